/* run.c - corral run: one command, one fresh sandbox. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char run_usage[] =
"Usage: corral run [OPTIONS] [--] COMMAND [ARG...]\n"
"\n"
"Run COMMAND in a fresh sandbox and wait for it.  Inside, it is uid 1000\n"
"(\"agent\") with no capabilities, in new user, mount, pid, net, ipc, uts and\n"
"cgroup namespaces; it sees a read-only host /usr, a generated /etc, a\n"
"private /tmp and /home/agent, no network but loopback, and its working\n"
"directory is /workspace.  Landlock, a seccomp deny list and cgroup limits\n"
"(rlimits where no cgroup can be had) apply on top.\n"
"\n"
"Options (flags override the policy file, whatever their order):\n"
"  --policy FILE        JSON policy; default: the built-in default policy.\n"
"                       Repeatable: each file over the one before, a key's\n"
"                       value replacing theirs (objects merged key by key,\n"
"                       a list replaced whole: \"tripwires\": [] leaves none)\n"
"  --settings FILE      an srt (Anthropic sandbox-runtime) settings file,\n"
"                       translated to a policy (after --policy) whose lists\n"
"                       are added to the policy's, not replacing them; what\n"
"                       did not map is said on stderr, key by key; its\n"
"                       denyRead and denyWrite are judged in the views of\n"
"                       --policy, --workspace, --ro and --rw too\n"
"  --workspace DIR      show DIR at /workspace, copy-on-write: the sandbox\n"
"                       may change its view, the host copy is never written\n"
"                       (without it /workspace is an empty tmpfs)\n"
"  --ro HOST[:PATH]     bind HOST read-only at PATH (default: the same path)\n"
"                       (a relative HOST is the working directory's; what\n"
"                       it resolves to may hold no ':')\n"
"  --rw HOST[:PATH]     bind HOST writable at PATH: changes reach the host\n"
"                       (a bind under another is mounted on it, whatever the\n"
"                       order: --rw /data --ro /data/secret keeps the latter\n"
"                       read-only; a path given to both is read-only); while\n"
"                       one is mounted no setuid or setgid mode is set\n"
"                       anywhere inside (chmod u+s: EPERM, recorded; so is\n"
"                       chmod 755 of a setgid directory, which GNU chmod\n"
"                       asks as 02755).  What the agent writes lands as\n"
"                       HOST's owner; as root, a root-owned HOST is never\n"
"                       mapped for writing (chown it to the user whose\n"
"                       files it should hold)\n"
"  --env NAME=VALUE     set a variable inside (the environment is cleared;\n"
"                       only PATH HOME LANG TERM TMPDIR USER are set)\n"
"  --env-pass NAME      copy NAME from corral's own environment\n""  --cwd DIR            the working directory inside, an absolute path\n"
"                       (default: /workspace, or the image's WorkingDir)\n"
"  --timeout DURATION   wall-clock limit for the whole process tree\n"
"                       (\"30\", \"30s\", \"500ms\", \"2m\"; default: none)\n"
"  --memory SIZE        memory limit (\"256M\", \"2G\"; 0 = none; default 2G)\n"
"  --pids N             limit on processes and threads (0 = none;\n"
"                       default 1024)\n"
"  --open-files N       each process's open files (RLIMIT_NOFILE); N x\n"
"                       pids must fit in a quarter of the host's file\n"
"                       table (default: that quarter over pids, >= 1024)\n"
"  --cpus N.N           CPU bandwidth in cores (0 = none, the default)\n"
"  --disk SIZE          size of the writable tmpfs (/tmp, home, workspace\n"
"                       changes, all together; default 1G)\n"
"                       Defaults are the built-in policy's\n"
"                       (policies/default.json); a --policy's replace them\n"
"  --output-limit SIZE  with --json: bytes kept per stream (default 1M)\n"
"  --net none|proxy     network: \"none\" (loopback only, the default) or\n"
"                       \"proxy\" (out through corral's proxy, only to the\n"
"                       destinations --allow names)\n"
"  --allow PATTERN      with --net proxy, let the sandbox reach PATTERN\n"
"                       (repeatable): a name (\"pypi.org\"), its subdomains\n"
"                       (\"*.example.com\", not example.com itself), an IPv4\n"
"                       address or network (\"10.1.2.0/24\"), an IPv6 one in\n"
"                       brackets (\"[2001:db8::/32]\"); each with an optional\n"
"                       :PORT, ports 80 and 443 without one.  \"*\" and\n"
"                       whole top-level domains are refused\n"
"  --deny PATTERN       refuse PATTERN even where --allow covers it; deny\n"
"                       wins (repeatable; without :PORT, every port)\n"
"                       Inside, HTTP_PROXY/HTTPS_PROXY point at an HTTP\n"
"                       proxy on 127.0.0.1:3128 (CONNECT; the TLS SNI must\n"
"                       match the name), ALL_PROXY at SOCKS5 on :1080, and\n"
"                       DNS on 127.0.0.1:53 answers only allowed names.\n"
"                       Transparent (policy network.transparent, on by\n"
"                       default): every TCP connection is redirected to\n"
"                       the proxy with nftables and judged by its TLS SNI\n"
"                       or HTTP Host; allowed names resolve to token\n"
"                       addresses (100.64.0.0/16) that map back to them;\n"
"                       UDP (but DNS) and ICMP to other addresses are\n"
"                       dropped and are egress.denied events\n"
"  --events FILE        append every event of the run (exec, egress allowed\n"
"                       and denied, denied syscalls, tripwires, aborts) as\n"
"                       JSON lines to FILE, each with the SHA-256 of the\n"
"                       line before (`corral audit verify FILE`); refused\n"
"                       in an --rw bind, where the sandbox could rewrite it\n"
"  --tool-call ID       the tool call this run is; every event carries it as\n"
"                       \"call\" (default: the sandbox's id)\n"
"  --rootfs DIR         DIR is the sandbox's root instead of the host's /usr\n"
"                       (read-only; corral's /etc entries, /tmp, /home/agent,\n"
"                       /workspace, /dev and /proc over it as always)\n"
"  --image REF          the root is image REF from `corral image import`\n"
"                       (NAME[:TAG], NAME@sha256:HEX, sha256:HEX); its Env\n"
"                       and WorkingDir apply unless set here (--env, --cwd),\n"
"                       its Entrypoint comes first and its Cmd when no\n"
"                       COMMAND is given\n"
"  --root-writable      with --rootfs or --image: the root is copy-on-write\n"
"                       (apt-get, pip into system paths), discarded with the\n"
"                       sandbox, within --disk (policy filesystem.root_writable)\n"
"  --user root|agent    root: with --rootfs or --image and ids 0-65535 mapped,\n"
"                       run as uid 0 of the sandbox's user namespace with\n"
"                       CAP_CHOWN, DAC_OVERRIDE, FOWNER, FSETID, SETUID and\n"
"                       SETGID there (dpkg, apt-get install); never the\n"
"                       host's root (policy identity.user; default agent)\n"
"  --state-dir DIR      with --image: the image store is DIR/images, as for\n"
"                       `corral image --state-dir` (default: see corral image)\n"
"  --export-to DIR      after the command, write the workspace as the sandbox\n"
"                       left it to DIR (a new directory)\n"
"  --apply              after the command, write its changes onto the\n"
"                       workspace itself; a file the host changed since the\n"
"                       start is not overwritten (a conflict, reported)\n"
"  --patch FILE         after the command, write its changes to FILE as a\n"
"                       git patch (`git apply FILE`; binary files included),\n"
"                       made beside it and renamed onto FILE once whole: a\n"
"                       failed export leaves FILE as it was\n"
"                       Exports never follow a symlink, write no device\n"
"                       node, fifo, socket or setuid bit, and hold back a\n"
"                       symlink that leaves the tree and every change that\n"
"                       would make a host tool run code later (.git/config\n"
"                       keys such as core.fsmonitor, .git/hooks, filter\n"
"                       drivers in .gitattributes, .gitmodules commands,\n"
"                       .vscode tasks and settings, .envrc, .devcontainer;\n"
"                       policy section \"export\"), each with its reason\n"
"                       As root (sudo, a root CI runner), an export writes\n"
"                       as the user who owns where it goes, not as root:\n"
"                       --apply as the workspace's owner, --export-to DIR\n"
"                       and --patch FILE as the owner of the directory DIR\n"
"                       or FILE is made in (the first user other than root\n"
"                       who owns a directory or symlink on its path, who\n"
"                       could lead it elsewhere), with that user's\n"
"                       permissions: what they could not write is a\n"
"                       conflict or an error, never written as root (said on\n"
"                       stderr; --json: export.written_as).  Root's own\n"
"                       directories are written as root, as before\n"
"  --allow-risky GLOB   let changes at paths matching GLOB through the\n"
"                       hold-back table (each one an event); repeatable.\n"
"                       A halted sandbox's changes are not exported\n"
"  -t, --tty            give the command a terminal: a pty made inside the\n"
"                       sandbox (its own devpts), relayed to yours, which\n"
"                       is raw while it runs and restored after.  Use it for\n"
"                       an interactive shell, an editor, a REPL: job control,\n"
"                       ^C and ^Z reach the sandbox's foreground job, the\n"
"                       window size follows yours.  Input that ends (a pipe,\n"
"                       /dev/null) is then typed as ^D, as by script(1), so\n"
"                       that a shell given it ends.  Without it (the default;\n"
"                       scripts, pipes, --json) stdin, stdout and stderr are\n"
"                       pipes corral relays: no fd of yours enters the sandbox\n"
"  --json               capture stdout and stderr and print one JSON object:\n"
"                       status, exit_code, signal, reason, stdout, stderr,\n"
"                       *_truncated, duration_ms, cpu_ms, max_rss_kb, layers\n"
"  -h, --help           this text\n"
"\n"
"Abort criteria (policy section \"abort\"): when one is met the supervisor\n"
"halts the sandbox by itself: it freezes it, records why, then kills it or\n"
"holds it frozen (on_abort), and the result's status is \"halted\".\n"
"\n"
"Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the command\n"
"once it runs, but one corral's caller ignores stays ignored (nohup's\n"
"SIGHUP; SIGINT and SIGQUIT of a script's `corral run ... &`).  One that\n"
"comes before (policy, image, cgroup, namespaces, mounts) ends the run\n"
"there: the command is not started, nothing of the sandbox is left, and\n"
"the exit status is 128+N, as below.  One that comes once the command\n"
"has ended, while --export-to, --apply or --patch is being done, cuts the\n"
"export short at once, even within a large file: what it wrote stays,\n"
"each file whole, the one it was writing left out; --patch's FILE is left\n"
"as it was; the exit status is 128+N.\n"
"\n"
"Exit status: the command's own; 128+N if it died of signal N or N came\n"
"before it started (137 when the memory limit or an abort killed it); 124 on\n"
"timeout; 125 if corral could not build the sandbox (a bad option or\n"
"policy, a missing file or kernel feature; as docker run's 125); 126 the\n"
"command cannot be executed; 127 not found.  A halted run never exits 0:\n"
"if its command had ended by itself before the criterion was read, the\n"
"command's own status, or 1 where that was 0.\n"
"Output that could not all be written to corral's stdout or stderr (a\n"
"full disk, ulimit -f; not a reader gone, as `| head`), or a --json\n"
"result that could not, or events the --events file did not take, is\n"
"said on stderr, and a 0 becomes 125.\n"
"With --json, an error of corral's before a result (a bad option, a\n"
"policy) is one object on stdout too: {\"error\": CODE, \"detail\": the\n"
"sentence stderr got}, CODE \"usage\", \"policy\", \"not_found\" (a file\n"
"named that is not there) ... or \"failed\" (docs/API.md, \"The CLI's own\n"
"errors\").\n"
"Without --json, how the command ended is told on stderr whenever it did\n"
"not simply exit, or a limit (the disk full, an rlimit's ENOMEM, EMFILE),\n"
"the network's policy or a denial lies behind a non-zero exit.\n"
"\n"
"Docker's -e, -v, -w, -it, --rm: corral's --env, --ro/--rw, --cwd, -t;\n"
"every run's sandbox is removed when its command ends.\n"
"\n"
"Examples:\n"
"  corral run -- python3 -c 'print(6 * 7)'\n"
"  corral run --workspace . --memory 512M --timeout 60s -- make test\n"
"  corral run --workspace . --patch agent.diff -- ./agent_step.sh\n"
"  corral run --net proxy --allow pypi.org --allow '*.pythonhosted.org' \\\n"
"      -- pip download requests\n"
"  corral run --json --env MODE=ci --workspace . -- ./check.sh | jq .status\n"
"  corral run -t --workspace . -- bash\n";

enum {
	OPT_POLICY = 256, OPT_WORKSPACE, OPT_RO, OPT_RW, OPT_ENV, OPT_ENV_PASS,
	OPT_TIMEOUT, OPT_MEMORY, OPT_PIDS, OPT_OPEN_FILES, OPT_CPUS, OPT_DISK, OPT_OUTPUT, OPT_JSON,
	OPT_NET, OPT_ALLOW, OPT_DENY, OPT_EVENTS, OPT_TOOL_CALL,
	OPT_ROOTFS, OPT_IMAGE, OPT_ROOT_WRITABLE, OPT_USER, OPT_STATE_DIR,
	OPT_EXPORT_TO, OPT_APPLY, OPT_PATCH, OPT_ALLOW_RISKY, OPT_SETTINGS,
	OPT_CWD,	/* run_options[] is in this order: its name is at opt - OPT_POLICY */
};

