/* result.c - how a run ended, as an exit status and as JSON. */
#include "internal.h"
#include "events.h"
#include "sandbox.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <nettle/base64.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *const status_names[] = {
	[CORRAL_EXITED] = "exited",
	[CORRAL_SIGNALED] = "signaled",
	[CORRAL_TIMEOUT] = "timeout",
	[CORRAL_OOM] = "oom",
	[CORRAL_PIDS_LIMIT] = "pids_limit",
	[CORRAL_HALTED] = "halted",
	[CORRAL_ERROR] = "error",
};

const char *corral_status_name(enum corral_status s)
{
	if ((unsigned int)s >= sizeof(status_names) / sizeof(status_names[0]))
		return "error";
	return status_names[s];
}

int corral_status_from_name(const char *name, enum corral_status *s)
{
	for (size_t i = 0; name && i < sizeof(status_names) / sizeof(status_names[0]); i++) {
		if (status_names[i] && !strcmp(status_names[i], name)) {
			*s = (enum corral_status)i;
			return 0;
		}
	}
	return -EINVAL;
}

int corral_result_exit_code(const struct corral_result *res)
{
	switch (res->status) {
	case CORRAL_TIMEOUT:
		return 124;
	case CORRAL_ERROR:
		return 125;
	case CORRAL_HALTED:
		/*
		 * A command that ended by itself before the halt keeps its
		 * status; a halted run never reads as a success, though.
		 */
		if (!res->signal && !res->exit_code)
			return 1;
		break;
	default:
		break;
	}
	return res->signal ? 128 + res->signal : res->exit_code;
}

/* Program output is bytes; JSON wants UTF-8: invalid bytes become U+FFFD. */
json_t *corral_json_bytes(const char *data, size_t len)
{
	const unsigned char *s = (const unsigned char *)data;
	size_t j = 0;
	json_t *v;
	char *buf;

	v = json_stringn(data ? data : "", data ? len : 0);
	if (v || !data)
		return v;
	buf = malloc(len * 3 + 1);
	if (!buf)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = corral_utf8_char(data + i, len - i);

		if (n && s[i] != 0) {
			memcpy(buf + j, s + i, n);
			j += n;
			i += n;
		} else {
			if (s[i] == 0)
				buf[j++] = 0;
			else
				j += (memcpy(buf + j, "\xef\xbf\xbd", 3), 3);
			i++;
		}
	}
	v = json_stringn_nocheck(buf, j);
	free(buf);
	return v;
}

/* Any bytes as base64 (RFC 4648, padded), for output that is not text. */
json_t *corral_json_base64(const char *data, size_t len)
{
	char *b;
	json_t *v;

	if (len > INT_MAX / 2)
		return NULL;
	b = malloc(BASE64_ENCODE_RAW_LENGTH(len) + 1);
	if (!b)
		return NULL;
	base64_encode_raw(b, len, (const uint8_t *)data);
	v = json_stringn_nocheck(b, BASE64_ENCODE_RAW_LENGTH(len));
	free(b);
	return v;
}

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/*
 * Canonical base64 only: groups of four, the alphabet, '=' only as the
 * last one or two characters, no whitespace anywhere, and (nettle checks
 * it) no stray bits before the padding.  What OpenSSL's EVP_DecodeBlock
 * took before is a superset (it read '=' anywhere as zero bits and
 * trimmed whitespace at either end); what both take decodes the same.
 */
int corral_base64_decode(const char *in, size_t len, char **out, size_t *outlen)
{
	struct base64_decode_ctx ctx;
	size_t body = len, n = 0;
	uint8_t *b;

	*out = NULL;
	*outlen = 0;
	if (len % 4 || len > INT_MAX)
		return -EINVAL;
	while (body > 0 && len - body < 2 && in[body - 1] == '=')
		body--;
	for (size_t i = 0; i < body; i++)
		if (!in[i] || !strchr(b64_alphabet, in[i]))
			return -EINVAL;
	b = malloc(BASE64_DECODE_LENGTH(len) + 1);
	if (!b)
		return -ENOMEM;
	base64_decode_init(&ctx);
	n = BASE64_DECODE_LENGTH(len) + 1;
	if (!base64_decode_update(&ctx, &n, b, len, in) || !base64_decode_final(&ctx)) {
		free(b);
		return -EINVAL;
	}
	*out = (char *)b;
	*outlen = n;
	return 0;
}

