/*
 * api_builds.c - answers that take long to make: a diff, a patch, an
 * export's patch.  The sandbox's code decides how costly they are (its
 * workspace may be as large as its disk), and the daemon serves every
 * sandbox from one loop: made in line, a 387 MB patch held every other
 * sandbox's requests for 14.6 s and took 759 MB of the daemon.
 *
 * So a worker process makes the answer (corral_box_diff_start,
 * corral_box_export_start; for an export to a directory or onto the
 * workspace, the worker writes on the host as the client, and answers
 * its report) into a spool file of the state dir, opened
 * O_TMPFILE: it has no name, and is gone with its last fd, also when the
 * daemon is killed.  Once the worker has ended, the daemon sends the
 * spool a slice at a time, the next slice when the client has taken the
 * last: the daemon holds one slice of it, whatever its size.  The
 * answer's status is the worker's, known before the first byte is sent,
 * so every status and body stays what it was.  An export's patch goes
 * out inside its JSON answer: the report, then the patch as a JSON
 * string, escaped a slice at a time (never cut inside a UTF-8 sequence:
 * the same bytes as escaping it whole), in chunked encoding.  A client
 * that asks for EXPORT_STREAM_TYPE gets the report as a line of JSON,
 * then the patch's bytes: it need not hold the patch to parse the answer.
 *
 * At most BUILDS_MAX workers (these, archives out and recursive listings,
 * snapshots' copies and archives' unpacks) run at once, one diff or
 * export of them a sandbox's, BUILDS_PER_OWNER
 * of them one lease's or TCP peer's sandboxes', BUILDS_LOCAL_MAX the unix
 * socket's others': more is a 503 that says Retry-After.  An owner's builds
 * count until their answers have been read, not only while their workers
 * run: a spool is as large as the patch, and a peer that asked again and
 * again, reading none, held one on each of its connections.  A client that goes before the
 * answer is sent kills the worker (the spool goes with the build); the
 * sandbox's destroy (the daemon's stop too) kills it and answers 404.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUILD_SLICE	(1 << 20)	/* sent at once, then the client's turn */

struct build {
	struct build *next, *prev;
	struct daemon *d;
	struct sandbox *sb;		/* whose worker is running, or NULL */
	struct evhttp_request *req;	/* NULL once the client has gone */
	char owner[DAEMON_PEER_KEY_MAX + 8];	/* owner_key(); "": none */
	struct corral_box_job *job;	/* the worker, until it ends */
	struct corral_box_work *work;	/* a walk's worker, likewise */
	struct event *ev_closed;	/* meanwhile: its client's end closing */
	enum build_kind kind;
	int spool;
	off_t off, size;
	char *head;			/* export: the report, to ,"patch":" or \n */
	int stage;			/* 0 head, 1 the spool, 2 the tail, 3 done */
};

static void build_free(struct build *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else if (b->d->builds == b)
		b->d->builds = b->next;
	if (b->next)
		b->next->prev = b->prev;
	if (b->job || b->work) {
		corral_box_job_cancel(b->job);
		corral_box_work_cancel(b->work);
		b->d->nworkers--;
		untar_stream_room(b->d);
	}
	if (b->ev_closed)
		event_free(b->ev_closed);
	if (b->spool >= 0)
		close(b->spool);
	free(b->head);
	free(b);
}

static void build_gone(struct evhttp_connection *conn, void *arg)
{
	struct build *b = arg;

	(void)conn;
	forget_request(b->req);
	b->req = NULL;
	build_free(b);	/* its worker killed, its spool closed */
}

/*
 * evhttp reads nothing of a connection whose request waits for its
 * answer: a client that closes meanwhile is seen by EV_CLOSED on its
 * socket (as api_exec.c's).  NULL if it cannot be watched.
 */
struct event *watch_closed(struct daemon *d, struct evhttp_request *req,
			   event_callback_fn cb, void *arg)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	struct event *ev = fd >= 0 ? event_new(d->base, fd, EV_CLOSED, cb, arg) : NULL;

	if (ev && event_add(ev, NULL) < 0) {
		event_free(ev);
		ev = NULL;
	}
	return ev;
}

