/*
 * cp.c - corral cp: one file into or out of a sandbox of the daemon's
 * (PUT and GET .../files?path=), or a directory's listing.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct verb cp_verb = {
	.name = "cp",
	.head =
"Usage: corral cp [--json] SRC DST\n"
"       corral cp ID:/DIR - > FILE.tar\n"
"       corral cp - ID:/DIR/ < FILE.tar\n"
"       corral cp --list [--json] ID:/DIR\n"
"\n"
"Copy one regular file into or out of the sandbox ID.  One of SRC and DST is\n"
"ID:/PATH, an absolute path inside the sandbox; the other is a local path,\n"
"or \"-\" for corral's stdin (as SRC) or stdout (as DST).  A local DST that is\n"
"a directory, or an ID:/PATH that ends in \"/\", gets the file under its own\n"
"name.  An existing local file is replaced whole: a new file, with its\n"
"mode and owner, renamed onto it, so a copy cut short leaves it as it was\n"
"(through a symlink, the link's target is replaced; hard links to it keep\n"
"the old content; where that cannot be, a directory we may not write or a\n"
"file mounted over, it is written in place).  The daemon resolves PATH\n"
"beneath the sandbox's root, with the rights of the sandbox's user: a\n"
"symlink anywhere in it is refused, never followed, and /proc and /sys are\n"
"refused.  Files go either way up to 64 MiB.  A local name with a colon in\n"
"it is written ./NAME.  No symlink that lies in one of the sandbox's --rw\n"
"binds on the host is followed on the way to the local file: the sandbox\n"
"may have left it there to lead the copy to a file of its choosing.\n"
"A file copied out to \"-\" on a terminal is shown, its control bytes as\n"
"\\xNN (a line break and a tab as they are), never sent to the terminal to\n"
"act on; to a file or a pipe its bytes go as they are.\n"
"A directory goes as a tar, as docker cp's \"-\" takes and gives one:\n"
"ID:/DIR as SRC with \"-\" as DST writes DIR as a tar on stdout (a file\n"
"or a pipe, not a terminal); \"-\" as SRC with a DST that ends in \"/\"\n"
"unpacks the tar on stdin into that directory, made if missing, sent as\n"
"it is read, neither side holding it whole (the daemon's archive:\n"
"docs/API.md, Files; a busy daemon is asked again for 30 s).  A\n"
"directory as SRC otherwise is refused, naming that way.\n"
"\n"
"Options:\n"
"  --list               list the directory ID:/DIR instead: for each entry\n"
"                       its type and mode (as ls -l shows them), its size\n"
"                       and its name, sorted by name; bytes of a name that a\n"
"                       terminal would act on are shown as \\xNN\n"
"  --json               print the daemon's answer: {\"path\", \"size\"} for a\n"
"                       copy in, the listing object with --list; a copy out\n"
"                       prints nothing more\n",
	.tail =
"Exit status: 0 copied (or listed); 2 bad usage; 125 a local file cannot be\n"
"read or written, the daemon refused (no such file, a symlink in the path,\n"
"not a regular file, too large) or could not be reached, or SRC is a\n"
"directory and DST not \"-\".\n"
"\n"
"Examples:\n"
"  corral cp main.py \"$id\":/workspace/main.py\n"
"  corral cp \"$id\":/workspace/out/report.json .\n"
"  corral cp \"$id\":/tmp/log.txt - | less\n"
"  corral cp --list \"$id\":/workspace\n",
};

enum { OPT_LIST = OPT_OWN };

static const struct option cp_options[] = {
	CONN_OPTIONS,
	{ "list", no_argument, NULL, OPT_LIST },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct cp_args {
	bool list, json;
};

static int cp_option(void *arg, int opt, const char *val)
{
	struct cp_args *a = arg;

	if (opt == OPT_LIST)
		a->list = true;
	else if (opt == OPT_JSON)
		a->json = true;
	else
		return verb_usage_error(&cp_verb, "option %d is not handled", opt);
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

bool client_split_remote(const char *arg, char *id, size_t idlen,
			 const char **path)
{
	const char *colon = strchr(arg, ':');
	size_t n;

	if (!colon || colon[1] != '/')
		return false;
	n = colon - arg;
	if (n == 0 || n >= idlen)
		return false;
	memcpy(id, arg, n);
	id[n] = '\0';
	if (!client_valid_id(id))
		return false;
	*path = colon + 1;
	return true;
}

/* "/v1/sandboxes/ID/archive?path=DIR", malloc'd; NULL when said */
static char *archive_path(struct conn *c, const char *id, const char *dir)
{
	char *esc = conn_escape(dir), *rest = NULL, *path = NULL;

	if (esc && asprintf(&rest, "/archive?path=%s", esc) < 0)
		rest = NULL;
	if (rest)
		path = conn_sandbox_path(c, id, rest);
	else
		out_of_memory("building the archive's path");
	free(rest);
	free(esc);
	return path;
}

