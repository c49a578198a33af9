/*
 * exec_tty.c - corral exec -t: a command on a pty made inside the sandbox,
 * joined to corral's own terminal over the daemon's terminal protocol
 * (docs/API.md, "Terminals"): an exec request that upgrades its
 * connection, then frames.  Our terminal is raw while it runs, so ^C and
 * ^Z are bytes the pty inside turns into signals for its foreground job;
 * SIGWINCH sends our new size.  The terminal gets its settings back on
 * every way out, and corral exits with the command's status.
 */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#define FRAME_HEAD	5		/* kind, then a 32-bit big-endian length */
#define INPUT_CHUNK	4096		/* what one input frame carries, at most */
#define HEAD_MAX	(64 * 1024)	/* the daemon's answer's head */
#define ANSWER_MAX	(1024 * 1024)	/* a refusal's body; a frame */

struct session {
	struct conn *c;
	int fd;
	char *in;			/* from the daemon, not yet a whole frame */
	size_t in_len, in_cap;
	unsigned char out[FRAME_HEAD + INPUT_CHUNK];	/* a frame being sent */
	size_t out_off, out_len;
	bool stdin_open, winch, eof;
	bool eof_due;			/* output came after our input ended */
	bool raw;			/* our terminal (fd 0) made raw */
	struct termios saved;		/* its settings before */
	bool out_typed_eof;		/* the frame being sent is type_eof's */
	int eof_left;			/* ^Ds still to type then (type_eof) */
	json_t *result;			/* the 'x' frame */
	json_t *error;			/* an 'e' frame */
	char why[512];			/* the first failure, said when cooked */
};

/*
 * A failure while our terminal is raw would print as a staircase (no \r
 * after \n) and under what the command left on the screen: it is kept
 * and said once the terminal has its settings back.
 */
