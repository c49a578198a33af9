/*
 * stdrelay.c - the caller's stdio <-> the sandbox's pipes or pty.
 *
 * Handing the caller's own fds 0-2 into a sandbox hands over the objects
 * behind them: fchmod, futimens and fsetxattr reach a host file through
 * an fd already open, tcsetattr and TIOCSWINSZ the caller's terminal, and
 * openat(0, "..") walks out of a directory given as stdin.  So nothing of
 * the caller's crosses: each stream moves bytes between a caller's fd and
 * a pipe (or pty master) the supervisor made.
 *
 * Where one side is a pipe the kernel moves the bytes (splice), else they
 * go through a buffer.  The caller's fds are shared with other processes,
 * so their file status flags are never changed: a stream waits for them
 * with epoll and then does one operation, which cannot block for long;
 * its own fds (pipes, the master) are non-blocking.  Regular files, which
 * epoll refuses, are always ready.  A stream waits on its source only
 * when the sink has room, so a slow reader outside stops the writer
 * inside rather than growing the supervisor.
 */
#include "stdrelay.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#define CHUNK		(1 << 20)	/* bytes per splice or read (a pipe's worth) */
#define BURST		16		/* operations per wake-up: others get a turn */
#define MAX_STREAMS	4

struct stream {
	struct stdrelay *r;
	int from, to;
	bool own_from, own_to;
	bool required;
	bool from_poll, to_poll;	/* epoll takes the fd (not a regular file) */
	bool from_nowait;		/* a read of from never blocks */
	bool copy;			/* splice refused: through buf */
	bool veof;			/* to is a pty master: type EOF at the end */
	bool done;
	int sink;			/* to, kept after the stream ends */
	int error;			/* a write's errno that ended it, or 0 */
	char *buf;
	size_t off, len;
	struct event *rd, *wr;
};

struct stdrelay {
	struct event_base *base;
	stdrelay_fn changed;
	void *arg;
	size_t n;
	int probe;		/* pollable()'s epoll fd, or -1 */
	int veof_to;		/* the pty master whose input ended, or -1 */
	int veof_left;		/* times EOF may be typed there again */
	struct stream s[MAX_STREAMS];
};

/*
 * Can epoll watch fd?  Regular files (and some devices) it refuses.  One
 * epoll fd asks for every stream of the relay (a run's stdin, stdout and
 * stderr: 5 calls, not 9); EEXIST is a file it took before.
 */
static bool pollable(struct stdrelay *r, int fd)
{
	struct epoll_event e = { .events = EPOLLIN };

	if (r->probe < 0)
		r->probe = epoll_create1(EPOLL_CLOEXEC);
	if (r->probe < 0)
		return false;
	return epoll_ctl(r->probe, EPOLL_CTL_ADD, fd, &e) == 0 || errno == EEXIST;
}

static void stream_end(struct stream *s)
{
	s->done = true;
	if (s->rd)
		event_del(s->rd);
	if (s->wr)
		event_del(s->wr);
	/* closing our end is the news: EOF for a reader, EPIPE for a writer */
	if (s->own_from && s->from >= 0)
		close(s->from);
	if (s->own_to && s->to >= 0)
		close(s->to);
	s->from = s->to = -1;
	free(s->buf);
	s->buf = NULL;
}

/* Nothing moved: wait for whichever side is not ready. */
static void stream_wait(struct stream *s, bool sink_full)
{
	if (sink_full && s->to_poll) {
		event_add(s->wr, NULL);
		return;
	}
	if (s->from_poll) {
		event_add(s->rd, NULL);
		return;
	}
	/*
	 * A regular file is always ready: come back after the loop has
	 * polled the other streams (a zero timeout, not event_active, which
	 * would run again in the same pass and starve them).
	 */
	event_add(s->rd, &(struct timeval){ 0, 0 });
}

/* After EAGAIN from splice: was the source empty or the sink full? */
static bool sink_full(const struct stream *s)
{
	struct pollfd p = { .fd = s->to, .events = POLLOUT };
	int n = poll(&p, 1, 0);

	/* an error or hang-up is for the next splice to report */
	return n == 0 || (n == 1 && !(p.revents & (POLLOUT | POLLERR | POLLHUP)));
}

/* One step through the buffer: 1 moved, 0 must wait (*full: on the sink), -1 ended. */
static int copy_step(struct stream *s, bool *full)
{
	ssize_t n;

	if (s->off == s->len) {
		n = read(s->from, s->buf, CHUNK);
		if (n > 0) {
			s->off = 0;
			s->len = n;
			return 1;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			*full = false;
			return 0;
		}
		return -1;	/* EOF, or EIO from a master whose slave closed */
	}
	n = write(s->to, s->buf + s->off, s->len - s->off);
	if (n >= 0) {
		s->off += n;
		return 1;
	}
	if (errno == EAGAIN || errno == EINTR) {
		*full = true;
		return 0;
	}
	s->error = errno;
	return -1;
}