/*
 * A directory is not copied as a file, nor refused with "not a regular
 * file" alone: a docker cp user expects it whole.  It goes as a tar, the
 * way docker cp's "-" takes and gives one; the refusal says that way.
 */
static int dir_refused(void)
{
	cli_json_amend("not_supported", NULL, 0);
	return EXIT_CORRAL;
}

/* A PUT of BUF to PATH; with --json, the daemon's answer printed. */
static int put_body(struct conn *c, struct request *q, char *path, char *buf,
		    size_t len, bool as_json)
{
	struct reply r = { .max = REPLY_MAX };
	json_t *o = NULL;
	int code = EXIT_CORRAL;

	q->path = path;
	q->body = buf;
	q->body_len = len;
	if (conn_perform(c, q, &r) == 0 && reply_check(&r) == 0) {
		code = 0;
		if (as_json) {
			o = reply_object(&r);
			code = o ? print_json(o) : EXIT_CORRAL;
		}
	}
	json_decref(o);
	reply_free(&r);
	return code;
}

/* `corral cp - ID:/DIR/`: a tar on stdin, unpacked into DIR by the daemon */
static int cp_in_archive(struct conn *c, const char *id, const char *dst,
			 bool as_json)
{
	struct request q = { .method = "PUT",
			     .type = "Content-Type: application/x-tar" };
	char *buf = NULL, *path = NULL, *dir;
	size_t len;
	int code;

	dir = strdup(dst);
	if (!dir)
		return out_of_memory("naming the directory");
	/* "/tmp/in/" is the directory /tmp/in; "/" stays the root */
	for (len = strlen(dir); len > 1 && dir[len - 1] == '/'; len--)
		dir[len - 1] = '\0';
	path = archive_path(c, id, dir);
	if (!path) {
		code = EXIT_CORRAL;
		goto out;
	}
	/* as it is read: neither side holds it whole (cp_stream.c) */
	code = cp_in_stream(c, path, as_json);
	if (code != CP_STREAM_OLD)
		goto out;
	code = read_local("-", FILE_MAX, &buf, &len, NULL, 0);
	if (!code)
		code = put_body(c, &q, path, buf, len, as_json);
out:
	free(path);
	free(buf);
	free(dir);
	return code;
}

static int cp_in(struct conn *c, const char *src, const char *id,
		 const char *dst, bool as_json)
{
	struct request q = { .method = "PUT",
			     .type = "Content-Type: application/octet-stream" };
	char *full = NULL, *buf = NULL, *path = NULL;
	struct corral_dir_id *rw = NULL;
	size_t len, nrw = 0;
	struct stat st;
	int code = 0;

	if (strcmp(src, "-") && stat(src, &st) == 0 && S_ISDIR(st.st_mode)) {
		cli_error("%s is a directory: cp copies one file; `tar -C %s -cf - . | "
			  "corral cp - %s:%s%s` unpacks it there (as docker cp's \"-\")",
			  src, src, id, dst, dst[strlen(dst) - 1] == '/' ? "" : "/");
		return dir_refused();
	}
	if (dst[strlen(dst) - 1] == '/') {
		if (!strcmp(src, "-"))
			return cp_in_archive(c, id, dst, as_json);
		if (asprintf(&full, "%s%s", dst, base_name(src)) < 0)
			return out_of_memory("naming the destination");
		dst = full;
	}
	if (strcmp(src, "-"))
		code = sandbox_rw_dirs(c, id, &rw, &nrw);
	if (!code)
		code = read_local(src, FILE_MAX, &buf, &len, rw, nrw);
	if (code)
		goto out;
	path = conn_files_path(c, id, dst, false);
	code = path ? put_body(c, &q, path, buf, len, as_json) : EXIT_CORRAL;
out:
	free(path);
	free(buf);
	free(full);
	free(rw);
	return code;
}