static void session_error(struct session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void session_error(struct session *s, const char *fmt, ...)
{
	va_list ap;

	if (s->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
}

static void session_say_why(struct session *s)
{
	if (s->why[0])
		cli_error("%s", s->why);
	s->why[0] = '\0';
}

/* ---- the connection -------------------------------------------------------- */

/* Send it all, waiting for room (a request head, a body). */
static int send_all(struct session *s, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		size_t n = 0;
		const char *why = "";
		int rc = conn_raw_send(s->c, p, len, &n, &why);
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };

		if (rc == 0) {
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		if (rc < 0) {
			session_error(s, "sending to the daemon: %s", why);
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* What the connection has now, onto s->in: 1 some, 0 none yet, -1 failed. */
static int recv_some(struct session *s, size_t max)
{
	size_t n = 0;
	const char *why = "";
	int rc;

	if (s->in_len + 65536 > s->in_cap) {
		size_t cap = s->in_len + 65536;
		char *p;

		if (cap > max + 65536) {
			session_error(s, "the daemon sent more than %zu bytes in one piece", max);
			return -1;
		}
		p = realloc(s->in, cap);
		if (!p)
			return out_of_memory("for the daemon's answer"), -1;
		s->in = p;
		s->in_cap = cap;
	}
	/* one byte kept for a NUL after what came: the head is parsed as text */
	rc = conn_raw_recv(s->c, s->in + s->in_len, s->in_cap - s->in_len - 1, &n, &why);
	if (rc == 0)
		return 0;
	if (rc < 0) {
		session_error(s, "reading from the daemon: %s", why);
		return -1;
	}
	if (n == 0)
		s->eof = true;
	s->in_len += n;
	s->in[s->in_len] = '\0';
	return 1;
}

static void consume(struct session *s, size_t n)
{
	memmove(s->in, s->in + n, s->in_len - n);
	s->in_len -= n;
	s->in[s->in_len] = '\0';
}

/* ---- the upgrade ----------------------------------------------------------- */

static char *request_head(struct conn *c, const char *path, size_t body_len)
{
	char *head;

	if (asprintf(&head, "POST %s HTTP/1.1\r\nHost: corral\r\n"
		     "Connection: Upgrade\r\nUpgrade: corral-tty\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "%s%s\r\n", path, body_len, c->auth ? c->auth : "",
		     c->auth ? "\r\n" : "") < 0)
		return NULL;
	return head;
}

/* The answer's head, whole: its length (s->in holds it and what followed). */
static long read_head(struct session *s, long *status)
{
	char *end;

	for (;;) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		int r;

		end = s->in_len ? memmem(s->in, s->in_len, "\r\n\r\n", 4) : NULL;
		if (end)
			break;
		if (s->eof) {
			cli_error("the daemon closed the connection without an answer");
			return -1;
		}
		r = recv_some(s, HEAD_MAX);
		if (r < 0)
			return -1;
		if (r == 0 && poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
	if (sscanf(s->in, "HTTP/1.%*1d %ld", status) != 1) {
		cli_error("the daemon's answer is not HTTP");
		return -1;
	}
	return end + 4 - s->in;
}

/* Not 101: the daemon's refusal, said as the other verbs say it. */
static int refused(struct session *s, long status, size_t head_len)
{
	struct reply r = { .status = status };
	const char *cl = NULL;
	long want = 0;

	for (char *p = s->in, *eol; p < s->in + head_len; p = eol + 2) {
		eol = memmem(p, s->in + head_len - p, "\r\n", 2);
		if (!eol)
			break;
		if (!strncasecmp(p, "Content-Length:", 15)) {
			cl = p + 15;
			break;
		}
	}
	if (cl)
		want = strtol(cl, NULL, 10);
	if (want < 0 || want > ANSWER_MAX)
		want = 0;
	while (s->in_len - head_len < (size_t)want && !s->eof) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		int n = recv_some(s, ANSWER_MAX);

		if (n < 0)
			break;
		if (n == 0 && poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
	}
	consume(s, head_len);
	r.buf = s->in;
	r.len = s->in_len < (size_t)want ? s->in_len : (size_t)want;
	if (r.buf)
		r.buf[r.len] = '\0';
	if (status >= 200 && status < 300)
		cli_error("the daemon ran the command without a terminal (HTTP %ld, not 101): an older daemon?",
			  status);
	else
		reply_check(&r);
	return EXIT_CORRAL;
}

static int upgrade(struct session *s, const char *path, const json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	char *head = text ? request_head(s->c, path, strlen(text)) : NULL;
	long status = 0, head_len;
	int code = EXIT_CORRAL;

	if (!head) {
		code = out_of_memory("building the exec request");
		goto out;
	}
	if (send_all(s, head, strlen(head)) < 0 || send_all(s, text, strlen(text)) < 0)
		goto out;
	head_len = read_head(s, &status);
	if (head_len < 0)
		goto out;
	if (status != 101) {
		code = refused(s, status, head_len);
		goto out;
	}
	consume(s, head_len);	/* what is left are frames */
	code = 0;
out:
	if (head)
		explicit_bzero(head, strlen(head));	/* it has the token */
	free(head);
	free(text);
	return code;
}

/* ---- frames ----------------------------------------------------------------- */

static int write_out(const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(1, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		p += k;
		n -= k;
	}
	return 0;
}

/* The daemon's frames now whole: output, the result, an error. */
static int take_frames(struct session *s)
{
	while (s->in_len >= FRAME_HEAD) {
		const unsigned char *h = (const unsigned char *)s->in;
		size_t len = (size_t)h[1] << 24 | h[2] << 16 | h[3] << 8 | h[4];
		const char *data = s->in + FRAME_HEAD;

		if (len > ANSWER_MAX) {
			session_error(s, "the daemon sent a frame of %zu bytes", len);
			return -1;
		}
		if (s->in_len < FRAME_HEAD + len)
			return 0;
		if (h[0] == 'o')
			s->eof_due = s->eof_left > 0;
		if (h[0] == 'o' && write_out(data, len) < 0)
			s->stdin_open = false;	/* our stdout is gone: keep the session */
		else if (h[0] == 'x' && !s->result)
			s->result = json_loadb(data, len, 0, NULL);
		else if (h[0] == 'e' && !s->error)
			s->error = json_loadb(data, len, 0, NULL);
		/* kinds newer than this client are not for the terminal */
		consume(s, FRAME_HEAD + len);
	}
	return 0;
}

static void frame(struct session *s, char kind, const void *data, size_t len)
{
	s->out[0] = (unsigned char)kind;
	s->out[1] = len >> 24;
	s->out[2] = len >> 16;
	s->out[3] = len >> 8;
	s->out[4] = len;
	memcpy(s->out + FRAME_HEAD, data, len);
	s->out_off = 0;
	s->out_len = FRAME_HEAD + len;
}

/*
 * Our input (a pipe, /dev/null) ended: its end typed on the pty as a
 * user's ^D, as `corral run -t` and util-linux's script(1) do, where an
 * interactive shell waited for its wall-clock timeout.  Again when the
 * pty next writes (a prompt: one typed before the shell set its terminal
 * up is lost there), a few times at most.  The pty's own VEOF is the
 * daemon's to read; 0x04 is every terminal's default.
 */
#define EOF_TYPED_MAX	8

static void type_eof(struct session *s)
{
	static const char ctrl_d = 0x04;

	s->eof_due = false;
	if (s->out_len || s->eof_left <= 0)
		return;
	s->eof_left--;
	frame(s, 'i', &ctrl_d, 1);
	s->out_typed_eof = true;
}

/* The next frame to go, if the last one went: a new size, then typing. */
static void next_frame(struct session *s)
{
	char buf[INPUT_CHUNK];
	struct winsize ws;
	ssize_t n;

	if (s->out_len)
		return;
	if (s->winch) {
		unsigned char w[4];

		s->winch = false;
		corral_term_winsize(0, &ws);
		if (!ws.ws_row)
			return;
		w[0] = ws.ws_row >> 8;
		w[1] = ws.ws_row;
		w[2] = ws.ws_col >> 8;
		w[3] = ws.ws_col;
		frame(s, 'w', w, 4);
		return;
	}
	n = s->stdin_open ? read(0, buf, sizeof(buf)) : 0;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	/* our input ended: typed as a user's ^D (type_eof) */
	if (n <= 0) {
		s->stdin_open = false;
		s->eof_left = EOF_TYPED_MAX;
		type_eof(s);
		return;
	}
	frame(s, 'i', buf, n);
}

static int send_some(struct session *s)
{
	size_t n = 0;
	const char *why = "";
	int rc;

	if (!s->out_len)
		return 0;
	rc = conn_raw_send(s->c, s->out + s->out_off, s->out_len - s->out_off, &n, &why);
	if (rc == 0)
		return 0;
	/*
	 * A ^D typed as the shell ended may meet a daemon that has closed
	 * its side after the result: not a broken session; the result (or
	 * the daemon's end) is still there to read.
	 */
	if (rc < 0 && s->out_typed_eof) {
		s->out_len = s->out_off = 0;
		s->eof_left = 0;
		s->out_typed_eof = false;
		return 0;
	}
	if (rc < 0)
		return -1;
	s->out_off += n;
	if (s->out_off == s->out_len) {
		s->out_len = s->out_off = 0;
		s->out_typed_eof = false;
	}
	return 0;
}

/* ---- the session ------------------------------------------------------------ */

/* Until the result, the daemon's end, or a signal that ends us (its number). */
static int relay(struct session *s, int sfd)
{
	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = s->stdin_open && !s->out_len ? 0 : -1, .events = POLLIN },
			{ .fd = s->fd, .events = POLLIN | (s->out_len ? POLLOUT : 0) },
			{ .fd = sfd, .events = POLLIN },
		};
		struct signalfd_siginfo si;
		int r;

		if (s->result || s->error || s->eof)
			return 0;
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pfd[2].revents && read(sfd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGTSTP) {
				/* from elsewhere (^Z is a byte): stopped cooked */
				if (corral_term_stop(s->raw ? 0 : -1, &s->saved) < 0)
					s->raw = false;
				s->winch = true;	/* resized meanwhile, perhaps */
				continue;
			}
			if (si.ssi_signo != SIGWINCH)
				return si.ssi_signo;
			s->winch = true;
		}
		/*
		 * What TLS holds is read too: take until there is nothing, or
		 * until the last frame: a read after it may meet the daemon's
		 * close (a reset, if our last typing was still unread there),
		 * which is not a broken session.
		 */
		while ((r = recv_some(s, ANSWER_MAX)) > 0 && !s->eof) {
			if (take_frames(s) < 0)
				return -1;
			if (s->result || s->error)
				return 0;
		}
		if (r < 0 || take_frames(s) < 0)
			return -1;
		if (pfd[0].revents)
			next_frame(s);
		if (s->winch && !s->out_len)
			next_frame(s);
		if (s->eof_due && !s->out_len)
			type_eof(s);
		if (send_some(s) < 0)
			return -1;
	}
}

struct saved_signals {
	sigset_t mask;
	struct sigaction pipe;
};

/*
 * Signals that would end corral come through a signalfd, as SIGWINCH does,
 * and SIGTSTP: with the terminal raw ^Z is a byte, and one from elsewhere
 * stops corral with the terminal cooked (relay: corral_term_stop); one the
 * caller ignores stays ignored.  SIGTTIN and SIGTTOU as the caller has
 * them: ignored, a `bg` made us read EIO, an end of input, and set raw
 * the terminal a shell had.  SIGPIPE is ignored.
 */
static int signals_take(struct saved_signals *sv)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, tstp;
	sigset_t set;
	int sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (sigaction(SIGTSTP, NULL, &tstp) == 0 && tstp.sa_handler != SIG_IGN)
		sigaddset(&set, SIGTSTP);
	if (sigprocmask(SIG_BLOCK, &set, &sv->mask) < 0)
		return -1;
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	sigaction(SIGPIPE, &ign, &sv->pipe);
	return sfd;
}