static json_t *output_string(const struct corral_result *res,
			     const struct corral_output *o)
{
	return res->output_base64 ? corral_json_base64(o->data, o->len) :
		corral_json_bytes(o->data, o->len);
}

/* How much of each stream was dropped, and where: head before, tail after. */
static void output_shape(json_t *o, const struct corral_result *res)
{
	json_object_set_new(o, "stdout_dropped", json_integer((json_int_t)res->out.dropped));
	json_object_set_new(o, "stderr_dropped", json_integer((json_int_t)res->err.dropped));
	if (res->out.dropped)
		json_object_set_new(o, "stdout_dropped_at",
				    json_integer((json_int_t)res->out.dropped_at));
	if (res->err.dropped)
		json_object_set_new(o, "stderr_dropped_at",
				    json_integer((json_int_t)res->err.dropped_at));
	json_object_set_new(o, "output_encoding", json_string(res->output_base64 ?
			    "base64" : "text"));
	if (res->output_order)
		json_object_set_new(o, "output_order", json_loads(res->output_order, 0, NULL));
}

/*
 * The note names host paths, cut at a byte count (a character split) and
 * not UTF-8 on every host: as bytes, or a bad one made the whole object
 * null (json_pack refuses the string).
 */
json_t *corral_ids_json(const struct corral_ids *ids)
{
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:o}",
			 "mapping", ids->mapping[0] ? ids->mapping : "none",
			 "uid", (json_int_t)ids->uid, "gid", (json_int_t)ids->gid,
			 "range_uid", (json_int_t)ids->range_uid,
			 "range_gid", (json_int_t)ids->range_gid,
			 "count", (json_int_t)ids->count,
			 "idmapped", ids->idmapped,
			 "note", corral_json_bytes(ids->note, strlen(ids->note)));
}

json_t *corral_result_object(const struct corral_result *res)
{
	json_t *o, *layers, *denials;
	size_t kept;

	layers = json_pack("{s:i, s:b, s:b, s:s, s:o?}",
			   "landlock_abi", res->layers.landlock_abi,
			   "seccomp", res->layers.seccomp,
			   "seccomp_notify", res->layers.seccomp_notify,
			   "limits", res->layers.limits ? res->layers.limits : "none",
			   "ids", corral_ids_json(&res->layers.ids));
	o = json_pack("{s:s, s:i, s:i, s:o, s:o?, s:b, s:o?, s:b, s:I, s:I, s:I, s:o?}",
		      "status", corral_status_name(res->status),
		      "exit_code", corral_result_exit_code(res),
		      "signal", res->signal,
		      "reason", corral_json_bytes(res->reason, strlen(res->reason)),
		      "stdout", output_string(res, &res->out),
		      "stdout_truncated", res->out.truncated,
		      "stderr", output_string(res, &res->err),
		      "stderr_truncated", res->err.truncated,
		      "duration_ms", (json_int_t)res->duration_ms,
		      "cpu_ms", (json_int_t)res->cpu_ms,
		      "max_rss_kb", (json_int_t)res->max_rss_kb,
		      "layers", layers);
	if (!o)
		return NULL;
	output_shape(o, res);
	if (res->sandbox_id[0])
		json_object_set_new(o, "sandbox", json_string(res->sandbox_id));
	if (res->tool_call[0])
		json_object_set_new(o, "tool_call", json_string(res->tool_call));
	denials = res->denials ? json_loads(res->denials, 0, NULL) : NULL;
	kept = json_array_size(denials);
	json_object_set_new(o, "denials", denials ? denials : json_array());
	/* a flood's denials are all counted, the first ones kept: the rest said */
	json_object_set_new(o, "denials_dropped", json_integer((json_int_t)
			    (res->denials_total > kept ? res->denials_total - kept : 0)));
	if (res->export_report)
		json_object_set_new(o, "export", json_loads(res->export_report, 0, NULL));
	json_object_set_new(o, "events_lost", json_integer((json_int_t)res->events_lost));
	return o;
}

char *corral_result_json(const struct corral_result *res)
{
	json_t *o = corral_result_object(res);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

	json_decref(o);
	return text;
}

/* ---- how a command ended, for corral_run and a box's calls alike ------ */

/* More of the reason, after what it says, as far as it has room. */
static void __attribute__((format(printf, 2, 3)))
reason_add(struct corral_result *res, const char *fmt, ...)
{
	size_t n = strlen(res->reason);
	va_list ap;

	va_start(ap, fmt);
	if (n < sizeof(res->reason))
		vsnprintf(res->reason + n, sizeof(res->reason) - n, fmt, ap);
	va_end(ap);
}