static const struct option run_options[] = {
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "ro", required_argument, NULL, OPT_RO },
	{ "rw", required_argument, NULL, OPT_RW },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "env-pass", required_argument, NULL, OPT_ENV_PASS },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "pids", required_argument, NULL, OPT_PIDS },
	{ "open-files", required_argument, NULL, OPT_OPEN_FILES },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "output-limit", required_argument, NULL, OPT_OUTPUT },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "net", required_argument, NULL, OPT_NET },
	{ "allow", required_argument, NULL, OPT_ALLOW },
	{ "deny", required_argument, NULL, OPT_DENY },
	{ "events", required_argument, NULL, OPT_EVENTS },
	{ "tool-call", required_argument, NULL, OPT_TOOL_CALL },
	{ "rootfs", required_argument, NULL, OPT_ROOTFS },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "root-writable", no_argument, NULL, OPT_ROOT_WRITABLE },
	{ "user", required_argument, NULL, OPT_USER },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "export-to", required_argument, NULL, OPT_EXPORT_TO },
	{ "apply", no_argument, NULL, OPT_APPLY },
	{ "patch", required_argument, NULL, OPT_PATCH },
	{ "allow-risky", required_argument, NULL, OPT_ALLOW_RISKY },
	{ "settings", required_argument, NULL, OPT_SETTINGS },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "tty", no_argument, NULL, 't' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/*
 * A host path given relative (--workspace ., --rw ./out:/out) is the
 * caller's, named from its working directory, as --rootfs and `corral
 * create --workspace` take it: resolved here, before the library, whose
 * policy files have no working directory to be relative to and so take
 * absolute paths only.  An absolute one is passed on as written.  bind:
 * only the part before a ':' is the host's.  *out is NULL for an absolute
 * path, else the resolved spelling to use instead (free it).
 */
