/*
 * api_files.c - /v1/sandboxes/ID/files?path=P: a file read, written
 * (&parents=1: its missing directories made), listed (&list=1, with
 * &recursive=1 the whole tree) or deleted inside the sandbox; mkdir and
 * rename; a directory as a tar archive out and in (/archive?path=P).  All
 * through the box's file API, which resolves P in the sandbox's view,
 * never the host's, and follows no symlink.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ?path=P[&list=1], decoded; a NUL inside the path is an error. */
bool file_query(const char *q, char *path, size_t len, bool *list,
		struct api_fault *f)
{
	struct evkeyvalq kv;
	const char *v;
	bool ok = true;

	TAILQ_INIT(&kv);
	if (!q || evhttp_parse_query_str(q, &kv) < 0 ||
	    !(v = evhttp_find_header(&kv, "path"))) {
		evhttp_clear_headers(&kv);
		return api_fault(f, 400, "bad_request", "the query must give "
				 "path=/absolute/path/in/the/sandbox");
	}
	/* evhttp decodes %00 into the string: a shorter string than sent */
	if (strstr(q, "%00") || strlen(v) >= len || v[0] != '/')
		ok = api_fault(f, 400, "bad_request", "path must be absolute, "
			       "under %zu bytes, with no NUL (got \"%.200s\")",
			       len, v);
	snprintf(path, len, "%s", v);
	*list = query_flag(evhttp_find_header(&kv, "list"));
	evhttp_clear_headers(&kv);
	return ok;
}

/* A mode as "0755" or 493; permission bits only. */
static bool mode_field(json_t *v, unsigned *m, struct api_fault *f)
{
	const char *s = json_string_value(v);
	long long n = -1;
	char got[48];

	if (json_is_integer(v))
		n = json_integer_value(v);
	/* octal digits only: strtol would take blanks, a sign, and overflow */
	else if (s && s[0] && strlen(s) <= 4 && strspn(s, "01234567") == strlen(s))
		n = strtol(s, NULL, 8);
	if (n < 0 || n > 0777)
		return api_fault(f, 400, "bad_request", "mode must be permission "
				 "bits, as \"0755\" or 493 (no setuid, setgid "
				 "or sticky bit; got %s)", api_json_text(v, got, sizeof(got)));
	*m = n;
	return true;
}

/* The path the request names, in a sandbox that has a view to name it in. */
static bool file_target(struct sandbox *sb, struct evhttp_request *req,
			char *path, size_t len, bool *list)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct api_fault f;

	if (!file_query(q, path, len, list, &f)) {
		reply_fault(req, &f);
		return false;
	}
	if (corral_box_state(sb->box) == CORRAL_BOX_STARTING) {
		reply_error(req, 409, "conflict", "the sandbox is still starting");
		return false;
	}
	return true;
}

/*
 * The file's bytes, copied by read(2) now, never mapped: the sandbox may
 * truncate the file while we serve it, and a mapped page past its new end
 * is a SIGBUS for the whole daemon the moment anything in user space (TLS
 * encrypting the body) touches it.  A file that shrinks is served as it
 * was read; one that grows past max is too large however it started.
 */
