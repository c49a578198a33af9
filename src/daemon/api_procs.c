/*
 * api_procs.c - /v1/sandboxes/ID/processes: background calls, started by
 * POST, listed, shown with their output so far, killed by DELETE, and
 * kept after they end (the oldest ended ones go past API_PROCS_KEPT).
 * A process's output is followed from an offset (.../output), its stdin
 * written (.../stdin), any signal sent (.../signal) and its end waited
 * for (.../wait).
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void watch_end(struct proc_watch *w, bool gone);

void proc_free(struct proc *pr)
{
	if (pr->creating)
		reply_error(pr->creating, 410, "gone", "the sandbox was destroyed");
	if (pr->deleting)
		reply_error(pr->deleting, 410, "gone", "the sandbox was destroyed");
	while (pr->watches)
		watch_end(pr->watches, true);
	corral_call_free(pr->call);
	json_decref(pr->argv);
	free(pr);
}

static json_t *proc_json(struct proc *pr, bool output)
{
	const struct corral_result *res = corral_call_result(pr->call);
	json_t *o = json_pack("{s:i, s:s, s:O, s:s}", "pid", (int)pr->pid,
			      "tool_call_id", corral_call_id(pr->call),
			      "argv", pr->argv, "state", res ? "exited" : "running");

	if (o && res)
		json_object_set_new(o, "result", result_json(res));
	if (o && output) {
		const struct corral_output *out = corral_call_output(pr->call, 1);
		const struct corral_output *er = corral_call_output(pr->call, 2);

		json_object_set_new(o, "stdout", api_bytes(out->data, out->len));
		json_object_set_new(o, "stderr", api_bytes(er->data, er->len));
	}
	return o;
}

/* ---- held requests: wait and follow --------------------------------------- */