void result_from_wait(struct corral_result *res, int status)
{
	if (WIFSIGNALED(status)) {
		res->status = CORRAL_SIGNALED;
		res->signal = WTERMSIG(status);
		snprintf(res->reason, sizeof(res->reason), "killed by signal %d "
			 "(SIG%s)", res->signal, sigabbrev_np(res->signal) ?: "?");
		/*
		 * Our filter's one kill (seccomp.c): it leaves no event, the
		 * kernel kills before any supervisor hears of the call.
		 */
		if (res->signal == SIGSYS)
			reason_add(res, ": a system call of another ABI (i386 or x32), "
				   "which the sandbox's seccomp filter answers by killing "
				   "the process, unless the program raised SIGSYS itself");
	} else {
		res->status = CORRAL_EXITED;
		res->exit_code = WEXITSTATUS(status);
		snprintf(res->reason, sizeof(res->reason), "exited with status %d",
			 res->exit_code);
	}
}

void result_halted_after_end(struct corral_result *res, int status,
			     const char *halt, const char *then)
{
	char ended[sizeof(res->reason)];

	result_from_wait(res, status);
	snprintf(ended, sizeof(ended), "%s", res->reason);
	res->status = CORRAL_HALTED;
	snprintf(res->reason, sizeof(res->reason), "halted: %.280s; %sthe command "
		 "had ended: %.140s", halt, then, ended);
}

/*
 * Status "signaled" and 128+sig, as for a signal the command died of, so
 * that a caller's handling of a signal does not depend on when it came;
 * the reason says that nothing ran.
 */
void result_not_started(struct corral_result *res, int sig)
{
	res->status = CORRAL_SIGNALED;
	res->signal = sig;
	res->kill_said = true;
	snprintf(res->reason, sizeof(res->reason), "SIG%s during setup: the "
		 "command was not started", sigabbrev_np(sig) ?: "?");
}

/*
 * Each process forked for a call died before the call reached it (call.c
 * forks another when the first does, once): the command was not started.
 * Status and signal are the last one's death, as for a signal during
 * setup; the reason says that nothing ran.
 */
void result_not_reached(struct corral_result *res, int status, unsigned lost)
{
	char how[64];

	if (WIFSIGNALED(status)) {
		res->status = CORRAL_SIGNALED;
		res->signal = WTERMSIG(status);
		res->kill_said = true;
		snprintf(how, sizeof(how), "killed by signal %d (SIG%s)",
			 res->signal, sigabbrev_np(res->signal) ?: "?");
	} else {
		res->status = CORRAL_EXITED;
		res->exit_code = WEXITSTATUS(status);
		snprintf(how, sizeof(how), "exited with status %d", res->exit_code);
	}
	snprintf(res->reason, sizeof(res->reason), "not started: "
		 "the %u process%s forked for the call died before the call "
		 "reached %s, the last %s", lost, lost == 1 ? "" : "es",
		 lost == 1 ? "it" : "them", how);
}

/* As a shell says it: 127 when the command is not there, else 126. */
void result_exec_failed(struct corral_result *res, const char *cmd, int e)
{
	res->status = CORRAL_EXITED;
	res->exit_code = (e == ENOENT || e == ENOTDIR) ? 127 : 126;
	snprintf(res->reason, sizeof(res->reason), "%s: %s: %s",
		 res->exit_code == 127 ? "not found" : "cannot execute", cmd,
		 strerror(e));
}

void result_timeout(struct corral_result *res, uint64_t timeout_ms)
{
	res->status = CORRAL_TIMEOUT;
	res->signal = SIGKILL;
	snprintf(res->reason, sizeof(res->reason), "killed: wall-clock timeout "
		 "of %.3g s reached", timeout_ms / 1000.0);
}

/*
 * Killed by SIGKILL and nothing more said: the OOM killer's way, or its
 * own (nothing tells them apart), and "killed: memory limit" says it.
 * Anything else (an exit status, another signal, a signal the caller or
 * a client had corral send, a command never started: kill_said, set
 * where those words are written) is how the command ended, kept after
 * the limit: the OOM kill was of another of its processes.  It once
 * judged by a ';' in the reason, which any clause could put there.
 */
