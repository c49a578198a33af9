/*
 * api_snapshots.c - POST /v1/sandboxes/ID/snapshot, /v1/snapshots: a
 * sandbox's workspace kept as an object, and new sandboxes started on it
 * (POST /v1/sandboxes {"from_snapshot": ID}, api_sandboxes.c).
 *
 * A snapshot is a directory of the state dir, snapshots/ID, holding tree/
 * (the upper layer's copy, corral_box_snapshot) and meta.json (written
 * last: a directory without it is a snapshot that did not finish, and is
 * neither listed nor counted; one a killed daemon left is removed when the
 * next daemon starts, snapshots_sweep()).
 * The disk budget (--snapshot-budget) is the sum of the snapshots' sizes:
 * each snapshot may take what the others leave.
 */
#include "api.h"

#include <event2/event.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_BUDGET_DEFAULT	(UINT64_C(1) << 30)
#define SNAPSHOT_FILES_MAX	1000000		/* entries in one snapshot */
#define SNAPSHOTS_MAX		10000		/* snapshots listed or counted */
#define SNAPSHOT_META_MAX	(64 * 1024)

struct snap_req {
	struct worker_owner owner;	/* its worker's, while it copies */
	struct daemon *d;
	struct evhttp_request *req;
	struct corral_box *box;
	char id[64], sandbox[64], created[32];
	char *workspace;
	struct event *ev_closed;	/* its client closing, while it is made */
};

static bool snapshot_id_ok(const char *id)
{
	size_t n = strlen(id);

	return n && n < 64 && id[0] != '.' &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789._-") == n;
}

/* STATE/snapshots[/ID[/LEAF]] into buf; the directory made when absent. */
static int snap_path(struct daemon *d, const char *id, const char *leaf,
		     char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/snapshots", d->state_dir);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	n = snprintf(buf, len, "%s/snapshots%s%s%s%s", d->state_dir, id ? "/" : "",
		     id ? id : "", leaf ? "/" : "", leaf ? leaf : "");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A snapshot's meta.json, or NULL (absent: not finished; or not ours). */
