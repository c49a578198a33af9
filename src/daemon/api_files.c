/*
 * api_files.c - /v1/sandboxes/ID/files?path=P: a file read, written,
 * listed (&list=1) or deleted inside the sandbox, through the box's file
 * API (which resolves P in the sandbox's view, never the host's).
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

static void file_get(struct sandbox *sb, struct evhttp_request *req,
		     const char *path)
{
	struct corral_err err = { 0 };
	struct evbuffer *buf;
	struct stat st;
	int fd;

	if (corral_box_open(sb->box, path, O_RDONLY, &fd, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	if (fstat(fd, &st) < 0 || st.st_size > API_FILE_MAX) {
		close(fd);
		reply_error(req, 413, "too_large", "%s is %lld bytes; the limit is "
			    "%d", path, (long long)st.st_size, API_FILE_MAX);
		return;
	}
	buf = evbuffer_new();
	/* evbuffer_add_file takes fd (and closes it) */
	if (!buf || (st.st_size && evbuffer_add_file(buf, fd, 0, st.st_size) < 0)) {
		if (buf)
			evbuffer_free(buf);
		if (!st.st_size || !buf)
			close(fd);
		reply_error(req, 500, "internal", "cannot read %s", path);
		return;
	}
	if (!st.st_size)
		close(fd);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/octet-stream");
	evhttp_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
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
	if (corral_box_open(sb->box, path, O_WRONLY, &fd, &err) < 0) {
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

static void file_list(struct sandbox *sb, struct evhttp_request *req,
		      const char *path)
{
	struct corral_err err = { 0 };
	struct corral_dirent *v;
	json_t *a;
	size_t n;

	if (corral_box_list(sb->box, path, &v, &n, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	a = json_array();
	for (size_t i = 0; i < n; i++) {
		const char *type = v[i].type == 'f' ? "file" : v[i].type == 'd' ?
			"dir" : v[i].type == 'l' ? "symlink" : "other";

		json_array_append_new(a, json_pack("{s:o, s:s, s:I, s:i}", "name",
				      api_bytes(v[i].name, strlen(v[i].name)),
				      "type", type, "size", (json_int_t)v[i].size,
				      "mode", (int)v[i].mode));
	}
	free(v);
	reply_json(req, 200, json_pack("{s:s, s:o}", "path", path, "entries", a));
}


void files_get(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	char path[4096];
	bool list;

	if (!file_target(sb, req, path, sizeof(path), &list))
		return;
	if (list)
		file_list(sb, req, path);
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
