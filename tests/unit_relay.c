/*
 * unit_relay.c - the kernel's relay of a judged tunnel (relay.c), on
 * loopback TCP in this process: every byte arrives once and in order both
 * ways, the bytes read before the relay go first, the end of each side is
 * passed on, a pipe that ended empty serves the next relay and one that
 * still held bytes never does; first bytes a judge must see reach the
 * upstream only once it passed them, whole and once.
 */
#include "relay.h"
#include "unit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TIMEOUT_S	20	/* a relay that hangs fails, it does not hang us */

/* a connected pair on 127.0.0.1: *a dialled, *b accepted */
static int tcp_pair(int *a, int *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*a = *b = -1;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(l, 1) < 0 || getsockname(l, (struct sockaddr *)&sin, &len) < 0)
		goto fail;
	*a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto fail;
	*b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*b < 0)
		goto fail;
	close(l);
	return 0;
fail:
	if (l >= 0)
		close(l);
	if (*a >= 0)
		close(*a);
	*a = -1;
	return -1;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own */
}

static uint8_t pattern(uint64_t i, uint8_t seed)
{
	return (uint8_t)(i * 131 + (i >> 11) + seed);
}

/* An endpoint: sends n bytes of its pattern, ends, reads the other's to EOF. */
struct endpoint {
	int fd;
	uint64_t send_n;
	uint8_t seed, peer_seed;
	const char *prefix;	/* what the peer's stream starts with, or NULL */
	uint64_t got;
	bool in_order;
};

static void *endpoint_main(void *arg)
{
	struct endpoint *e = arg;
	static __thread uint8_t buf[64 << 10];
	size_t plen = e->prefix ? strlen(e->prefix) : 0;
	uint64_t sent = 0;

	e->in_order = true;
	while (sent < e->send_n) {
		size_t k = e->send_n - sent < sizeof(buf) ? e->send_n - sent : sizeof(buf);
		ssize_t n;

		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(sent + i, e->seed);
		n = write(e->fd, buf, k);
		if (n <= 0)
			return NULL;
		sent += n;
	}
	shutdown(e->fd, SHUT_WR);
	for (;;) {
		ssize_t n = read(e->fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			uint64_t at = e->got + i;
			uint8_t want = at < plen ? (uint8_t)e->prefix[at] : pattern(at - plen, e->peer_seed);

			if (buf[i] != want)
				e->in_order = false;
		}
		e->got += n;
	}
	return NULL;
}

struct outcome {
	struct event_base *base;
	bool done;
	uint64_t up, down;
};

static void on_done(void *arg, uint64_t up, uint64_t down)
{
	struct outcome *o = arg;

	o->done = true;
	o->up = up;
	o->down = down;
	event_base_loopbreak(o->base);
}

/* Relay a sandbox's n_up bytes (after "hello ") and an upstream's n_down. */
static void relay_once(uint64_t n_up, uint64_t n_down, int *fds_before, int *fds_during)
{
	struct event_base *base = event_base_new();
	struct evbuffer *first = evbuffer_new();
	struct outcome o = { .base = base };
	struct endpoint sb = { .send_n = n_up, .seed = 1, .peer_seed = 2 };
	struct endpoint up = { .send_n = n_down, .seed = 2, .peer_seed = 1, .prefix = "hello " };
	struct timeval tv = { TIMEOUT_S, 0 };
	pthread_t t1, t2;
	int s_out, s_in, u_in, u_out;
	struct relay *r;

	CHECK(base && first);
	CHECK(tcp_pair(&s_out, &s_in) == 0);
	CHECK(tcp_pair(&u_in, &u_out) == 0);
	if (!base || !first || s_out < 0 || u_in < 0)
		return;
	evbuffer_add(first, "hello ", 6);
	if (fds_before)
		*fds_before = open_fds();
	r = relay_start(base, s_in, u_in, first, NULL, NULL, on_done, &o);
	CHECK(r != NULL);
	CHECK(evbuffer_get_length(first) == 0);
	if (fds_during)
		*fds_during = open_fds();
	sb.fd = s_out;
	up.fd = u_out;
	pthread_create(&t1, NULL, endpoint_main, &sb);
	pthread_create(&t2, NULL, endpoint_main, &up);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	CHECK(o.done);
	if (!o.done) {		/* unblock the endpoints: they see an error */
		shutdown(s_out, SHUT_RDWR);
		shutdown(u_out, SHUT_RDWR);
	}
	relay_free(r);		/* closes s_in and u_in: the endpoints see EOF */
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK(o.up == n_up + 6);
	CHECK(o.down == n_down);
	CHECK(up.got == n_up + 6);
	CHECK(sb.got == n_down);
	CHECK(sb.in_order && up.in_order);
	close(s_out);
	close(u_out);
	evbuffer_free(first);
	event_base_free(base);
}