static json_t *snap_meta(struct daemon *d, const char *id)
{
	char path[4096];
	json_t *m;

	if (!snapshot_id_ok(id) || snap_path(d, id, "meta.json", path, sizeof(path)) < 0)
		return NULL;
	m = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
	if (m && (!json_is_object(m) || !json_is_string(json_object_get(m, "workspace")))) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/*
 * Whether the snapshot of meta m is a local sandbox's, or may be: one an
 * earlier daemon made (STATE/tcp-since), whose plain id does not say.
 */
static bool snap_local(struct daemon *d, json_t *m)
{
	const char *sb = json_string_value(json_object_get(m, "sandbox"));
	const char *created = json_string_value(json_object_get(m, "created"));

	return !sb || sandbox_id_local(sb) || !created ||
	       strcmp(created, d->tcp_since_time) <= 0;
}

/*
 * Whether req's client may see the snapshot of meta m: not a TCP client
 * when it is a local sandbox's (its tree may hold what that sandbox had
 * of the host: a bind's files copied into its workspace), nor when its
 * workspace is outside every --allow-host-path (a from_snapshot of it is
 * refused them anyway).  Judged by what the record says: across restarts.
 */
static bool snap_seen(struct daemon *d, struct evhttp_request *req, json_t *m)
{
	return !api_over_tcp(d, req) ||
	       (!snap_local(d, m) &&
		api_access_remote_path(d, json_string_value(json_object_get(m, "workspace"))));
}

/*
 * Every finished snapshot's meta (a JSON array), and their bytes; with
 * req, only those its client may see, and only theirs (how much a local
 * sandbox's snapshots take, and when that grows, is the host user's work;
 * the budget, one for all, still counts them: snap_recount).
 */
static json_t *snap_all(struct daemon *d, struct evhttp_request *req, uint64_t *bytes)
{
	json_t *a = json_array();
	char path[4096];
	struct dirent *de;
	DIR *dir;

	*bytes = 0;
	if (!a || snap_path(d, NULL, NULL, path, sizeof(path)) < 0 ||
	    !(dir = opendir(path)))
		return a;
	while ((de = readdir(dir)) && json_array_size(a) < SNAPSHOTS_MAX) {
		json_t *m = de->d_name[0] == '.' ? NULL : snap_meta(d, de->d_name);

		if (!m)
			continue;
		if (req && !snap_seen(d, req, m)) {
			json_decref(m);
			continue;
		}
		*bytes += (uint64_t)json_integer_value(json_object_get(m, "bytes"));
		json_array_append_new(a, m);
	}
	closedir(dir);
	return a;
}

static uint64_t snap_budget(struct daemon *d)
{
	return d->snapshot_budget ? d->snapshot_budget : SNAPSHOT_BUDGET_DEFAULT;
}

/*
 * The finished snapshots' bytes, for the copies under way: each of them
 * checks the budget against these and the others' (snapshot.c), since a
 * limit fixed as it starts knows nothing of the copies beside it.
 */
static void snap_recount(struct daemon *d)
{
	uint64_t used;

	if (d->snap_tally) {
		json_decref(snap_all(d, NULL, &used));
		corral_snapshot_tally_keep(d->snap_tally, used);
	}
}

static void snap_remove(struct daemon *d, const char *id)
{
	char path[4096];

	if (snap_path(d, id, NULL, path, sizeof(path)) == 0)
		corral_snapshot_remove(path);
}

/* ---- removal off the loop ------------------------------------------------ */

/*
 * A snapshot's tree is as large as the budget lets it be: 100k
 * directories took 30 s to remove, on the loop.  A snapshot deleted (or
 * cut short) is renamed into STATE/trash at once, out of every listing
 * and count, and a process forked for the purpose removes it there; the
 * loop hears of its end by its pidfd.  One the daemon's end cut short is
 * removed when the next daemon starts (snapshots_sweep).
 */
struct remover {
	pid_t pid;
	int pidfd;
	struct event *ev;
};

static void remover_done(evutil_socket_t fd, short what, void *arg)
{
	struct remover *rm = arg;

	(void)fd;
	(void)what;
	while (waitpid(rm->pid, NULL, 0) < 0 && errno == EINTR)
		;
	event_free(rm->ev);
	close(rm->pidfd);
	free(rm);
}

static __attribute__((noreturn)) void remover_main(const char *path)
{
	sigset_t none;

	prctl(PR_SET_NAME, "corral-remove", 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* libevent's handlers would write into the daemon's signal pipe */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* nor a client's connection or a sandbox's socket kept open */
	syscall(SYS_close_range, 3, ~0U, 0);
	_exit(corral_snapshot_remove(path) < 0 ? 1 : 0);
}

/* path removed by a process of its own; in line if none can be forked. */
static void remove_off_loop(struct daemon *d, const char *path)
{
	struct remover *rm = calloc(1, sizeof(*rm));

	if (rm)
		rm->pid = fork();
	if (rm && rm->pid == 0)
		remover_main(path);
	if (!rm || rm->pid < 0) {
		free(rm);
		corral_snapshot_remove(path);
		return;
	}
	rm->pidfd = (int)syscall(SYS_pidfd_open, rm->pid, 0);
	rm->ev = rm->pidfd >= 0 ? event_new(d->base, rm->pidfd, EV_READ, remover_done, rm) :
		 NULL;
	if (rm->ev && event_add(rm->ev, NULL) == 0)
		return;
	/* forked, but the loop cannot watch it: wait here */
	while (waitpid(rm->pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (rm->ev)
		event_free(rm->ev);
	if (rm->pidfd >= 0)
		close(rm->pidfd);
	free(rm);
}

/* STATE/trash[/NAME] into buf; the directory made when absent. */
static int trash_path(struct daemon *d, const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/trash", d->state_dir);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	n = snprintf(buf, len, "%s/trash%s%s", d->state_dir, name ? "/" : "",
		     name ? name : "");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Gone from the snapshots now; its files removed off the loop. */
static void snap_remove_later(struct daemon *d, const char *id)
{
	char from[4096], to[4096];

	if (snap_path(d, id, NULL, from, sizeof(from)) < 0)
		return;
	if (trash_path(d, id, to, sizeof(to)) < 0 || rename(from, to) < 0) {
		corral_snapshot_remove(from);	/* in line, as it was */
		return;
	}
	remove_off_loop(d, to);
}

/*
 * At start, before the first request, no snapshot is under way: one with
 * no meta.json is what a killed daemon was copying.  Nothing lists it,
 * counts it against the budget or can DELETE it, so it would stay for
 * good; it goes now.
 */
void snapshots_sweep(struct daemon *d)
{
	char path[4096], meta[4096];
	struct dirent *de;
	struct stat st;
	DIR *dir;

	/* what a stopped daemon had left to remove */
	if (trash_path(d, NULL, path, sizeof(path)) == 0 && (dir = opendir(path))) {
		while ((de = readdir(dir)))
			if (snapshot_id_ok(de->d_name) &&
			    trash_path(d, de->d_name, meta, sizeof(meta)) == 0)
				remove_off_loop(d, meta);
		closedir(dir);
	}
	if (snap_path(d, NULL, NULL, path, sizeof(path)) < 0 || !(dir = opendir(path)))
		return;
	while ((de = readdir(dir))) {
		if (!snapshot_id_ok(de->d_name) ||
		    snap_path(d, de->d_name, "meta.json", meta, sizeof(meta)) < 0 ||
		    lstat(meta, &st) == 0 || errno != ENOENT)
			continue;
		snap_remove_later(d, de->d_name);
		fprintf(stderr, "corral serve: removed the unfinished snapshot %s/%s\n",
			path, de->d_name);
	}
	closedir(dir);
}

static int meta_write(struct daemon *d, const char *id, json_t *meta)
{
	char tmp[4096], path[4096];

	if (snap_path(d, id, "meta.json.tmp", tmp, sizeof(tmp)) < 0 ||
	    snap_path(d, id, "meta.json", path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (json_dump_file(meta, tmp, JSON_COMPACT | JSON_ENSURE_ASCII) < 0)
		return -EIO;
	return rename(tmp, path) < 0 ? -errno : 0;
}

static void snap_done(void *arg, int r, const struct corral_snapshot_info *info,
		      const struct corral_err *err)
{
	struct snap_req *s = arg;
	json_t *meta = NULL;

	worker_disown(s->d, &s->owner);
	if (s->ev_closed)
		event_free(s->ev_closed);
	s->ev_closed = NULL;
	if (r == 0) {
		meta = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:b}", "id", s->id,
				 "sandbox", s->sandbox, "workspace", s->workspace,
				 "created", s->created, "bytes", (json_int_t)info->bytes,
				 "files", (json_int_t)info->files,
				 "skipped", (json_int_t)info->skipped, "frozen", info->frozen);
		r = meta ? meta_write(s->d, s->id, meta) : -ENOMEM;
		/* kept now: counted there before its copy's slot is let go */
		snap_recount(s->d);
		if (r < 0)
			reply_error(s->req, 500, "internal", "cannot write the snapshot's "
				    "record: %s", strerror(-r));
	} else {
		reply_err(s->req, err);
	}
	if (r < 0) {
		/* a failed copy removed its own; one cut short left its part */
		snap_remove_later(s->d, s->id);
	} else {
		char why[160];

		snprintf(why, sizeof(why), "snapshot %s: %llu files, %llu bytes%s", s->id,
			 (unsigned long long)info->files, (unsigned long long)info->bytes,
			 info->frozen ? "" : " (copied running: no freezer)");
		corral_box_note(s->box, "snapshot", why);
		reply_json(s->req, 201, json_incref(meta));
	}
	json_decref(meta);
	free(s->workspace);
	free(s);
}

/* The client closed before the answer: the copy is cut short, not kept. */
static void snap_closed(evutil_socket_t fd, short what, void *arg)
{
	struct snap_req *s = arg;

	(void)fd;
	(void)what;
	corral_box_snapshot_cancel(s->box);	/* snap_done, now: the answer to nobody */
}

void snapshot_post(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };
	struct snap_req *s = calloc(1, sizeof(*s));
	struct api_fault f;
	unsigned char rnd[6];
	char dir[4096], tree[4096];
	uint64_t used;
	json_t *all = snap_all(sb->d, NULL, &used);
	const char *ws = corral_box_workspace(sb->box);
	time_t now = time(NULL);
	struct tm tm;
	int r;

	(void)rest;
	json_decref(all);
	if (!s || getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		free(s);
		reply_error(req, 500, "internal", "out of memory or randomness");
		return;
	}
	if (!ws) {
		free(s);
		reply_error(req, 400, "bad_request", "the sandbox has no workspace: "
			    "nothing to snapshot");
		return;
	}
	if (!builds_room(sb->d, sb, false, &f)) {
		free(s);
		reply_busy(req, &f);
		return;
	}
	/* before the first copy's worker is forked: they all share it */
	if (!sb->d->snap_tally &&
	    !(sb->d->snap_tally = corral_snapshot_tally_new(snap_budget(sb->d), &err))) {
		free(s);
		reply_err(req, &err);
		return;
	}
	corral_snapshot_tally_keep(sb->d->snap_tally, used);
	if (used >= snap_budget(sb->d)) {
		free(s);
		reply_error(req, 507, "no_space", "the snapshots take %llu bytes of "
			    "the budget of %llu (--snapshot-budget): delete some",
			    (unsigned long long)used, (unsigned long long)snap_budget(sb->d));
		return;
	}
	*s = (struct snap_req){ .d = sb->d, .req = req, .box = sb->box,
				.workspace = strdup(ws) };
	snprintf(s->id, sizeof(s->id), "snap-%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", sb->id);
	gmtime_r(&now, &tm);
	strftime(s->created, sizeof(s->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	r = s->workspace ? snap_path(sb->d, s->id, NULL, dir, sizeof(dir)) : -ENOMEM;
	if (r == 0)
		r = snap_path(sb->d, s->id, "tree", tree, sizeof(tree));
	if (r == 0 && mkdir(dir, 0700) < 0)
		r = -errno;
	if (r < 0) {
		reply_error(req, 500, "internal", "cannot make the snapshot's directory "
			    "in %s/snapshots: %s", sb->d->state_dir, strerror(-r));
		free(s->workspace);
		free(s);
		return;
	}
	/* a worker copies (snapshot.c): its client's end cuts it short */
	worker_own(sb->d, &s->owner, sb);
	s->ev_closed = watch_closed(sb->d, req, snap_closed, s);
	if (corral_box_snapshot_tallied(sb->box, tree, snap_budget(sb->d) - used,
					SNAPSHOT_FILES_MAX, sb->d->snap_tally, snap_done,
					s, &err) < 0) {
		worker_disown(sb->d, &s->owner);
		if (s->ev_closed)
			event_free(s->ev_closed);
		reply_err(req, &err);
		snap_remove(sb->d, s->id);
		free(s->workspace);
		free(s);
	}
}

void snapshots_list(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	uint64_t used;
	json_t *all = snap_all(d, req, &used);

	(void)rest;
	reply_json(req, 200, json_pack("{s:o, s:I, s:I}", "snapshots", all,
				       "bytes", (json_int_t)used,
				       "budget_bytes", (json_int_t)snap_budget(d)));
}

/* The meta of snapshot id if req's client may see it, else NULL. */
static json_t *snap_meta_seen(struct daemon *d, struct evhttp_request *req,
			      const char *id)
{
	json_t *m = snap_meta(d, id);

	if (m && !snap_seen(d, req, m)) {
		json_decref(m);
		return NULL;
	}
	return m;
}

void snapshot_get(struct daemon *d, struct evhttp_request *req, const char *id)
{
	json_t *m = snap_meta_seen(d, req, id);

	if (!m)
		reply_error(req, 404, "not_found", "no snapshot \"%.64s\"", id);
	else
		reply_json(req, 200, m);
}

void snapshot_delete(struct daemon *d, struct evhttp_request *req, const char *id)
{
	json_t *m = snap_meta_seen(d, req, id);

	if (!m) {
		reply_error(req, 404, "not_found", "no snapshot \"%.64s\"", id);
		return;
	}
	json_decref(m);
	/* forks hold copies of it: none uses it once built */
	snap_remove_later(d, id);
	snap_recount(d);
	reply_json(req, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
}

int snapshot_workspace(struct daemon *d, struct evhttp_request *req, const char *id,
		       struct corral_policy *p, bool *local, struct api_fault *f)
{
	json_t *m = snap_meta_seen(d, req, id);
	struct corral_err err = { 0 };

	if (!m) {
		api_fault(f, 404, "not_found", "no snapshot \"%.64s\"", id);
		return -1;
	}
	*local = snap_local(d, m);
	if (corral_policy_set_workspace(p, json_string_value(json_object_get(m, "workspace")),
					&err) < 0) {
		json_decref(m);
		api_fault(f, 400, "bad_request", "snapshot %s: %s", id, err.msg);
		return -1;
	}
	json_decref(m);
	return 0;
}

int snapshot_layer(struct daemon *d, const char *id, struct corral_policy *p,
		   char **tree, int *fd, struct api_fault *f)
{
	struct corral_err err = { 0 };
	char path[4096];

	*fd = -1;
	*tree = NULL;
	if (!snapshot_id_ok(id)) {
		api_fault(f, 404, "not_found", "no snapshot \"%.64s\"", id);
		return -1;
	}
	if (snap_path(d, id, "tree", path, sizeof(path)) < 0 || !(*tree = strdup(path))) {
		api_fault(f, 500, "internal", "snapshot %s: out of memory", id);
		return -1;
	}
	if (corral_policy_set_workspace_layer(p, *tree, fd, &err) < 0) {
		api_fault(f, 500, "internal", "%s", err.msg);
		free(*tree);
		*tree = NULL;
		return -1;
	}
	return 0;
}
