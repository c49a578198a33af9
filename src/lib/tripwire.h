/*
 * tripwire.h - decoy credentials planted in the sandbox, and the
 * supervisor's watch on them.
 *
 * The policy names the files (abort.tripwires, all under /home/agent, /tmp
 * or /workspace).  The sandbox's first process plants them while it builds
 * its mounts (mount_plant_tripwires, from mount_build), before anything
 * untrusted runs; the supervisor then watches them from outside, through
 * the sandbox's root, and reports every open of one (and every removal,
 * rename or change of attributes: tampering with a tripwire counts as
 * touching it).
 *
 * Two ways to watch, picked at start and named by tripwire_mode():
 *   "fanotify"  the supervisor may use fanotify permission events (root:
 *               CAP_SYS_ADMIN in the initial user namespace).  Every open of
 *               a tripwire waits for the supervisor, which reports the
 *               opener's pid (host view) and denies the open (EPERM): the
 *               decoy is never read.
 *   "inotify"   anyone else.  The kernel reports the open after it
 *               happened, without a pid (reported as -1): the decoy may
 *               already have been read; it is fake, and the abort follows.
 *   "none"      the policy names no tripwires.
 */
#ifndef CORRAL_TRIPWIRE_H
#define CORRAL_TRIPWIRE_H

#include "internal.h"

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

struct event_base;
struct tripwire;

/* What the policy allows (policy_schema.c checks both). */
#define TRIPWIRE_MAX_FILES	32
#define TRIPWIRE_PATH_MAX	255

/*
 * A tripwire was touched.  path is the sandbox path as the policy names it
 * (valid during the call); pid is the host pid of the process that opened
 * it, or -1 where the mode cannot tell; how says what happened, one of:
 *   "fanotify: open denied"
 *   "inotify: after the open, no pid"
 *   "inotify: read after an open not seen, no pid"
 *   "removed: deleted"
 *   "removed: renamed"
 *   "tampered: attributes or links changed"
 * group is the last part of the opener's cgroup path, read while the open
 * still waited for our answer (the process may be gone by the callback),
 * or "" when unknown (inotify).
 * The callback may call tripwire_free() on its own watch: the free then
 * happens when the callback returns, and no further hits are delivered.
 */
typedef void (*tripwire_hit_fn)(void *arg, const char *path, pid_t pid,
				const char *how, const char *group);

/*
 * Watch the tripwires of *p, reached through /proc/<sandbox_pid>/root: the
 * sandbox's mount namespace.  Call it once they are planted (mount_build
 * has returned in the sandbox) and before anything untrusted runs there;
 * as an unprivileged user, also before the sandbox's PID 1 makes itself
 * non-dumpable, which closes its /proc/<pid>/root to its owner.  Each file
 * must be a regular file reached without any symlink.
 * Returns NULL only on error (err says which path and why); with no
 * tripwires in the policy the watch is a valid one of mode "none".
 */
struct tripwire *tripwire_start(struct event_base *base, pid_t sandbox_pid,
				const struct corral_policy *p, tripwire_hit_fn hit,
				void *arg, struct corral_err *err);

/* Flags for tripwire_start_at(). */
#define TRIPWIRE_NO_FANOTIFY	1u	/* watch with inotify even as root */

/*
 * The same, with the root given as a directory fd (it is not kept): each
 * absolute path is resolved as if rootfd were "/" (RESOLVE_IN_ROOT), with no
 * symlink followed.  tripwire_start() is this with /proc/<pid>/root; tests
 * use it on a directory of their own.
 */
struct tripwire *tripwire_start_at(struct event_base *base, int rootfd,
				   const char *const *paths, size_t n,
				   unsigned int flags, tripwire_hit_fn hit,
				   void *arg, struct corral_err *err);

/*
 * Whether st (from fstat of an O_PATH fd, which no watch hears) is one of
 * the tripwires, by inode: a hard link or a new name of one is one too.
 * The supervisor's own file operations ask before they open anything, and
 * never open a tripwire: an open of its own would wait on its own answer
 * (fanotify) or be counted as the agent's (inotify).  NULL: none.
 */
bool tripwire_is_wire(const struct tripwire *t, const struct stat *st);

/* "fanotify", "inotify" or "none". */
const char *tripwire_mode(const struct tripwire *t);

/*
 * Stop watching and free.  NULL is fine.  Opens still waiting for an
 * answer are let through by the kernel when the fanotify fd closes.
 */
void tripwire_free(struct tripwire *t);

void tripwire_drain(struct tripwire *t);

/*
 * The decoy content for a tripwire at path, chosen by its name, random
 * where a secret would be (getrandom): ".aws/credentials" or "credentials"
 * an AWS key pair; "id_*" (not ".pub") an OpenSSH private key; ".netrc",
 * ".git-credentials", ".env" their usual lines; anything else a token line.
 * Writes at most len bytes (4096 is always enough) without a NUL; returns
 * the length or a negative errno.
 */
ssize_t tripwire_decoy(const char *path, char *buf, size_t len,
		       struct corral_err *err);
#define TRIPWIRE_DECOY_MAX 4096

/*
 * The destination of a bind in *p that is path or lies above it, or NULL:
 * a tripwire there would be planted in a host directory, and is refused.
 */
const char *tripwire_bind_over(const struct corral_policy *p, const char *path);

/*
 * mount.c: plant every tripwire of *p in the sandbox's writable tmpfs (or
 * the workspace's overlay upper layer), as the sandbox user, mode 0600,
 * missing parents made 0700.  Called from mount_build() after the scratch
 * tmpfs, the workspace and the binds are in place, before the host's root
 * is detached.  Never follows a symlink nor crosses a mount; refuses a
 * path under a bind and a path that already exists.
 */
int mount_plant_tripwires(const struct corral_policy *p, struct corral_err *err);

#endif