TEST(relay_both_ways_in_order_and_ends)
{
	relay_once(5u << 20, 3u << 20, NULL, NULL);
	relay_once(0, 1, NULL, NULL);	/* one side silent */
}

TEST(relay_reuses_pipes_that_ended_empty)
{
	int before = -1, during = -2;

	/* the relays before left their pipes: this one opens no fd */
	relay_once(1u << 20, 1u << 20, &before, &during);
	CHECK(before > 0 && during == before);
	/* and carried only its own bytes: relay_once checked every one */
}

TEST(relay_pipe_that_held_bytes_is_not_kept)
{
	struct event_base *base = event_base_new();
	struct evbuffer *first = evbuffer_new();
	struct outcome o = { .base = base };
	struct timeval tv = { TIMEOUT_S, 0 };
	int s_out, s_in, u_in, u_out, before, after;
	struct relay *r;

	/* pipes in the pool from the tests before: one pair is taken here */
	relay_once(1, 1, NULL, NULL);
	CHECK(tcp_pair(&s_out, &s_in) == 0);
	CHECK(tcp_pair(&u_in, &u_out) == 0);
	before = open_fds();
	evbuffer_add(first, "never sent", 10);
	/* the upstream's side can take nothing: the pending bytes stay queued */
	shutdown(u_in, SHUT_WR);
	r = relay_start(base, s_in, u_in, first, NULL, NULL, on_done, &o);
	CHECK(r != NULL);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	CHECK(o.done);
	CHECK(o.up == 0);
	relay_free(r);
	after = open_fds();
	/* the relay's two sockets and the pipe that held bytes are gone */
	CHECK(after == before - 2 - 2);
	close(s_out);
	close(u_out);
	evbuffer_free(first);
	event_base_free(base);
}

/* ---- the judge of the sandbox's first bytes ------------------------------ */

struct judged {
	struct outcome o;
	int s_out;		/* the sandbox's end, written from the judge */
	struct relay *r;
	int calls;
	enum relay_verdict last;	/* what to answer once it has 6 bytes */
	bool full_seen;
};

static void judged_done(void *arg, uint64_t up, uint64_t down)
{
	on_done(&((struct judged *)arg)->o, up, down);
}

/*
 * Asks for more until "abcdef" is in, writing the rest itself; then says
 * j->last.  Passed, the sandbox goes on with "gh" and ends.
 */
static enum relay_verdict judge(void *arg, const uint8_t *p, size_t n, bool full,
				size_t *pass)
{
	struct judged *j = arg;

	(void)pass;
	j->calls++;
	j->full_seen |= full;
	if (n < 6 && !full) {
		CHECK(write(j->s_out, "cdef", 4) == 4);
		return RELAY_JUDGE_MORE;
	}
	if (j->last == RELAY_JUDGE_MORE)
		return RELAY_JUDGE_MORE;
	CHECK(n == 6 && !memcmp(p, "abcdef", 6));
	if (j->last == RELAY_JUDGE_GONE) {
		relay_free(j->r);
		j->r = NULL;
		event_base_loopbreak(j->o.base);
		return RELAY_JUDGE_GONE;
	}
	CHECK(write(j->s_out, "gh", 2) == 2);
	shutdown(j->s_out, SHUT_WR);
	return RELAY_JUDGE_PASS;
}