static void signals_give_back(const struct saved_signals *sv, int sfd)
{
	if (sfd >= 0)
		close(sfd);
	sigaction(SIGPIPE, &sv->pipe, NULL);
	sigprocmask(SIG_SETMASK, &sv->mask, NULL);
}

static int session_end(struct session *s, int sig)
{
	const char *detail;

	if (sig > 0) {
		cli_error("%s: the command's terminal is closed", strsignal(sig));
		return 128 + sig;
	}
	if (s->result)
		return exec_result_code(s->result, true);
	detail = json_string_value(json_object_get(s->error, "detail"));
	if (detail)
		daemon_error(detail, " (in the terminal session)");
	else
		cli_error("the daemon ended the terminal session without the call's result");
	return EXIT_CORRAL;
}

int exec_tty(struct conn *c, const char *id, json_t *body)
{
	struct session s = { .c = c, .fd = CURL_SOCKET_BAD, .stdin_open = true };
	struct saved_signals sv;
	struct winsize ws;
	char *path;
	int code, sfd = -1, sig;

	corral_term_winsize(0, &ws);
	code = body_put(body, "tty", json_true());
	if (!code && ws.ws_row && ws.ws_col)
		code = body_put(body, "rows", json_integer(ws.ws_row)) ||
		       body_put(body, "cols", json_integer(ws.ws_col)) ? EXIT_CORRAL : 0;
	if (code)
		return code;
	path = conn_sandbox_path(c, id, "/exec");
	if (!path)
		return EXIT_CORRAL;
	code = EXIT_CORRAL;
	if (conn_connect_raw(c, path, &s.fd) < 0)
		goto out;
	code = upgrade(&s, path, body);
	if (code)
		goto out;
	/* a SIGTSTP from elsewhere: the modes reset before corral stops */
	cli_terminal_reset_on_stop(true);
	sfd = signals_take(&sv);
	if (sfd < 0) {
		cli_error("signalfd: %s", strerror(errno));
		signals_give_back(&sv, sfd);
		cli_terminal_reset_on_stop(false);
		code = EXIT_CORRAL;
		goto out;
	}
	/* not a terminal (a pipe, a file): its bytes go as typed, no raw mode */
	s.raw = isatty(0) && corral_term_raw(0, &s.saved) == 0;
	if (take_frames(&s) < 0)
		sig = -1;
	else
		sig = relay(&s, sfd);
	/* before anything is said: the caller's terminal as it was */
	if (s.raw)
		corral_term_restore(0, &s.saved);
	signals_give_back(&sv, sfd);
	cli_terminal_reset_on_stop(false);
	cli_terminal_after_output();
	session_say_why(&s);
	if (sig < 0) {
		cli_error("the terminal session with the daemon broke off");
		code = EXIT_CORRAL;
	} else {
		code = session_end(&s, sig);
	}
out:
	session_say_why(&s);
	json_decref(s.result);
	json_decref(s.error);
	free(s.in);
	free(path);
	return code;
}
