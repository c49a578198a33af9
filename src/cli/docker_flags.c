/*
 * docker_flags.c - what to say to a docker user whose option corral's
 * verb lacks.  `corral run -e X=1 -v .:/src -w /src --rm -it ...` was
 * "invalid option -- 'e'" and nothing more: the reader had to find out
 * from --help that corral spells it --env, or that a bind is --ro/--rw.
 * Nothing here accepts an option: each row only names corral's way, or
 * says why there is none (a capability, a host namespace).  So too for a
 * docker command corral has under another name (ps, stop, images).
 */
#include "cli.h"

#include <string.h>

#define RUN	1u
#define EXEC	2u
#define CREATE	4u

static const struct docker_flag {
	unsigned verbs;
	const char *names[6];		/* as docker spells them */
	const char *hint;
} flags[] = {
	{ RUN, { "-e", "--env-file" },
	  "corral run sets a variable with --env NAME=VALUE and copies one of yours with --env-pass NAME; a policy's \"env\": {\"set\": {...}} for many" },
	{ EXEC, { "-e", "--env-file" },
	  "corral exec sets a variable with --env NAME=VALUE" },
	{ CREATE, { "-e", "--env", "--env-file" },
	  "a sandbox's variables come from its policy, --policy FILE with \"env\": {\"set\": {...}}, or per call: corral exec --env NAME=VALUE" },
	{ RUN, { "-v", "--volume", "--mount" },
	  "corral run binds a host directory with --ro HOST[:PATH] (read-only) or --rw HOST[:PATH] (writable), and shows a project copy-on-write at /workspace with --workspace DIR" },
	{ CREATE, { "-v", "--volume", "--mount" },
	  "corral create shows a project copy-on-write at /workspace with --workspace DIR; other binds are a policy's \"filesystem\": {\"ro\": [...], \"rw\": [...]}" },
	{ RUN | EXEC, { "-w", "--workdir" },
	  "corral spells the working directory inside --cwd DIR (default /workspace)" },
	{ RUN, { "--rm" },
	  "corral run always removes its sandbox when the command ends: drop --rm" },
	{ CREATE, { "--rm" },
	  "a sandbox lives until `corral rm ID` or its --ttl: drop --rm" },
	{ EXEC, { "--rm" },
	  "drop --rm: a call leaves its sandbox to `corral rm ID`" },
	{ RUN, { "-i", "--interactive" },
	  "corral run always passes its stdin to the command; for an interactive terminal (docker's -it) give -t alone" },
	{ RUN, { "-d", "--detach" },
	  "corral run waits for its command; for a sandbox that outlives one command: `corral serve`, then `corral create` and `corral exec --background ID -- CMD`" },
	{ EXEC, { "-d", "--detach" },
	  "corral exec spells it --background" },
	{ RUN, { "--name" },
	  "a run has no name; --tool-call ID names it in its events" },
	{ CREATE, { "--name" },
	  "a sandbox's id is the daemon's; name it with --label name=VALUE" },
	{ RUN, { "--network", "--publish", "-p" },
	  "corral run's network is --net none (loopback only, the default) or --net proxy with --allow HOST for each destination; no host network, no published ports" },
	{ CREATE, { "--network", "--net", "-p", "--publish" },
	  "a sandbox's network is its policy's \"network\" section (--policy FILE): \"mode\": \"proxy\" and an \"allow\" list" },
	{ RUN, { "-m" },
	  "corral spells it --memory SIZE" },
	{ CREATE, { "-m", "--memory", "--cpus", "--pids-limit", "--ulimit" },
	  "a sandbox's limits are its policy's \"limits\" section (--policy FILE): memory, pids, cpus, disk, timeout, open_files" },
	{ RUN, { "--pids-limit" },
	  "corral spells it --pids N" },
	{ RUN, { "--ulimit" },
	  "corral sets open files with --open-files N; memory, processes and CPU with --memory, --pids and --cpus" },
	{ RUN | CREATE, { "-u" },
	  "corral spells it --user agent|root (agent, uid 1000, is the default; root only on an image)" },
	{ EXEC, { "-u", "--user" },
	  "a call runs as its sandbox's user: corral create --user root|agent" },
	{ RUN, { "--entrypoint" },
	  "give the whole command after \"--\": corral run --image REF -- PROGRAM ARG..." },
	{ RUN, { "--read-only" },
	  "the host's files are always read-only inside; only /workspace, /tmp, /home/agent and --rw binds are written" },
	{ RUN, { "--tmpfs" },
	  "/tmp, /home/agent and /workspace are always a tmpfs; --disk SIZE bounds them" },
	{ RUN, { "--dns", "--add-host" },
	  "names resolve through corral's proxy: a policy's \"network\": {\"resolver\": ..., \"hosts\": {...}}" },
	{ RUN, { "--init" },
	  "a corral sandbox's PID 1 is always a small init that reaps and forwards signals: drop --init" },
	{ RUN | EXEC | CREATE, { "--privileged", "--cap-add", "--security-opt", "--device" },
	  "corral grants no capabilities, devices or seccomp exceptions: there is no such option (see SECURITY.md)" },
	{ RUN | CREATE, { "--pid", "--ipc", "--uts", "--userns", "--cgroupns" },
	  "a corral sandbox never shares a namespace with the host: there is no such option" },
};

static unsigned verb_bit(const char *verb)
{
	if (!strcmp(verb, "run"))
		return RUN;
	if (!strcmp(verb, "exec"))
		return EXEC;
	if (!strcmp(verb, "create"))
		return CREATE;
	return 0;
}

/* "--volume=/a:/b" is --volume */
static bool same_flag(const char *name, const char *opt)
{
	size_t n = strlen(name);

	if (!strcmp(name, opt))
		return true;
	return !strncmp(name, opt, n) && opt[n] == '=';
}

const char *docker_flag_hint(const char *verb, const char *opt)
{
	unsigned bit = verb_bit(verb);

	if (!bit || !opt)
		return NULL;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (!(flags[i].verbs & bit))
			continue;
		for (size_t k = 0; k < 6 && flags[i].names[k]; k++)
			if (same_flag(flags[i].names[k], opt))
				return flags[i].hint;
	}
	return NULL;
}

static const struct docker_verb {
	const char *name;
	const char *hint;
} verbs[] = {
	{ "ps", "corral ls lists the daemon's sandboxes" },
	{ "stop", "corral halt ID stops a sandbox and keeps its evidence; corral rm ID destroys it" },
	{ "kill", "corral halt ID stops a sandbox and keeps its evidence; corral rm ID destroys it" },
	{ "start", "corral create makes a sandbox; a paused one goes on with corral resume ID" },
	{ "unpause", "corral spells it resume" },
	{ "images", "corral image ls lists the images" },
	{ "pull", "corral contacts no registry: skopeo copy docker://REF oci-archive:FILE, then corral image import FILE" },
	{ "build", "corral builds no images: docker save REF > FILE, then corral image import FILE" },
	{ "inspect", "corral ls --json shows the sandboxes, corral image inspect REF an image" },
	{ "attach", "corral exec -t ID -- /bin/bash opens a terminal in a sandbox" },
	{ "top", "corral ls shows each sandbox's CPU and memory; corral logs ID its background processes" },
	{ "stats", "corral ls shows each sandbox's CPU and memory" },
};

const char *docker_verb_hint(const char *name)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(verbs[i].name, name))
			return verbs[i].hint;
	return NULL;
}