static int host_path_abs(const char *arg, bool bind, char **out,
			 struct corral_err *err)
{
	const char *colon = bind ? strchr(arg, ':') : NULL;
	char *host, *abs;
	int r = 0;

	*out = NULL;
	if (arg[0] == '/' || arg[0] == '\0')
		return 0;	/* the library names what is wrong with "" */
	host = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
	if (!host)
		return corral_set_err(err, -ENOMEM, "out of memory resolving %s", arg);
	abs = realpath(host, NULL);
	if (!abs)
		r = corral_set_err(err, -errno, "%s: %s (a relative path is taken from "
				   "the working directory)", host, strerror(errno));
	/*
	 * The result is read as HOST[:PATH] again: a ':' of the working
	 * directory's name or of a symlink's target would split it there,
	 * and bind a host path the caller never named (the part before).
	 */
	else if (bind && strchr(abs, ':'))
		r = corral_set_err(err, -EINVAL, "%s is %s, whose ':' cannot be a "
				   "bind's HOST (HOST:PATH): name it by a path "
				   "without one", host, abs);
	else if (asprintf(out, "%s%s", abs, colon ? colon : "") < 0) {
		*out = NULL;
		r = corral_set_err(err, -ENOMEM, "out of memory resolving %s", arg);
	}
	free(abs);
	free(host);
	return r;
}