static void watch_unlink(struct proc_watch *w)
{
	for (struct proc_watch **pp = &w->pr->watches; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	if (w->ev_timeout)
		event_free(w->ev_timeout);
	free(w);
}

static void watch_gone(struct evhttp_connection *conn, void *arg)
{
	struct proc_watch *w = arg;

	(void)conn;
	forget_request(w->req);
	watch_unlink(w);
}

static void follow_line(struct evhttp_request *req, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	struct evbuffer *buf = text ? evbuffer_new() : NULL;

	json_decref(o);
	if (buf) {
		evbuffer_add(buf, text, strlen(text));
		evbuffer_add(buf, "\n", 1);
		evhttp_send_reply_chunk(req, buf);
		evbuffer_free(buf);
	}
	free(text);
}

/*
 * The process ended (or the sandbox went, gone): a waiter gets the
 * process, a follower its end line and the end of the stream.
 */
static void watch_end(struct proc_watch *w, bool gone)
{
	struct proc *pr = w->pr;
	const struct corral_result *res = corral_call_result(pr->call);

	api_set_closecb(pr->sb->d, w->req, NULL, NULL);
	if (w->follow) {
		follow_line(w->req, gone || !res ?
			    json_pack("{s:s, s:s}", "type", "gone", "reason",
				      "the sandbox was destroyed") :
			    json_pack("{s:s, s:o}", "type", "end", "result",
				      result_json(res)));
		api_reply_end(w->req);
	} else if (gone) {
		reply_error(w->req, 410, "gone", "the sandbox was destroyed");
	} else {
		reply_json(w->req, 200, proc_json(pr, true));
	}
	watch_unlink(w);
}

static const char *const stream_names[] = { "stdout", "stderr" };

/* Bytes of one stream from offset at, as a follower reads them. */
static void follow_bytes(struct proc_watch *w, int no, uint64_t at,
			 const char *data, size_t len)
{
	follow_line(w->req, json_pack("{s:s, s:I, s:o}", "type",
				      stream_names[no - 1], "offset", (json_int_t)at,
				      "data", api_bytes(data, len)));
}

static void proc_wrote(void *arg, struct corral_call *c, int no,
			const char *data, size_t len)
{
	struct proc *pr = arg;
	uint64_t at = pr->total[no - 1];
	struct proc_watch *w, *next;

	(void)c;
	pr->total[no - 1] += len;
	for (w = pr->watches; w; w = next) {
		next = w->next;
		if (!w->follow || !(w->streams & no))
			continue;
		/* a follower that does not read is cut off, not buffered for */
		if (api_queued(w->req) > FOLLOW_QUEUE_MAX) {
			api_set_closecb(pr->sb->d, w->req, NULL, NULL);
			api_reply_end(w->req);
			watch_unlink(w);
			continue;
		}
		follow_bytes(w, no, at, data, len);
	}
}

static void proc_start(void *arg, struct corral_call *c)
{
	struct proc *pr = arg;

	pr->pid = corral_call_pid(c);
	if (pr->creating) {
		reply_json(pr->creating, 201, json_pack("{s:i, s:s}", "pid",
			   (int)pr->pid, "tool_call_id", corral_call_id(c)));
		pr->creating = NULL;
	}
}

static void proc_done(void *arg, struct corral_call *c,
		      const struct corral_result *res)
{
	struct proc *pr = arg;

	(void)c;
	/* it never started (not found, bad cwd): the POST gets the result */
	if (pr->creating) {
		reply_json(pr->creating, 201, json_pack("{s:i, s:s, s:o}", "pid", 0,
			   "tool_call_id", res->tool_call, "result",
			   result_json(res)));
		pr->creating = NULL;
	}
	if (pr->deleting) {
		reply_json(pr->deleting, 200, proc_json(pr, true));
		pr->deleting = NULL;
	}	while (pr->watches)
		watch_end(pr->watches, false);
}

/* pid_text is "PID" or "PID/what": the part after the pid in *sub. */
static struct proc *find_proc(struct sandbox *sb, const char *pid_text,
			      const char **sub)
{
	char *end;
	long pid = strtol(pid_text, &end, 10);

	*sub = end;
	if ((*end && *end != '/') || pid <= 0 || end == pid_text)
		return NULL;
	for (struct proc *pr = sb->procs; pr; pr = pr->next)
		if (pr->pid == pid)
			return pr;
	return NULL;
}

/* Keep at most API_PROCS_KEPT records: the oldest ended ones go first. */
static void procs_trim(struct sandbox *sb)
{
	while (sb->nprocs > API_PROCS_KEPT) {
		struct proc **pp, **old = NULL;

		for (pp = &sb->procs; *pp; pp = &(*pp)->next)
			if (corral_call_result((*pp)->call) && !(*pp)->deleting)
				old = pp;
		if (!old)
			return;
		struct proc *pr = *old;

		*old = pr->next;
		sb->nprocs--;
		proc_free(pr);
	}
}


/*
 * The body of POST processes: an exec's, and "stdin_open": true to keep
 * the process's stdin open for .../stdin (after "stdin", if given).
 */
static bool procs_args(struct evhttp_request *req, struct call_args *a)
{
	json_t *o = body_json(req, true), *open;
	struct api_fault f;
	bool keep;

	memset(a, 0, sizeof(*a));
	if (!o)
		return false;
	open = json_object_get(o, "stdin_open");
	keep = json_is_true(open);
	if (open && !json_is_boolean(open)) {
		api_fault(&f, 400, "bad_request", "stdin_open must be true or false");
	} else {
		json_object_del(o, "stdin_open");
		if (call_args_check(o, true, a, &f)) {
			a->co.stdin_open = keep;
			return true;
		}
		call_args_free(a);
	}
	reply_fault(req, &f);
	json_decref(o);
	a->o = NULL;
	return false;
}

void procs_post(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };
	struct api_fault f;
	struct call_args a;
	struct corral_call *c;
	struct proc *pr;

	procs_trim(sb);
	if (!procs_args(req, &a))
		return;
	if (!call_timeout_within(sb->d, client_bound(sb->d, req), &a.co, &f)) {
		reply_fault(req, &f);
		goto out;
	}
	pr = calloc(1, sizeof(*pr));
	if (!pr) {
		reply_error(req, 500, "internal", "out of memory for the process request");
		goto out;
	}
	pr->sb = sb;
	a.co.keep_tail = true;
	a.co.on_start = proc_start;
	a.co.on_done = proc_done;
	a.co.on_output = proc_wrote;
	a.co.arg = pr;
	if (corral_box_exec(sb->box, &a.co, &c, &err) < 0) {
		reply_err(req, &err);
		free(pr);
		goto out;
	}
	sandbox_count_exec(sb);
	pr->call = c;
	pr->argv = json_object_get(a.o, "argv") ?
		   json_deep_copy(json_object_get(a.o, "argv")) :
		   json_pack("[s, s, O]", "/bin/sh", "-c",
			     json_object_get(a.o, "command"));
	pr->next = sb->procs;
	sb->procs = pr;
	sb->nprocs++;
	/* answered by proc_start, once the pid is known */
	pr->creating = req;
out:
	call_args_free(&a);
	json_decref(a.o);
}

void procs_list(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	json_t *a = json_array();

	for (struct proc *pr = sb->procs; pr; pr = pr->next)
		if (pr->pid)
			json_array_append_new(a, proc_json(pr, false));
	reply_json(req, 200, json_pack("{s:o}", "processes", a));
}

/* The process the path names, or NULL and answered. */
/*
 * The process the path names, and what of it (sub: "", "/output" ...,
 * one of subs), or NULL and answered.  A pid of another sandbox, or of
 * no background process of this one, is not found here.
 */
