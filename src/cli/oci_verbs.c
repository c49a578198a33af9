/*
 * oci_verbs.c - the verbs after create: start, state, kill, delete, ps,
 * pause, resume, update, and features (no container needed).  Each asks
 * the container's monitor (corral_container_ctl) what only it can do.
 */
#include "cli.h"
#include "oci.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MONITOR_EXIT_MS	10000	/* the monitor's cleanup: cgroup, proxy */
/* ps: the monitor's answer holds every pid, up to 128 KiB of them */
#define PS_REPLY_MAX	(256 << 10)

/* "VERB [FLAGS] ID": flags are the caller's; the id is checked and loaded. */
static int load(const struct oci_global *g, const char *id, struct oci_state *st)
{
	struct corral_err err = { 0 };

	if (oci_state_load(g, id, st, &err) < 0) {
		oci_error(g, "%s", err.msg);
		return -1;
	}
	return 0;
}

/* One request; its error in the log; the reply in reply (may be NULL). */
static int ask(const struct oci_global *g, const struct oci_state *st,
	       const char *req, char *reply, size_t len)
{
	struct corral_err err = { 0 };
	char buf[8192];

	if (!reply) {
		reply = buf;
		len = sizeof(buf);
	}
	if (corral_container_ctl(st->ctl, req, reply, len, &err) < 0) {
		/* no monitor: the container's init has exited */
		if (err.code == -ENOENT || err.code == -ECONNREFUSED)
			oci_error(g, "container not running");
		else
			oci_error(g, "%s", err.msg);
		return -1;
	}
	return 0;
}

/* argv: VERB ID, nothing else */
static const char *only_id(const struct oci_global *g, int argc, char **argv)
{
	if (argc != 2) {
		oci_error(g, "%s: expected one container id", argv[0]);
		return NULL;
	}
	return argv[1];
}

int oci_start(const struct oci_global *g, int argc, char **argv)
{
	struct oci_state st;
	const char *id = only_id(g, argc, argv), *status;
	int r = -1;

	if (!id || load(g, id, &st) < 0)
		return 1;
	status = oci_state_status(&st);
	if (strcmp(status, "created"))
		oci_error(g, "cannot start a container that is %s", status);
	else
		r = ask(g, &st, "start", NULL, 0);
	oci_state_free(&st);
	return r < 0 ? 1 : 0;
}

int oci_state_cmd(const struct oci_global *g, int argc, char **argv)
{
	struct oci_state st;
	const char *id = only_id(g, argc, argv);
	json_t *o;

	if (!id || load(g, id, &st) < 0)
		return 1;
	o = oci_state_json(&st, oci_state_status(&st));
	/* ASCII: the annotations are config.json's, and a person may read this */
	if (o)
		json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	putchar('\n');
	json_decref(o);
	oci_state_free(&st);
	return o ? 0 : 1;
}

int oci_kill(const struct oci_global *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' }, { NULL, 0, NULL, 0 },
	};
	struct corral_err err = { 0 };
	struct oci_state st;
	bool all = false;
	char req[64];
	int opt, sig = SIGTERM, r;

	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+a", opts, NULL)) != -1) {
		if (opt != 'a') {
			oci_error(g, "kill: unknown flag %s", argv[optind - 1]);
			return OCI_USAGE;
		}
		all = true;
	}
	if (optind >= argc || argc - optind > 2) {
		oci_error(g, "kill: expected ID [SIGNAL]");
		return OCI_USAGE;
	}
	if (argc - optind == 2 && (sig = oci_signal_parse(argv[optind + 1], &err)) < 0) {
		oci_error(g, "%s", err.msg);
		return OCI_USAGE;
	}
	if (load(g, argv[optind], &st) < 0)
		return 1;
	snprintf(req, sizeof(req), "%s %d", all ? "kill-all" : "kill", sig);
	r = ask(g, &st, req, NULL, 0);
	oci_state_free(&st);
	return r < 0 ? 1 : 0;
}

