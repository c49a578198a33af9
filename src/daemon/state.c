/*
 * state.c - corral serve's state directory: its lock, the audit log it
 * opens, the record of the sandboxes handed out (STATE/sandboxes.log),
 * what a killed daemon left there said and forgotten at the next start,
 * and STATE/tcp-since.  The snapshots under it are api_snapshots.c's.
 */
#include "api.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* path and its parents (0755 those), as mkdir -p: 0 or a negative errno */
int daemon_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* ---- the state directory ------------------------------------------------- */

/*
 * Which sandboxes this daemon has handed out and not destroyed, for the
 * next start after a crash: one log, STATE/sandboxes.log, a line "+ID"
 * as a sandbox is handed out and "-ID" as it goes, each one write(2) to
 * a file kept open (in the page cache once written, so a killed daemon
 * loses none of it; fsynced no more than the audit log is).  It was a
 * file a sandbox, STATE/sandboxes/ID.json, written to a temporary name
 * and renamed, and unlinked at the end: an inode made and one removed
 * on ext4, 70-300 us a sandbox here against 0.5 for a line, 6-7% of the
 * daemon's CPU in a burst of creates (issue 17).  Nothing read the
 * file but its name.  The log is written afresh, with the live
 * sandboxes alone, when most of its lines are of gone ones (state_compact).
 */
#define RECORD_NAME		"sandboxes.log"
/* how many lines the log may grow to before it is written afresh ... */
#define RECORD_COMPACT_LINES	128
/* ... once it holds this many times as many lines as live sandboxes */
#define RECORD_COMPACT_RATIO	4

static int record_append(struct daemon *d, char op, const char *id)
{
	char line[80];
	int n = snprintf(line, sizeof(line), "%c%s\n", op, id);
	ssize_t w;

	if (d->record_fd < 0)
		return -EBADF;
	if (n < 0 || (size_t)n >= sizeof(line))
		return -ENAMETOOLONG;
	w = write(d->record_fd, line, n);
	if (w == n) {
		d->record_bytes += n;
		d->record_lines++;
		return 0;
	}
	/*
	 * A part of a line (the disk full) would run into the next one and
	 * hide it from the next start: cut back to the last whole line.
	 */
	n = w < 0 ? -errno : -ENOSPC;
	if (w > 0 && ftruncate(d->record_fd, d->record_bytes) < 0)
		fprintf(stderr, "corral serve: cannot cut %s/%s back to %lld bytes: %s\n",
			d->state_dir, RECORD_NAME, (long long)d->record_bytes,
			strerror(errno));
	return n;
}

/*
 * The log again, the live sandboxes' lines alone: to a temporary name,
 * renamed over it, and appended to from then on through the same fd (no
 * open after the rename that could fail with the old file gone from the
 * name).  Not done (the disk full): the old log is still right, only
 * longer, and is appended to as before.
 */
static void state_compact(struct daemon *d)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	size_t lines = 0;
	off_t bytes = 0;
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/%s", d->state_dir, RECORD_NAME);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "corral serve: cannot write %s: %s\n", tmp, strerror(errno));
		return;
	}
	for (struct sandbox *sb = d->sandboxes; sb && r >= 0; sb = sb->next) {
		if (!sb->recorded)
			continue;
		r = dprintf(fd, "+%s\n", sb->id);
		bytes += r > 0 ? r : 0;
		lines++;
	}
	if (r < 0 || rename(tmp, path) < 0) {
		fprintf(stderr, "corral serve: cannot write %s: %s\n", tmp,
			r < 0 ? "a write failed" : strerror(errno));
		close(fd);
		unlink(tmp);
		return;
	}
	close(d->record_fd);
	d->record_fd = fd;
	d->record_bytes = bytes;
	d->record_lines = lines;
}

int state_write(struct daemon *d, struct sandbox *sb)
{
	int r = record_append(d, '+', sb->id);

	if (r == 0) {
		sb->recorded = true;
		d->nrecorded++;
	}
	return r;
}