static struct proc *named_proc(struct sandbox *sb, struct evhttp_request *req,
			       const char *pid, const char *const *subs,
			       const char **sub)
{
	struct proc *pr = find_proc(sb, pid, sub);
	size_t i;

	if (!pr || !pr->pid) {
		reply_error(req, 404, "not_found", "no process %.32s in sandbox %s",
			    pid, sb->id);
		return NULL;
	}
	for (i = 0; subs[i] && strcmp(subs[i], *sub); i++)
		;
	if (!subs[i]) {
		reply_error(req, 404, "not_found", "no such route");
		return NULL;
	}
	return pr;
}

void proc_get(struct sandbox *sb, struct evhttp_request *req, const char *pid)
{
	static const char *const subs[] = { "", NULL };
	const char *sub;
	struct proc *pr = named_proc(sb, req, pid, subs, &sub);

	if (pr)
		reply_json(req, 200, proc_json(pr, true));
}

/* Answered once the process has ended (proc_done), or now if it has. */
void proc_delete(struct sandbox *sb, struct evhttp_request *req, const char *pid)
{
	static const char *const subs[] = { "", NULL };
	const char *sub;
	struct proc *pr = named_proc(sb, req, pid, subs, &sub);

	if (!pr)
		return;
	if (corral_call_result(pr->call) || pr->deleting) {
		reply_json(req, 200, proc_json(pr, true));
		return;
	}
	/* a frozen process ends only once thawed: the answer would wait for it */
	if (corral_box_state(sb->box) == CORRAL_BOX_PAUSED) {
		reply_error(req, 409, "conflict", "sandbox %s is paused; resume it "
			    "first (a frozen process cannot end)", sb->id);
		return;
	}
	pr->deleting = req;
	corral_call_kill(pr->call, SIGKILL);
}

/* ---- wait, follow, stdin, signal -------------------------------------------- */

static void query_of(struct evhttp_request *req, struct evkeyvalq *kv)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));

	TAILQ_INIT(kv);
	if (q)
		evhttp_parse_query_str(q, kv);
}

static struct proc_watch *watch_new(struct sandbox *sb, struct evhttp_request *req,
				    struct proc *pr, bool follow)
{
	struct proc_watch *w = calloc(1, sizeof(*w));

	if (!w) {
		reply_error(req, 500, "internal", "out of memory for a held request");
		return NULL;
	}
	w->pr = pr;
	w->req = req;
	w->follow = follow;
	w->next = pr->watches;
	pr->watches = w;
	api_set_closecb(sb->d, req, watch_gone, w);
	return w;
}

static void wait_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proc_watch *w = arg;

	(void)fd;
	(void)what;
	api_set_closecb(w->pr->sb->d, w->req, NULL, NULL);
	reply_json(w->req, 200, proc_json(w->pr, true));
	watch_unlink(w);
}

/* GET .../wait[?timeout_seconds=S]: the process once ended (or at S, running). */
void proc_wait(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const subs[] = { "/wait", NULL };
	const char *sub;
	struct proc *pr = named_proc(sb, req, rest, subs, &sub);
	struct evkeyvalq kv;
	struct api_fault f;
	double secs = -1;		/* none: wait for the end */
	struct proc_watch *w;
	bool ok;

	if (!pr)
		return;
	query_of(req, &kv);
	ok = query_number("timeout_seconds", evhttp_find_header(&kv, "timeout_seconds"),
			  0, 86400, &secs, &f);
	evhttp_clear_headers(&kv);
	if (!ok) {
		reply_fault(req, &f);
		return;
	}
	if (corral_call_result(pr->call) || secs == 0) {
		reply_json(req, 200, proc_json(pr, true));
		return;
	}
	if (!(w = watch_new(sb, req, pr, false)))
		return;
	if (secs > 0) {
		uint64_t ms = secs * 1000;
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

		w->ev_timeout = evtimer_new(sb->d->base, wait_timeout, w);
		if (w->ev_timeout)
			evtimer_add(w->ev_timeout, &tv);
	}
}

/*
 * GET .../output[?stream=stdout|stderr][&offset=N][&follow=1]: NDJSON
 * lines of the output from byte offset N of each stream: what is kept,
 * a "dropped" line for what was not, then (follow) each write as it
 * comes, and an "end" line with the result once the process has ended.
 */
