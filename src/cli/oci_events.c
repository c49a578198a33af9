/*
 * oci_events.c - `corral oci events [--stats] [--interval D] ID`, as
 * runc's events.go: JSON lines on stdout,
 *   {"type":"stats","id":ID,"data":{cpu, memory, pids, ...}}
 *   {"type":"oom","id":ID}
 * --stats prints one stats line and exits; otherwise a stats line every
 * interval (default 5s) until the container stops.
 *
 * The counters come from the container's monitor ("stats"), which holds
 * its cgroup.  runc hears of an OOM kill at once from the kernel; here
 * the monitor's count of OOM kills is read with each stats line, so an
 * "oom" line comes at most one interval late, before that stats line.
 */
#include "cli.h"
#include "oci.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EVENTS_DEFAULT_MS	5000
#define EVENTS_MAX_MS		(24LL * 3600 * 1000)
#define STATS_REPLY_MAX		16384

/*
 * A Go duration as runc's --interval takes it ("5s", "250ms", "1m30s",
 * "1.5s"), or a bare number of seconds; in ms, rounded up.  -EINVAL, or
 * -ERANGE for what is not above 0 or over a day.
 */
int oci_duration_ms(const char *s, long long *ms)
{
	static const struct { const char *unit; double ns; } units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, { "ms", 1e6 },
		{ "s", 1e9 }, { "m", 60e9 }, { "h", 3600e9 },
	};
	double total = 0;
	const char *p = s;
	char *end;

	if (!*p)
		return -EINVAL;
	if (*p == '+')
		p++;
	while (*p) {
		size_t best = 0, k = 0, len = strspn(p, "0123456789.");
		char num[32];
		double v;

		/* digits only: no sign in the middle ("-1s"), no "1e3", "0x1" */
		if (len == 0 || len >= sizeof(num))
			return -EINVAL;
		memcpy(num, p, len);
		num[len] = '\0';
		errno = 0;
		v = strtod(num, &end);
		if (*end || errno)
			return -EINVAL;
		p += len;
		if (!*p && total == 0 && p == s + strspn(s, "+0123456789.")) {
			total = v * 1e9;	/* a bare number: seconds */
			break;
		}
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t n = strlen(units[i].unit);

			if (!strncmp(p, units[i].unit, n) && n > best) {
				best = n;
				k = i;
			}
		}
		if (!best)
			return -EINVAL;
		total += v * units[k].ns;
		p += best;
		if (total > EVENTS_MAX_MS * 1e6)
			return -ERANGE;
	}
	if (total <= 0 || total > EVENTS_MAX_MS * 1e6)
		return -ERANGE;
	*ms = (long long)((total + 999999) / 1e6);
	return 0;
}

/* One JSON line; false when stdout is gone (the reader left). */
static bool print_event(const char *type, const char *id, json_t *data)
{
	json_t *o = json_pack("{s:s, s:s}", "type", type, "id", id);
	bool ok;

	if (!o) {
		json_decref(data);
		return false;
	}
	if (data)
		json_object_set_new(o, "data", data);
	ok = json_dumpf(o, stdout, JSON_COMPACT) == 0 && putchar('\n') != EOF &&
	     fflush(stdout) == 0;
	json_decref(o);
	return ok;
}

/*
 * Ask the monitor for the stats: the document (new) and the OOM kills so
 * far; NULL when it cannot (err; -ECONNREFUSED/-ENOENT: it has exited).
 */
static json_t *fetch_stats(const struct oci_state *st, uint64_t *oom,
			   struct corral_err *err)
{
	static char reply[STATS_REPLY_MAX];
	unsigned long long n;
	json_error_t je;
	json_t *doc;
	int off = 0;