static int read_file(int fd, struct evbuffer *buf, size_t max)
{
	for (;;) {
		/* one byte past max tells a file that grew from one that did not */
		size_t want = max + 1 - evbuffer_get_length(buf);
		struct evbuffer_iovec v;
		ssize_t n;

		if (want > 1 << 20)
			want = 1 << 20;
		if (evbuffer_reserve_space(buf, want, &v, 1) < 1)
			return -ENOMEM;
		n = read(fd, v.iov_base, v.iov_len < want ? v.iov_len : want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		v.iov_len = n;
		if (evbuffer_commit_space(buf, &v, 1) < 0)
			return -ENOMEM;
		if (evbuffer_get_length(buf) > max)
			return -EFBIG;
	}
}

static void file_get(struct sandbox *sb, struct evhttp_request *req,
		     const char *path)
{
	struct corral_err err = { 0 };
	struct evbuffer *buf;
	struct stat st;
	int fd, r;

	if (corral_box_open(sb->box, path, O_RDONLY, &fd, &err) < 0) {
		/*
		 * "type": "dir" says what a client needs to know next (`corral
		 * cp ID:/DIR -` asks for the archive): it listed the whole
		 * directory for it, however large the sandbox made it.
		 */
		if (err.code == -EISDIR)
			reply_json(req, 400, json_pack("{s:s, s:o, s:s}", "error", "bad_request",
						       "detail", api_bytes(err.msg, strlen(err.msg)),
						       "type", "dir"));
		else
			reply_err(req, &err);
		return;
	}
	if (fstat(fd, &st) < 0 || st.st_size > API_FILE_MAX) {
		close(fd);
		reply_error(req, 413, "too_large", "%s is %lld bytes; the limit is "
			    "%d", path, (long long)st.st_size, API_FILE_MAX);
		return;
	}
	if (!api_answer_room(sb->d, req, (uint64_t)st.st_size, path)) {
		close(fd);
		return;
	}
	if (!(buf = evbuffer_new())) {
		close(fd);
		reply_error(req, 500, "internal", "out of memory reading %s", path);
		return;
	}
	r = read_file(fd, buf, API_FILE_MAX);
	close(fd);
	if (r == -EFBIG)
		reply_error(req, 413, "too_large", "%s grew past the limit of %d "
			    "bytes while it was read", path, API_FILE_MAX);
	else if (r < 0)
		reply_error(req, 500, "internal", "read %s: %s", path, strerror(-r));
	if (r < 0) {
		evbuffer_free(buf);
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/octet-stream");
	api_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
}

/* A flag of the query besides path and list (parents=, recursive=). */
static bool query_has(struct evhttp_request *req, const char *name)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct evkeyvalq kv;
	bool on = false;

	TAILQ_INIT(&kv);
	if (q && evhttp_parse_query_str(q, &kv) == 0)
		on = query_flag(evhttp_find_header(&kv, name));
	evhttp_clear_headers(&kv);
	return on;
}

/* The directory path is in, made with its parents (PUT ...&parents=1). */
static int make_parents(struct sandbox *sb, const char *path,
			struct corral_err *err)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];

	if (slash == path)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	return corral_box_mkdir(sb->box, dir, 0755, true, err);
}

static void file_put(struct sandbox *sb, struct evhttp_request *req,
		     const char *path)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in), off = 0;
	struct corral_err err = { 0 };
	const char *data;
	int fd;

	if (len > API_FILE_MAX) {
		reply_error(req, 413, "too_large", "the file is %zu bytes; the limit "
			    "is %d", len, API_FILE_MAX);
		return;
	}
	if ((query_has(req, "parents") && make_parents(sb, path, &err) < 0) ||
	    corral_box_open(sb->box, path, O_WRONLY, &fd, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	data = len ? (const char *)evbuffer_pullup(in, -1) : "";
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO, code;
			const char *error;

			close(fd);
			/* half a file is worse than none */
			corral_box_unlink(sb->box, path, &(struct corral_err){ 0 });
			code = api_status(-e, &error);
			reply_error(req, code, error, "%s: %s (the sandbox's "
				    "disk limit?)", path, strerror(e));
			return;
		}
		off += n;
	}
	close(fd);
	reply_json(req, 201, json_pack("{s:s, s:I}", "path", path, "size",
				       (json_int_t)len));
}

/* The mode as ls -l's octal digits: "0644", "1777". */
static json_t *mode_json(unsigned mode)
{
	char m[8];

	snprintf(m, sizeof(m), "%04o", mode & 07777);
	return json_string(m);
}

static const char *type_name(char type)
{
	return type == 'f' ? "file" : type == 'd' ? "dir" : type == 'l' ?
	       "symlink" : "other";
}

/*
 * A listing's entries, and the bytes of their names and targets so far:
 * the entry count alone does not bound it.  A path is up to 4 KiB, and
 * empty files cost the sandbox's disk nothing: 100000 of them deep in
 * long-named directories were a 400 MB answer, 1.5 GB of the daemon's
 * memory and 11 s of its loop, for one request.  Each entry is written
 * out as it comes, not kept as a JSON tree to the end: the tree of
 * 100000 entries of 200-byte names was about 190 MB of the daemon's at
 * its peak, for a 23 MB answer.
 */
struct listing {
	struct evbuffer *out;
	size_t bytes, n;
	int fd;			/* a worker's spool, written as it grows; or -1 */
	size_t loop_bytes;	/* on the loop: past these, a worker's (spilled) */
	bool spilled;
	const char *key;	/* the listing's, for its "next" cursor */
	char last[4096];	/* the last entry given: where the next page starts */
};

#define LIST_FLUSH	(1 << 20)	/* a worker's listing held before its write */