void proc_output(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const subs[] = { "/output", NULL };
	const char *sub;
	struct proc *pr = named_proc(sb, req, rest, subs, &sub);
	struct evkeyvalq kv;
	struct api_fault f;
	const char *st;
	uint64_t from = 0;
	int streams = 3;
	bool follow, ok;

	if (!pr)
		return;
	query_of(req, &kv);
	st = evhttp_find_header(&kv, "stream");
	follow = query_flag(evhttp_find_header(&kv, "follow"));
	if (st)
		streams = !strcmp(st, "stdout") ? 1 : !strcmp(st, "stderr") ? 2 :
			  !strcmp(st, "both") ? 3 : 0;
	ok = streams ? query_count("offset", evhttp_find_header(&kv, "offset"),
				   UINT64_MAX, &from, &f) :
	     api_fault(&f, 400, "bad_request", "stream is stdout, stderr or "
		       "both (got \"%.40s\")", st);
	evhttp_clear_headers(&kv);
	if (!ok) {
		reply_fault(req, &f);
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/x-ndjson");
	evhttp_send_reply_start(req, 200, "OK");
	for (int no = 1; no <= 2; no++) {
		const struct corral_output *o = corral_call_output(pr->call, no);
		uint64_t total = pr->total[no - 1], at = from, kept;

		/* what is kept is the tail of what was written (keep_tail) */
		kept = total > o->len ? total - o->len : 0;
		if (!(streams & no) || at >= total)
			continue;
		if (at < kept)
			follow_line(req, json_pack("{s:s, s:s, s:I, s:I}", "type",
				    "dropped", "stream", stream_names[no - 1], "offset",
				    (json_int_t)at, "bytes", (json_int_t)(kept - at)));
		at = at > kept ? at : kept;
		follow_bytes(&(struct proc_watch){ .req = req }, no, at,
			     o->data + (at - kept), total - at);
	}
	if (corral_call_result(pr->call) || !follow) {
		if (corral_call_result(pr->call))
			follow_line(req, json_pack("{s:s, s:o}", "type", "end",
				    "result", result_json(corral_call_result(pr->call))));
		api_reply_end(req);
		return;
	}
	struct proc_watch *w = watch_new(sb, req, pr, true);

	if (w)
		w->streams = streams;
	else
		api_reply_end(req);
}

/* POST .../stdin[?eof=1]: the body, raw, to the process's stdin. */
void proc_stdin(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const subs[] = { "/stdin", NULL };
	const char *sub;
	struct proc *pr = named_proc(sb, req, rest, subs, &sub);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	struct corral_err err = { 0 };
	struct evkeyvalq kv;
	bool eof;

	if (!pr)
		return;
	query_of(req, &kv);
	eof = query_flag(evhttp_find_header(&kv, "eof"));
	evhttp_clear_headers(&kv);
	if (corral_call_result(pr->call)) {
		reply_error(req, 409, "conflict", "process %d has ended: its stdin "
			    "is gone", (int)pr->pid);
		return;
	}
	if (corral_call_write_stdin(pr->call, len ? evbuffer_pullup(in, -1) : NULL,
				    len, eof, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	reply_json(req, 200, json_pack("{s:i, s:I, s:b}", "pid", (int)pr->pid,
				       "accepted", (json_int_t)len, "eof", eof));
}

static const struct { const char *name; int sig; } signal_names[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
	{ "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },
	{ "WINCH", SIGWINCH }, { "ABRT", SIGABRT },
};

/* "TERM", "SIGTERM" or 15; 0 when it names none. */
static int signal_of(json_t *v)
{
	const char *s;

	if (json_is_integer(v))
		return json_integer_value(v) > 0 && json_integer_value(v) < SIGRTMAX ?
		       (int)json_integer_value(v) : 0;
	if (!json_is_string(v))
		return 0;
	s = json_string_value(v);
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
		if (!strcmp(s, signal_names[i].name))
			return signal_names[i].sig;
	return 0;
}

/* POST .../signal {"signal": "TERM"}: to the process and all it started. */
void proc_signal(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const known[] = { "signal", NULL };
	static const char *const subs[] = { "/signal", NULL };
	struct corral_err err = { 0 };
	const char *sub;
	struct proc *pr = named_proc(sb, req, rest, subs, &sub);
	struct api_fault f;
	char got[48];
	int sig, r;
	json_t *o;

	if (!pr || !(o = body_json(req, true)))
		return;
	sig = signal_of(json_object_get(o, "signal"));
	if (!only_fields(o, known, &f) || (!sig && !api_fault(&f, 400,
	    "bad_request", "signal must be a name (\"TERM\", \"SIGINT\", "
	    "\"KILL\", \"USR1\" ...) or a number from 1 to %d (got %s)", SIGRTMAX - 1,
	    api_json_text(json_object_get(o, "signal"), got, sizeof(got))))) {
		reply_fault(req, &f);
	} else if (corral_call_result(pr->call)) {
		reply_error(req, 409, "conflict", "process %d has ended", (int)pr->pid);
	} else if ((r = corral_call_kill(pr->call, sig)) < 0) {
		corral_set_errno(&err, -r, "signal %d to process %d", sig, (int)pr->pid);
		reply_err(req, &err);
	} else {
		reply_json(req, 200, json_pack("{s:i, s:i, s:s}", "pid", (int)pr->pid,
					       "signal", sig, "state", "running"));
	}
	json_decref(o);
}