/*
 * Whether ID:/PATH, which the daemon would not give as a file (its 400,
 * refused), is a directory: the refusal says "type": "dir".  A daemon
 * before that said only "not a regular file"; then the directory's
 * listing is asked for, which costs what the sandbox made it (100000
 * names were 23 MB to learn one bit).
 */
static bool remote_is_dir(struct conn *c, const char *id, const char *src,
			  const struct reply *refused)
{
	json_t *o = json_loadb(refused->buf ? refused->buf : "", refused->len, 0, NULL);
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *detail = json_string_value(json_object_get(o, "detail"));
	struct request q = { .method = "GET" };
	struct reply r = { .max = REPLY_MAX };
	char *path = NULL;
	bool dir = false, ask;

	ask = !type && detail && strstr(detail, "not a regular file");
	if (type)
		dir = !strcmp(type, "dir");
	json_decref(o);
	if (!ask || !(path = conn_files_path(c, id, src, true)))
		return dir;
	q.path = path;
	dir = conn_perform(c, &q, &r) == 0 && r.status == 200;
	reply_free(&r);
	free(path);
	return dir;
}

/* `corral cp ID:/DIR -`: the directory as a tar on stdout, as docker cp's */
static int cp_out_archive(struct conn *c, const char *id, const char *src)
{
	struct request q = { .method = "GET" };
	struct reply r = { .max = FILE_MAX };
	char *path = archive_path(c, id, src);
	int code = EXIT_CORRAL;

	if (!path)
		return EXIT_CORRAL;
	/*
	 * The sandbox's names and bytes, raw, are escape sequences to a
	 * terminal; and a tar there is no copy (docker save refuses too).
	 */
	if (isatty(STDOUT_FILENO)) {
		free(path);
		return verb_usage_error(&cp_verb, "%s:%s is a directory: its tar goes to a file "
					"or a pipe, not a terminal (> FILE.tar, | tar -tv)",
					id, src);
	}
	q.path = path;
	if (conn_perform(c, &q, &r) == 0 && reply_check(&r) == 0)
		code = write_local("-", r.buf ? r.buf : "", r.len, NULL, 0);
	reply_free(&r);
	free(path);
	return code;
}

static int cp_out(struct conn *c, const char *id, const char *src,
		  const char *dst)
{
	struct request q = { .method = "GET" };
	struct reply r = { .max = FILE_MAX };
	char *path, *full = NULL;
	struct corral_dir_id *rw = NULL;
	struct stat st;
	size_t nrw = 0;
	int code = EXIT_CORRAL;

	path = conn_files_path(c, id, src, false);
	if (!path)
		return EXIT_CORRAL;
	q.path = path;
	/* the whole file first: a refusal must not truncate DST */
	if (conn_perform(c, &q, &r) < 0)
		goto out;
	if (r.status == 400 && remote_is_dir(c, id, src, &r)) {
		if (!strcmp(dst, "-")) {
			code = cp_out_archive(c, id, src);
			goto out;
		}
		cli_error("%s:%s is a directory: cp copies one file; `corral cp %s:%s - "
			  "> FILE.tar` writes it as a tar (as docker cp's \"-\"), "
			  "`corral cp --list %s:%s` lists it", id, src, id, src, id, src);
		code = dir_refused();
		goto out;
	}
	if (reply_check(&r) < 0)
		goto out;
	if (strcmp(dst, "-") && stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (asprintf(&full, "%s/%s", dst, base_name(src)) < 0) {
			full = NULL;
			code = out_of_memory("naming the destination");
			goto out;
		}
		dst = full;
	}
	if (strcmp(dst, "-") && sandbox_rw_dirs(c, id, &rw, &nrw))
		goto out;
	code = write_local(dst, r.buf ? r.buf : "", r.len, rw, nrw);
out:
	reply_free(&r);
	free(full);
	free(path);
	free(rw);
	return code;
}