/* What the listing holds so far, into its spool. */
static int list_flush(struct listing *l)
{
	while (evbuffer_get_length(l->out)) {
		int n = evbuffer_write(l->out, l->fd);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
	}
	return 0;
}

static int list_entry(void *arg, const struct corral_entry *e)
{
	struct listing *l = arg;
	size_t len = strlen(e->path) + (e->target ? strlen(e->target) : 0);
	char *text;
	json_t *o;
	int r;

	if (l->loop_bytes && l->bytes + len > l->loop_bytes) {
		l->spilled = true;
		return 1;	/* too much for the loop: a worker lists it */
	}
	if (l->bytes + len > API_LIST_BYTES)
		return 1;	/* truncated, as at API_LIST_MAX entries */
	l->bytes += len;
	o = json_pack("{s:o, s:s, s:I, s:o, s:I}", "name",
		      api_bytes(e->path, strlen(e->path)), "type",
		      type_name(e->type), "size", (json_int_t)e->size,
		      "mode", mode_json(e->mode), "mtime", (json_int_t)e->mtime);
	if (!o)
		return -ENOMEM;
	if (e->target)
		json_object_set_new(o, "target", api_bytes(e->target,
							   strlen(e->target)));
	text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!text)
		return -ENOMEM;
	r = evbuffer_add_printf(l->out, "%s%s", l->n++ ? "," : "", text) < 0 ? -ENOMEM : 0;
	free(text);
	snprintf(l->last, sizeof(l->last), "%s", e->path);
	if (r == 0 && l->fd >= 0 && evbuffer_get_length(l->out) >= LIST_FLUSH)
		r = list_flush(l);
	return r;
}

/*
 * A listing's cursor: "c1", the listing's key (16 hex digits), then the
 * last entry given, in hex (a name is any bytes but NUL and '/').  It is
 * all the daemon needs to go on: nothing is kept between pages, however
 * many clients page, and however long.  The key, a hash of the sandbox's
 * id, the path and whether recursive, tells a cursor of another listing
 * from a mistyped one; it is no secret and needs none: the name in a
 * cursor is only compared with the names the walk reads
 * (corral_box_walk_after), so a forged one can show nothing the same
 * listing from its start does not.
 */
#define CURSOR_TAG	"c1"

static void list_key(const struct sandbox *sb, const char *path, bool recursive,
		     char key[17])
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */
	const char *parts[] = { sb->id, recursive ? "r" : "d", path };

	for (size_t i = 0; i < 3; i++)
		for (const char *c = parts[i]; ; c++) {
			h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
			if (!*c)
				break;
		}
	snprintf(key, 17, "%016llx", (unsigned long long)h);
}

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The cursor's entry, into after (4096 bytes); false: f says why. */
static bool cursor_entry(const char *cur, const char *key, bool recursive, char *after,
			 struct api_fault *f)
{
	size_t head = strlen(CURSOR_TAG) + 16, len = strlen(cur), n = 0;
	const char *hex = cur + head;

	if (len <= head || (len - head) % 2 || (len - head) / 2 >= 4096 ||
	    strncmp(cur, CURSOR_TAG, strlen(CURSOR_TAG)))
		return api_fault(f, 400, "bad_request", "cursor: not one a listing's "
				 "\"next\" gave (%zu characters)", len);
	if (strncmp(cur + strlen(CURSOR_TAG), key, 16))
		return api_fault(f, 400, "bad_request", "cursor: another listing's (of "
				 "another sandbox or path, or recursive where this is "
				 "not): page with the \"next\" of this one");
	for (; hex[2 * n]; n++) {
		int hi = hex_value(hex[2 * n]), lo = hex_value(hex[2 * n + 1]);

		if (hi < 0 || lo < 0 || (hi | lo) == 0)
			return api_fault(f, 400, "bad_request", "cursor: not lowercase "
					 "hex of a name (or a NUL in it)");
		after[n] = (char)(hi << 4 | lo);
	}
	after[n] = '\0';
	/* an entry's path: names joined by '/', none empty, "." or ".." */
	for (const char *c = after; ; ) {
		const char *slash = strchr(c, '/');
		size_t clen = slash ? (size_t)(slash - c) : strlen(c);

		if (!clen || (clen == 1 && c[0] == '.') ||
		    (clen == 2 && c[0] == '.' && c[1] == '.') || (slash && !recursive))
			return api_fault(f, 400, "bad_request", "cursor: names no entry "
					 "of a%s listing", recursive ? " recursive" :
					 " directory's");
		if (!slash)
			break;
		c = slash + 1;
	}
	return true;
}

