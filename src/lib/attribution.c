/*
 * attribution.c - the call an event belongs to: by the cgroup2 group that
 * made its socket, the group its process was seen in, the group its pid
 * is in now, and without cgroups by the session a call's first process
 * leads.  A background process found an hour later is still its call's.
 */
#include "internal.h"
#include "box.h"
#include "events.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The id of the call whose cgroup holds host pid ("corral-cN"), or 0. */
static uint32_t call_id_of_pid(pid_t pid)
{
	struct cg_proc where;
	unsigned id;

	if (cg_proc_read(&where, pid) < 0)
		return 0;
	for (size_t i = 0; i < where.n; i++) {
		const char *at = strstr(where.e[i].path, "/corral-c");

		if (at && sscanf(at, "/corral-c%u", &id) == 1)
			return id;
	}
	return 0;
}

/* The session of host pid: a call's first process leads one (setsid). */
static pid_t session_of(pid_t pid)
{
	char buf[512], *f = proc_stat_fields(pid, buf, sizeof(buf));
	pid_t sid = 0;

	/* state ppid pgrp session */
	if (f && sscanf(f, " %*c %*d %*d %d", &sid) != 1)
		sid = 0;
	return sid;
}

/* The pid as the sandbox sees it: the last NSpid field. */
static pid_t inner_pid(pid_t pid)
{
	char path[64], line[256];
	pid_t inner = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *last = strrchr(line, '\t');

			inner = last ? atoi(last + 1) : 0;
			break;
		}
	}
	fclose(f);
	return inner;
}

/*
 * Whether the sandbox (init host pid init) holds a process that is
 * neither init nor of session sid: a finished call's leftover, or one
 * that left its call's session.  A walk of /proc, for the rare event
 * that names no pid (an inotify tripwire hit, which halts the box).
 */
bool box_others_alive(pid_t init, pid_t sid)
{
	char path[64];
	struct dirent *de;
	struct stat ns, st;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)init);
	if (stat(path, &ns) < 0)
		return true;	/* cannot tell: someone else may have */
	d = opendir("/proc");
	if (!d)
		return true;
	while (!found && (de = readdir(d))) {
		pid_t pid;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = atoi(de->d_name);
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
		if (pid == init || stat(path, &st) < 0 || st.st_ino != ns.st_ino ||
		    st.st_dev != ns.st_dev)
			continue;
		/* gone meanwhile (session 0): it touched nothing more */
		found = session_of(pid) && session_of(pid) != sid;
	}
	closedir(d);
	return found;
}

static bool name_call(json_t *event, const char *tool_call, bool background)
{
	json_object_set_new(event, "call", json_string(tool_call));
	if (background)
		json_object_set_new(event, "background", json_true());
	return true;
}

/* What an event's process is known by, in the order it is tried. */
enum call_key { BY_CGROUP2, BY_ID, BY_SESSION };

static uint64_t call_key_of(const struct corral_call *c, enum call_key k)
{
	return k == BY_CGROUP2 ? c->cgid : k == BY_ID ? c->id : (uint64_t)c->host_pid;
}

static uint64_t lingerer_key_of(const struct lingerer *l, enum call_key k)
{
	return k == BY_CGROUP2 ? l->cgid : k == BY_ID ? l->id : (uint64_t)l->sid;
}

/* The call, running or left behind, that key names: into the event. */
static bool name_by(struct corral_box *b, json_t *event, enum call_key k,
		    uint64_t key)
{
	if (!key)
		return false;
	for (struct corral_call *c = b->calls; c; c = c->next)
		if (call_key_of(c, k) == key) {
			b->named = c->id;
			return name_call(event, c->tool_call, c->done);
		}
	for (struct lingerer *l = b->lingering; l; l = l->next)
		if (lingerer_key_of(l, k) == key)
			return name_call(event, l->tool_call, true);
	return false;
}

/*
 * The call an event belongs to: by the cgroup2 group that made its socket
 * (it outlives the process), by the group its process was seen in before
 * it could exit, by the group its pid is in now, and without cgroups by
 * the session the call's first process leads.
 */
bool box_attribute(void *arg, json_t *event)
{
	struct corral_box *b = arg;
	json_int_t pid = json_integer_value(json_object_get(event, "pid"));
	const char *group = json_string_value(json_object_get(event, EVENTS_KEY_GROUP));
	unsigned id = 0;

	b->named = 0;
	if (pid > 0 && !json_object_get(event, "sandbox_pid")) {
		pid_t inner = inner_pid(pid);

		if (inner > 0)
			json_object_set_new(event, "sandbox_pid", json_integer(inner));
	}
	if (name_by(b, event, BY_CGROUP2,
		    json_integer_value(json_object_get(event, EVENTS_KEY_CGROUP))))
		return true;
	if (group && sscanf(group, "corral-c%u", &id) == 1 &&
	    name_by(b, event, BY_ID, id))
		return true;
	if (pid <= 0)
		return false;
	if (name_by(b, event, BY_ID, call_id_of_pid(pid)))
		return true;
	return cg_mode(b->cg) == CG_NONE &&
	       name_by(b, event, BY_SESSION, session_of(pid));
}