static int splice_step(struct stream *s, bool *full)
{
	ssize_t n = splice(s->from, NULL, s->to, NULL, CHUNK,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

	if (n > 0)
		return 1;
	if (n == 0)
		return -1;
	if (errno == EINTR)
		return 1;
	if (errno == EAGAIN) {
		*full = sink_full(s);
		return 0;
	}
	if (errno == EINVAL) {	/* neither side a pipe, or no splice: copy */
		s->buf = malloc(CHUNK);
		if (!s->buf)
			return -1;
		s->copy = true;
		return 1;
	}
	/* the sink's alone: a read's EIO is a pty whose last slave closed */
	if (errno == EPIPE || errno == ENOSPC || errno == EFBIG || errno == EDQUOT)
		s->error = errno;
	return -1;
}

/*
 * The caller's input into a pty ended: type the terminal's end-of-file
 * character, as util-linux's script(1) does.  A shell on the pty (bash,
 * its readline, python's prompt) takes it as a user's ^D and ends;
 * without it, `corral run -t -- bash < /dev/null` waited for ever for
 * input that could not come.  The master gives the slave's settings
 * (VEOF, or none).  An EOF typed before the shell set its terminal up is
 * lost there (bash's readline), so it is typed again when the pty next
 * writes (a prompt), a few times at most: a program that reads no input
 * never sees them, and one that reads later sees EOF, as it should.
 */
#define VEOF_TYPED_MAX	8

static void type_eof(struct stdrelay *r)
{
	struct termios t;
	unsigned char c;

	if (r->veof_to < 0 || r->veof_left <= 0)
		return;
	r->veof_left--;
	if (tcgetattr(r->veof_to, &t) < 0 || t.c_cc[VEOF] == _POSIX_VDISABLE)
		return;
	c = t.c_cc[VEOF];
	/* best effort: a full input queue (EAGAIN) has a reader to come */
	if (write(r->veof_to, &c, 1) < 0)
		return;
}

static void stream_pump(struct stream *s)
{
	bool full = false, moved = false;
	int r = 1;

	for (int i = 0; i < BURST && r > 0; i++) {
		r = s->copy ? copy_step(s, &full) : splice_step(s, &full);
		moved |= r > 0;
		/* a caller's fd that may block: one read per readiness */
		if (r > 0 && !s->from_nowait && (!s->copy || s->off == s->len))
			break;
	}
	if (r < 0 && s->veof && !s->error) {
		s->r->veof_to = s->to;
		s->r->veof_left = VEOF_TYPED_MAX;
		type_eof(s->r);
	} else if (moved && s->from == s->r->veof_to) {
		type_eof(s->r);		/* the pty wrote: a prompt, perhaps */
	}
	if (r < 0)
		stream_end(s);
	else if (r == 0)
		stream_wait(s, full);
	else if (s->copy && s->off < s->len)
		stream_wait(s, true);
	else
		stream_wait(s, false);
	s->r->changed(s->r->arg);
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;

	(void)fd;
	(void)what;
	if (!s->done)
		stream_pump(s);
}

struct stdrelay *stdrelay_new(struct event_base *base, stdrelay_fn changed,
			      void *arg)
{
	struct stdrelay *r = calloc(1, sizeof(*r));

	if (r) {
		r->base = base;
		r->probe = -1;
		r->veof_to = -1;
		r->changed = changed;
		r->arg = arg;
	}
	return r;
}

/*
 * A read of fd returns at once: it is ours and non-blocking, a regular
 * file, or a pipe or socket, which splice's SPLICE_F_NONBLOCK reaches.
 */
static bool reads_nowait(int fd, bool own, bool poll_ok)
{
	struct stat st;

	if (own || !poll_ok)
		return true;
	return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

int stdrelay_add(struct stdrelay *r, int from, bool own_from, int to,
		 bool own_to, bool required)
{
	struct stream *s;

	if (r->n == MAX_STREAMS) {
		if (own_from)
			close(from);
		if (own_to)
			close(to);
		return -ENOSPC;
	}
	s = &r->s[r->n++];
	*s = (struct stream){ .r = r, .from = from, .to = to, .own_from = own_from,
			      .own_to = own_to, .required = required, .sink = to };
	/* ours are pipes or a pty master: only the caller's need asking */
	s->from_poll = own_from || pollable(r, from);
	s->to_poll = own_to || pollable(r, to);
	s->from_nowait = reads_nowait(from, own_from, s->from_poll);
	s->rd = event_new(r->base, s->from_poll ? from : -1, EV_READ, on_ready, s);
	s->wr = event_new(r->base, s->to_poll ? to : -1, EV_WRITE, on_ready, s);
	if (!s->rd || !s->wr) {
		stream_end(s);
		return -ENOMEM;
	}
	/*
	 * Wait for the source first: a caller's terminal is read only when
	 * it has bytes (a read would block).  changed() never fires from here.
	 */
	stream_wait(s, false);
	return 0;
}

int stdrelay_add_tty_input(struct stdrelay *r, int from, int master)
{
	int e = stdrelay_add(r, from, false, master, false, false);

	if (e == 0)
		r->s[r->n - 1].veof = true;
	return e;
}

int stdrelay_error(const struct stdrelay *r, int to)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (!r->s[i].own_to && r->s[i].sink == to && r->s[i].done)
			return r->s[i].error;
	return 0;
}

bool stdrelay_done(const struct stdrelay *r)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (r->s[i].required && !r->s[i].done)
			return false;
	return true;
}

void stdrelay_free(struct stdrelay *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		struct stream *s = &r->s[i];

		if (!s->done)
			stream_end(s);
		if (s->rd)
			event_free(s->rd);
		if (s->wr)
			event_free(s->wr);
	}
	if (r->probe >= 0)
		close(r->probe);
	free(r);
}