/* The listing's request: path, recursive=, cursor=. */
static bool list_request(struct sandbox *sb, struct evhttp_request *req,
			 const char *path, struct list_req *lr, char *after)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	const char *cur;
	struct evkeyvalq kv;
	struct api_fault f;
	bool ok = true;

	*lr = (struct list_req){ .path = path };
	TAILQ_INIT(&kv);
	if (q && evhttp_parse_query_str(q, &kv) == 0) {
		lr->recursive = query_flag(evhttp_find_header(&kv, "recursive"));
		list_key(sb, path, lr->recursive, lr->key);
		cur = evhttp_find_header(&kv, "cursor");
		if (cur && *cur && !(ok = cursor_entry(cur, lr->key, lr->recursive,
						      after, &f)))
			reply_fault(req, &f);
		else if (cur && *cur)
			lr->after = after;
	}
	evhttp_clear_headers(&kv);
	return ok;
}

/* ,"next":CURSOR after the last entry given */
static int list_next(struct listing *l)
{
	static const char hex[] = "0123456789abcdef";
	char cur[2 * sizeof(l->last) + 32];
	size_t n;

	n = (size_t)snprintf(cur, sizeof(cur), "%s%s", CURSOR_TAG, l->key);
	for (const unsigned char *c = (const unsigned char *)l->last; *c; c++) {
		cur[n++] = hex[*c >> 4];
		cur[n++] = hex[*c & 15];
	}
	cur[n] = '\0';
	return evbuffer_add_printf(l->out, ",\"next\":\"%s\"", cur) < 0 ? -ENOMEM : 0;
}

/*
 * A directory's entries, at most dir_max; dir_max 0: the tree, names
 * relative to path, at most API_LIST_MAX.  With more: if the directory
 * holds more than dir_max names, *more and l->out is not the answer.
 * {"path": P, "entries": [...], "truncated": B}, as reply_json writes it,
 * into l->out (and its spool, if it has one).  path is UTF-8 (list_path).
 */
static int list_into(struct corral_box *box, const char *path, const char *after,
		     size_t dir_max, bool *more, struct listing *l, struct corral_err *err)
{
	json_t *p = json_string(path);
	char *ptext = p ? json_dumps(p, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
	bool truncated;
	int r;

	json_decref(p);
	r = !ptext || evbuffer_add_printf(l->out, "{\"path\":%s,\"entries\":[",
					   ptext) < 0 ? -ENOMEM : 0;
	free(ptext);
	truncated = false;
	if (r == 0 && more)
		r = corral_box_list_small(box, path, dir_max, list_entry, l, more,
					  &truncated, err);
	else if (r == 0)
		r = corral_box_walk_after(box, path, !dir_max, after,
					  dir_max ? dir_max : API_LIST_MAX,
					  list_entry, l, &truncated, err);
	else
		corral_set_err(err, r, "out of memory for the listing");
	if (r == 0 && more && (*more |= l->spilled))
		return 0;
	if (r == 0 && (evbuffer_add_printf(l->out, "],\"truncated\":%s",
					   truncated ? "true" : "false") < 0 ||
		       (truncated && l->n && l->key && list_next(l) < 0) ||
		       evbuffer_add(l->out, "}\n", 2) < 0))
		r = corral_set_err(err, -ENOMEM, "out of memory for the listing");
	if (r == 0 && l->fd >= 0 && (r = list_flush(l)) < 0)
		corral_set_errno(err, -r, "writing the listing of %.300s", path);
	return r;
}

/* A path the listing can name in its JSON; else answered 400. */
static bool list_path(struct evhttp_request *req, const char *path)
{
	json_t *p = json_string(path);

	json_decref(p);
	if (!p)
		reply_error(req, 400, "bad_request", "the path is not UTF-8");
	return p != NULL;
}

/*
 * One directory's entries are listed on the loop when it holds at most
 * LIST_ON_LOOP names of at most LIST_ON_LOOP_BYTES of names and symlink
 * targets (a few ms of it, an answer of at most about 200 KB when the
 * names are not UTF-8); a larger one, by a worker, as a recursive
 * listing.  On the loop, 100,000 names of 255 bytes that are not UTF-8
 * (six bytes each in JSON) held every other client 3 s a request and
 * the daemon 157 MB; 1000 of them still 29 ms.
 */
#define LIST_ON_LOOP		1000
#define LIST_ON_LOOP_BYTES	(32 * 1024)

/*
 * A directory's entries: on the loop if they are few, else by a worker.
 * A page after the first is a worker's: the names before its cursor are
 * read too, however many, and not counted among the few.
 */
static void file_list(struct sandbox *sb, struct evhttp_request *req,
		      const struct list_req *lr)
{
	struct corral_err err = { 0 };
	struct listing l = { evbuffer_new(), 0, 0, -1, LIST_ON_LOOP_BYTES, false,
			     lr->key, "" };
	bool more = false;

	if (!l.out) {
		reply_error(req, 500, "internal", "out of memory for the listing");
		return;
	}
	if (lr->after) {
		build_list_start(sb, req, lr);
	} else if (list_into(sb->box, lr->path, NULL, LIST_ON_LOOP, &more, &l, &err) < 0) {
		reply_err(req, &err);
	} else if (more) {
		build_list_start(sb, req, lr);
	} else if (api_answer_room(sb->d, req, evbuffer_get_length(l.out),
				   "the listing")) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "application/json");
		api_send_reply(req, 200, "OK", l.out);
	}
	evbuffer_free(l.out);
}

