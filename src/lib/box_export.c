/*
 * box_export.c - a long-lived sandbox's workspace on its way out: its
 * diff and its export (to a new directory, onto the workspace, or as a
 * git patch), from the overlay's upper layer the box's init handed over.
 *
 * The box keeps three things from its start: the upper layer's fd (the
 * sandbox's, MSG_UPPER_FD), the host workspace's fd, and the stats of the
 * workspace's files then (the baseline: a host file changed since is a
 * conflict for apply, never overwritten).  Each apply brings the baseline
 * up to what it wrote (the helper's records: stat and SHA-256 of its own
 * writes), so the sandbox can apply, work on and apply again, and a host
 * edit in between is still a conflict.
 *
 * corral_box_diff and corral_box_export work in the caller's process (a
 * patch only reads; a write waits for its helper); their _start forms
 * (the daemon's) do the same in a worker forked for it, off the caller's
 * loop (box_job.c), a patch written to the caller's file as it is made.
 * A write on the host (to, apply) is made by a forked process that first
 * takes the caller's fs
 * uid, fs gid and groups, so the daemon (root, say) writes nothing its
 * caller could not write itself.  The helper reads the sandbox's files
 * as that user too: a file the agent made unreadable is reported, not
 * written.  The helper sends its report back on a pipe; its events are
 * emitted here, so that only the daemon writes the audit chain.
 */
#include "internal.h"
#include "box.h"
#include "events.h"
#include "export.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


int box_ws_open(struct corral_box *b, struct corral_err *err)
{
	struct export_limits lim;

	if (!b->p->workspace)
		return 0;
	/* pinned: the directory judged, as the sandbox's lower layer is */
	b->lowerfd = b->p->workspace_pinned ?
		     openat(b->p->workspace_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) :
		     open(b->p->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b->lowerfd < 0)
		return corral_set_err(err, -errno, "workspace %s: %s", b->p->workspace,
				      strerror(errno));
	export_limits_of(b->p, &lim);
	/* a workspace too large to record still makes a box: apply says why not */
	if (baseline_take(b->lowerfd, &lim, &b->ws_base, err) < 0 && err->code != -EFBIG)
		return corral_wrap_err(err, "workspace %s", b->p->workspace);
	err->code = 0;
	err->msg[0] = '\0';
	return 0;
}

void box_ws_close(struct corral_box *b)
{
	close_fd(&b->lowerfd);
	baseline_free(b->ws_base);
	b->ws_base = NULL;
}

const char *corral_box_workspace(const struct corral_box *b)
{
	return b->p->workspace;
}

static int box_layers(struct corral_box *b, struct layers *l,
		      struct corral_err *err)
{
	if (!b->p->workspace)
		return corral_set_err(err, -EINVAL, "the sandbox has no workspace: "
				      "nothing to diff or export");
	if (!b->sb || b->sb->upperfd < 0 || b->killed)
		return corral_set_err(err, -ESRCH, "the sandbox's upper layer is gone "
				      "(it died or was killed): nothing to diff or export");
	l->upper = b->sb->upperfd;
	l->lower = b->lowerfd;
	l->planted = b->p;
	return 0;
}

/* "a/b", "/workspace/a/b", "/a/b" -> "a/b"; "" or "." -> everything. */
static int only_path(const char *path, char *buf, size_t len,
		     struct corral_err *err)
{
	if (!path)
		path = "";
	if (!strncmp(path, "/workspace", 10) && (!path[10] || path[10] == '/'))
		path += 10;
	while (*path == '/')
		path++;
	if (strlen(path) >= len)
		return corral_set_err(err, -ENAMETOOLONG, "path too long");
	strcpy(buf, path);
	if (buf[0] && path_normalize(buf) < 0)
		return corral_set_err(err, -EINVAL, "path %.200s: climbs out of the workspace",
				      path);
	if (!strcmp(buf, "."))
		buf[0] = '\0';
	return 0;
}

