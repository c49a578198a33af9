/*
 * api_procs.c - /v1/sandboxes/ID/processes: background calls, started by
 * POST, listed, shown with their output so far, killed by DELETE, and
 * kept after they end (the oldest ended ones go past API_PROCS_KEPT).
 */
#include "api.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

void proc_free(struct proc *pr)
{
	if (pr->creating)
		reply_error(pr->creating, 410, "gone", "the sandbox was destroyed");
	if (pr->deleting)
		reply_error(pr->deleting, 410, "gone", "the sandbox was destroyed");
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
	}
}

static struct proc *find_proc(struct sandbox *sb, const char *pid_text)
{
	char *end;
	long pid = strtol(pid_text, &end, 10);

	if (*end || pid <= 0)
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


void procs_post(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };
	struct call_args a;
	struct corral_call *c;
	struct proc *pr;

	procs_trim(sb);
	if (!call_args_read(req, true, &a))
		return;
	pr = calloc(1, sizeof(*pr));
	if (!pr) {
		reply_error(req, 500, "internal", "out of memory for the process request");
		goto out;
	}
	pr->sb = sb;
	a.co.keep_tail = true;
	a.co.on_start = proc_start;
	a.co.on_done = proc_done;
	a.co.arg = pr;
	if (corral_box_exec(sb->box, &a.co, &c, &err) < 0) {
		reply_err(req, &err);
		free(pr);
		goto out;
	}
	sb->d->execs++;
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
static struct proc *named_proc(struct sandbox *sb, struct evhttp_request *req,
			       const char *pid)
{
	struct proc *pr = find_proc(sb, pid);

	if (!pr)
		reply_error(req, 404, "not_found", "no process %.32s in sandbox %s",
			    pid, sb->id);
	return pr;
}

void proc_get(struct sandbox *sb, struct evhttp_request *req, const char *pid)
{
	struct proc *pr = named_proc(sb, req, pid);

	if (pr)
		reply_json(req, 200, proc_json(pr, true));
}

/* Answered once the process has ended (proc_done), or now if it has. */
void proc_delete(struct sandbox *sb, struct evhttp_request *req, const char *pid)
{
	struct proc *pr = named_proc(sb, req, pid);

	if (!pr)
		return;
	if (corral_call_result(pr->call) || pr->deleting) {
		reply_json(req, 200, proc_json(pr, true));
		return;
	}
	pr->deleting = req;
	corral_call_kill(pr->call, SIGKILL);
}