/* In the worker: the listing into the spool fd. */
static int list_work(struct corral_box *box, void *arg, int fd, struct corral_err *err)
{
	const struct list_req *j = arg;
	struct listing l = { evbuffer_new(), 0, 0, fd, 0, false, j->key, "" };
	int r;

	if (!l.out)
		return corral_set_err(err, -ENOMEM, "out of memory for the listing");
	r = list_into(box, j->path, j->after, j->recursive ? 0 : API_LIST_MAX, NULL,
		      &l, err);
	evbuffer_free(l.out);
	return r;
}

/*
 * A recursive listing walks the tree the sandbox made, up to 100000
 * entries of 32 MiB of names (a third of a second of the loop, and more
 * when the names are not UTF-8: six bytes each of the answer): a worker
 * makes it into a spool, as an archive out (api_builds.c); so too one
 * directory's of more than LIST_ON_LOOP names.
 */
int file_list_start(struct corral_box *box, const struct list_req *lr, int fd,
		    corral_box_work_done_fn done, void *arg, struct corral_box_work **job,
		    struct corral_err *err)
{
	/* the worker's copy of lr and its strings is made at its fork, before this returns */
	return corral_box_work_start(box, lr->path, list_work, (void *)lr, fd, done, arg,
				     job, err);
}

void files_get(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	char path[4096], after[4096];
	struct list_req lr;
	bool list;

	if (!file_target(sb, req, path, sizeof(path), &list))
		return;
	if (list && (!list_path(req, path) || !list_request(sb, req, path, &lr, after)))
		return;
	if (list && lr.recursive)
		build_list_start(sb, req, &lr);
	else if (list)
		file_list(sb, req, &lr);
	else
		file_get(sb, req, path);
}

void files_put(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	char path[4096];
	bool list;

	if (file_target(sb, req, path, sizeof(path), &list))
		file_put(sb, req, path);
}

void files_delete(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };
	char path[4096];
	bool list;

	if (!file_target(sb, req, path, sizeof(path), &list))
		return;
	if (corral_box_unlink(sb->box, path, &err) < 0)
		reply_err(req, &err);
	else
		reply_json(req, 200, json_pack("{s:s, s:b}", "path", path,
					       "deleted", 1));
}

/* ---- mkdir, rename ------------------------------------------------------- */

void files_mkdir(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const known[] = { "path", "parents", "mode", NULL };
	struct corral_err err = { 0 };
	const char *path = NULL;
	json_t *o, *parents, *mode;
	struct api_fault f;
	unsigned m = 0755;

	if (!(o = body_json(req, true)))
		return;
	parents = json_object_get(o, "parents");
	mode = json_object_get(o, "mode");
	if (!only_fields(o, known, &f) || !string_field(o, "path", 4095, &path, &f) ||
	    (!path && !api_fault(&f, 400, "bad_request", "path is required")) ||
	    (parents && !json_is_boolean(parents) &&
	     !api_fault(&f, 400, "bad_request", "parents must be true or false")) ||
	    (mode && !mode_field(mode, &m, &f))) {
		reply_fault(req, &f);
	} else if (corral_box_mkdir(sb->box, path, m, json_is_true(parents), &err) < 0) {
		reply_err(req, &err);
	} else {
		reply_json(req, 201, json_pack("{s:s, s:o}", "path", path, "mode",
					       mode_json(m)));
	}
	json_decref(o);
}