int corral_box_diff(struct corral_box *b, const char *path, bool patch,
		    char **out, size_t *len, struct corral_err *err)
{
	struct layers l;
	struct export_limits lim;
	struct changes ch = { 0 };
	char only[4096];
	int r;

	*out = NULL;
	*len = 0;
	err->code = 0;
	err->msg[0] = '\0';
	r = box_layers(b, &l, err);
	if (r == 0)
		r = only_path(path, only, sizeof(only), err);
	if (r < 0)
		return r;
	if (patch) {
		struct patch_buf pb = { 0 };
		struct export_req req = {
			.p = b->p, .layers = l, .apply_fd = -1, .patch_out = &pb,
			.only = only,
		};
		json_t *report = NULL;

		r = export_run(&req, &report, err);
		json_decref(report);
		if (r < 0) {
			free(pb.data);
			return r;
		}
		*out = pb.data ? pb.data : strdup("");
		*len = pb.len;
		return *out ? 0 : corral_set_err(err, -ENOMEM, "out of memory");
	}
	export_limits_of(b->p, &lim);
	r = diff_changes(&l, &lim, &ch, err);
	if (r < 0)
		return r;
	changes_keep_under(&ch, only);
	{
		json_t *j = changes_json(&ch);

		*out = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		json_decref(j);
	}
	changes_free(&ch);
	if (!*out)
		return corral_set_err(err, -ENOMEM, "out of memory for the diff");
	*len = strlen(*out);
	return 0;
}

/* Whether the new directory to would lie in the workspace it copies. */
static bool to_inside(const char *to, const char *workspace)
{
	char *dir = strdup(to), *slash, *real = NULL, *ws = NULL;
	bool inside = false;

	if (!dir)
		return true;
	slash = strrchr(dir, '/');
	if (slash)
		slash == dir ? (void)(dir[1] = '\0') : (void)(*slash = '\0');
	real = realpath(dir, NULL);
	ws = realpath(workspace, NULL);
	if (real && ws) {
		size_t n = strlen(ws);

		inside = !strncmp(real, ws, n) && (real[n] == '/' || !real[n] || n == 1);
	}
	free(dir);
	free(real);
	free(ws);
	return inside;
}

/* ---- the helper that writes as the caller ------------------------------- */

int corral_box_rw_dirs(const struct corral_box *b, struct corral_dir_id **ids,
		       size_t *n)
{
	struct corral_err err = { 0 };

	return export_rw_dirs(b->p, ids, n, &err);
}

/* In the helper, as the caller: the destination, made or opened by its path. */
static int open_dest(struct corral_box *b, const struct corral_box_export_opts *o,
		     int *fd, char *msg, size_t len)
{
	struct stat a, c;

	if (o->to) {
		/* its directory judged: no symlink of the box's --rw binds followed */
		struct corral_err e = { 0 };
		char *base;
		int parent = export_dest_parent(b->p, "to", o->to, true, &base, &e);

		if (parent >= 0) {
			*fd = export_new_dir(parent, base, "to", o->to, &e);
			close(parent);
			free(base);
		}
		if (parent < 0 || *fd < 0) {
			snprintf(msg, len, "%s", e.msg);
			return e.code;
		}
		return 0;
	}
	/* apply: the workspace again by its path, as the caller, and the same one */
	*fd = open(b->p->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0) {
		snprintf(msg, len, "workspace %s: %s", b->p->workspace, strerror(errno));
		return -errno;
	}
	if (fstat(*fd, &a) < 0 || fstat(b->lowerfd, &c) < 0 ||
	    a.st_dev != c.st_dev || a.st_ino != c.st_ino) {
		snprintf(msg, len, "workspace %s: not the directory the sandbox was "
			 "made on any more", b->p->workspace);
		return -ESTALE;
	}
	return 0;
}

static void helper(struct corral_box *b, const struct corral_box_export_opts *o,
		   struct export_req *req, int wr)
{
	struct corral_err err = { 0 };
	json_t *report = NULL, *answer;
	char *text;
	int r, dest = -1;