/* The client closed while the worker ran: killed, the answer to nobody. */
static void build_closed(evutil_socket_t fd, short what, void *arg)
{
	struct build *b = arg;

	(void)fd;
	(void)what;
	api_set_closecb(b->d, b->req, NULL, NULL);
	reply_error(b->req, 499, "gone", "the client closed before the answer");
	b->req = NULL;
	build_free(b);	/* its worker killed, its spool closed */
}

/* The answer ends here: the build is over. */
static void build_end(struct build *b)
{
	api_set_closecb(b->d, b->req, NULL, NULL);
	api_reply_end(b->req);
	b->req = NULL;
	build_free(b);
}

static bool continues(char c)
{
	return ((unsigned char)c & 0xc0) == 0x80;
}

/*
 * A slice of the spool (got of the avail bytes at raw) as a JSON string's
 * inside, as jansson writes corral_json_bytes() of the whole: cut before
 * a byte that does not continue a UTF-8 sequence, no sequence is split,
 * and each byte is escaped as it would be in the whole.  A byte after 3
 * that continue is part of no sequence: a cut before it is as good.
 */
static ssize_t escape_slice(const char *raw, size_t got, size_t avail,
			    struct evbuffer *out)
{
	size_t cut = got;
	json_t *s;
	char *text;

	while (cut > 0 && got - cut < 3 && cut < avail && continues(raw[cut]))
		cut--;
	if (cut == 0 || (cut < avail && continues(raw[cut])))
		cut = got;
	s = corral_json_bytes(raw, cut);
	text = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(s);
	if (!text)
		return -ENOMEM;
	/* without its quotes */
	evbuffer_add(out, text + 1, strlen(text) - 2);
	free(text);
	return (ssize_t)cut;
}

static void build_sent(struct evhttp_connection *conn, void *arg);

/* The next slice out; the one after when the client has taken it. */
static void build_pump(struct build *b)
{
	struct evbuffer *out = evbuffer_new();
	char *raw = NULL;
	ssize_t n = 0;

	if (!out)
		goto broken;
	if (b->stage == 0) {
		evbuffer_add(out, b->head, strlen(b->head));
		b->stage = 1;
	}
	if (b->stage == 1) {
		size_t want = b->size - b->off < BUILD_SLICE ? (size_t)(b->size - b->off) :
			      BUILD_SLICE;
		/* a slice and the 3 bytes after it: is its end inside a sequence? */
		size_t more = b->kind == BUILD_EXPORT_PATCH ? 3 : 0;

		if (want && !(raw = malloc(want + more)))
			goto broken;
		while (want) {
			n = pread(b->spool, raw, want + more, b->off);
			if (n >= 0 || errno != EINTR)
				break;
		}
		if (want && n <= 0)
			goto broken;
		if (want && b->kind == BUILD_EXPORT_PATCH) {
			size_t got = (size_t)n < want ? (size_t)n : want;

			n = escape_slice(raw, got, (size_t)n, out);
			if (n < 0)
				goto broken;
		} else if (want) {
			evbuffer_add(out, raw, (size_t)n < want ? (size_t)n : want);
			n = (size_t)n < want ? n : (ssize_t)want;
		}
		b->off += n;
		if (b->off >= b->size)
			b->stage = b->kind == BUILD_EXPORT_PATCH ? 2 : 3;
		free(raw);
		raw = NULL;
	}
	if (b->stage == 2 && evbuffer_get_length(out) < BUILD_SLICE) {
		evbuffer_add(out, "\"}\n", 3);
		b->stage = 3;
	}
	if (!evbuffer_get_length(out)) {
		evbuffer_free(out);
		build_end(b);
		return;
	}
	evhttp_send_reply_chunk_with_cb(b->req, out, build_sent, b);
	evbuffer_free(out);
	return;
broken:
	/* the status is sent: a short answer, its connection closed */
	free(raw);
	if (out)
		evbuffer_free(out);
	fprintf(stderr, "corral serve: cannot read a build's spool at %lld: %s\n",
		(long long)b->off, n < 0 ? strerror(errno) : "out of memory or short");
	api_set_closecb(b->d, b->req, NULL, NULL);
	evhttp_connection_free(evhttp_request_get_connection(b->req));
	b->req = NULL;
	build_free(b);
}

static void build_sent(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	build_pump(arg);
}

