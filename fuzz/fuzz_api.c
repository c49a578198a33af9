/*
 * fuzz_api.c - libFuzzer target for the daemon's request handling: the
 * bytes a client could send, through the gate (api_gate.c), libevent's HTTP
 * parser and api.c's routing and validation, over a real unix socket.  The daemon here may
 * create no sandbox (--max-sandboxes 0): what is fuzzed is everything a
 * request meets before one would be built.  Whatever the bytes: no crash,
 * no leak, and the connection ends.
 *
 *   make fuzz FUZZ_SECONDS=60
 */
#include "daemon.h"

#include <event2/event.h>
#include <event2/http.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_INPUT	(64 * 1024)
#define MAX_TURNS	200

/* serve.c's sandbox log: this daemon has no state directory */
int state_write(struct daemon *d, struct sandbox *sb)
{
	(void)d;
	(void)sb;
	return 0;
}

void state_remove(struct daemon *d, struct sandbox *sb)
{
	(void)d;
	(void)sb;
}

static struct daemon dm;
static struct sockaddr_un addr = { .sun_family = AF_UNIX };
static char dir[] = "/tmp/corral-fuzz-api.XXXXXX";

/* libFuzzer ends a timed run with exit(): nothing of ours stays in /tmp */
static void remove_dir(void)
{
	unlink(addr.sun_path);
	rmdir(dir);
}

static void setup(void)
{
	struct evhttp_bound_socket *bound;
	struct corral_err err = { 0 };
	int fd;

	if (!mkdtemp(dir) || atexit(remove_dir) != 0)
		abort();
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/sock", dir);
	dm.base = event_base_new();
	dm.http_unix = evhttp_new(dm.base);
	dm.state_dir = strdup("/nonexistent");
	dm.max_sandboxes = 0;
	dm.lock_fd = -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* serve.c's defaults, every one: a limit left 0 here refused every
	 * lease, and the fuzzer never reached what follows one */
	dm.limits = (struct daemon_limits){
		.max_connections = DAEMON_MAX_CONNECTIONS,
		.max_per_peer = DAEMON_MAX_PER_PEER,
		.header_timeout_s = DAEMON_HEADER_TIMEOUT_S,
		.idle_timeout_s = DAEMON_IDLE_TIMEOUT_S,
		.max_leases = DAEMON_MAX_LEASES,
		.lease_timeout_s = DAEMON_LEASE_TIMEOUT_S,
		.tls_handshake_rate = DAEMON_TLS_HANDSHAKE_RATE,
	};
	if (!dm.base || !dm.http_unix || fd < 0 ||
	    bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(fd, 16) < 0 ||
	    !(bound = evhttp_accept_socket_with_handle(dm.http_unix, fd)) ||
	    /* the gate too: every head meets it before the API */
	    api_gate_listen(&dm, dm.http_unix, bound, "fuzz", false, &err) < 0)
		abort();
	evhttp_set_max_body_size(dm.http_unix, API_FILE_MAX + 1);
	evhttp_set_max_headers_size(dm.http_unix, 64 * 1024);
	evhttp_set_gencb(dm.http_unix, api_handle, &dm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	char buf[65536];
	size_t off = 0;
	bool eof = false;
	int c, one = 1 << 20;

	if (!ready++)
		setup();
	if (size > MAX_INPUT)
		return 0;
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		abort();
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
	fcntl(c, F_SETFL, O_NONBLOCK);
	for (int turn = 0; turn < MAX_TURNS && !eof; turn++) {
		ssize_t n;

		if (off < size) {
			n = write(c, data + off, size - off);
			if (n > 0)
				off += n;
			if (off == size)
				shutdown(c, SHUT_WR);
		} else if (size == 0 && turn == 0) {
			shutdown(c, SHUT_WR);
		}
		event_base_loop(dm.base, EVLOOP_NONBLOCK);
		while ((n = read(c, buf, sizeof(buf))) > 0)
			;
		eof = n == 0 || (n < 0 && errno != EAGAIN);
	}
	close(c);
	/* let evhttp see the close and free the connection */
	for (int turn = 0; turn < 4; turn++)
		event_base_loop(dm.base, EVLOOP_NONBLOCK);
	return 0;
}