void state_remove(struct daemon *d, struct sandbox *sb)
{
	if (!sb->recorded)
		return;
	sb->recorded = false;
	d->nrecorded--;
	/* not written (the disk full): the next start after a crash calls it lost */
	if (record_append(d, '-', sb->id) < 0)
		return;
	if (d->record_lines >= RECORD_COMPACT_LINES &&
	    d->record_lines >= RECORD_COMPACT_RATIO * d->nrecorded)
		state_compact(d);
}

/* The last seq of each lost sandbox in the audit log (lost: id -> 0). */
static void last_seqs(struct daemon *d, json_t *lost)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	f = fopen(path, "re");
	while (f && (n = getline(&line, &cap, f)) > 0) {
		const char *id;
		json_t *v;

		json_object_foreach(lost, id, v) {
			char key[128];
			json_t *e;

			snprintf(key, sizeof(key), "\"sandbox\":\"%s\"", id);
			if (!memmem(line, n, key, strlen(key)))
				continue;
			e = json_loadb(line, n, 0, NULL);
			if (json_integer_value(json_object_get(e, "seq")) >
			    json_integer_value(v))
				json_integer_set(v, json_integer_value(json_object_get(e, "seq")));
			/* a log.gap's lines lost took their numbers: none used again */
			if (json_integer_value(json_object_get(e, "seq_last")) >
			    json_integer_value(v))
				json_integer_set(v, json_integer_value(json_object_get(e, "seq_last")));
			json_decref(e);
		}
	}
	free(line);
	if (f)
		fclose(f);
}

/* The ids a sandbox log's lines leave live into lost (id -> 0). */
static void record_read(const char *path, json_t *lost)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	struct corral_err err;
	FILE *f = fopen(path, "re");

	while (f && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n' || n < 3 || n > 64)
			continue;	/* cut short by a crash: never a whole id */
		line[n - 1] = '\0';
		if (corral_check_sandbox_id(line + 1, &err) < 0)
			continue;
		if (line[0] == '+')
			json_object_set_new(lost, line + 1, json_integer(0));
		else if (line[0] == '-')
			json_object_del(lost, line + 1);
	}
	free(line);
	if (f)
		fclose(f);
}

/*
 * A daemon that was killed left in STATE/sandboxes.log (a daemon before
 * it: a file a sandbox in STATE/sandboxes) the sandboxes it had: those
 * died with it.  Say so in the audit log, then forget them, and start
 * this daemon's log.
 */
static int state_recover(struct daemon *d, struct corral_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	json_t *lost = json_object(), *v;
	struct dirent *de;
	const char *id;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/sandboxes", d->state_dir);
	dp = opendir(dir);
	while (dp && lost && (de = readdir(dp))) {
		char file[PATH_MAX * 2], *dot = strrchr(de->d_name, '.');

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", dir, de->d_name);
		if (dot && !strcmp(dot, ".json")) {
			*dot = '\0';
			json_object_set_new(lost, de->d_name, json_integer(0));
		}
		unlink(file);
	}
	if (dp) {
		closedir(dp);
		rmdir(dir);
	}
	snprintf(path, sizeof(path), "%s/%s", d->state_dir, RECORD_NAME);
	if (lost)
		record_read(path, lost);
	if (json_object_size(lost))
		last_seqs(d, lost);
	json_object_foreach(lost, id, v)
		corral_log_note(d->log, id, json_integer_value(v), "sandbox.lost",
				"the daemon that ran this sandbox stopped without "
				"destroying it; it died with the daemon");
	json_decref(lost);
	/* said in the audit log: the old lines go */
	d->record_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (d->record_fd < 0)
		return corral_set_errno(err, errno, "%s", path);
	return 0;
}