/* Until the monitor has exited (it cleans up the cgroup first), bounded. */
static int wait_monitor(const struct oci_state *st)
{
	struct pollfd pfd = { .events = POLLIN };

	if (st->monitor <= 0)
		return 0;
	pfd.fd = syscall(SYS_pidfd_open, st->monitor, 0);
	if (pfd.fd < 0)
		return errno == ESRCH ? 0 : -errno;
	/* a recycled pid is not our monitor: its socket would be gone too */
	if (access(st->ctl, F_OK) < 0) {
		close(pfd.fd);
		return 0;
	}
	int n = poll(&pfd, 1, MONITOR_EXIT_MS);

	close(pfd.fd);
	return n == 1 ? 0 : -ETIMEDOUT;
}

int oci_delete(const struct oci_global *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' }, { NULL, 0, NULL, 0 },
	};
	struct corral_err err = { 0 };
	struct oci_state st;
	const char *status;
	bool force = false;
	char reply[64];
	int opt, r = 0;

	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+f", opts, NULL)) != -1) {
		if (opt != 'f') {
			oci_error(g, "delete: unknown flag %s", argv[optind - 1]);
			return OCI_USAGE;
		}
		force = true;
	}
	if (optind != argc - 1) {
		oci_error(g, "delete: expected one container id");
		return OCI_USAGE;
	}
	if (load(g, argv[optind], &st) < 0)
		return 1;
	status = oci_state_status(&st);
	/* a created container never ran: runc deletes it without --force */
	if (strcmp(status, "stopped") && strcmp(status, "created") && !force) {
		oci_error(g, "cannot delete container %s that is not stopped: %s",
			  st.id, status);
		oci_state_free(&st);
		return 1;
	}
	if (strcmp(status, "stopped"))
		corral_container_ctl(st.ctl, "kill-all 9", reply, sizeof(reply), &err);
	if (wait_monitor(&st) < 0) {
		oci_error(g, "the monitor of container %s did not exit within %d ms",
			  st.id, MONITOR_EXIT_MS);
		r = -1;
	}
	if (r == 0 && oci_state_remove(&st, &err) < 0) {
		oci_error(g, "%s", err.msg);
		r = -1;
	}
	oci_state_free(&st);
	return r < 0 ? 1 : 0;
}

int oci_ps(const struct oci_global *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' }, { NULL, 0, NULL, 0 },
	};
	struct oci_state st;
	char *reply, *tok, *save = NULL;
	bool json = false;
	json_t *a;
	int opt;

	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+f:", opts, NULL)) != -1) {
		if (opt != 'f' || (strcmp(optarg, "json") && strcmp(optarg, "table"))) {
			oci_error(g, "ps: --format json|table");
			return OCI_USAGE;
		}
		json = !strcmp(optarg, "json");
	}
	if (optind >= argc) {
		oci_error(g, "ps: expected a container id");
		return OCI_USAGE;
	}
	if (load(g, argv[optind], &st) < 0)
		return 1;
	reply = malloc(PS_REPLY_MAX);
	if (!reply) {
		oci_error(g, "ps: out of memory");
		oci_state_free(&st);
		return 1;
	}
	if (ask(g, &st, "ps", reply, PS_REPLY_MAX) < 0) {
		free(reply);
		oci_state_free(&st);
		return 1;
	}
	oci_state_free(&st);
	a = json_array();
	strtok_r(reply, " ", &save);	/* "ok" */
	while ((tok = strtok_r(NULL, " ", &save)))
		json_array_append_new(a, json_integer(atoi(tok)));
	if (json) {
		json_dumpf(a, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		size_t i;
		json_t *v;

		puts("PID");
		json_array_foreach(a, i, v)
			printf("%lld\n", (long long)json_integer_value(v));
	}
	json_decref(a);
	free(reply);
	return 0;
}

static int freeze(const struct oci_global *g, int argc, char **argv, const char *req)
{
	struct oci_state st;
	const char *id = only_id(g, argc, argv);
	int r;

	if (!id || load(g, id, &st) < 0)
		return 1;
	r = ask(g, &st, req, NULL, 0);
	oci_state_free(&st);
	return r < 0 ? 1 : 0;
}

int oci_pause(const struct oci_global *g, int argc, char **argv)
{
	return freeze(g, argc, argv, "pause");
}

int oci_resume(const struct oci_global *g, int argc, char **argv)
{
	return freeze(g, argc, argv, "resume");
}