static int entry_cmp(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));

	return strcmp(x ? x : "", y ? y : "");
}

static void mode_string(const char *type, json_int_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	out[0] = !type ? '?' : !strcmp(type, "dir") ? 'd' :
		 !strcmp(type, "symlink") ? 'l' : !strcmp(type, "file") ? '-' : '?';
	for (i = 0; i < 9; i++)
		out[1 + i] = mode & (0400 >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

static int print_entry(const json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *type = json_string_value(json_object_get(e, "type"));
	char mode[11], *safe;
	int n;

	/* the daemon says a mode as octal digits, "0644" */
	mode_string(type, strtol(json_string_value(json_object_get(e, "mode")) ?: "0",
				 NULL, 8), mode);
	safe = printable(name ? name : "?", name ? strlen(name) : 1);
	if (!safe)
		return out_of_memory("listing the directory");
	n = printf("%s %12" JSON_INTEGER_FORMAT " %s%s\n", mode,
		   json_integer_value(json_object_get(e, "size")), safe,
		   type && !strcmp(type, "dir") ? "/" : "");
	free(safe);
	return n < 0 ? EXIT_CORRAL : 0;
}

static int print_listing(const json_t *o)
{
	json_t *entries = json_object_get(o, "entries"), **v;
	size_t n = json_array_size(entries), i;
	int code = 0;

	if (!json_is_array(entries)) {
		cli_error("the daemon's listing has no entries");
		return EXIT_CORRAL;
	}
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return out_of_memory("listing the directory");
	for (i = 0; i < n; i++)
		v[i] = json_array_get(entries, i);
	qsort(v, n, sizeof(*v), entry_cmp);
	for (i = 0; i < n && !code; i++)
		code = print_entry(v[i]);
	free(v);
	return code;
}

static int cp_list(struct conn *c, const char *id, const char *dir,
		   bool as_json)
{
	char *path = conn_files_path(c, id, dir, true);
	json_t *o;
	int code;

	if (!path)
		return EXIT_CORRAL;
	o = conn_call_json(c, "GET", path, NULL);
	free(path);
	if (!o)
		return EXIT_CORRAL;
	code = as_json ? print_json(o) : print_listing(o);
	json_decref(o);
	return code;
}

static int cp_run(struct conn *c, const struct cp_args *a, int n, char **ops)
{
	const char *src_path, *dst_path;
	char src_id[128], dst_id[128];
	bool src_remote, dst_remote;
	int code;

	if (a->list) {
		if (n != 1 || !client_split_remote(ops[0], src_id, sizeof(src_id), &src_path))
			return verb_usage_error(&cp_verb, "--list takes one ID:/DIR");
		code = conn_open(c, &cp_verb);
		return code ? code : cp_list(c, src_id, src_path, a->json);
	}
	if (n != 2)
		return verb_usage_error(&cp_verb, "cp takes SRC and DST (got %d operand%s)",
					n, n == 1 ? "" : "s");
	src_remote = client_split_remote(ops[0], src_id, sizeof(src_id), &src_path);
	dst_remote = client_split_remote(ops[1], dst_id, sizeof(dst_id), &dst_path);
	if (src_remote == dst_remote)
		return verb_usage_error(&cp_verb, "one of SRC and DST must be ID:/PATH and the other a local path (got \"%s\" and \"%s\")",
					ops[0], ops[1]);
	if (!*ops[src_remote ? 1 : 0])
		return verb_usage_error(&cp_verb, "an empty local path");
	code = conn_open(c, &cp_verb);
	if (code)
		return code;
	if (dst_remote)
		return cp_in(c, ops[0], dst_id, dst_path, a->json);
	return cp_out(c, src_id, src_path, ops[1]);
}

int cmd_cp(int argc, char **argv)
{
	struct cp_args a = { 0 };
	struct conn c = { 0 };
	int code;

	code = verb_parse(&cp_verb, cp_options, ":h", argc, argv, &c,
			  cp_option, &a);
	if (!code)
		code = cp_run(&c, &a, argc - optind, argv + optind);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