/*
 * EMFILE before the sandbox is up is the caller's open-files limit (main
 * raised the soft one to the hard one): a run needs a few dozen fds, and
 * "Too many open files" alone does not say whose limit or how to raise it.
 */
static const char *nofile_hint(void)
{
	static char hint[96];
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
		return "";
	snprintf(hint, sizeof(hint), " (corral's open-files limit is %llu: raise "
		 "it with ulimit -n)", (unsigned long long)rl.rlim_max);
	return hint;
}

/*
 * An option getopt refused ('?' unknown, ':' without its value), said as
 * the client verbs say it; a docker user's option with corral's spelling.
 */
static void bad_option(int opt, char **argv)
{
	const char *arg = argv[optind - 1];
	char s[3] = { '-', (char)optopt, 0 };
	const char *hint;

	if (opt == ':') {
		cli_error("option \"%s\" needs a value; see `corral run --help`", arg);
		cli_json_amend("usage", NULL, 0);
		return;
	}
	if (optopt > 0 && optopt < 256)
		arg = s;	/* argv's may be a cluster, "-it" */
	hint = docker_flag_hint("run", arg);
	cli_error("unknown option \"%s\"%s%s; see `corral run --help`", arg,
		  hint ? ": " : "", hint ? hint : "");
	cli_json_amend("usage", NULL, 0);
}

/* Apply one flag to the policy; the policy file was loaded before. */
static int apply_flag(struct corral_policy *p, int opt, const char *arg,
		      struct corral_err *err)
{
	char *abs;
	int r;

	switch (opt) {
	case OPT_WORKSPACE:
	case OPT_RO:
	case OPT_RW:
		r = host_path_abs(arg, opt != OPT_WORKSPACE, &abs, err);
		if (r < 0)
			return r;
		if (opt == OPT_WORKSPACE)
			r = corral_policy_set_workspace(p, abs ? abs : arg, err);
		else
			r = corral_policy_add_bind(p, abs ? abs : arg, opt == OPT_RW, err);
		free(abs);
		return r;
	case OPT_ENV:
		return corral_policy_set_env(p, arg, err);
	case OPT_ENV_PASS:
		r = corral_policy_pass_env(p, arg, err);
		/*
		 * Not an error: a policy's env.pass may list a name not always
		 * set, and this is the same list.  But the flag was typed for
		 * this run, and the command would find nothing, unsaid.
		 */
		if (r == 0 && !getenv(arg))
			cli_error("note: --env-pass %s: %s is not set in corral's "
				  "environment: the sandbox gets no %s", arg, arg, arg);
		return r;
	case OPT_TIMEOUT:
		return corral_policy_set_limit(p, "timeout", arg, err);
	case OPT_MEMORY:
		return corral_policy_set_limit(p, "memory", arg, err);
	case OPT_PIDS:
		return corral_policy_set_limit(p, "pids", arg, err);
	case OPT_OPEN_FILES:
		return corral_policy_set_limit(p, "open_files", arg, err);
	case OPT_CPUS:
		return corral_policy_set_limit(p, "cpus", arg, err);
	case OPT_DISK:
		return corral_policy_set_limit(p, "disk", arg, err);
	case OPT_OUTPUT:
		return corral_policy_set_limit(p, "output", arg, err);
	case OPT_NET:
		return corral_policy_set_net(p, arg, err);
	case OPT_ALLOW:
		return corral_policy_add_allow(p, arg, err);
	case OPT_DENY:
		return corral_policy_add_deny(p, arg, err);
	case OPT_CWD:
		return corral_policy_set_workdir(p, arg, err);
	}
	return 0;
}

/*
 * --rootfs DIR, made absolute by the directory opened (O_PATH: the mount
 * at the name is entered, nothing of it asked) and judged before
 * anything there is stat'ed: realpath()'s lstat of a FUSE mount there
 * whose daemon never answers held corral, SIGTERM or not.
 */
static int rootfs_path(struct corral_policy *p, const char *rootfs, struct corral_err *err)
{
	char self[64], abs[PATH_MAX], what[PATH_MAX + 16], *layer = abs;
	ssize_t n;
	int fd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC), r;

	if (fd < 0)
		return corral_set_err(err, -errno, "--rootfs %s: %s", rootfs, strerror(errno));
	snprintf(what, sizeof(what), "--rootfs %s", rootfs);
	r = corral_root_fd_check(fd, what, err);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = r == 0 ? readlink(self, abs, sizeof(abs) - 1) : 0;
	if (n < 0)
		r = corral_set_err(err, -errno, "--rootfs %s: %s", rootfs, strerror(errno));
	close(fd);
	if (r < 0)
		return r;
	abs[n] = '\0';
	return corral_policy_set_root(p, &layer, 1, err);
}

/*
 * --rootfs DIR or --image REF: the root, and what the image asks of the
 * run; *argv_out borrows *img's strings (free both after the run).
 */
static int apply_root(struct corral_policy *p, const char *rootfs, const char *image,
		      const char *state_dir, char *const *argv, struct corral_image **img, char ***argv_out,
		      struct corral_err *err)
{
	struct corral_image_store *s;
	int r;

	if (rootfs && image)
		return corral_set_err(err, -EINVAL, "--rootfs and --image: one root, not two");
	if (rootfs)
		return rootfs_path(p, rootfs, err);
	r = corral_image_store_open(&s, state_dir, err);
	if (r < 0)
		return r;
	r = corral_image_resolve(s, image, img, err);
	corral_image_store_close(s);
	if (r == 0)
		r = corral_policy_apply_image(p, *img, err);
	if (r == 0)
		r = corral_image_argv(*img, argv, argv_out, err);
	return r;
}