/*
 * The export's report, up to where its patch goes: inside the JSON answer
 * ({...,"patch":"), or for a stream its line ({...} and a newline, which
 * no JSON jansson writes compact holds).  report is the text diff_end
 * dumped (compact, ASCII): cut and joined as it is, never parsed again.
 * Parsed and dumped here once more, a report of 50,000 names of 200
 * bytes that are not UTF-8 (64 MB, each byte \ufffd) was two of the four
 * passes that held the loop 4.7 s.
 */
static char *export_head(const char *report, bool stream)
{
	size_t n = report ? strlen(report) : 0;
	char *head = NULL;

	if (n < 2 || report[0] != '{' || report[n - 1] != '}') {
		report = "{}";
		n = 2;
	}
	if (stream && asprintf(&head, "%s\n", report) < 0)
		head = NULL;
	/* "{...}" -> "{...,"patch":"" (as the reply set "patch" last) */
	else if (!stream && asprintf(&head, "%.*s%s\"patch\":\"", (int)(n - 1), report,
				     n > 2 ? "," : "") < 0)
		head = NULL;
	return head;
}

static void build_done(void *arg, int r, const char *report, const struct corral_err *err)
{
	struct build *b = arg;
	struct evkeyvalq *h;
	struct stat st;
	char len[32];

	b->job = NULL;
	b->work = NULL;
	b->sb = NULL;
	b->d->nworkers--;
	untar_stream_room(b->d);
	if (b->ev_closed)
		event_free(b->ev_closed);
	b->ev_closed = NULL;
	if (!b->req) {
		build_free(b);
		return;
	}
	if (r < 0 && b->kind >= BUILD_EXPORT_PATCH) {
		const char *error;
		int code = api_status(err->code, &error);

		api_set_closecb(b->d, b->req, NULL, NULL);
		/* the detail names a file of the sandbox's: bytes (see reply_error) */
		reply_json(b->req, code, json_pack("{s:s, s:o, s:o*}", "error", error,
						   "detail", api_bytes(err->msg, strlen(err->msg)),
						   "report",
						   report ? json_loads(report, 0, NULL) : NULL));
		b->req = NULL;
		build_free(b);
		return;
	}
	if (r < 0 || b->kind == BUILD_EXPORT_WRITE) {
		json_t *rep = report ? json_loads(report, 0, NULL) : NULL;

		api_set_closecb(b->d, b->req, NULL, NULL);
		if (r < 0 && b->kind == BUILD_ARCHIVE && err->code == -EFBIG)
			reply_error(b->req, 413, "too_large", "%s (the limit of an "
				    "archive out)", err->msg);
		else if (r < 0)
			reply_err(b->req, err);
		else
			reply_json(b->req, 200, rep ? rep : json_object());
		b->req = NULL;
		build_free(b);
		return;
	}
	if (b->kind == BUILD_EXPORT_PATCH || b->kind == BUILD_EXPORT_STREAM)
		b->head = export_head(report, b->kind == BUILD_EXPORT_STREAM);
	if (fstat(b->spool, &st) < 0 || (b->kind >= BUILD_EXPORT_PATCH && !b->head)) {
		api_set_closecb(b->d, b->req, NULL, NULL);
		reply_error(b->req, 500, "internal", "cannot read the answer's spool "
			    "in %s: %s", b->d->state_dir, strerror(errno));
		b->req = NULL;
		build_free(b);
		return;
	}
	b->size = st.st_size;
	b->stage = b->head ? 0 : 1;
	h = evhttp_request_get_output_headers(b->req);
	evhttp_add_header(h, "Content-Type", b->kind == BUILD_DIFF_PATCH ? "text/x-diff" :
			  b->kind == BUILD_EXPORT_STREAM ? EXPORT_STREAM_TYPE :
			  b->kind == BUILD_ARCHIVE ? "application/x-tar" :
			  "application/json");
	/* an export's JSON length is known once escaped: that one is chunked */
	if (b->kind != BUILD_EXPORT_PATCH) {
		snprintf(len, sizeof(len), "%lld", (long long)st.st_size +
			 (long long)(b->head ? strlen(b->head) : 0));
		evhttp_add_header(h, "Content-Length", len);
	}
	evhttp_send_reply_start(b->req, 200, "OK");
	build_pump(b);
}