/* what reached the upstream's end, to EOF (at most len) */
static size_t read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len && (n = read(fd, buf + got, len - got)) > 0)
		got += n;
	return got;
}

/* early: "ab" was read before the relay began (to_up), not sent after */
static void judged_once(enum relay_verdict last, size_t judge_max, const char *want,
			bool early)
{
	struct relay_judges judges = { .first = judge, .max = judge_max };
	struct evbuffer *to_up = evbuffer_new();
	struct judged j = { .last = last };
	struct timeval tv = { TIMEOUT_S, 0 };
	int s_in, u_in, u_out;
	char buf[64];
	size_t got;

	j.o.base = event_base_new();
	CHECK(tcp_pair(&j.s_out, &s_in) == 0);
	CHECK(tcp_pair(&u_in, &u_out) == 0);
	shutdown(u_out, SHUT_WR);	/* the upstream says nothing */
	if (early)
		CHECK(evbuffer_add(to_up, "ab", 2) == 0);
	else
		CHECK(write(j.s_out, "ab", 2) == 2);
	j.r = relay_start(j.o.base, s_in, u_in, to_up, NULL, &judges, judged_done, &j);
	CHECK(j.r != NULL);
	CHECK(evbuffer_get_length(to_up) == 0);
	CHECK(j.calls == 0);	/* early bytes are judged from the loop */
	event_base_loopexit(j.o.base, &tv);
	event_base_dispatch(j.o.base);
	if (j.r)
		relay_free(j.r);	/* closes s_in and u_in */
	got = read_all(u_out, buf, sizeof(buf));
	CHECK(got == strlen(want) && !memcmp(buf, want, got));
	if (last == RELAY_JUDGE_PASS)
		CHECK(j.o.done && j.o.up == 8 && j.calls == 2);
	if (last == RELAY_JUDGE_MORE)
		CHECK(j.o.done && j.o.up == 0 && j.full_seen);
	close(j.s_out);
	close(u_out);
	evbuffer_free(to_up);
	event_base_free(j.o.base);
}

TEST(relay_judged_first_bytes_pass_once_in_order)
{
	/* "ab", then "cdef" in a second read: judged whole, sent once, then "gh" */
	judged_once(RELAY_JUDGE_PASS, 64, "abcdefgh", false);
	/* read before the relay began: shown to the judge all the same */
	judged_once(RELAY_JUDGE_PASS, 64, "abcdefgh", true);
}

TEST(relay_refused_first_bytes_go_nowhere)
{
	judged_once(RELAY_JUDGE_GONE, 64, "", false);
	judged_once(RELAY_JUDGE_GONE, 64, "", true);
}

TEST(relay_judge_that_wants_more_than_its_bound_ends_the_tunnel)
{
	struct event_base *base = event_base_new();
	struct evbuffer *early = evbuffer_new();
	struct relay_judges judges = { .first = judge, .max = 4 };
	struct judged j = { 0 };
	int s_out, s_in, u_in, u_out;

	/* more bytes read before the relay than its judge may hold: refused */
	CHECK(tcp_pair(&s_out, &s_in) == 0);
	CHECK(tcp_pair(&u_in, &u_out) == 0);
	evbuffer_add(early, "abcde", 5);
	CHECK(relay_start(base, s_in, u_in, early, NULL, &judges, judged_done, &j) == NULL);
	CHECK(j.calls == 0);
	close(s_out);
	close(u_out);
	evbuffer_free(early);
	event_base_free(base);
	/* 4 bytes at most: full at 4, still "more": nothing goes on, both ways end */
	judged_once(RELAY_JUDGE_MORE, 4, "", false);
}