/* Export flags: where the changes go; false when the flag is not one. */
static bool export_flag(struct corral_export_opts *x, int opt, char *arg,
			char **risky)
{
	switch (opt) {
	case OPT_EXPORT_TO:
		x->to = arg;
		return true;
	case OPT_APPLY:
		x->apply = true;
		return true;
	case OPT_PATCH:
		x->patch = arg;
		return true;
	case OPT_ALLOW_RISKY:
		if (x->nallow_risky < 64)
			risky[x->nallow_risky] = arg;
		x->nallow_risky++;
		return true;
	}
	return false;
}

/*
 * A held or conflicting change: its path is a name the sandbox chose, its
 * reason may quote it; neither may drive the terminal.
 */
static void print_entry(const char *what, json_t *e)
{
	json_t *path = json_object_get(e, "path"), *reason = json_object_get(e, "reason");
	char *p = printable(json_string_value(path) ?: "?", json_string_value(path) ?
			    json_string_length(path) : 1);
	char *r = printable(json_string_value(reason) ?: "", json_string_length(reason));

	fprintf(stderr, "corral: export: %s %s: %s\n", what, p ? p : "(out of memory)",
		r ? r : "(out of memory)");
	free(p);
	free(r);
}

/* Without --json: what was held back and what conflicted, on stderr. */
static void print_export(const struct corral_result *res)
{
	json_t *rep = res->export_report ? json_loads(res->export_report, 0, NULL) : NULL;
	static const char *const lists[] = { "held", "conflicts" };
	json_t *error, *as;
	char *why;

	if (!rep)
		return;
	cli_ground_terminal(stderr);
	/* root's export, made as the destination's owner (export.c: pick_owner) */
	as = json_object_get(rep, "written_as");
	if (json_is_object(as))
		fprintf(stderr, "corral: export: written as uid %lld gid %lld, who owns "
			"where it goes\n",
			(long long)json_integer_value(json_object_get(as, "uid")),
			(long long)json_integer_value(json_object_get(as, "gid")));
	for (size_t l = 0; l < 2; l++) {
		json_t *a = json_object_get(rep, lists[l]), *e;
		size_t i;

		json_array_foreach(a, i, e)
			print_entry(l ? "conflict at" : "held back", e);
	}
	/* an error names the path it failed at */
	error = json_object_get(rep, "error");
	why = json_is_string(error) ? printable(json_string_value(error),
						json_string_length(error)) : NULL;
	fprintf(stderr, "corral: export: %zu written, %zu held back, %zu conflicts%s%s\n",
		json_array_size(json_object_get(rep, "exported")),
		json_array_size(json_object_get(rep, "held")),
		json_array_size(json_object_get(rep, "conflicts")),
		error ? "; failed: " : "", error ? (why ? why : "(out of memory)") : "");
	free(why);
	json_decref(rep);
}

/*
 * The reason may quote what the caller did not write: an image's
 * Entrypoint that is not there ("not found: ..."), a name the sandbox
 * made up.  Its control bytes are shown, never sent to the terminal.
 */
static void print_end(const struct corral_result *res)
{
	char *safe;

	/* output lost on its way to the caller is said, whatever else */
	if (!res->output_errno &&
	    !cli_end_worth_telling(corral_status_name(res->status), res->exit_code,
				   res->reason))
		return;
	safe = printable(res->reason, strlen(res->reason));
	cli_ground_terminal(stderr);
	fprintf(stderr, "corral: %s\n", safe ? safe : "(out of memory)");
	free(safe);
}

/*
 * `corral run -- ./step.sh` or `-- python3 step.py` in a project's
 * directory: the command runs in /workspace, empty without --workspace,
 * and fails there ("not found", python's "can't open file") with nothing
 * to say why the file the user sees is not there.  When the command
 * failed in the default /workspace, had none, and an argument is a
 * relative path that exists here, say so once.
 */