static bool killed_bare(const struct corral_result *res)
{
	return res->status == CORRAL_SIGNALED && res->signal == SIGKILL &&
	       !res->kill_said;
}

/*
 * The limits a command hit, over how it ended: one verdict for `corral
 * run` and a box's calls alike, from the counters of the group it ran in
 * (oom_kills: processes the OOM killer took; pids_max_hits: forks refused;
 * throttled: periods the CPU quota held it back; v1's TCP buffers, which
 * slow a connection at their limit and kill nothing).  A command that exited
 * after one of its children was OOM-killed (a shell says 137) ran out of
 * memory all the same.  Every limit that bit is said: a call that timed
 * out or was halted after an OOM kill, or ran out of memory and of pids,
 * used to name only one, and an agent loop reads the result, not the
 * limit.hit events.  How the command ended stays in the reason, after the
 * memory or pids limit its status names (killed_bare).
 */
void result_limits(struct corral_result *res, const struct corral_policy *p,
		   const struct cg_stats *hits)
{
	bool by_itself = res->status == CORRAL_EXITED || res->status == CORRAL_SIGNALED;
	uint64_t oom = hits->oom_kills, pids = hits->pids_max_hits;
	char size[32], tail[CORRAL_ERR_MAX], share[CG_SHARE_SAID];

	corral_format_size(p->memory_bytes, size, sizeof(size));
	if (by_itself && oom && killed_bare(res)) {
		res->status = CORRAL_OOM;
		snprintf(res->reason, sizeof(res->reason), "killed: memory limit "
			 "%s reached (%llu process%s killed by the OOM killer)%s",
			 size, (unsigned long long)oom, oom == 1 ? "" : "es",
			 cg_memory_share_said(hits, share));
		oom = 0;
	} else if (by_itself && oom) {
		memcpy(tail, res->reason, sizeof(tail));
		res->status = CORRAL_OOM;
		snprintf(res->reason, sizeof(res->reason), "memory limit %s reached "
			 "(%llu process%s killed by the OOM killer)%s; the command %.200s",
			 size, (unsigned long long)oom, oom == 1 ? "" : "es",
			 cg_memory_share_said(hits, share), tail);
		oom = 0;
	} else if (by_itself && pids) {
		memcpy(tail, res->reason, sizeof(tail));
		res->status = CORRAL_PIDS_LIMIT;
		snprintf(res->reason, sizeof(res->reason), "pids limit %llu "
			 "reached: %llu fork%s refused%s; the command %.200s",
			 (unsigned long long)p->pids, (unsigned long long)pids,
			 pids == 1 ? " was" : "s were", cg_pids_share_said(hits, share),
			 tail);
		pids = 0;
	}
	if (oom)
		reason_add(res, "; memory limit %s reached too (%llu process%s "
			   "killed by the OOM killer)%s", size, (unsigned long long)oom,
			   oom == 1 ? "" : "es", cg_memory_share_said(hits, share));
	if (pids)
		reason_add(res, "; pids limit %llu reached too (%llu fork%s "
			   "refused)%s", (unsigned long long)p->pids,
			   (unsigned long long)pids, pids == 1 ? "" : "s",
			   cg_pids_share_said(hits, share));
	if (hits->throttled && p->cpus > 0)
		reason_add(res, "; CPU limit %.3g cores reached: throttled in %llu "
			   "period%s of 100 ms", p->cpus, (unsigned long long)hits->throttled,
			   hits->throttled == 1 ? "" : "s");
	if (cg_tcp_reached(hits))
		reason_add(res, "; %s", cg_tcp_said(hits, tail, sizeof(tail)));
}

/*
 * What the box's limits did to a finished call's background processes
 * while this command ran: said after its own verdict, which they are not
 * (its command was not the one killed, nor the forker refused).
 */
void result_background_hits(struct corral_result *res, const struct corral_policy *p,
			    const char *call, uint64_t oom, uint64_t pids)
{
	char size[32];

	corral_format_size(p->memory_bytes, size, sizeof(size));
	if (oom)
		reason_add(res, "; memory limit %s reached too: %llu background "
			   "process%s of call %.100s killed by the OOM killer", size,
			   (unsigned long long)oom, oom == 1 ? "" : "es", call);
	if (pids)
		reason_add(res, "; pids limit %llu reached too: %llu fork%s of call "
			   "%.100s's background processes refused",
			   (unsigned long long)p->pids, (unsigned long long)pids,
			   pids == 1 ? "" : "s", call);
}