/* ---- a judge that asks for the upstream's answer -------------------------- */

/*
 * The sandbox sends "HELLO1" and "hello2" at once; the judge lets "HELLO1"
 * go and asks for the upstream's answer ("RETRY", in two writes), then is
 * shown "hello2" again without a new read.  peer_last: what the peer says
 * to "RETRY"; second: what the judge says to "hello2".
 */
struct asked {
	struct outcome o;
	int s_out, u_out;	/* the sandbox's end, the upstream's end */
	struct relay *r;
	int first_calls, peer_calls;
	enum relay_verdict second;
	bool gone;
};

static void asked_done(void *arg, uint64_t up, uint64_t down)
{
	on_done(&((struct asked *)arg)->o, up, down);
}

static enum relay_verdict ask_first(void *arg, const uint8_t *p, size_t n, bool full,
				    size_t *pass)
{
	struct asked *a = arg;

	(void)full;
	a->first_calls++;
	if (a->first_calls == 1) {
		CHECK(n == 12 && !memcmp(p, "HELLO1hello2", 12));
		/* the upstream answers in two writes: the peer judge asks for more */
		CHECK(write(a->u_out, "RE", 2) == 2);
		*pass = 6;
		return RELAY_JUDGE_PEER;
	}
	if (a->peer_calls == 0 || memcmp(p, "hello2", n < 6 ? n : 6))
		return RELAY_JUDGE_MORE;	/* held: the upstream said nothing yet */
	CHECK(n == 6);
	if (a->second == RELAY_JUDGE_GONE) {
		relay_free(a->r);
		a->r = NULL;
		a->gone = true;
		event_base_loopbreak(a->o.base);
		return RELAY_JUDGE_GONE;
	}
	/* the sandbox's end ends only now: its end before a verdict ends all */
	shutdown(a->s_out, SHUT_WR);
	return a->second;
}

static enum relay_verdict ask_peer(void *arg, const uint8_t *p, size_t n, bool full,
				   size_t *pass)
{
	struct asked *a = arg;
	uint8_t got[64];

	(void)full;
	(void)pass;
	/* the first part went up, and nothing of the second meanwhile */
	if (a->peer_calls++ == 0)
		CHECK(recv(a->u_out, got, sizeof(got), MSG_DONTWAIT) == 6 &&
		      !memcmp(got, "HELLO1", 6));
	if (n < 5) {
		CHECK(write(a->u_out, p[0] == 'R' ? "TRY" : "?", 3) == 3);
		return RELAY_JUDGE_MORE;
	}
	CHECK(n == 5 && !memcmp(p, "RETRY", 5));
	shutdown(a->u_out, SHUT_WR);
	return RELAY_JUDGE_PASS;
}

static void asked_once(enum relay_verdict second, const char *want_up)
{
	struct relay_judges judges = { .first = ask_first, .peer = ask_peer, .max = 64 };
	struct asked a = { .second = second };
	struct timeval tv = { TIMEOUT_S, 0 };
	char buf[64];
	int s_out, s_in, u_in;
	size_t got;

	a.o.base = event_base_new();
	CHECK(tcp_pair(&s_out, &s_in) == 0);
	a.s_out = s_out;
	CHECK(tcp_pair(&u_in, &a.u_out) == 0);
	CHECK(write(s_out, "HELLO1hello2", 12) == 12);
	a.r = relay_start(a.o.base, s_in, u_in, NULL, NULL, &judges, asked_done, &a);
	CHECK(a.r != NULL);
	event_base_loopexit(a.o.base, &tv);
	event_base_dispatch(a.o.base);
	if (a.r)
		relay_free(a.r);
	CHECK(a.peer_calls == 2);
	/* the sandbox got the upstream's answer once the peer judge passed it */
	got = read_all(s_out, buf, sizeof(buf));
	if (second == RELAY_JUDGE_PASS)
		CHECK(got == 5 && !memcmp(buf, "RETRY", 5));
	got = read_all(a.u_out, buf, sizeof(buf));
	CHECK(got == strlen(want_up) && !memcmp(buf, want_up, got));
	close(s_out);
	close(a.u_out);
	event_base_free(a.o.base);
}