static bool workspace_hint(const struct corral_policy *p, char *const *argv,
			   int code)
{
	struct stat st;

	if (code == 0 || p->workspace || p->workspace_layer || p->workdir)
		return false;
	for (int i = 0; i < 8 && argv[i]; i++) {
		const char *a = argv[i];

		if (a[0] == '-' || a[0] == '/' || (!strchr(a, '/') && !strchr(a, '.')))
			continue;
		if (fstatat(AT_FDCWD, a, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		cli_error("note: %s is in this directory, not in the sandbox's /workspace, which is empty without --workspace: `corral run --workspace . ...` shows this directory there",
			  a);
		return true;
	}
	return false;
}

/*
 * `corral run ubuntu bash`, docker's order: "ubuntu" is looked up as a
 * command on the host's /usr and is not found.  When the first word was
 * not found and no root was named, say whether an image of that name is
 * in the store (then --image NAME is what was meant), or, for a bare
 * name, how images come in.  The store is only read, never made, and never waited for (an
 * import may hold it for minutes): busy, nothing is said.
 */
/* The PATH the command was given, when not corral's own (NULL then). */
static const char *given_path(const struct corral_policy *p)
{
	for (size_t i = p->nenv; i-- > 0;)
		if (!strcmp(p->env[i].name, "PATH"))
			return p->env[i].value;
	for (size_t i = 0; i < p->nenv_pass; i++)
		if (!strcmp(p->env_pass[i], "PATH"))
			return getenv("PATH");
	return NULL;
}

static void image_hint(const struct corral_policy *p, const char *state_dir,
		       const struct corral_result *res, char *const *argv)
{
	struct corral_policy q;
	struct corral_image *img = NULL;
	struct corral_err err = { 0 };
	char want[CORRAL_ERR_MAX], *store;
	struct stat st;
	int r = -ENOENT;

	/* a path is no image's name; "ghcr.io/x/y" may be one, "./x" not */
	if (p->nroot_layers || corral_result_exit_code(res) != 127 ||
	    argv[0][0] == '/' || argv[0][0] == '.')
		return;
	snprintf(want, sizeof(want), "not found: %s: ", argv[0]);
	if (strncmp(res->reason, want, strlen(want)))
		return;
	store = corral_image_store_path(state_dir);
	corral_policy_init(&q);
	q.image = strdup(argv[0]);
	if (!q.image)
		r = -ENOMEM;	/* nothing known: nothing said */
	else if (store && stat(store, &st) == 0)
		r = corral_policy_use_image(&q, state_dir, &img, &err);
	if (r == 0)
		cli_error("note: %s is an image in the store, not a command: "
			  "`corral run --image %s -- COMMAND` runs on it", argv[0], argv[0]);
	/* `--env PATH=/opt/x/bin`: the host's /usr is not where it looked */
	else if (r == -ENOENT && !strchr(argv[0], '/') && given_path(p))
		cli_error("note: %s is in no directory of the PATH the command "
			  "was given (%s), and no image of that name is in the "
			  "store (`corral image ls`)", argv[0], given_path(p));
	else if (r == -ENOENT && !strchr(argv[0], '/'))
		cli_error("note: %s is no command on the host's /usr, and no image "
			  "of that name is in the store (`corral image ls`); an image "
			  "comes in with `corral image import FILE` (an OCI layout, an "
			  "oci-archive or a `docker save` tarball), then `corral run "
			  "--image NAME -- COMMAND`", argv[0]);
	corral_image_free(img);
	corral_policy_free(&q);
	free(store);
}

/* ---- a signal before the sandbox's setup --------------------------------- */

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NSTOP (sizeof(stop_signals) / sizeof(stop_signals[0]))

struct stops {
	struct sigaction old[NSTOP];
	sigset_t mask;		/* the caller's, while corral_run has the signals */
	bool handed;
};

/*
 * Until corral_run takes them (hand_stops_over), nothing of the sandbox
 * exists: the policy is read, the image looked up (which waits while an
 * import holds the store).  A signal then ends corral at once, as it
 * would have, but says so the way corral_run does (result_not_started).
 * Only syscalls: it runs in a signal handler.  What srt's settings made
 * on the host is removed first (else left there, an empty .envrc or
 * .claude/settings.json in the user's project).
 */
static const struct corral_srt_made *volatile made_on_stop;

static void stop_before_setup(int sig)
{
	const char *m = sig == SIGINT ? "corral: SIGINT during setup: the command was not started\n" :
		sig == SIGTERM ? "corral: SIGTERM during setup: the command was not started\n" :
		sig == SIGHUP ? "corral: SIGHUP during setup: the command was not started\n" :
		"corral: SIGQUIT during setup: the command was not started\n";

	corral_srt_made_unmake(made_on_stop);
	if (write(2, m, strlen(m)) < 0)
		_exit(128 + sig);
	_exit(128 + sig);
}

/* One the caller ignores (nohup: SIGHUP) stays ignored. */
static void catch_stops(struct stops *st)
{
	struct sigaction sa = { .sa_handler = stop_before_setup };

	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < NSTOP; i++)
		if (sigaction(stop_signals[i], NULL, &st->old[i]) == 0 &&
		    st->old[i].sa_handler != SIG_IGN)
			sigaction(stop_signals[i], &sa, NULL);
}

/*
 * Blocked, then the caller's dispositions back: one that comes now stays
 * pending for corral_run's signalfd, which reads it before the spawn.
 */
static void hand_stops_over(struct stops *st)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < NSTOP; i++)
		sigaddset(&set, stop_signals[i]);
	if (sigprocmask(SIG_BLOCK, &set, &st->mask) == 0)
		st->handed = true;
	for (size_t i = 0; i < NSTOP; i++)
		sigaction(stop_signals[i], &st->old[i], NULL);
}

/*
 * After corral_run: one still pending came for the run after its last
 * read (corral_run's own unblock leaves them to us, as they were blocked
 * when it was called); the caller's mask back without it.
 */
static void take_stops_back(struct stops *st)
{
	struct timespec zero = { 0, 0 };
	sigset_t set;

	if (!st->handed)
		return;
	sigemptyset(&set);
	for (size_t i = 0; i < NSTOP; i++)
		if (!sigismember(&st->mask, stop_signals[i]))
			sigaddset(&set, stop_signals[i]);
	while (sigtimedwait(&set, NULL, &zero) > 0)
		;
	sigprocmask(SIG_SETMASK, &st->mask, NULL);
}

/* A flag that adds a view of the host: applied before srt's settings. */
static bool view_flag(int opt)
{
	return opt == OPT_WORKSPACE || opt == OPT_RO || opt == OPT_RW;
}

/* srt's settings: what each key became goes to stderr, one line each. */
static int load_settings(struct corral_policy *p, const char *path,
			 struct corral_srt_made **made)
{
	struct corral_err err = { 0 };
	char *report = NULL, *line, *save = NULL;

	if (corral_policy_load_srt_file(p, path, &report, made, &err) < 0) {
		cli_error("--settings: %s", err.msg);
		cli_json_policy_errno(err.code);
		return -1;
	}
	for (line = strtok_r(report, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* a C1 control or U+202E of the settings' strings, as text */
		char *safe = printable(line, strlen(line));

		fprintf(stderr, "corral: %s: %s\n", path, safe ? safe : "(out of memory)");
		free(safe);
	}
	free(report);
	return 0;
}

/*
 * The settings loaded with the stop signals held back: one that came
 * meanwhile ends corral once what they made is known to the handler,
 * which removes it.
 */
static int load_settings_held(struct corral_policy *p, const char *path,
			      struct corral_srt_made **made)
{
	sigset_t set, old;
	int r;