/* A spool nobody else can open: no name, gone with its last fd. */
int spool_open(struct daemon *d)
{
	char path[4096];
	int fd = open(d->state_dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd;
	/* a filesystem without O_TMPFILE: a name, unlinked at once */
	snprintf(path, sizeof(path), "%s/spool.XXXXXX", d->state_dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0 && unlink(path) < 0) {
		int e = errno;

		close(fd);
		unlink(path);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Whose sandbox this is, as far as the daemon tells its clients apart: a
 * lease's (a `corral mcp` session's on a shared daemon), else a TCP
 * peer's; "local" for the unix socket's others, its own user's.  As
 * text, kept by each build: its answer may still be unread when the
 * sandbox, and its lease, are gone.
 */
static void owner_key(const struct sandbox *sb, char *buf, size_t len)
{
	if (sb->lease)
		snprintf(buf, len, "lease %llu", (unsigned long long)lease_serial(sb->lease));
	else if (sb->peer[0])
		snprintf(buf, len, "peer %s", sb->peer);
	else
		snprintf(buf, len, "local");
}

void worker_hold(struct daemon *d, struct worker_owner *w, const struct sandbox *sb)
{
	owner_key(sb, w->key, sizeof(w->key));
	w->idle = true;
	w->prev = NULL;
	w->next = d->owned;
	if (w->next)
		w->next->prev = w;
	d->owned = w;
}

bool worker_take(struct daemon *d, struct worker_owner *w)
{
	if (!w->idle || d->nworkers >= BUILDS_MAX)
		return !w->idle;
	w->idle = false;
	d->nworkers++;
	return true;
}

void worker_release(struct daemon *d, struct worker_owner *w)
{
	if (w->idle)
		return;
	w->idle = true;
	d->nworkers--;
	untar_stream_room(d);
}

void worker_own(struct daemon *d, struct worker_owner *w, const struct sandbox *sb)
{
	worker_hold(d, w, sb);
	w->idle = false;
	d->nworkers++;
}

void worker_disown(struct daemon *d, struct worker_owner *w)
{
	worker_release(d, w);
	if (w->prev)
		w->prev->next = w->next;
	else
		d->owned = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->next = w->prev = NULL;
}

/* A walk of the sandbox's tree for a client: beside a diff of it. */
static bool walk_kind(enum build_kind kind)
{
	return kind == BUILD_ARCHIVE || kind == BUILD_LIST || kind == BUILD_LIST_DIR;
}

bool builds_room(struct daemon *d, struct sandbox *sb, bool build, struct api_fault *f)
{
	char owner[sizeof(((struct build *)0)->owner)] = "";
	bool local = sb && !sb->lease && !sb->peer[0];
	int owners = 0;

	if (d->nworkers >= BUILDS_MAX)
		return api_fault(f, 503, "busy", "%d diffs, patches, snapshots, "
				 "listings and archives in or out are being made, the daemon's limit: "
				 "try again when one is done", BUILDS_MAX);
	if (sb)
		owner_key(sb, owner, sizeof(owner));
	for (struct build *b = d->builds; sb && b; b = b->next) {
		if (build && b->sb == sb && !walk_kind(b->kind))
			return api_fault(f, 503, "busy", "a diff or patch of this "
					 "sandbox is being made: one at a time");
		/* made or being sent: a build is in the list until it is read */
		if (owner[0] && !strcmp(b->owner, owner))
			owners++;
	}
	for (struct worker_owner *w = d->owned; owner[0] && w; w = w->next)
		owners += !strcmp(w->key, owner);
	/*
	 * Half the workers for one owner: a model asking for costly diffs of
	 * its own sandboxes, one after the other, held all of them, and
	 * every other session's diff and export was a 503 while it went on;
	 * so did a TCP peer's archives, each unpacked for as long as it
	 * inflates, and its snapshots.  And as many answers waiting for it:
	 * each holds its spool on the host's disk until its client has read it.
	 * The unix socket's clients together (the daemon's own user's, not
	 * told apart) may have twice the workers: 64 connections that each
	 * asked for an archive of 4 MiB and read none held 64 spools, 256 MiB
	 * of the state dir's disk and 128 of the daemon's fds (at the 256
	 * connections a listener takes and 64 MiB archives: 16 GiB).
	 */
	if (local && owners >= BUILDS_LOCAL_MAX)
		return api_fault(f, 503, "busy", "%d diffs, patches, exports, snapshots, "
				 "listings or archives in or out of the local socket's "
				 "sandboxes are being made or wait to be read, the most "
				 "its clients may have (twice the daemon's workers): try "
				 "again when one is done and read", owners);
	if (!local && owners >= BUILDS_PER_OWNER)
		return api_fault(f, 503, "busy", "%d diffs, patches, exports, snapshots, "
				 "listings or archives in or out of this %s's sandboxes are being made "
				 "or wait to be read, the most one %s may have (half the "
				 "daemon's workers): try again when one is done and read",
				 owners, sb->lease ? "lease" : "TCP peer",
				 sb->lease ? "lease" : "peer");
	return true;
}

static void build_walked(void *arg, int r, const struct corral_err *err)
{
	build_done(arg, r, NULL, err);
}

void reply_busy(struct evhttp_request *req, const struct api_fault *f)
{
	if (f->status == 503)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
	reply_fault(req, f);
}

/* The builds' worker for kind: 0 started, else err set. */
static int build_go(struct build *b, const char *path,
		    const struct corral_box_export_opts *x, const struct list_req *lr,
		    struct corral_err *err)
{
	struct corral_box *box = b->sb->box;

	if (b->kind == BUILD_ARCHIVE)
		return corral_box_tar_start(box, path, API_FILE_MAX, b->spool,
					    build_walked, b, &b->work, err);
	if (b->kind == BUILD_LIST || b->kind == BUILD_LIST_DIR)
		return file_list_start(box, lr, b->spool, build_walked, b, &b->work, err);
	if (b->kind >= BUILD_EXPORT_PATCH)
		return corral_box_export_start(box, x, b->spool, build_done, b, &b->job, err);
	return corral_box_diff_start(box, path, b->kind == BUILD_DIFF_PATCH, b->spool,
				     build_done, b, &b->job, err);
}

static void build_begin(struct sandbox *sb, struct evhttp_request *req,
			enum build_kind kind, const char *path,
			const struct corral_box_export_opts *x, const struct list_req *lr)
{
	struct daemon *d = sb->d;
	struct corral_err err = { 0 };
	struct build *b;
	struct api_fault f;
	int r;

	/* a walk (an archive out, a listing) is not a build of the workspace */
	if (!builds_room(d, sb, !walk_kind(kind), &f)) {
		reply_busy(req, &f);
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		reply_error(req, 500, "internal", "out of memory for a build");
		return;
	}
	*b = (struct build){ .d = d, .sb = sb, .req = req, .kind = kind };
	owner_key(sb, b->owner, sizeof(b->owner));
	/* to and apply answer their report only: no spool */
	b->spool = kind == BUILD_EXPORT_WRITE ? -2 : spool_open(d);
	if (b->spool == -1) {
		reply_error(req, 500, "internal", "cannot open a spool file in %s: %s",
			    d->state_dir, strerror(errno));
		free(b);
		return;
	}
	r = build_go(b, path, x, lr, &err);
	if (r < 0) {
		const char *error;
		int code = api_status(err.code, &error);

		if (b->spool >= 0)
			close(b->spool);
		free(b);
		if (kind >= BUILD_EXPORT_PATCH)
			reply_json(req, code, json_pack("{s:s, s:o}", "error", error,
							"detail", api_bytes(err.msg, strlen(err.msg))));
		else
			reply_err(req, &err);
		return;
	}
	d->nworkers++;
	b->next = d->builds;
	if (b->next)
		b->next->prev = b;
	d->builds = b;
	api_set_closecb(d, req, build_gone, b);
	b->ev_closed = watch_closed(d, req, build_closed, b);
}

void build_start(struct sandbox *sb, struct evhttp_request *req, enum build_kind kind,
		 const char *path, const struct corral_box_export_opts *x)
{
	build_begin(sb, req, kind, path, x, NULL);
}

void build_list_start(struct sandbox *sb, struct evhttp_request *req,
		      const struct list_req *lr)
{
	build_begin(sb, req, lr->recursive ? BUILD_LIST : BUILD_LIST_DIR, lr->path,
		    NULL, lr);
}

/* The daemon stops (its sandboxes are gone, their workers with them). */
void api_builds_stop(struct daemon *d)
{
	while (d->builds) {
		struct build *b = d->builds;

		if (b->req)
			api_set_closecb(d, b->req, NULL, NULL);
		b->req = NULL;
		build_free(b);
	}
}