TEST(relay_judge_sees_the_upstreams_answer_before_its_second_part)
{
	/* "hello2" passed after the answer: it follows "HELLO1", once */
	asked_once(RELAY_JUDGE_PASS, "hello2");
	/* refused: it never goes up */
	asked_once(RELAY_JUDGE_GONE, "");
}

/*
 * A silent upstream holds the sandbox's bytes behind the first part at the
 * judge's bound: the sandbox is not read past it (the judge never sees
 * more, and says "more" while full), and once the upstream answers, all
 * of it goes on, in order, after the first part.
 */
struct silent {
	struct outcome o;
	int u_out;
	int calls;
	bool answered, peer_passed, over;
};

static void silent_done(void *arg, uint64_t up, uint64_t down)
{
	on_done(&((struct silent *)arg)->o, up, down);
}

static enum relay_verdict silent_first(void *arg, const uint8_t *p, size_t n, bool full,
				       size_t *pass)
{
	struct silent *w = arg;

	w->over |= n > 64;
	if (w->calls++ == 0) {
		CHECK(n > 6 && !memcmp(p, "HELLO1", 6));
		*pass = 6;
		return RELAY_JUDGE_PEER;
	}
	if (w->peer_passed)
		return RELAY_JUDGE_PASS;
	/* held to the bound: only now does the upstream answer */
	if (full && !w->answered) {
		w->answered = true;
		CHECK(write(w->u_out, "OK", 2) == 2);
	}
	return RELAY_JUDGE_MORE;
}

static enum relay_verdict silent_peer(void *arg, const uint8_t *p, size_t n, bool full,
				      size_t *pass)
{
	struct silent *w = arg;

	(void)p;
	(void)full;
	(void)pass;
	CHECK(w->answered && n == 2);
	w->peer_passed = true;
	shutdown(w->u_out, SHUT_WR);
	return RELAY_JUDGE_PASS;
}

TEST(relay_held_for_a_silent_upstream_at_the_judges_bound)
{
	struct relay_judges judges = { .first = silent_first, .peer = silent_peer, .max = 64 };
	struct silent w = { 0 };
	struct timeval tv = { TIMEOUT_S, 0 };
	char want[6 + 4096], buf[sizeof(want) + 1];
	int s_out, s_in, u_in;
	struct relay *r;
	size_t got;

	memcpy(want, "HELLO1", 6);
	for (size_t i = 6; i < sizeof(want); i++)
		want[i] = (char)('a' + i % 26);
	w.o.base = event_base_new();
	CHECK(tcp_pair(&s_out, &s_in) == 0);
	CHECK(tcp_pair(&u_in, &w.u_out) == 0);
	CHECK(write(s_out, want, sizeof(want)) == (ssize_t)sizeof(want));
	shutdown(s_out, SHUT_WR);
	r = relay_start(w.o.base, s_in, u_in, NULL, NULL, &judges, silent_done, &w);
	CHECK(r != NULL);
	event_base_loopexit(w.o.base, &tv);
	event_base_dispatch(w.o.base);
	relay_free(r);
	CHECK(w.answered && w.peer_passed && !w.over);
	got = read_all(w.u_out, buf, sizeof(buf));
	CHECK(got == sizeof(want) && !memcmp(buf, want, got));
	got = read_all(s_out, buf, sizeof(buf));
	CHECK(got == 2 && !memcmp(buf, "OK", 2));
	close(s_out);
	close(w.u_out);
	event_base_free(w.o.base);
}

int main(void)
{
	/* as in the supervisor (run.c blocks it, serve.c ignores it) */
	signal(SIGPIPE, SIG_IGN);
	unit_run_all();
	UNIT_DONE();
}