	sigemptyset(&set);
	for (size_t i = 0; i < NSTOP; i++)
		sigaddset(&set, stop_signals[i]);
	if (sigprocmask(SIG_BLOCK, &set, &old) < 0) {
		cli_error("sigprocmask: %s", strerror(errno));
		return -1;
	}
	r = load_settings(p, path, made);
	made_on_stop = *made;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}

static int run(int argc, char **argv, struct stops *st, struct corral_srt_made **made)
{
	struct corral_policy p;
	struct corral_result res;
	struct corral_err err = { 0 };
	struct corral_run_opts o = { .forward_signals = true };
	const char *settings_file = NULL, *rootfs = NULL, *image = NULL, *state_dir = NULL;
	struct corral_image *img = NULL;
	char **img_argv = NULL;
	struct corral_export_opts x = { 0 };
	char *risky[64];
	bool allow_flag = false, net_flag = false, json_lost = false;
	int opt, r, code, idx = -1;
	const char *prefix;

	/*
	 * First pass: only the --policy files, so flags override them.  Each
	 * over the one before, in order, its lists replacing theirs (as
	 * corral_json_merge): all of them are the invoker's, none a bound.
	 */
	corral_policy_init(&p);
	/* an error before --json is read (a policy's) is JSON all the same */
	cli_json_scan(argc, argv, "+ht", run_options, OPT_JSON);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+ht", run_options, &idx)) != -1) {
		/* before anything is loaded: the later passes see only whole names */
		prefix = option_abbreviated(argv, run_options, idx);
		if (prefix) {
			say_abbreviated("run", prefix, run_options[idx].name);
			corral_policy_free(&p);
			return EXIT_CORRAL;
		}
		if (value_is_dashes(argv, idx)) {
			cli_error("option \"--%s\" needs a value (got \"--\", which ends "
				  "the options); see `corral run --help`",
				  run_options[idx].name);
			cli_json_amend("usage", NULL, 0);
			corral_policy_free(&p);
			return EXIT_CORRAL;
		}
		idx = -1;
		if (opt == OPT_POLICY &&
		    corral_policy_load_file(&p, optarg, &err) < 0) {
			cli_error("%s", err.msg);
			cli_json_policy_errno(err.code);
			corral_policy_free(&p);
			return EXIT_CORRAL;
		}
		if (opt == OPT_SETTINGS)
			settings_file = optarg;
	}
	/*
	 * Then the views the flags add (--workspace, --ro, --rw), before the
	 * settings: srt's denyRead and denyWrite are judged against every
	 * view the sandbox gets, and a flag's was not there yet (`--settings
	 * s.json --workspace .` let the sandbox read the ./.env it denied).
	 * A --policy cannot replace them: it was loaded before.
	 */
	optind = 0;
	while ((opt = getopt_long(argc, argv, "+ht", run_options, NULL)) != -1) {
		if (view_flag(opt) && apply_flag(&p, opt, optarg, &err) < 0) {
			cli_error("--%s: %s", run_options[opt - OPT_POLICY].name, err.msg);
			corral_policy_free(&p);
			return EXIT_CORRAL;
		}
	}
	if (settings_file && load_settings_held(&p, settings_file, made) < 0) {
		corral_policy_free(&p);
		return EXIT_CORRAL;
	}

