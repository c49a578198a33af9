/*
 * stdrelay.h - a one-shot sandbox's stdio, relayed by the supervisor.
 *
 * No fd of the caller's enters a sandbox: the command's 0, 1, 2 are pipes
 * (or a pty inside the sandbox) that the supervisor owns, and a stream
 * moves the bytes between them and the caller's fds.
 */
#ifndef CORRAL_STDRELAY_H
#define CORRAL_STDRELAY_H

#include <stdbool.h>

struct event_base;
struct stdrelay;

/* Called after bytes moved or a stream ended (not from stdrelay_add). */
typedef void (*stdrelay_fn)(void *arg);

struct stdrelay *stdrelay_new(struct event_base *base, stdrelay_fn changed,
			      void *arg);
/*
 * Copy from -> to until from ends (EOF, or EIO: a pty whose last slave
 * closed) or to refuses (EPIPE: the reader is gone).  own_from / own_to:
 * the relay closes that fd when the stream ends (a pipe's end closed is
 * how the other side learns); an owned fd is the supervisor's own pipe or
 * pty master, non-blocking, which epoll takes.  required: stdrelay_done
 * waits for it.
 * Returns 0 or -errno (from and to are closed if owned).
 */
int stdrelay_add(struct stdrelay *r, int from, bool own_from, int to,
		 bool own_to, bool required);
/*
 * The caller's input (not owned, not required) into a pty master: at its
 * EOF the terminal's end-of-file character is typed there (a user's ^D).
 */
int stdrelay_add_tty_input(struct stdrelay *r, int from, int master);
/*
 * The errno of the write that ended the stream into the caller's fd to
 * (EPIPE: its reader is gone; ENOSPC, EFBIG, EDQUOT, or EIO where it was
 * not spliced: bytes the command wrote were lost), or 0: it ended at its
 * source's end, or has not ended.
 */
int stdrelay_error(const struct stdrelay *r, int to);
/* Every required stream has ended. */
bool stdrelay_done(const struct stdrelay *r);
void stdrelay_free(struct stdrelay *r);

/* term.c, the caller's terminal: corral_term_raw() and the rest, in corral.h. */

#endif