/* ---- limits that were rlimits ----------------------------------------- */

static bool output_says(const struct corral_result *res, const char *const *marks)
{
	for (size_t i = 0; marks[i]; i++)
		if (memmem(res->err.data ? res->err.data : "", res->err.len, marks[i],
			   strlen(marks[i])) ||
		    memmem(res->out.data ? res->out.data : "", res->out.len, marks[i],
			   strlen(marks[i])))
			return true;
	return false;
}


/*
 * Without cgroups the memory and pids limits are rlimits of each process
 * (cgroup_none.c), and nothing counts what they refused.  A command that
 * failed the way one of them makes programs fail (an allocation that
 * fails, a fork that fails; seen in its captured output) gets the limit
 * named in its reason, instead of a bare exit status.
 */
void result_explain_rlimits(struct corral_result *res, const struct corral_policy *p)
{
	static const char *const memory_marks[] = { "MemoryError",
		"Cannot allocate memory", "out of memory", "Out of memory",
		"bad_alloc", "ENOMEM", "memory allocation", "heap out of memory",
		NULL };
	static const char *const fork_marks[] = { "fork", "Resource temporarily "
		"unavailable", "EAGAIN", "BlockingIOError", NULL };
	char size[32];

	if ((res->status != CORRAL_EXITED || !res->exit_code) &&
	    res->status != CORRAL_SIGNALED)
		return;
	if (p->memory_bytes && output_says(res, memory_marks)) {
		corral_format_size(p->memory_bytes, size, sizeof(size));
		reason_add(res, "; memory limit %s is an rlimit here (RLIMIT_DATA "
			   "of each process, no cgroup): an allocation past it "
			   "fails with ENOMEM", size);
	}
	if (p->pids && output_says(res, fork_marks)) {
		reason_add(res, "; pids limit %llu is an rlimit here (RLIMIT_NPROC, "
			   "no cgroup): a fork past it fails with EAGAIN",
			   (unsigned long long)p->pids);
	}
}

/*
 * A command's open files are an rlimit of each process, with or without
 * cgroups, and nothing counts an open it refused.  One that failed with
 * EMFILE (in its captured output) gets the limit and where it came from
 * named in its reason: limits.open_files, or the share of the host's file
 * table the default gives (sandbox_nofile_cap).  nofile 0: no limit of ours.
 */
void result_explain_open_files(struct corral_result *res, const struct corral_policy *p,
			       rlim_t nofile)
{
	static const char *const marks[] = { "Too many open files", "EMFILE", NULL };

	if (!nofile || ((res->status != CORRAL_EXITED || !res->exit_code) &&
			res->status != CORRAL_SIGNALED) || !output_says(res, marks))
		return;
	if (p->open_files)
		reason_add(res, "; open files: at most %llu a process (limits.open_files, "
			   "RLIMIT_NOFILE): an open past it fails with EMFILE",
			   (unsigned long long)nofile);
	else
		reason_add(res, "; open files: at most %llu a process (RLIMIT_NOFILE, "
			   "this host's file table shared over limits.pids; "
			   "limits.open_files chooses another split): an open "
			   "past it fails with EMFILE", (unsigned long long)nofile);
}

/*
 * With the network off a tool says only what its resolver or its connect
 * said: "Name or service not known" (the supervisor answers every name
 * NXDOMAIN inside, dnsoff.c), ENETUNREACH for an address.  A command that
 * failed so, in its captured output, gets the policy named in its reason;
 * each name asked is also a denial, which the reason's "denied:" part
 * names (events_explain_denials), so that a lookup whose failure the tool
 * kept quiet is still explained.
 */
void result_explain_network(struct corral_result *res, const struct corral_policy *p)
{
	static const char *const marks[] = { "name resolution", "EAI_AGAIN",
		"Could not resolve", "Name or service not known", "getaddrinfo",
		"Network is unreachable", "ENETUNREACH", "ENOTFOUND",
		"No address associated", "Temporary failure in resolving", NULL };

	if (p->net != CORRAL_NET_NONE ||
	    ((res->status != CORRAL_EXITED || !res->exit_code) &&
	     res->status != CORRAL_SIGNALED))
		return;
	if (output_says(res, marks))
		reason_add(res, "; the network is off by policy (network.mode "
			   "\"none\"): no name resolves and no connection leaves "
			   "the sandbox");
}