	if (corral_container_ctl(st->ctl, "stats", reply, sizeof(reply), err) < 0)
		return NULL;
	if (sscanf(reply, "ok %llu %n", &n, &off) != 1 || off == 0) {
		corral_set_err(err, -EPROTO, "the monitor's stats: \"%.60s\"", reply);
		return NULL;
	}
	doc = json_loads(reply + off, 0, &je);
	if (!doc)
		corral_set_err(err, -EPROTO, "the monitor's stats: %s", je.text);
	*oom = n;
	return doc;
}

static bool monitor_gone(int code)
{
	return code == -ENOENT || code == -ECONNREFUSED;
}

/* The monitor, as a pidfd: readable once it has exited (-1: gone already). */
static int monitor_pidfd(const struct oci_state *st)
{
	int fd;

	if (st->monitor <= 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, st->monitor, 0);
	/* a pid recycled since: the monitor's socket would be gone too */
	if (fd >= 0 && access(st->ctl, F_OK) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Every interval: an "oom" line if the group's OOM kills grew, then a
 * stats line; until the monitor exits (the container has stopped).
 */
static int events_loop(const struct oci_global *g, const struct oci_state *st,
		       long long interval_ms)
{
	struct corral_err err = { 0 };
	struct pollfd pfd = { .fd = monitor_pidfd(st), .events = POLLIN };
	uint64_t seen = 0, oom = 0;
	bool first = true;
	int r = 0;
	json_t *doc;

	if (pfd.fd < 0)
		return 0;
	for (;;) {
		int n = poll(&pfd, 1, (int)interval_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			oci_error(g, "events: poll: %s", strerror(errno));
			r = -1;
			break;
		}
		if (n > 0)	/* the monitor exited: the container stopped */
			break;
		doc = fetch_stats(st, &oom, &err);
		if (!doc) {
			if (monitor_gone(err.code) || !strcmp(err.msg, "container not running"))
				break;
			/* runc logs a failed read and carries on */
			oci_error(g, "events: %s", err.msg);
			continue;
		}
		if (!first && oom > seen && !print_event("oom", st->id, NULL)) {
			json_decref(doc);
			break;
		}
		first = false;
		seen = oom;
		if (!print_event("stats", st->id, doc))
			break;
	}
	close(pfd.fd);
	return r;
}

int oci_events(const struct oci_global *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stats", no_argument, NULL, 's' },
		{ "interval", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	struct corral_err err = { 0 };
	struct oci_state st;
	long long interval = EVENTS_DEFAULT_MS;
	bool once = false;
	uint64_t oom;
	json_t *doc;
	int opt, r;

	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			once = true;
			break;
		case 'i':
			r = oci_duration_ms(optarg, &interval);
			if (r == -ERANGE) {
				oci_error(g, "duration interval must be greater than 0 "
					  "(and at most a day): %s", optarg);
				return OCI_USAGE;
			}
			if (r < 0) {
				oci_error(g, "events: --interval %s: a duration such "
					  "as 5s, 250ms or 1m", optarg);
				return OCI_USAGE;
			}
			break;
		default:
			oci_error(g, "events: unknown flag %s", argv[optind - 1]);
			return OCI_USAGE;
		}
	}
	if (optind != argc - 1) {
		oci_error(g, "events: expected one container id");
		return OCI_USAGE;
	}
	if (oci_state_load(g, argv[optind], &st, &err) < 0) {
		oci_error(g, "%s", err.msg);
		return 1;
	}
	if (!strcmp(oci_state_status(&st), "stopped")) {
		oci_error(g, "container with id %s is not running", st.id);
		oci_state_free(&st);
		return 1;
	}
	if (!once) {
		r = events_loop(g, &st, interval);
		oci_state_free(&st);
		return r < 0 ? 1 : 0;
	}
	doc = fetch_stats(&st, &oom, &err);
	if (!doc)
		oci_error(g, "%s", monitor_gone(err.code) ?
			  "container not running" : err.msg);
	r = doc && print_event("stats", st.id, doc) ? 0 : 1;
	oci_state_free(&st);
	return r;
}