/* The newest "created" of the snapshots in STATE/snapshots into buf ("": none). */
static void snapshots_newest(struct daemon *d, char *buf, size_t len)
{
	char path[PATH_MAX * 2];
	struct dirent *de;
	DIR *dp;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/snapshots", d->state_dir);
	dp = opendir(path);
	while (dp && (de = readdir(dp))) {
		json_t *m;
		const char *c;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/snapshots/%s/meta.json", d->state_dir,
			 de->d_name);
		m = json_load_file(path, 0, NULL);
		c = json_string_value(json_object_get(m, "created"));
		/* one that says no time: every one is before now */
		if (m && !c)
			c = "9999";
		if (c && strcmp(c, buf) > 0)
			snprintf(buf, len, "%s", c);
		json_decref(m);
	}
	if (dp)
		closedir(dp);
}

/*
 * A daemon before local sandboxes had ids of their own ("sb-h...") wrote
 * the lines and snapshots of sandboxes a TCP client may not see (made on
 * the socket with a host path of its own, say) under plain "sb-" ids:
 * nothing in them says whose.  The first daemon that tells them apart
 * notes in STATE/tcp-since how long the audit log was and the newest
 * snapshot's time: a TCP client gets no line before that, nor a snapshot
 * made up to then (a new state directory: 0 and none).  Its lines are
 * there for the socket's clients and `corral audit` as before.  A log
 * shorter than the note is not the one noted: all of it is before.
 */
static int tcp_since(struct daemon *d, struct corral_err *err)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8], line[96] = "";
	unsigned long long bytes;
	struct stat st;
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	if (stat(path, &st) < 0)
		return corral_set_errno(err, errno, "%s", path);
	snprintf(path, sizeof(path), "%s/tcp-since", d->state_dir);
	f = fopen(path, "re");
	if (f) {
		bool ok = fgets(line, sizeof(line), f) &&
			  sscanf(line, "%llu %23s", &bytes, d->tcp_since_time) >= 1;

		fclose(f);
		if (!ok)
			return corral_set_err(err, -EINVAL, "%s: not \"BYTES [TIME]\" "
					      "(the audit log's bytes and the snapshots' "
					      "time a TCP client does not get)", path);
		d->tcp_since_bytes = bytes <= (unsigned long long)st.st_size ?
				     (off_t)bytes : st.st_size;
		return 0;
	}
	if (errno != ENOENT)
		return corral_set_errno(err, errno, "%s", path);
	d->tcp_since_bytes = st.st_size;
	snapshots_newest(d, d->tcp_since_time, sizeof(d->tcp_since_time));
	/*
	 * Not kept (the disk full: a daemon that starts degraded): this
	 * daemon holds it all the same, and the next notes a longer log,
	 * leaving out of TCP clients' reach more than it must, never less.
	 */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	r = f ? fprintf(f, "%llu %s\n", (unsigned long long)d->tcp_since_bytes,
			d->tcp_since_time) : -1;
	if ((f && fclose(f) != 0) || r < 0 || rename(tmp, path) < 0) {
		fprintf(stderr, "corral serve: cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
	}
	return 0;
}

int state_open(struct daemon *d, struct corral_err *err)
{
	char path[PATH_MAX];
	int r;

	r = daemon_mkdir_p(d->state_dir, 0700);
	if (r < 0)
		return corral_set_errno(err, -r, "state directory %s",
				      d->state_dir);
	snprintf(path, sizeof(path), "%s/daemon.lock", d->state_dir);
	d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0)
		return corral_set_errno(err, errno, "%s", path);
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return corral_set_err(err, -EBUSY, "another corral serve is using the state directory %s",
				      d->state_dir);
	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	r = corral_log_open(&d->log, path, err);
	if (r < 0)
		return r;
	corral_log_observe(d->log, api_on_log_line, d);
	r = state_recover(d, err);
	if (r == 0)
		r = tcp_since(d, err);
	if (r < 0)
		return r;
	snapshots_sweep(d);
	return 0;
}