/*
 * update --resources FILE|-: memory.limit, pids.limit, cpu.quota/period,
 * never above what the operator's policy gave the container.
 */
int oci_update(const struct oci_global *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "resources", required_argument, NULL, 'r' }, { NULL, 0, NULL, 0 },
	};
	struct corral_err err = { 0 };
	struct oci_operator op;
	struct oci_spec s = { .net_fd = -1 };
	struct oci_state st;
	const char *res = NULL;
	json_error_t je;
	json_t *o;
	json_int_t mem, pids, quota, period;
	double cpus = 0;
	char req[128];
	int opt, r;

	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+r:", opts, NULL)) != -1) {
		if (opt != 'r') {
			oci_error(g, "update: only --resources FILE|- is supported");
			return OCI_USAGE;
		}
		res = optarg;
	}
	if (!res || optind != argc - 1) {
		oci_error(g, "update: expected --resources FILE|- ID");
		return OCI_USAGE;
	}
	if (load(g, argv[optind], &st) < 0)
		return 1;
	o = !strcmp(res, "-") ? json_loadf(stdin, 0, &je) : json_load_file(res, 0, &je);
	r = o ? 0 : corral_set_err(&err, -EINVAL, "--resources %s:%d: %s", res,
				   je.line, je.text);
	mem = json_integer_value(json_object_get(json_object_get(o, "memory"), "limit"));
	pids = json_integer_value(json_object_get(json_object_get(o, "pids"), "limit"));
	quota = json_integer_value(json_object_get(json_object_get(o, "cpu"), "quota"));
	period = json_integer_value(json_object_get(json_object_get(o, "cpu"), "period"));
	if (quota > 0 && period > 0)
		cpus = (double)quota / period;
	json_decref(o);
	if (r == 0)
		r = oci_operator_load(&op, g->config, &err);
	if (r == 0) {
		r = oci_spec_load(&op, st.bundle, st.config, &s, &err);
		oci_operator_free(&op);
	}
	if (r == 0 && ((mem > 0 && s.p.memory_bytes && (uint64_t)mem > s.p.memory_bytes) ||
		       (pids > 0 && s.p.pids && (uint64_t)pids > s.p.pids) ||
		       (cpus > 0 && s.p.cpus > 0 && cpus > s.p.cpus)))
		r = corral_set_err(&err, -EPERM, "update: a limit above what the "
				   "container was created with is refused");
	oci_spec_free(&s);
	if (r < 0) {
		oci_error(g, "%s", err.msg);
		oci_state_free(&st);
		return 1;
	}
	snprintf(req, sizeof(req), "update %lld %lld %.4f", mem > 0 ? (long long)mem : 0,
		 pids > 0 ? (long long)pids : 0, cpus);
	r = ask(g, &st, req, NULL, 0);
	oci_state_free(&st);
	return r < 0 ? 1 : 0;
}

/* The runtime spec's features document: what this runtime accepts. */
int oci_features(const struct oci_global *g, int argc, char **argv)
{
	json_t *o;

	(void)g;
	(void)argc;
	(void)argv;
	o = json_pack("{s:s, s:s, s:[], s:[s,s,s,s,s,s,s,s], s:{s:[s,s,s,s,s,s,s], "
		      "s:[], s:{s:b, s:b, s:b}, s:{s:b}, s:{s:b}, s:{s:b}}, "
		      "s:{s:s, s:s, s:s}}",
		      "ociVersionMin", "1.0.0", "ociVersionMax", OCI_VERSION,
		      "hooks",
		      "mountOptions", "bind", "rbind", "ro", "rw", "nosuid", "nodev",
		      "noexec", "private",
		      "linux",
		      "namespaces", "user", "pid", "network", "ipc", "uts", "mount",
		      "cgroup",
		      "capabilities",
		      "cgroup", "v1", 1, "v2", 1, "systemd", 0,
		      "seccomp", "enabled", 1,
		      "apparmor", "enabled", 0,
		      "selinux", "enabled", 0,
		      "annotations",
		      "io.corral.policy", "a policy of the operator's policies_dir",
		      "io.corral.allow", "egress allowed by name, through corral's proxy",
		      "io.corral.runtime", "corral");
	if (!o)
		return 1;
	json_dumpf(o, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(o);
	return 0;
}