	optind = 0;
	while ((opt = getopt_long(argc, argv, "+:ht", run_options, NULL)) != -1) {
		if (opt == 'h') {
			fputs(run_usage, stdout);
			corral_policy_free(&p);
			return 0;
		}
		if (opt == '?' || opt == ':') {
			bad_option(opt, argv);
			corral_policy_free(&p);
			return EXIT_CORRAL;
		}
		if (opt == OPT_JSON) {
			o.capture = true;
			continue;
		}
		if (opt == 't') {
			o.tty = true;
			continue;
		}
		if (opt == OPT_EVENTS) {
			o.events_path = optarg;
			continue;
		}
		if (opt == OPT_TOOL_CALL) {
			if (corral_check_tool_call_id(optarg, &err) < 0) {
				cli_error("--tool-call: %s", err.msg);
				corral_policy_free(&p);
				return EXIT_CORRAL;
			}
			o.tool_call = optarg;
			continue;
		}
		if (opt == OPT_ROOTFS || opt == OPT_IMAGE) {
			*(opt == OPT_ROOTFS ? &rootfs : &image) = optarg;
			continue;
		}
		if (opt == OPT_ROOT_WRITABLE) {
			p.root_writable = true;
			continue;
		}
		if (opt == OPT_USER) {
			if (strcmp(optarg, "agent") && strcmp(optarg, "root")) {
				cli_error("--user: expected agent or root (got \"%s\")", optarg);
				corral_policy_free(&p);
				return EXIT_CORRAL;
			}
			p.root_inside = !strcmp(optarg, "root");
			continue;
		}
		if (opt == OPT_STATE_DIR) {
			state_dir = optarg;
			continue;
		}
		if (export_flag(&x, opt, optarg, risky)) {
			o.export = &x;
			continue;
		}
		if (view_flag(opt))
			continue;	/* applied before the settings */
		if (opt == OPT_ALLOW)
			allow_flag = true;
		if (opt == OPT_NET)
			net_flag = true;	/* --net none: offline on purpose */
		if (apply_flag(&p, opt, optarg, &err) < 0) {
			cli_error("--%s: %s", run_options[opt - OPT_POLICY].name, err.msg);
			corral_policy_free(&p);
			return EXIT_CORRAL;
		}
	}
	o.argv = argv + optind;
	if (!rootfs && !image)
		image = p.image;	/* the policy's filesystem.image; a flag wins */
	if ((rootfs || image) &&
	    apply_root(&p, rootfs, image, state_dir, o.argv, &img, &img_argv, &err) < 0) {
		cli_error("%s", err.msg);
		corral_image_free(img);
		corral_policy_free(&p);
		return EXIT_CORRAL;
	}
	if (img_argv)
		o.argv = img_argv;
	if (!o.argv[0]) {
		cli_error("no command given; usage: corral run [OPTIONS] -- COMMAND [ARG...]");
		cli_json_amend("usage", NULL, 0);
		corral_image_free(img);
		corral_policy_free(&p);
		return EXIT_CORRAL;
	}
	x.allow_risky = risky;
	if (x.nallow_risky > 64 || (x.nallow_risky && !x.to && !x.apply && !x.patch)) {
		cli_error(x.nallow_risky > 64 ? "--allow-risky: at most 64 patterns" :
			  "--allow-risky is for an export: add --export-to DIR, --apply or --patch FILE");
		free(img_argv);
		corral_image_free(img);
		corral_policy_free(&p);
		return EXIT_CORRAL;
	}
	if (o.tty && o.capture) {
		cli_error("--tty and --json exclude each other: a terminal's output is one stream, not stdout and stderr");
		cli_json_amend("usage", NULL, 0);
		free(img_argv);
		corral_image_free(img);
		corral_policy_free(&p);
		return EXIT_CORRAL;
	}
	if (allow_flag && p.net == CORRAL_NET_NONE) {
		cli_error("--allow needs network mode \"proxy\" (add --net proxy); in mode \"none\" nothing leaves the sandbox");
		free(img_argv);
		corral_image_free(img);
		corral_policy_free(&p);
		return EXIT_CORRAL;
	}
	/*
	 * A policy's allowlist without "mode": "proxy" is not an error (a
	 * file may be laid over one that sets the mode), but the run it
	 * ends in is offline: say so before the command's lookups fail.
	 */
	if (p.net == CORRAL_NET_NONE && p.nnet_allow && !net_flag)
		cli_error("note: the policy's network.allow lists %zu destination%s, "
			  "but network.mode is \"none\": nothing leaves the sandbox "
			  "(add --net proxy, or \"mode\": \"proxy\" to the policy)",
			  p.nnet_allow, p.nnet_allow == 1 ? "" : "s");

	hand_stops_over(st);
	/*
	 * ^Z: the modes its output set are reset before corral stops; with
	 * -t, ^Z is the pty's, and a SIGTSTP from elsewhere comes here from
	 * corral_term_stop, the terminal cooked first
	 */
	if (!o.capture)
		cli_terminal_reset_on_stop(true);
	r = corral_run(&p, &o, &res, &err);
	cli_terminal_reset_on_stop(false);
	take_stops_back(st);
	/* its output came raw: what it set on the terminal, undone first */
	if (!o.capture)
		cli_terminal_after_output();
	if (o.capture) {
		char *json = corral_result_json(&res);

		/* a harness that reads it must not take a lost result for a run */
		if (!json || puts(json) == EOF || fflush(stdout) == EOF) {
			cli_error("cannot write the result to stdout: %s",
				  json ? strerror(errno) : "out of memory");
			json_lost = true;
		} else {
			cli_json_printed();
		}
		free(json);
	}
	if (r < 0) {
		cli_error("%s%s", err.msg, err.code == -EMFILE ? nofile_hint() : "");
		code = EXIT_CORRAL;
	} else {
		if (!o.capture)
			print_end(&res);
		if (!o.capture && o.export)
			print_export(&res);
		code = corral_result_exit_code(&res);
		if (!o.capture) {
			/* a file of this directory named is not an image meant */
			if (!workspace_hint(&p, o.argv, code))
				image_hint(&p, state_dir, &res, o.argv);
		}
		/* the command ran, but what it made did not come out as asked */
		if (res.export_failed && code == 0)
			code = EXIT_CORRAL;
		/* it ran, but what it said did not all reach the caller */
		if ((res.output_errno || json_lost) && code == 0)
			code = EXIT_CORRAL;
		/* a person's signal ended the export: it ends corral as said */
		if (res.export_signal)
			code = 128 + res.export_signal;
	}
	corral_result_free(&res);
	corral_policy_free(&p);
	free(img_argv);
	corral_image_free(img);
	return code;
}

int cmd_run(int argc, char **argv)
{
	struct stops st = { .handed = false };
	struct corral_srt_made *made = NULL;
	sigset_t set, old;
	bool held;
	int code;

	catch_stops(&st);
	code = run(argc, argv, &st, &made);
	/*
	 * Once the sandbox is gone: what srt's settings made on the host.
	 * A stop signal waits until it is removed and the caller's
	 * disposition is back (the handler would leave it half done).
	 */
	sigemptyset(&set);
	for (size_t i = 0; i < NSTOP; i++)
		sigaddset(&set, stop_signals[i]);
	held = sigprocmask(SIG_BLOCK, &set, &old) == 0;
	made_on_stop = NULL;
	corral_srt_made_remove(made);
	if (!st.handed)
		for (size_t i = 0; i < NSTOP; i++)
			sigaction(stop_signals[i], &st.old[i], NULL);
	if (held)
		sigprocmask(SIG_SETMASK, &old, NULL);
	return code;
}
