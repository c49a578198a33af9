/*
 * srt_made.h - what an srt settings file's translation holds and makes on
 * the host to keep a path read-only (srt_made.c); srt.c uses it.
 */
#ifndef CORRAL_SRT_MADE_H
#define CORRAL_SRT_MADE_H

#include "corral.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * The user xattr on what corral makes: a later run, and the user
 * (getfattr -d), know it for corral's.
 */
#define SRT_MARK "user.corral.placeholder"

/* directories pinned on the way to one kept path, at most */
#define SRT_PINS_MAX 16

struct corral_srt_made *srt_made_new(void);

/*
 * Open root (a write path's directory) for srt_made_keep, once: as
 * beneath (its path from outer's) in outer, a write bind holding it,
 * with no link followed; by its path where outer is NULL.  0, or -errno
 * with why said (ELOOP: a link on the way beneath outer).
 */
int srt_made_top(struct corral_srt_made *m, const char *root, const char *outer,
		 const char *beneath, char *why, size_t whylen);

/* srt_made_keep found a symbolic link on rel's way, or at its end */
#define SRT_KEEP_LINK 2

/*
 * srt_made_keep found rel's first missing component not makeable, and
 * not by the sandbox either: its directory is on a read-only file
 * system, or takes no new name from this user and is not the user's
 * (whose mode the sandbox could change); nothing is bound
 */
#define SRT_KEEP_UNMAKEABLE 3

struct srt_link {
	char target[PATH_MAX];	/* what the link holds, as readlink gives it */
	const char *after;	/* rel's components after the link ("" at its end) */
};

/*
 * Keep root/rel read-only (root opened by srt_made_top): its first component that is not there made
 * (an empty directory, or a file holding content (NULL: empty) when it
 * is rel itself and not directory) and marked, then held; one corral
 * made before (marked, as made) is taken as made.  *bind: the path to bind read-only (rel's, or
 * the made component's); pins: the directories between root and it,
 * to bind onto themselves so none is renamed away.  0, or -errno with
 * why said (a file on the way: nothing bound); SRT_KEEP_UNMAKEABLE; SRT_KEEP_LINK where a
 * component is a symbolic link (the user's .envrc -> envs/dev): *bind
 * is the link's path, *link what it holds, pins the directories before
 * it; the caller keeps the link as itself and what it names.
 */
int srt_made_keep(struct corral_srt_made *m, const char *root, const char *rel,
		  bool directory, const char *content, char **bind, char **pins,
		  size_t *npins, struct srt_link *link, char *why, size_t whylen);

/*
 * Fork the janitor: what m made is removed also if this process is
 * killed alone (SIGKILL), once no process holds it;
 * corral_srt_made_remove tells it there is nothing to do.  0, or -errno
 * (no janitor: as before, the next run removes them).
 */
int srt_made_watch(struct corral_srt_made *m);

/* What path is to this run (for the report). */
enum srt_made_kind {
	SRT_FOUND,		/* the user's: left as it is */
	SRT_MADE,		/* made, marked */
	SRT_MADE_UNMARKED,	/* made where no user xattr can be set */
	SRT_ADOPTED,		/* marked, made by another run or a killed one */
};
enum srt_made_kind srt_made_kind(const struct corral_srt_made *m, const char *path);

#endif