void files_rename(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const known[] = { "from", "to", "overwrite", NULL };
	struct corral_err err = { 0 };
	const char *from = NULL, *to = NULL;
	json_t *o, *over;
	struct api_fault f;

	if (!(o = body_json(req, true)))
		return;
	over = json_object_get(o, "overwrite");
	if (!only_fields(o, known, &f) || !string_field(o, "from", 4095, &from, &f) ||
	    !string_field(o, "to", 4095, &to, &f) ||
	    ((!from || !to) && !api_fault(&f, 400, "bad_request", "from and to "
					  "are required")) ||
	    (over && !json_is_boolean(over) &&
	     !api_fault(&f, 400, "bad_request", "overwrite must be true or false"))) {
		reply_fault(req, &f);
	} else if (corral_box_rename(sb->box, from, to, json_is_true(over), &err) < 0) {
		reply_err(req, &err);
	} else {
		reply_json(req, 200, json_pack("{s:s, s:s}", "from", from, "to", to));
	}
	json_decref(o);
}

/* ---- a directory as a tar archive ------------------------------------------- */

/*
 * An archive out is made by a worker into a spool, sent a slice at a time
 * (api_builds.c): its cost is the tree the sandbox made, and a tree of
 * 240,000 FIFOs (left out: no byte of it, never near the 64 MiB cap) held
 * the loop 0.5 s a request.  It counts among the daemon's workers, and
 * its sandbox's owner's (builds_room), beside a diff of the same sandbox.
 */
void archive_get(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	char path[4096];
	bool list;

	if (file_target(sb, req, path, sizeof(path), &list))
		build_start(sb, req, BUILD_ARCHIVE, path, NULL);
}

/*
 * An archive is unpacked by a worker (corral_box_untar_start), never on
 * the loop: its cost is what it inflates to, up to the sandbox's free
 * disk, not its 64 MiB.  It counts among the daemon's workers, and its
 * sandbox's owner's (builds_room).
 */
struct unpack {
	struct worker_owner owner;
	struct daemon *d;
	struct evhttp_request *req;
	struct corral_box_untar_job *job;
	struct event *ev_closed;	/* its client closing, meanwhile */
	char path[4096];
};

static void unpack_done(void *arg, int r, const struct corral_untar *st,
			const struct corral_err *err)
{
	struct unpack *u = arg;

	worker_disown(u->d, &u->owner);
	if (u->ev_closed)
		event_free(u->ev_closed);
	if (r < 0)
		reply_err(u->req, err);
	else
		reply_json(u->req, 201, json_pack("{s:s, s:I, s:I}", "path", u->path,
						  "entries", (json_int_t)st->entries,
						  "bytes", (json_int_t)st->bytes));
	free(u);
}

/* The client closed while the worker ran: killed, the answer to nobody. */
static void unpack_closed(evutil_socket_t fd, short what, void *arg)
{
	struct unpack *u = arg;

	(void)fd;
	(void)what;
	corral_box_untar_cancel(u->job);	/* unpack_done, now */
}

void archive_put(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	struct corral_err err = { 0 };
	struct api_fault f;
	struct unpack *u;
	char path[4096];
	bool list;

	if (!file_target(sb, req, path, sizeof(path), &list))
		return;
	if (len > API_FILE_MAX) {
		reply_error(req, 413, "too_large", "the archive is %zu bytes; the "
			    "limit is %d", len, API_FILE_MAX);
		return;
	}
	if (!builds_room(sb->d, sb, false, &f)) {
		reply_busy(req, &f);
		return;
	}
	/* the tar in frames after a 101, spooled as it comes (api_untar.c) */
	if (untar_stream_asked(req)) {
		untar_stream_start(sb, req, path);
		return;
	}
	if (!(u = calloc(1, sizeof(*u)))) {
		reply_error(req, 500, "internal", "out of memory unpacking into %s", path);
		return;
	}
	*u = (struct unpack){ .d = sb->d, .req = req };
	snprintf(u->path, sizeof(u->path), "%s", path);
	worker_own(sb->d, &u->owner, sb);
	if (corral_box_untar_start(sb->box, path, len ? (const void *)evbuffer_pullup(in, -1) : "",
				   len, unpack_done, u, &u->job, &err) < 0) {
		worker_disown(sb->d, &u->owner);
		reply_err(req, &err);
		free(u);
		return;
	}
	u->ev_closed = watch_closed(sb->d, req, unpack_closed, u);
}
