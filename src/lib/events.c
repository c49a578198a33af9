/*
 * events.c - every decision the supervisor makes, as one JSON line.
 *
 * Lines are appended with a single write(2) on an O_APPEND descriptor, so
 * concurrent runs appending to one file never interleave within a line.
 */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct events {
	int fd;			/* -1: memory only */
	char *sandbox;
	uint64_t seq;
	json_t *denials;
};

int events_open(struct events **out, const char *path, const char *sandbox,
		struct corral_err *err)
{
	struct events *ev = calloc(1, sizeof(*ev));

	*out = NULL;
	if (!ev)
		return corral_set_err(err, -ENOMEM, "out of memory");
	ev->fd = -1;
	ev->sandbox = strdup(sandbox);
	ev->denials = json_array();
	if (!ev->sandbox || !ev->denials) {
		events_close(ev);
		return corral_set_err(err, -ENOMEM, "out of memory");
	}
	if (path) {
		ev->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
			      O_NOCTTY, 0600);
		if (ev->fd < 0) {
			int e = errno;

			events_close(ev);
			return corral_set_err(err, -e, "events file %s: %s", path,
					      strerror(e));
		}
	}
	*out = ev;
	return 0;
}

static void write_line(int fd, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	size_t len;

	if (!text)
		return;
	len = strlen(text);
	text[len] = '\n';	/* replaces the NUL: json_dumps's buffer has room */
	if (write(fd, text, len + 1) < 0) {
		/* A full disk must not stop the sandbox's supervision. */
	}
	free(text);
}

void events_emit(struct events *ev, const char *type, json_t *fields)
{
	struct timespec ts;
	char when[64];
	json_t *o;

	if (!ev) {
		json_decref(fields);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime(&ts.tv_sec));
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ",
		 ts.tv_nsec / 1000000);
	o = json_pack("{s:I, s:s, s:s, s:s}", "seq", (json_int_t)++ev->seq,
		      "time", when, "sandbox", ev->sandbox, "type", type);
	if (!o) {
		json_decref(fields);
		return;
	}
	if (fields)
		json_object_update(o, fields);
	json_decref(fields);
	if (ev->fd >= 0)
		write_line(ev->fd, o);
	if (!strcmp(type, "egress.denied"))
		json_array_append(ev->denials, o);
	json_decref(o);
}

json_t *events_denials(struct events *ev)
{
	return ev ? json_incref(ev->denials) : json_array();
}

size_t events_count_denied(const struct events *ev)
{
	return ev ? json_array_size(ev->denials) : 0;
}

void events_close(struct events *ev)
{
	if (!ev)
		return;
	if (ev->fd >= 0)
		close(ev->fd);
	json_decref(ev->denials);
	free(ev->sandbox);
	free(ev);
}