	corral_forget(NULL);
	signal(SIGPIPE, SIG_IGN);
	r = export_become(o->uid, o->gid, err.msg, sizeof(err.msg));
	if (r == 0)
		r = open_dest(b, o, &dest, err.msg, sizeof(err.msg));
	if (r == 0) {
		if (o->to) {
			req->to_opened = true;
			req->to_fd = dest;
		} else {
			req->apply_fd = dest;
		}
		r = export_run(req, &report, &err);
	}
	/* the sentence may quote a name the sandbox chose: bytes, not "s" */
	answer = json_pack("{s:i, s:o, s:o*, s:O*}", "code", r, "msg",
			   corral_json_bytes(err.msg, strlen(err.msg)),
			   "report", report, "written", req->wrote);
	text = answer ? json_dumps(answer, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	if (text)
		(void)!write(wr, text, strlen(text));
	_exit(text ? 0 : 1);
}

/* The helper's answer (export_writer_wait), its report and what it wrote. */
static int helper_wait(pid_t pid, int rd, json_t **report, json_t **written,
		       struct corral_err *err)
{
	json_t *a;
	int r = export_writer_wait(pid, rd, "the export's helper", NULL, NULL, &a, err);

	*report = json_incref(json_object_get(a, "report"));
	*written = json_incref(json_object_get(a, "written"));
	json_decref(a);
	return r;
}

static int export_as_caller(struct corral_box *b, const struct corral_box_export_opts *o,
			    struct export_req *req, json_t **report,
			    json_t **written, struct corral_err *err)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return corral_set_err(err, -errno, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return corral_set_err(err, -e, "cannot fork the export's helper: %s",
				      strerror(e));
	}
	if (pid == 0) {
		close(p[0]);
		helper(b, o, req, p[1]);
	}
	close(p[1]);
	{
		int r = helper_wait(pid, p[0], report, written, err);

		close(p[0]);
		return r;
	}
}

/*
 * What the apply wrote becomes the baseline's: the next apply must not
 * take these writes for the host's.  Also after an error: what was
 * written is on the host.  A record that outgrew the limit is dropped,
 * and apply says so from then on.
 */
static void keep_written(struct corral_box *b, const json_t *written)
{
	struct export_limits lim;
	struct corral_err err = { 0 };

	if (!b->ws_base || !written)
		return;
	export_limits_of(b->p, &lim);
	if (baseline_update(b->ws_base, written, &lim, &err) == -EFBIG) {
		baseline_free(b->ws_base);
		b->ws_base = NULL;
	}
	if (err.code)
		events_emit(b->ev, "export.baseline", json_pack("{s:o}", "reason",
			    corral_json_bytes(err.msg, strlen(err.msg))));
}

/* The helper's events, from its report: the audit chain is the daemon's. */
static void report_events(struct corral_box *b, const char *mode, json_t *report,
			  int r, const struct corral_err *err)
{
	json_t *held = json_object_get(report, "held");
	json_t *out = json_object_get(report, "exported"), *e;
	size_t i;

	json_array_foreach(held, i, e)
		events_emit(b->ev, "export.held", json_pack("{s:O, s:O*, s:O*, s:O*}",
			    "path", json_object_get(e, "path"), "change",
			    json_object_get(e, "change"), "file_type",
			    json_object_get(e, "type"), "reason",
			    json_object_get(e, "reason")));
	json_array_foreach(out, i, e) {
		const char *note = json_string_value(json_object_get(e, "note"));
		static const char let[] = "let out by --allow-risky ";

		if (note && !strncmp(note, let, sizeof(let) - 1))
			events_emit(b->ev, "export.allow_risky", json_pack("{s:O, s:s}",
				    "path", json_object_get(e, "path"), "pattern",
				    note + sizeof(let) - 1));
	}
	/* an error may name a path of the sandbox's, not UTF-8 */
	events_emit(b->ev, "export", json_pack("{s:s, s:i, s:i, s:i, s:o}", "mode", mode,
		    "exported", (int)json_array_size(out), "held", (int)json_array_size(held),
		    "conflicts", (int)json_array_size(json_object_get(report, "conflicts")),
		    "error", corral_json_bytes(r < 0 ? err->msg : "", r < 0 ? strlen(err->msg) : 0)));
}

int corral_box_export(struct corral_box *b, const struct corral_box_export_opts *o,
		      char **report, char **patch, size_t *patch_len,
		      struct corral_err *err)
{
	struct patch_buf pb = { 0 };
	struct export_req req = {
		.p = b->p, .apply_fd = -1, .allow_risky = o->allow_risky,
		.nallow_risky = o->nallow_risky, .base = o->apply ? b->ws_base : NULL,
	};
	json_t *rep = NULL, *written = NULL;
	int r;

	*report = NULL;
	if (patch) {
		*patch = NULL;
		*patch_len = 0;
	}
	err->code = 0;
	err->msg[0] = '\0';
	if (!!o->to + o->apply + o->patch != 1)
		return corral_set_err(err, -EINVAL, "an export goes to one place: "
				      "to, apply or patch, not several");
	if (o->patch && !patch)
		return corral_set_err(err, -EINVAL, "a patch needs somewhere to go");
	if (o->to && o->to[0] != '/')
		return corral_set_err(err, -EINVAL, "to %.200s: an absolute path", o->to);
	if (b->state == CORRAL_BOX_HALTED)
		return corral_set_err(err, CORRAL_E_HALTED, "the sandbox was halted (%s): "
				      "nothing is exported", b->halt_reason);
	r = box_layers(b, &req.layers, err);
	if (r < 0)
		return r;
	if (o->to && to_inside(o->to, b->p->workspace))
		return corral_set_err(err, -EINVAL, "to %.200s: lies inside the workspace "
				      "it copies", o->to);
	if (o->apply && !b->ws_base)
		return corral_set_err(err, -EFBIG, "the workspace had more than "
				      "export.max_files entries when the sandbox started, "
				      "or after an apply: with no record of it, apply "
				      "cannot tell conflicts (export to a new directory "
				      "or as a patch)");
	if (o->patch) {
		req.patch_out = &pb;
		req.ev = b->ev;
		r = export_run(&req, &rep, err);
		if (r == 0) {
			*patch = pb.data ? pb.data : strdup("");
			*patch_len = pb.len;
			pb.data = NULL;
			if (!*patch)
				r = corral_set_err(err, -ENOMEM, "out of memory");
		}
		free(pb.data);
	} else {
		req.to = o->to;
		if (o->apply && !(req.wrote = json_array()))
			return corral_set_err(err, -ENOMEM, "out of memory starting the apply");
		r = export_as_caller(b, o, &req, &rep, &written, err);
		json_decref(req.wrote);
		report_events(b, o->to ? "to" : "apply", rep, r, err);
		if (o->apply)
			keep_written(b, written);
		json_decref(written);
	}
	if (rep)
		*report = json_dumps(rep, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(rep);
	return r;
}

/* ---- diff and patch, made by a worker (box_job.c) ----------------------- */

struct corral_box_job {
	struct box_job *job;
	struct corral_box *b;
	corral_box_job_fn done;
	void *arg;
	int out;			/* the caller's file */
	bool patch, export;
	bool write;			/* to or apply, as the caller (export_become()) */
	struct corral_box_export_opts o;	/* write: its strings the caller's */
	struct export_req req;		/* patch and export: the worker's */
	char only[4096];
	int journal;			/* apply: its records as written, or -1 */
	char hold[256];			/* a test's FIFO: apply held at its 3rd file */
	unsigned int held;		/* in the worker: files come to the hook */
};

/*
 * What an apply wrote, from its journal: the records of a worker that
 * never answered (killed midway, by its client's end or its cap), each
 * line as written; a line cut short is no record (a conflict next time).
 */
static json_t *journal_read(int fd)
{
	json_t *recs = json_array();
	struct stat st;
	char *buf, *line, *save = NULL;

	if (!recs || fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    (uint64_t)st.st_size > EXPORT_ANSWER_MAX || !(buf = malloc((size_t)st.st_size + 1)))
		return recs;
	if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return recs;
	}
	buf[st.st_size] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *rec = json_loads(line, 0, NULL);

		if (json_is_array(rec))
			json_array_append(recs, rec);
		json_decref(rec);
	}
	free(buf);
	return recs;
}

static void job_free(struct corral_box_job *j)
{
	if (j->journal >= 0)
		close(j->journal);
	json_decref(j->req.wrote);
	free(j);
}

/* A test's hook: the apply's 3rd file waits for a writer of j->hold. */
static void apply_hold(void *arg, const char *path)
{
	struct corral_box_job *j = arg;
	char c;
	int fd;

	(void)path;
	if (++j->held != 3)
		return;
	fd = open(j->hold, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

/* In the worker: the diff, the patch or the export's patch into j->out. */
static int diff_work(struct corral_box *b, void *arg, int answer)
{
	struct corral_box_job *j = arg;
	struct corral_err err = { 0 };
	json_t *report = NULL, *events = json_array(), *a;
	bool text_report;
	int r;

	if (j->write) {
		int dest = -1;

		/* as helper() did: the caller's ids first, then its destination */
		signal(SIGPIPE, SIG_IGN);
		r = export_become(j->o.uid, j->o.gid, err.msg, sizeof(err.msg));
		if (r == 0)
			r = open_dest(b, &j->o, &dest, err.msg, sizeof(err.msg));
		if (r == 0 && j->o.to) {
			j->req.to_opened = true;
			j->req.to_fd = dest;
		} else if (r == 0) {
			j->req.apply_fd = dest;
			j->req.journal = j->journal >= 0;
			j->req.journal_fd = j->journal;
			if (j->hold[0]) {
				j->req.fault = apply_hold;
				j->req.fault_arg = j;
			}
		}
		if (r == 0)
			r = export_run(&j->req, &report, &err);
	} else if (j->patch) {
		j->req.events_out = j->export ? events : NULL;
		r = export_run(&j->req, &report, &err);
		if (!j->export) {
			json_decref(report);
			report = NULL;
		}
	} else {
		struct export_limits lim;
		struct changes ch = { 0 };
		json_t *d = NULL;

		export_limits_of(b->p, &lim);
		r = diff_changes(&j->req.layers, &lim, &ch, &err);
		if (r == 0) {
			changes_keep_under(&ch, j->only);
			d = changes_json(&ch);
			changes_free(&ch);
			r = d ? 0 : corral_set_err(&err, -ENOMEM, "out of memory for the diff");
		}
		if (r == 0 && json_dumpfd(d, j->out, JSON_COMPACT | JSON_ENSURE_ASCII) < 0)
			r = corral_set_err(&err, -EIO, "cannot write the diff out");
		json_decref(d);
	}
	/* the cap (box_job.c) is what failed, not the host: a 507 that says so */
	if (r == -ENOMEM && b->job_mem_max) {
		char why[sizeof(err.msg)];

		snprintf(why, sizeof(why), "%s", err.msg);
		corral_set_err(&err, -EFBIG, "%.600s: the worker that makes it may take %llu "
			       "MiB and this workspace's changes need more (export them "
			       "a part at a time: a diff's path)", why,
			       (unsigned long long)(b->job_mem_max >> 20));
		r = err.code;
	}
	/*
	 * As the helper's: a name in the sentence need not be UTF-8.  An
	 * export's patch has its report after the answer, on a line of its
	 * own, as the caller sends it: as large as the export's names (64 MB
	 * of 50,000 names of 200 bytes that are not UTF-8, each byte
	 * \ufffd), and never parsed on the caller's loop, which it held
	 * seconds.  The to and apply writer's is in the answer: its events
	 * are read from it (report_events).
	 */
	text_report = j->export && !j->write;
	a = json_pack("{s:i, s:o, s:o*, s:o*, s:O*, s:I, s:I}", "code", r, "msg",
		      corral_json_bytes(err.msg, strlen(err.msg)),
		      "report", text_report ? NULL : report, "events", events,
		      "written", j->req.wrote, "memory", (json_int_t)box_job_memory(b),
		      "memory_max", (json_int_t)b->job_mem_max);
	if (!a || json_dumpfd(a, answer, JSON_COMPACT | JSON_ENSURE_ASCII) < 0 ||
	    (text_report && report && (write(answer, "\n", 1) != 1 ||
				       json_dumpfd(report, answer, JSON_COMPACT |
						   JSON_ENSURE_ASCII) < 0)))
		r = -EIO;
	json_decref(a);
	if (text_report)
		json_decref(report);
	return r;
}

/* From the loop: the worker's answer to the caller; its events emitted here. */
static void diff_end(void *arg, const char *answer, size_t len, int status)
{
	struct corral_box_job *j = arg;
	struct corral_err err = { 0 };
	/* an export's patch: its report's line after the answer (diff_work) */
	const char *nl = answer ? memchr(answer, '\n', len) : NULL;
	json_t *a = answer ? json_loadb(answer, nl ? (size_t)(nl - answer) : len, 0, NULL) : NULL;
	json_t *code = json_object_get(a, "code"), *msg = json_object_get(a, "msg"), *e;
	char *report = NULL;
	size_t i;
	int r;

	if (status == -1) {
		r = corral_set_err(&err, -ESRCH, "the sandbox was destroyed while its "
				   "diff was made");
	} else if (!json_is_integer(code)) {
		r = corral_set_err(&err, -EIO, "the diff's worker ended without an "
				   "answer (wait status %d)", status);
	} else {
		r = (int)json_integer_value(code);
		if (r > 0 || r < -4095)
			r = -EIO;
		if (r < 0)
			corral_set_err(&err, r, "%s", json_is_string(msg) ?
				       json_string_value(msg) : "the diff failed");
	}
	json_array_foreach(json_object_get(a, "events"), i, e)
		events_emit(j->b->ev, json_string_value(json_object_get(e, "type")),
			    json_incref(json_object_get(e, "data")));
	/* what the worker took: the operator's measure of what a sandbox costs us */
	if (json_is_integer(json_object_get(a, "memory")))
		events_emit(j->b->ev, "build", json_pack("{s:s, s:O, s:O}", "kind",
			    j->write ? (j->o.to ? "export.to" : "export.apply") :
			    j->export ? "export.patch" : j->patch ? "diff.patch" : "diff",
			    "memory_bytes", json_object_get(a, "memory"),
			    "memory_max_bytes", json_object_get(a, "memory_max")));
	if (j->write) {
		/* the writer's events from its report; what an apply wrote is recorded */
		report_events(j->b, j->o.to ? "to" : "apply", json_object_get(a, "report"),
			      r, &err);
		if (j->o.apply && status != -1 && json_object_get(a, "written")) {
			keep_written(j->b, json_object_get(a, "written"));
		} else if (j->o.apply && status != -1) {
			/* no answer (its cap, a crash): what it wrote is in its journal */
			json_t *recs = journal_read(j->journal);

			keep_written(j->b, recs);
			json_decref(recs);
		}
	}
	if (json_object_get(a, "report"))
		report = json_dumps(json_object_get(a, "report"),
				    JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(a);
	j->job = NULL;
	/* the answer ends with a NUL (box_job.c: job_answer) */
	j->done(j->arg, r, report ? report : nl && nl[1] ? nl + 1 : NULL, &err);
	free(report);
	job_free(j);
}

static int job_go(struct corral_box_job *j, struct corral_box_job **out,
		  struct corral_err *err)
{
	int fds[2] = { j->out, j->journal };
	int r = box_job_start(j->b, diff_work, diff_end, j, fds, 2, &j->job, err);

	if (r < 0) {
		job_free(j);
		return r;
	}
	*out = j;
	return 0;
}

int corral_box_diff_start(struct corral_box *b, const char *path, bool patch, int fd,
			  corral_box_job_fn done, void *arg,
			  struct corral_box_job **out, struct corral_err *err)
{
	struct corral_box_job *j;
	int r;

	*out = NULL;
	err->code = 0;
	err->msg[0] = '\0';
	j = calloc(1, sizeof(*j));
	if (!j)
		return corral_set_err(err, -ENOMEM, "out of memory for a diff");
	*j = (struct corral_box_job){ .b = b, .done = done, .arg = arg, .out = fd,
				      .patch = patch, .journal = -1 };
	r = box_layers(b, &j->req.layers, err);
	if (r == 0)
		r = only_path(path, j->only, sizeof(j->only), err);
	if (r < 0) {
		free(j);
		return r;
	}
	j->req.p = b->p;
	j->req.apply_fd = -1;
	j->req.patch_sink = true;
	j->req.patch_fd = fd;
	j->req.only = j->only;
	return job_go(j, out, err);
}

int corral_box_export_start(struct corral_box *b, const struct corral_box_export_opts *o,
			    int fd, corral_box_job_fn done, void *arg,
			    struct corral_box_job **out, struct corral_err *err)
{
	struct corral_box_job *j;
	int r;

	*out = NULL;
	err->code = 0;
	err->msg[0] = '\0';
	if (!!o->to + o->apply + o->patch != 1)
		return corral_set_err(err, -EINVAL, "an export goes to one place: "
				      "to, apply or patch, not several");
	if (o->to && o->to[0] != '/')
		return corral_set_err(err, -EINVAL, "to %.200s: an absolute path", o->to);
	if (b->state == CORRAL_BOX_HALTED)
		return corral_set_err(err, CORRAL_E_HALTED, "the sandbox was halted (%s): "
				      "nothing is exported", b->halt_reason);
	j = calloc(1, sizeof(*j));
	if (!j)
		return corral_set_err(err, -ENOMEM, "out of memory for an export");
	*j = (struct corral_box_job){ .b = b, .done = done, .arg = arg, .out = fd,
				      .patch = o->patch, .export = true,
				      .write = !o->patch, .o = *o, .journal = -1 };
	r = box_layers(b, &j->req.layers, err);
	if (r == 0 && o->to && to_inside(o->to, b->p->workspace))
		r = corral_set_err(err, -EINVAL, "to %.200s: lies inside the workspace "
				   "it copies", o->to);
	if (r == 0 && o->apply && !b->ws_base)
		r = corral_set_err(err, -EFBIG, "the workspace had more than "
				   "export.max_files entries when the sandbox started, "
				   "or after an apply: with no record of it, apply "
				   "cannot tell conflicts (export to a new directory "
				   "or as a patch)");
	if (r == 0 && o->apply && !(j->req.wrote = json_array()))
		r = corral_set_err(err, -ENOMEM, "out of memory starting the apply");
	/* the daemon's, not the worker's: it outlives a worker killed midway */
	if (r == 0 && o->apply && (j->journal = memfd_create("corral-apply", MFD_CLOEXEC)) < 0)
		r = corral_set_err(err, -errno, "memfd_create for the apply's journal: %s",
				   strerror(errno));
	if (r == 0 && o->apply) {
		const char *hold = getenv("CORRAL_TEST_APPLY_FIFO");

		snprintf(j->hold, sizeof(j->hold), "%s", hold ? hold : "");
	}
	if (r < 0) {
		job_free(j);
		return r;
	}
	j->req.p = b->p;
	j->req.apply_fd = -1;
	j->req.patch_sink = o->patch;
	j->req.patch_fd = fd;
	j->req.to = o->to;
	j->req.base = o->apply ? b->ws_base : NULL;
	/* the globs are read in the worker: its copy of the caller's memory */
	j->req.allow_risky = o->allow_risky;
	j->req.nallow_risky = o->nallow_risky;
	return job_go(j, out, err);
}

/*
 * An apply cut short (its client gone) leaves on the host what it wrote
 * so far: its journal's records go into the baseline, so the next apply
 * knows those files for its own, not for host edits.
 */
void corral_box_job_cancel(struct corral_box_job *j)
{
	if (!j)
		return;
	box_job_kill(j->job);
	if (j->write && j->o.apply) {
		json_t *recs = journal_read(j->journal);

		keep_written(j->b, recs);
		events_emit(j->b->ev, "export", json_pack("{s:s, s:i, s:s}", "mode", "apply",
			    "written", (int)json_array_size(recs), "error",
			    "cut short: its client went before the apply ended; what it "
			    "wrote stays on the host, recorded for the next apply"));
		json_decref(recs);
	}
	job_free(j);
}
