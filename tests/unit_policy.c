/*
 * unit_policy.c - policy parsing: sizes, durations, binds, the JSON loader
 * and where its errors point.  Run from the repository root (it loads
 * the shipped policies from policies/).
 */
#include "corral.h"
#include "egress.h"
#include "internal.h"
#include "jsonpos.h"
#include "sandbox.h"
#include "tls.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers --------------------------------------------------------- */

/*
 * "LINE:COL" of the first occurrence of marker in text, counted the way
 * jansson counts (characters, not UTF-8 continuation bytes).
 */
static void pos_of(const char *text, const char *marker, char *out, size_t len)
{
	const char *at = strstr(text, marker), *c;
	unsigned line = 1, col = 1;

	snprintf(out, len, "?:?");
	if (!at)
		return;
	for (c = text; c < at; c++) {
		if (*c == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)*c & 0xc0) != 0x80) {
			col++;
		}
	}
	snprintf(out, len, "%u:%u", line, col);
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool policy_equal(const struct corral_policy *a,
			 const struct corral_policy *b)
{
	size_t i;

	if (!str_eq(a->workspace, b->workspace) || a->nbinds != b->nbinds ||
	    a->memory_bytes != b->memory_bytes || a->pids != b->pids ||
	    a->cpus != b->cpus || a->disk_bytes != b->disk_bytes ||
	    a->timeout_ms != b->timeout_ms ||
	    a->output_bytes != b->output_bytes || a->connections != b->connections ||
	    a->open_files != b->open_files ||
	    a->nenv != b->nenv ||
	    a->nenv_pass != b->nenv_pass || a->net != b->net ||
	    a->net_transparent != b->net_transparent ||
	    a->nnet_allow != b->nnet_allow || a->nnet_deny != b->nnet_deny ||
	    a->nnet_hosts != b->nnet_hosts ||
	    a->events.budget_bytes != b->events.budget_bytes ||
	    a->events.verbatim != b->events.verbatim ||
	    a->events.interval_ms != b->events.interval_ms ||
	    a->root_inside != b->root_inside)
		return false;
	for (i = 0; i < a->nnet_allow; i++)
		if (!str_eq(a->net_allow[i], b->net_allow[i]))
			return false;
	for (i = 0; i < a->nnet_deny; i++)
		if (!str_eq(a->net_deny[i], b->net_deny[i]))
			return false;
	for (i = 0; i < a->nnet_hosts; i++)
		if (!str_eq(a->net_hosts[i].name, b->net_hosts[i].name) ||
		    !str_eq(a->net_hosts[i].value, b->net_hosts[i].value))
			return false;
	for (i = 0; i < a->nbinds; i++)
		if (!str_eq(a->binds[i].src, b->binds[i].src) ||
		    !str_eq(a->binds[i].dst, b->binds[i].dst) ||
		    a->binds[i].writable != b->binds[i].writable)
			return false;
	for (i = 0; i < a->nenv; i++)
		if (!str_eq(a->env[i].name, b->env[i].name) ||
		    !str_eq(a->env[i].value, b->env[i].value))
			return false;
	for (i = 0; i < a->nenv_pass; i++)
		if (!str_eq(a->env_pass[i], b->env_pass[i]))
			return false;
	if (a->abort.max_denied_egress != b->abort.max_denied_egress ||
	    a->abort.max_distinct_denied != b->abort.max_distinct_denied ||
	    a->abort.window_ms != b->abort.window_ms ||
	    a->abort.max_denied_syscalls != b->abort.max_denied_syscalls ||
	    a->abort.max_cpu_ms != b->abort.max_cpu_ms ||
	    a->abort.max_wall_ms != b->abort.max_wall_ms ||
	    a->abort.kill != b->abort.kill ||
	    a->abort.ntripwires != b->abort.ntripwires)
		return false;
	for (i = 0; i < a->abort.ntripwires; i++)
		if (!str_eq(a->abort.tripwires[i], b->abort.tripwires[i]))
			return false;
	return true;
}

/* A policy with something in every field, so "unchanged" means something. */
static void busy_policy(struct corral_policy *p)
{
	struct corral_err err = { 0 };

	corral_policy_init(p);
	CHECK(corral_policy_set_workspace(p, "/srv/ws", &err) == 0);
	CHECK(corral_policy_add_bind(p, "/opt/tools:/tools", false, &err) == 0);
	CHECK(corral_policy_set_env(p, "KEEP=1", &err) == 0);
	CHECK(corral_policy_pass_env(p, "HOME2", &err) == 0);
	CHECK(corral_policy_add_allow(p, "keep.example:8443", &err) == 0);
	CHECK(corral_policy_add_deny(p, "bad.keep.example", &err) == 0);
	CHECK(corral_policy_load_string(p,
		"{\"network\": {\"hosts\": {\"keep.test\": \"192.0.2.1\"}}}",
		strlen("{\"network\": {\"hosts\": {\"keep.test\": \"192.0.2.1\"}}}"),
		"busy.json", &err) == 0);
	CHECK(corral_policy_load_string(p,
		"{\"abort\": {\"tripwires\": [\"/home/agent/.netrc\"],"
		" \"max_distinct_denied_destinations\": 4, \"window_seconds\": 5}}",
		strlen("{\"abort\": {\"tripwires\": [\"/home/agent/.netrc\"],"
		       " \"max_distinct_denied_destinations\": 4, \"window_seconds\": 5}}"),
		"busy.json", &err) == 0);
	p->memory_bytes = 64 * MiB;
	p->pids = 7;
	p->cpus = 0.5;
	p->open_files = 300;
}

static int load(struct corral_policy *p, const char *text,
		struct corral_err *err)
{
	return corral_policy_load_string(p, text, strlen(text), "t.json", err);
}

/*
 * text must fail to load with "t.json:L:C: key: ...want..." where L:C is
 * where marker first appears in text, and leave the policy as it was.
 */
static void expect_error(const char *text, const char *marker,
			 const char *key, const char *want)
{
	struct corral_policy p, before;
	struct corral_err err = { 0 };
	char pos[32], prefix[256];

	busy_policy(&p);
	busy_policy(&before);
	pos_of(text, marker, pos, sizeof(pos));
	snprintf(prefix, sizeof(prefix), "t.json:%s: %s: ", pos, key);
	CHECK(load(&p, text, &err) == -EINVAL);
	CHECK(err.code == -EINVAL);
	if (strncmp(err.msg, prefix, strlen(prefix)))
		fprintf(stderr, "  message: %s\n  expected prefix: %s\n",
			err.msg, prefix);
	CHECK(!strncmp(err.msg, prefix, strlen(prefix)));
	CHECK_STR_CONTAINS(err.msg, want);
	CHECK(policy_equal(&p, &before));
	corral_policy_free(&p);
	corral_policy_free(&before);
}

/* ---- sizes, durations, formatting ------------------------------------ */

static const struct {
	const char *in;
	uint64_t out;
} good_sizes[] = {
	{ "0", 0 }, { "4096", 4096 }, { "007", 7 },
	{ "100B", 100 }, { "100b", 100 },
	{ "1k", KiB }, { "1K", KiB }, { "1KB", KiB }, { "1kb", KiB },
	{ "1Ki", KiB }, { "1KiB", KiB }, { "1kib", KiB }, { "1KIB", KiB },
	{ "1M", MiB }, { "256MiB", 256 * MiB }, { "1mb", MiB },
	{ "2G", 2 * GiB }, { "1GB", GiB }, { "1gib", GiB },
	{ "1T", TiB }, { "1TiB", TiB }, { "3tb", 3 * TiB },
	{ "1.5G", 3 * GiB / 2 }, { "0.5K", 512 }, { "2.25M", 2359296 },
	/* fractions round up: a non-zero size never becomes 0 */
	{ "1.1K", 1127 }, { "0.0001K", 1 }, { "0.000000000000000000001T", 1 },
	{ "16777215T", 16777215 * TiB },
	{ "18446744073709551615", UINT64_MAX },
};

static const struct {
	const char *in;
	const char *why;
} bad_sizes[] = {
	{ "", "not a size" }, { "-1", "negative" }, { "-1G", "negative" },
	{ "1.2.3", "not a size" }, { "12XB", "not a size" },
	{ "1 G", "not a size" }, { " 1G", "not a size" }, { "1G ", "not a size" },
	{ "1.", "not a size" }, { ".5G", "not a size" }, { "G", "not a size" },
	{ "1KK", "not a size" }, { "1iB", "not a size" }, { "1Bi", "not a size" },
	{ "1P", "not a size" }, { "0x10", "not a size" }, { "1e3", "not a size" },
	{ "+1", "not a size" }, { "1,5G", "not a size" },
	{ "99999999999T", "too large" }, { "16777216T", "too large" },
	{ "18446744073709551616", "too large" },
	{ "99999999999999999999999999", "too large" },
};

TEST(parse_size_valid)
{
	struct corral_err err = { 0 };
	uint64_t v;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(good_sizes); i++) {
		v = 12345;
		CHECK(corral_parse_size(good_sizes[i].in, &v, &err) == 0);
		if (v != good_sizes[i].out)
			fprintf(stderr, "  %s -> %llu\n", good_sizes[i].in,
				(unsigned long long)v);
		CHECK(v == good_sizes[i].out);
	}
}

TEST(parse_size_invalid)
{
	struct corral_err err = { 0 };
	char got[64];
	uint64_t v;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad_sizes); i++) {
		v = 12345;
		err.msg[0] = '\0';
		CHECK(corral_parse_size(bad_sizes[i].in, &v, &err) == -EINVAL);
		CHECK(err.code == -EINVAL);
		CHECK(v == 12345);
		CHECK_STR_CONTAINS(err.msg, bad_sizes[i].why);
		snprintf(got, sizeof(got), "(got \"%s\")", bad_sizes[i].in);
		CHECK_STR_CONTAINS(err.msg, got);
	}
	CHECK(corral_parse_size(NULL, &v, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a size, expected a number with an "
			   "optional K/M/G/T suffix (got \"\")");
}

static const struct {
	const char *in;
	uint64_t ms;
} good_durations[] = {
	{ "0", 0 }, { "30", 30000 }, { "30s", 30000 }, { "30S", 30000 },
	{ "500ms", 500 }, { "500MS", 500 }, { "2m", 120000 },
	{ "1h", 3600000 }, { "1d", 86400000 }, { "1.5s", 1500 },
	{ "0.5", 500 }, { "1.5m", 90000 }, { "0.25h", 900000 },
	/* rounded up to the next millisecond */
	{ "0.0001s", 1 }, { "1.0005s", 1001 }, { "0.5ms", 1 },
	{ "213503982334d", 213503982334ULL * 86400000 },
};

static const struct {
	const char *in;
	const char *why;
} bad_durations[] = {
	{ "", "not a duration" }, { "-1", "negative" }, { "-5s", "negative" },
	{ "1.2.3", "not a duration" }, { "5x", "not a duration" },
	{ "1 s", "not a duration" }, { "s", "not a duration" },
	{ "1sec", "not a duration" }, { "1ms ", "not a duration" },
	{ "1.s", "not a duration" }, { "1w", "not a duration" },
	{ "213503982335d", "too large" },
	{ "99999999999999999999", "too large" },
};

TEST(parse_duration)
{
	struct corral_err err = { 0 };
	uint64_t v;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(good_durations); i++) {
		v = 12345;
		CHECK(corral_parse_duration(good_durations[i].in, &v, &err) == 0);
		if (v != good_durations[i].ms)
			fprintf(stderr, "  %s -> %llu\n", good_durations[i].in,
				(unsigned long long)v);
		CHECK(v == good_durations[i].ms);
	}
	for (i = 0; i < ARRAY_SIZE(bad_durations); i++) {
		v = 12345;
		CHECK(corral_parse_duration(bad_durations[i].in, &v, &err) ==
		      -EINVAL);
		CHECK(v == 12345);
		CHECK_STR_CONTAINS(err.msg, bad_durations[i].why);
	}
	CHECK(corral_parse_duration("5x", &v, &err) == -EINVAL);
	CHECK(!strcmp(err.msg, "not a duration, expected a number with an "
		      "optional ms/s/m/h/d suffix (got \"5x\")"));
}

TEST(format_size)
{
	static const struct {
		uint64_t in;
		const char *out;
	} t[] = {
		{ 0, "0 B" }, { 100, "100 B" }, { 1023, "1023 B" },
		{ 1024, "1 KiB" }, { 512 * KiB, "512 KiB" },
		{ 256 * MiB, "256 MiB" }, { GiB, "1 GiB" }, { 2 * GiB, "2 GiB" },
		{ 3 * GiB / 2, "1.5 GiB" }, { 1536, "1.5 KiB" },
		{ TiB, "1 TiB" }, { 1048575, "1.0 MiB" },
		{ UINT64_C(1) << 60, "1 EiB" }, { UINT64_MAX, "16.0 EiB" },
	};
	char buf[32];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(t); i++) {
		corral_format_size(t[i].in, buf, sizeof(buf));
		if (strcmp(buf, t[i].out))
			fprintf(stderr, "  %llu -> \"%s\"\n",
				(unsigned long long)t[i].in, buf);
		CHECK(!strcmp(buf, t[i].out));
	}
	corral_format_size(256 * MiB, buf, 4);
	CHECK(!strcmp(buf, "256"));
	buf[0] = 'x';
	corral_format_size(256 * MiB, buf, 0);
	CHECK(buf[0] == 'x');
}

/* ---- binds, env, workspace from the command line ---------------------- */

/* the root as the directory opened: judged on the fd, taken with it */
TEST(pin_root)
{
	static const char *const refused[] = { "/", "/proc", "/sys", "policies/default.json" };
	char dir[] = "/tmp/corral-unit-root.XXXXXX", *real;
	struct corral_policy p;
	struct corral_err err = { 0 };
	int fd;

	corral_policy_init(&p);
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		fd = open(refused[i], O_PATH | O_CLOEXEC);
		CHECK(fd >= 0);
		CHECK(corral_policy_pin_root(&p, fd, &err) < 0);
		CHECK(!p.root_pinned && p.nroot_layers == 0);
		/* the fd is the policy's, refused or not */
		CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF);
	}
	CHECK(mkdtemp(dir) != NULL);
	real = realpath(dir, NULL);
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(corral_policy_pin_root(&p, fd, &err) == 0);
	CHECK(p.root_pinned && p.root_fd == fd && p.nroot_layers == 1);
	CHECK(real && p.nroot_layers == 1 && !strcmp(p.root_layers[0], real));
	/* another root, by path, is not the pinned one: unpinned, fd closed */
	CHECK(corral_policy_set_root(&p, &real, 1, &err) == 0);
	CHECK(!p.root_pinned);
	CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF);
	corral_policy_free(&p);
	free(real);
	rmdir(dir);
}

/*
 * A host path as the build judges it, for a caller to refuse first: the
 * host's root, kernel filesystems and the directories of its unix sockets
 * (however reached: /var/run is /run) are EACCES; a directory of ours is not.
 */
TEST(host_path_check)
{
	static const char *const refused[] = { "/", "/proc", "/sys", "/run", "/var/run",
					       "/tmp", "/tmp/.", "/run/user" };
	char dir[] = "/tmp/corral-unit-host.XXXXXX";
	struct corral_err err = { 0 };
	int fd;

	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		fd = open(refused[i], O_PATH | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;	/* no /run/user on this host */
		CHECK(fd >= 0);
		CHECK(corral_host_path_check(fd, refused[i], &err) == -EACCES);
		CHECK(strstr(err.msg, refused[i]) != NULL);
		close(fd);
	}
	CHECK(mkdtemp(dir) != NULL);
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(corral_host_path_check(fd, dir, &err) == 0);
	close(fd);
	rmdir(dir);
}

TEST(add_bind_normalises)
{
	static const struct {
		const char *spec, *src, *dst;
	} t[] = {
		{ "/usr", "/usr", "/usr" },
		{ "/usr/", "/usr", "/usr" },
		{ "//usr///lib/./x/", "/usr/lib/x", "/usr/lib/x" },
		{ "/opt/tools:/tools", "/opt/tools", "/tools" },
		{ "/a/./b:/c//d/.", "/a/b", "/c/d" },
		{ "/:/host", "/", "/host" },
		{ "/x:/devices", "/x", "/devices" },
		{ "/x:/procfs/y", "/x", "/procfs/y" },
		{ "/x/...:/y..", "/x/...", "/y.." },
	};
	struct corral_policy p;
	struct corral_err err = { 0 };
	size_t i;

	corral_policy_init(&p);
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		CHECK(corral_policy_add_bind(&p, t[i].spec, i % 2, &err) == 0);
		CHECK(p.nbinds == i + 1);
		if (p.nbinds != i + 1)
			break;
		CHECK(!strcmp(p.binds[i].src, t[i].src));
		CHECK(!strcmp(p.binds[i].dst, t[i].dst));
		CHECK(p.binds[i].writable == (bool)(i % 2));
	}
	corral_policy_free(&p);
}

TEST(add_bind_rejects)
{
	static const struct {
		const char *spec, *why;
	} t[] = {
		{ "", "empty bind" },
		{ "usr", "host path must be absolute" },
		{ "./usr", "host path must be absolute" },
		{ "/usr:lib", "sandbox path must be absolute" },
		{ "/usr/../etc", "host path must not contain a \"..\"" },
		{ "/usr:/x/../y", "sandbox path must not contain a \"..\"" },
		{ "/a:/b:/c", "more than one ':'" },
		{ ":/x", "host path is empty" },
		{ "/x:", "sandbox path is empty" },
		{ "/x:/", "cannot be \"/\"" },
		{ "/", "cannot be \"/\"" },
		{ "/x:/proc", "cannot be /proc" },
		{ "/x:/proc/self", "cannot be /proc" },
		{ "/x:/sys/fs", "cannot be /sys" },
		{ "/dev", "cannot be /dev" },
		{ "/x:/oldroot", "cannot be /oldroot" },
		{ "/x:/.corral/y", "cannot be /.corral" },
		{ "/x:/.scratch", "cannot be /.scratch" },
		{ "/x://proc//", "cannot be /proc" },
	};
	struct corral_policy p;
	struct corral_err err = { 0 };
	char got[128];
	size_t i;

	corral_policy_init(&p);
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		CHECK(corral_policy_add_bind(&p, t[i].spec, true, &err) ==
		      -EINVAL);
		CHECK_STR_CONTAINS(err.msg, t[i].why);
		snprintf(got, sizeof(got), "(got \"%s\")", t[i].spec);
		CHECK_STR_CONTAINS(err.msg, got);
	}
	CHECK(p.nbinds == 0);
	corral_policy_free(&p);
}

/*
 * A container's tmpfs (corral_policy_add_tmpfs): the options an engine
 * writes, honoured or taken; the destination normalised; a copy has its own.
 */
TEST(add_tmpfs_options)
{
	static const char *const docker[] = { "noexec", "nosuid", "nodev", "rprivate",
					      "mode=1777", "size=65536k" };
	static const char *const podman[] = { "rw", "rprivate", "nosuid", "nodev",
					      "tmpcopyup", "size=50%" };
	static const char *const ro[] = { "ro", "suid", "dev", "mode=0750", "uid=1000",
					  "gid=1000", "nr_inodes=1k", "exec", "strictatime",
					  "noatime", "nodiratime", "relatime" };
	struct corral_policy p, q;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(corral_policy_add_tmpfs(&p, "/cache", docker, ARRAY_SIZE(docker), &err) == 0);
	CHECK(corral_policy_add_tmpfs(&p, "//run2/./x/", podman, ARRAY_SIZE(podman), &err) == 0);
	CHECK(corral_policy_add_tmpfs(&p, "/r", ro, ARRAY_SIZE(ro), &err) == 0);
	CHECK(corral_policy_add_tmpfs(&p, "/plain", NULL, 0, &err) == 0);
	CHECK(p.ntmpfs == 4);
	if (p.ntmpfs == 4) {
		CHECK(!strcmp(p.tmpfs[0].dst, "/cache") && p.tmpfs[0].noexec &&
		      !p.tmpfs[0].ro && p.tmpfs[0].mode == 01777);
		CHECK(!strcmp(p.tmpfs[1].dst, "/run2/x") && !p.tmpfs[1].noexec &&
		      !p.tmpfs[1].ro && p.tmpfs[1].mode == 01777);
		CHECK(p.tmpfs[2].ro && !p.tmpfs[2].noexec && p.tmpfs[2].mode == 0750);
		CHECK(!p.tmpfs[3].ro && !p.tmpfs[3].noexec && p.tmpfs[3].mode == 01777);
	}
	CHECK(corral_policy_copy(&q, &p, &err) == 0);
	CHECK(q.ntmpfs == 4 && q.tmpfs != p.tmpfs && q.tmpfs[1].dst != p.tmpfs[1].dst &&
	      !strcmp(q.tmpfs[1].dst, "/run2/x") && q.tmpfs[2].mode == 0750);
	corral_policy_free(&q);
	corral_policy_free(&p);
}

TEST(add_tmpfs_rejects)
{
	static const struct {
		const char *dst, *opt, *why;
	} t[] = {
		{ NULL, NULL, "no destination" },
		{ "cache", NULL, "must be absolute" },
		{ "/a/../../etc", NULL, "must not contain a \"..\" component" },
		{ "/", NULL, "cannot be \"/\"" },
		{ "//", NULL, "cannot be \"/\"" },
		{ "/proc/sys", NULL, "cannot be /proc" },
		{ "/dev/shm", NULL, "cannot be /dev" },
		{ "/.scratch", NULL, "cannot be /.scratch" },
		{ "/oldroot/x", NULL, "cannot be /oldroot" },
		{ "/etc", NULL, "hide corral's own /etc/hosts" },
		{ "/etc/resolv.conf", NULL, "hide corral's own /etc/resolv.conf" },
		{ "/home", NULL, "hide corral's own /home/agent" },
		{ "/tmp", NULL, "hide corral's own /tmp" },
		{ "/workspace/", NULL, "hide corral's own /workspace" },
		{ "/bound", NULL, "a bind is there already" },
		{ "/c", "mode=4755", "mode=4755 refused: a setuid or setgid bit" },
		{ "/c", "mode=2777", "mode=2777 refused" },
		{ "/c", "mode=10000", "mode=10000: not an octal mode" },
		{ "/c", "mode=9", "mode=9: not an octal mode" },
		{ "/c", "mode=", "mode=: not an octal mode" },
		{ "/c", "mode=-1", "mode=-1: not an octal mode" },
		{ "/c", "mode= 755", "not an octal mode" },
		{ "/c", "uid=0", "uid=0 refused: the directory is the sandbox user's (1000)" },
		{ "/c", "gid=65534", "gid=65534 refused" },
		{ "/c", "uid=x", "uid=x: not an id" },
		{ "/c", "uid=-1000", "not an id" },
		{ "/c", "gid=4294967296", "not an id" },
		{ "/c", "size=many", "size: not a size" },
		{ "/c", "size=%", "size: " },
		{ "/c", "nr_inodes=-1", "nr_inodes: " },
		{ "/c", "remount", "option \"remount\": not one" },
		{ "/c", "bind", "option \"bind\": not one" },
		{ "/c", "", "option \"\": not one" },
		{ "/c", "strictatime=1", "option \"strictatime=1\": not one" },
	};
	struct corral_policy p;
	struct corral_err err = { 0 };
	char dst[32];
	size_t i;

	corral_policy_init(&p);
	CHECK(corral_policy_add_bind(&p, "/opt:/bound", false, &err) == 0);
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		const char *o[] = { t[i].opt };

		err = (struct corral_err){ 0 };
		CHECK(corral_policy_add_tmpfs(&p, t[i].dst, o, t[i].opt ? 1 : 0, &err) < 0);
		CHECK_STR_CONTAINS(err.msg, t[i].why);
	}
	CHECK(p.ntmpfs == 0);
	CHECK(corral_policy_add_tmpfs(&p, "/c", NULL, 0, &err) == 0);
	CHECK(corral_policy_add_tmpfs(&p, "/c/", NULL, 0, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "a tmpfs on /c: given twice");
	for (i = 1; i < CORRAL_TMPFS_MAX; i++) {
		snprintf(dst, sizeof(dst), "/m%zu", i);
		CHECK(corral_policy_add_tmpfs(&p, dst, NULL, 0, &err) == 0);
	}
	CHECK(corral_policy_add_tmpfs(&p, "/one-more", NULL, 0, &err) == -E2BIG);
	CHECK_STR_CONTAINS(err.msg, "more than 16 tmpfs mounts");
	CHECK(p.ntmpfs == CORRAL_TMPFS_MAX);
	corral_policy_free(&p);
}

TEST(set_env_and_pass_env)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	char *big;

	corral_policy_init(&p);
	CHECK(corral_policy_set_env(&p, "A=b=c", &err) == 0);
	CHECK(corral_policy_set_env(&p, "_EMPTY=", &err) == 0);
	CHECK(corral_policy_set_env(&p, "A=2", &err) == 0);	/* overrides */
	CHECK(p.nenv == 2);
	CHECK(!strcmp(p.env[0].name, "A") && !strcmp(p.env[0].value, "2"));
	CHECK(!strcmp(p.env[1].name, "_EMPTY") && !strcmp(p.env[1].value, ""));

	CHECK(corral_policy_set_env(&p, "=x", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "name is empty");
	CHECK(corral_policy_set_env(&p, "NOEQUALS", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "NAME=VALUE");
	CHECK(corral_policy_set_env(&p, "1X=y", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "[A-Za-z_][A-Za-z0-9_]*");
	CHECK(corral_policy_set_env(&p, "A-B=y", &err) == -EINVAL);

	big = malloc(40000);
	memset(big, 'v', 40000 - 1);
	big[40000 - 1] = '\0';
	memcpy(big, "BIG=", 4);
	CHECK(corral_policy_set_env(&p, big, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "longer than 32 KiB");
	CHECK(strlen(err.msg) < 200);		/* the value is quoted, cut */
	memset(big, 'N', 256);			/* a 256-character name */
	big[256] = '\0';
	CHECK(corral_policy_pass_env(&p, big, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "longer than 255");
	big[255] = '\0';
	CHECK(corral_policy_pass_env(&p, big, &err) == 0);
	free(big);
	CHECK(p.nenv == 2);

	CHECK(corral_policy_pass_env(&p, "TERM_X", &err) == 0);
	CHECK(corral_policy_pass_env(&p, "TERM_X", &err) == 0); /* once */
	CHECK(p.nenv_pass == 2);
	CHECK(corral_policy_pass_env(&p, "", &err) == -EINVAL);
	CHECK(corral_policy_pass_env(&p, "A=B", &err) == -EINVAL);
	CHECK(corral_policy_pass_env(&p, "9", &err) == -EINVAL);
	CHECK(p.nenv_pass == 2);
	corral_policy_free(&p);
}

TEST(set_workspace)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(corral_policy_set_workspace(&p, "/home/me//proj/./", &err) == 0);
	CHECK(p.workspace && !strcmp(p.workspace, "/home/me/proj"));
	/* existence is checked when the sandbox is built, not here */
	CHECK(corral_policy_set_workspace(&p, "/does/not/exist", &err) == 0);
	CHECK(!strcmp(p.workspace, "/does/not/exist"));
	CHECK(corral_policy_set_workspace(&p, "proj", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "workspace must be absolute (got \"proj\")");
	CHECK(corral_policy_set_workspace(&p, "/a/../b", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "\"..\"");
	CHECK(corral_policy_set_workspace(&p, "", &err) == -EINVAL);
	CHECK(!strcmp(p.workspace, "/does/not/exist"));
	corral_policy_free(&p);
}

/* ---- the policy as a whole ------------------------------------------- */

TEST(init_and_free)
{
	struct corral_policy p;

	corral_policy_init(&p);
	CHECK(p.workspace == NULL && p.nbinds == 0 && p.binds == NULL);
	CHECK(p.memory_bytes == 2 * GiB);
	CHECK(p.pids == 1024);
	CHECK(p.cpus == 0);
	CHECK(p.disk_bytes == GiB);
	CHECK(p.timeout_ms == 0);
	CHECK(p.output_bytes == MiB);
	CHECK(p.connections == 256);
	CHECK(p.open_files == 0);	/* the share of the file table */
	CHECK(p.nenv == 0 && p.nenv_pass == 0);
	CHECK(p.net == CORRAL_NET_NONE);
	/* no abort criteria; a halt, if a policy asks for one, kills */
	CHECK(p.abort.max_denied_egress == 0 && p.abort.max_distinct_denied == 0);
	CHECK(p.abort.window_ms == 0 && p.abort.max_denied_syscalls == 0);
	CHECK(p.abort.max_cpu_ms == 0 && p.abort.max_wall_ms == 0);
	CHECK(p.abort.ntripwires == 0 && p.abort.tripwires == NULL);
	CHECK(p.abort.kill);
	corral_policy_free(&p);
	CHECK(p.memory_bytes == 0 && p.binds == NULL);
	corral_policy_free(&p);			/* twice is fine */
	corral_policy_free(NULL);
}

TEST(shipped_default_is_the_builtin_default)
{
	struct corral_policy p, def;
	struct corral_err err = { 0 };

	corral_policy_init(&def);
	corral_policy_init(&p);
	p.memory_bytes = 1;
	p.pids = 2;
	p.cpus = 3;
	p.disk_bytes = 4;
	p.timeout_ms = 5;
	p.output_bytes = 6;
	p.events = (struct corral_event_limits){ 7, 8, 9 };
	CHECK(corral_policy_set_workspace(&p, "/x", &err) == 0);
	if (corral_policy_load_file(&p, "policies/default.json", &err))
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(policy_equal(&p, &def));
	corral_policy_free(&p);
	corral_policy_free(&def);
}

TEST(shipped_offline)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	if (corral_policy_load_file(&p, "policies/offline.json", &err))
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(p.memory_bytes == 512 * MiB);
	CHECK(p.pids == 128);
	CHECK(p.cpus == 1);
	CHECK(p.disk_bytes == 256 * MiB);
	CHECK(p.timeout_ms == 60000);
	CHECK(p.output_bytes == MiB);
	CHECK(p.net == CORRAL_NET_NONE);
	CHECK(p.workspace == NULL && p.nbinds == 0 && p.nenv == 0);
	corral_policy_free(&p);
}

static const char full_policy[] =
	"{\n"
	"  \"description\": \"everything, once\",\n"
	"  \"filesystem\": {\n"
	"    \"workspace\": \"/srv//work/\",\n"
	"    \"ro\": [\"/opt/sdk\", \"/data/in:/in\"],\n"
	"    \"rw\": [\"/tmp/out:/out\"]\n"
	"  },\n"
	"  \"limits\": {\n"
	"    \"memory\": \"1.5G\",\n"
	"    \"pids\": 64,\n"
	"    \"cpus\": 1.5,\n"
	"    \"disk\": 268435456,\n"
	"    \"timeout\": \"2m\",\n"
	"    \"output\": \"64KiB\",\n"
	"    \"connections\": 32,\n"
	"    \"open_files\": 4096\n"
	"  },\n"
	"  \"env\": {\n"
	"    \"set\": {\"LANG\": \"C.UTF-8\", \"OPTS\": \"a=b c\", \"_x1\": \"\"},\n"
	"    \"pass\": [\"TERM\", \"COLUMNS\"]\n"
	"  },\n"
	"  \"network\": {\"mode\": \"none\"}\n"
	"}\n";

TEST(full_policy)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	if (load(&p, full_policy, &err))
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(p.workspace && !strcmp(p.workspace, "/srv/work"));
	CHECK(p.nbinds == 3);
	if (p.nbinds == 3) {
		CHECK(!strcmp(p.binds[0].src, "/opt/sdk") &&
		      !strcmp(p.binds[0].dst, "/opt/sdk") && !p.binds[0].writable);
		CHECK(!strcmp(p.binds[1].src, "/data/in") &&
		      !strcmp(p.binds[1].dst, "/in") && !p.binds[1].writable);
		CHECK(!strcmp(p.binds[2].src, "/tmp/out") &&
		      !strcmp(p.binds[2].dst, "/out") && p.binds[2].writable);
	}
	CHECK(p.memory_bytes == 3 * GiB / 2);
	CHECK(p.pids == 64);
	CHECK(p.cpus == 1.5);
	CHECK(p.disk_bytes == 256 * MiB);
	CHECK(p.timeout_ms == 120000);
	CHECK(p.output_bytes == 64 * KiB);
	CHECK(p.connections == 32);
	CHECK(p.open_files == 4096);
	CHECK(p.nenv == 3);
	if (p.nenv == 3) {
		CHECK(!strcmp(p.env[0].name, "LANG") &&
		      !strcmp(p.env[0].value, "C.UTF-8"));
		CHECK(!strcmp(p.env[1].name, "OPTS") &&
		      !strcmp(p.env[1].value, "a=b c"));
		CHECK(!strcmp(p.env[2].name, "_x1") && !strcmp(p.env[2].value, ""));
	}
	CHECK(p.nenv_pass == 2);
	if (p.nenv_pass == 2)
		CHECK(!strcmp(p.env_pass[0], "TERM") &&
		      !strcmp(p.env_pass[1], "COLUMNS"));
	corral_policy_free(&p);
}

static const char network_policy[] =
	"{\n"
	"  \"network\": {\n"
	"    \"mode\": \"proxy\",\n"
	"    \"allow\": [\"pypi.org\", \"*.pythonhosted.org\", \"api.github.com:443\",\n"
	"              \"10.1.2.0/24:5432\", \"[2001:db8::/32]:443\", \"Internal.Test\"],\n"
	"    \"deny\":  [\"*.evil.example\", \"*\", \"169.254.0.0/16\"],\n"
	"    \"transparent\": true,\n"
	"    \"hosts\": {\"Internal.Test.\": \"192.0.2.10\", \"v6.test\": \"2001:DB8::1\",\n"
	"              \"m.test\": \"::ffff:10.0.0.1\"}\n"
	"  }\n"
	"}\n";

TEST(network_section)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(p.net == CORRAL_NET_NONE && p.net_transparent);
	CHECK(p.nnet_allow == 0 && p.nnet_deny == 0 && p.nnet_hosts == 0);
	if (load(&p, network_policy, &err))
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(p.net == CORRAL_NET_PROXY);
	CHECK(p.net_transparent);
	CHECK(p.nnet_allow == 6);
	if (p.nnet_allow == 6) {
		/* patterns are kept as written */
		CHECK(!strcmp(p.net_allow[0], "pypi.org"));
		CHECK(!strcmp(p.net_allow[4], "[2001:db8::/32]:443"));
		CHECK(!strcmp(p.net_allow[5], "Internal.Test"));
	}
	CHECK(p.nnet_deny == 3 && !strcmp(p.net_deny[1], "*"));
	/* hosts are kept canonical */
	CHECK(p.nnet_hosts == 3);
	if (p.nnet_hosts == 3) {
		CHECK(!strcmp(p.net_hosts[0].name, "internal.test") &&
		      !strcmp(p.net_hosts[0].value, "192.0.2.10"));
		CHECK(!strcmp(p.net_hosts[1].name, "v6.test") &&
		      !strcmp(p.net_hosts[1].value, "2001:db8::1"));
		CHECK(!strcmp(p.net_hosts[2].name, "m.test") &&
		      !strcmp(p.net_hosts[2].value, "10.0.0.1"));
	}

	/*
	 * a second file merges as corral_json_merge: a list replaces (the
	 * deny list it does not name stays), hosts replace by name
	 */
	CHECK(load(&p, "{\"network\": {\"mode\": \"none\", \"transparent\": false,"
		       " \"allow\": [\"pypi.org\", \"crates.io\"],"
		       " \"hosts\": {\"INTERNAL.test\": \"192.0.2.11\"}}}", &err) == 0);
	CHECK(p.net == CORRAL_NET_NONE && !p.net_transparent);
	CHECK(p.nnet_allow == 2 && !strcmp(p.net_allow[0], "pypi.org") &&
	      !strcmp(p.net_allow[1], "crates.io"));
	CHECK(p.nnet_deny == 3);
	CHECK(p.nnet_hosts == 3 && !strcmp(p.net_hosts[0].value, "192.0.2.11"));
	/* an empty object changes nothing, an empty list empties */
	CHECK(load(&p, "{\"network\": {\"hosts\": {}}}", &err) == 0);
	CHECK(p.nnet_allow == 2 && p.nnet_deny == 3 && p.nnet_hosts == 3);
	CHECK(load(&p, "{\"network\": {\"allow\": [], \"deny\": []}}", &err) == 0);
	CHECK(p.nnet_allow == 0 && p.nnet_deny == 0 && p.nnet_hosts == 3);
	corral_policy_free(&p);
	CHECK(p.net_allow == NULL && p.net_hosts == NULL && p.nnet_deny == 0);
}

/* A policy with network entries survives a copy (a later failed load). */
TEST(network_copy_is_deep)
{
	struct corral_policy p, before;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	corral_policy_init(&before);
	CHECK(load(&p, network_policy, &err) == 0);
	CHECK(load(&before, network_policy, &err) == 0);
	CHECK(load(&p, "{\"network\": {\"allow\": [\"x.example\", \"bad..\"]}}",
		   &err) == -EINVAL);
	CHECK(policy_equal(&p, &before));
	CHECK(load(&p, "{\"network\": {\"mode\": \"proxy\"}}", &err) == 0);
	CHECK(policy_equal(&p, &before));
	corral_policy_free(&p);
	corral_policy_free(&before);
}

TEST(merge_over_current_values)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	busy_policy(&p);
	CHECK(load(&p, "{\"filesystem\": {\"ro\": [\"/a\"]},"
		       " \"env\": {\"set\": {\"KEEP\": \"2\", \"NEW\": \"3\"},"
		       " \"pass\": [\"HOME2\", \"X\"]},"
		       " \"limits\": {\"pids\": 9}}", &err) == 0);
	/* lists replace: "ro" is /a alone, "pass" its two names */
	CHECK(p.nbinds == 1 && !strcmp(p.binds[0].src, "/a"));
	CHECK(p.nenv == 2 && !strcmp(p.env[0].value, "2"));
	CHECK(p.nenv_pass == 2 && !strcmp(p.env_pass[0], "HOME2") &&
	      !strcmp(p.env_pass[1], "X"));
	CHECK(p.pids == 9);
	CHECK(p.memory_bytes == 64 * MiB && p.cpus == 0.5);	/* untouched */
	CHECK(!strcmp(p.workspace, "/srv/ws"));
	CHECK(load(&p, "{\"filesystem\": {\"workspace\": null}}", &err) == 0);
	CHECK(p.workspace == NULL);
	CHECK(load(&p, "{}", &err) == 0);
	corral_policy_free(&p);
}

TEST(limit_spellings)
{
	static const struct {
		const char *json;
		uint64_t memory, pids, timeout_ms;
		double cpus;
	} t[] = {
		{ "{\"memory\": 0, \"pids\": 0, \"cpus\": 0, \"timeout\": 0}",
		  0, 0, 0, 0 },
		{ "{\"memory\": \"unlimited\", \"pids\": \"unlimited\","
		  " \"cpus\": \"unlimited\", \"timeout\": \"none\"}", 0, 0, 0, 0 },
		{ "{\"memory\": 4194304, \"pids\": 1, \"cpus\": 0.25,"
		  " \"timeout\": 90}", 4 * MiB, 1, 90000, 0.25 },
		{ "{\"memory\": \"4M\", \"pids\": 4194304, \"cpus\": 1024,"
		  " \"timeout\": 1.5}", 4 * MiB, 4194304, 1500, 1024 },
		{ "{\"memory\": \"1T\", \"pids\": 2, \"cpus\": 2,"
		  " \"timeout\": \"30d\"}", TiB, 2, 30ULL * 86400000, 2 },
		{ "{\"memory\": \"8MiB\", \"pids\": 3, \"cpus\": 3,"
		  " \"timeout\": \"500ms\"}", 8 * MiB, 3, 500, 3 },
	};
	struct corral_err err = { 0 };
	struct corral_policy p;
	char json[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(t); i++) {
		corral_policy_init(&p);
		snprintf(json, sizeof(json), "{\"limits\": %s}", t[i].json);
		if (load(&p, json, &err))
			fprintf(stderr, "  %s\n", err.msg);
		CHECK(p.memory_bytes == t[i].memory);
		CHECK(p.pids == t[i].pids);
		CHECK(p.cpus == t[i].cpus);
		CHECK(p.timeout_ms == t[i].timeout_ms);
		corral_policy_free(&p);
	}
	corral_policy_init(&p);
	CHECK(load(&p, "{\"limits\": {\"disk\": \"1M\", \"output\": \"1K\"}}",
		   &err) == 0);
	CHECK(p.disk_bytes == MiB && p.output_bytes == KiB);
	CHECK(load(&p, "{\"limits\": {\"disk\": \"1T\", \"output\": \"1G\"}}",
		   &err) == 0);
	CHECK(p.disk_bytes == TiB && p.output_bytes == GiB);
	corral_policy_free(&p);
}

static const char abort_policy[] =
	"{\n"
	"  \"abort\": {\n"
	"    \"max_denied_egress\": 20,\n"
	"    \"max_distinct_denied_destinations\": 8, \"window_seconds\": 10,\n"
	"    \"max_denied_syscalls\": 50,\n"
	"    \"tripwires\": [\"/home/agent/.aws/credentials\",\n"
	"                  \"/home/agent//.ssh/./id_ed25519\", \"/tmp/.env\",\n"
	"                  \"/workspace/.git-credentials\", \"/tmp/.env\"],\n"
	"    \"max_cpu_seconds\": \"10m\", \"max_wall_seconds\": 3600,\n"
	"    \"on_abort\": \"freeze\"\n"
	"  }\n"
	"}\n";

TEST(abort_section)
{
	struct corral_policy p, copy;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	if (load(&p, abort_policy, &err))
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(p.abort.max_denied_egress == 20);
	CHECK(p.abort.max_distinct_denied == 8);
	CHECK(p.abort.window_ms == 10000);
	CHECK(p.abort.max_denied_syscalls == 50);
	CHECK(p.abort.max_cpu_ms == 600000);
	CHECK(p.abort.max_wall_ms == 3600000);
	CHECK(!p.abort.kill);
	/* normalised, and named twice is planted once */
	CHECK(p.abort.ntripwires == 4);
	if (p.abort.ntripwires == 4) {
		CHECK(!strcmp(p.abort.tripwires[0], "/home/agent/.aws/credentials"));
		CHECK(!strcmp(p.abort.tripwires[1], "/home/agent/.ssh/id_ed25519"));
		CHECK(!strcmp(p.abort.tripwires[2], "/tmp/.env"));
		CHECK(!strcmp(p.abort.tripwires[3], "/workspace/.git-credentials"));
	}

	/* a second file merges: tripwires and values replace */
	CHECK(load(&p, "{\"abort\": {\"on_abort\": \"kill\", \"window_seconds\": \"1.5s\","
		       " \"max_cpu_seconds\": 0.0005, \"max_wall_seconds\": \"none\","
		       " \"tripwires\": [\"/home/agent/.netrc\", \"/tmp/.env\"]}}",
		   &err) == 0);
	CHECK(p.abort.kill);
	CHECK(p.abort.window_ms == 1500);
	CHECK(p.abort.max_cpu_ms == 1);		/* rounded up, never to 0 */
	CHECK(p.abort.max_wall_ms == 0);
	CHECK(p.abort.max_denied_egress == 20);	/* untouched */
	CHECK(p.abort.ntripwires == 2 &&
	      !strcmp(p.abort.tripwires[0], "/home/agent/.netrc") &&
	      !strcmp(p.abort.tripwires[1], "/tmp/.env"));

	/* a window may go with its count, and both to 0 together */
	CHECK(load(&p, "{\"abort\": {\"max_distinct_denied_destinations\": 0,"
		       " \"window_seconds\": 0}}", &err) == 0);
	CHECK(p.abort.max_distinct_denied == 0 && p.abort.window_ms == 0);
	CHECK(load(&p, "{\"abort\": {\"max_denied_syscalls\": 1000000000,"
		       " \"max_wall_seconds\": \"30d\"}}", &err) == 0);
	CHECK(p.abort.max_denied_syscalls == 1000000000);
	CHECK(p.abort.max_wall_ms == 30ULL * 86400000);
	CHECK(load(&p, "{\"abort\": {}}", &err) == 0);

	/* the copy a load works on is deep: a failed load changes nothing */
	corral_policy_init(&copy);
	CHECK(load(&copy, abort_policy, &err) == 0);
	CHECK(load(&copy, "{\"abort\": {\"on_abort\": \"kill\", \"window_seconds\": \"1.5s\","
			  " \"max_cpu_seconds\": 0.0005, \"max_wall_seconds\": \"none\","
			  " \"tripwires\": [\"/home/agent/.netrc\", \"/tmp/.env\"]}}",
		   &err) == 0);
	CHECK(load(&copy, "{\"abort\": {\"max_distinct_denied_destinations\": 0,"
			  " \"window_seconds\": 0}}", &err) == 0);
	CHECK(load(&copy, "{\"abort\": {\"max_denied_syscalls\": 1000000000,"
			  " \"max_wall_seconds\": \"30d\"}}", &err) == 0);
	CHECK(policy_equal(&p, &copy));
	CHECK(load(&p, "{\"abort\": {\"max_denied_egress\": 1,"
		       " \"tripwires\": [\"/tmp/new\", \"/etc/shadow\"]}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "abort.tripwires[1]");
	CHECK(policy_equal(&p, &copy));
	corral_policy_free(&copy);
	corral_policy_free(&p);
	CHECK(p.abort.tripwires == NULL && p.abort.ntripwires == 0);
}

/* What a sandbox may write to its log: budget, whole repeats, interval. */
TEST(events_section)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(p.events.budget_bytes == 16 * MiB);
	CHECK(p.events.verbatim == 10);
	CHECK(p.events.interval_ms == 10000);
	CHECK(load(&p, "{\"events\": {\"budget\": \"64K\", \"verbatim\": 0,"
		       " \"summary_interval\": \"1.5s\"}}", &err) == 0);
	CHECK(p.events.budget_bytes == 64 * KiB);
	CHECK(p.events.verbatim == 0);
	CHECK(p.events.interval_ms == 1500);
	CHECK(load(&p, "{\"events\": {\"summary_interval\": 0.1}}", &err) == 0);
	CHECK(p.events.interval_ms == 100);
	CHECK(p.events.budget_bytes == 64 * KiB);	/* untouched */

	CHECK(load(&p, "{\"events\": {\"budget\": 0}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "events.budget: must be more than 0");
	CHECK(load(&p, "{\"events\": {\"budget\": \"1K\"}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "events.budget: too small, the minimum is 16 KiB");
	CHECK(load(&p, "{\"events\": {\"budget\": \"unlimited\"}}", &err) == -EINVAL);
	CHECK(load(&p, "{\"events\": {\"budget\": \"2G\"}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "events.budget: too large, the maximum is 1 GiB");
	CHECK(load(&p, "{\"events\": {\"verbatim\": -1}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "events.verbatim: expected an integer from 0 to 1000000");
	CHECK(load(&p, "{\"events\": {\"verbatim\": \"10\"}}", &err) == -EINVAL);
	CHECK(load(&p, "{\"events\": {\"summary_interval\": \"none\"}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "events.summary_interval: expected from 0.1 s to 24 h");
	CHECK(load(&p, "{\"events\": {\"summary_interval\": \"25h\"}}", &err) == -EINVAL);
	CHECK(load(&p, "{\"events\": {\"max\": 1}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "unknown key, expected one of: budget, verbatim, summary_interval");
	CHECK(p.events.budget_bytes == 64 * KiB && p.events.verbatim == 0 &&
	      p.events.interval_ms == 100);
	corral_policy_free(&p);
}

/* At most 32 tripwires, counted over every file merged. */
TEST(abort_tripwire_limit)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	char text[4096], pos[32], want[64];
	size_t off, i;

	corral_policy_init(&p);
	off = snprintf(text, sizeof(text), "{\"abort\": {\"tripwires\": [");
	for (i = 0; i < 32; i++)
		off += snprintf(text + off, sizeof(text) - off, "%s\"/tmp/t%zu\"",
				i ? ", " : "", i);
	snprintf(text + off, sizeof(text) - off, "]}}");
	CHECK(load(&p, text, &err) == 0);
	CHECK(p.abort.ntripwires == 32);
	/* the 32nd fits, a repeat costs nothing, the 33rd does not */
	snprintf(text + off, sizeof(text) - off, ", \"/tmp/t5\", \"/tmp/v\"]}}");
	CHECK(load(&p, text, &err) == -EINVAL);
	pos_of(text, "\"/tmp/v\"", pos, sizeof(pos));
	snprintf(want, sizeof(want), "t.json:%s: abort.tripwires[33]: ", pos);
	CHECK(!strncmp(err.msg, want, strlen(want)));
	CHECK_STR_CONTAINS(err.msg, "too many tripwires, at most 32 (got \"/tmp/v\")");
	CHECK(p.abort.ntripwires == 32);
	/* a later list replaces: the count is its own, not the sum */
	CHECK(load(&p, "{\"abort\": {\"tripwires\": [\"/tmp/t0\", \"/tmp/u\"]}}",
		   &err) == 0);
	CHECK(p.abort.ntripwires == 2);
	corral_policy_free(&p);
}

/* ---- errors, and where they point ------------------------------------ */

static const struct {
	const char *what;
	const char *text;
	const char *marker;	/* the error points at its first occurrence */
	const char *key;
	const char *want;
} load_errors[] = {
	{ "unknown top-level key",
	  "{\n  \"limits\": {},\n  \"limitz\": {\"memory\": 1}\n}",
	  "\"limitz\"", "limitz",
	  "unknown key, expected one of: description, filesystem, limits, env, network" },
	{ "unknown nested key",
	  "{\n  \"limits\": {\n    \"memory\": \"1G\",\n    \"swap\": \"1G\"\n  }\n}",
	  "\"swap\"", "limits.swap", "unknown key, expected one of: memory, pids" },
	{ "unknown key under network",
	  "{\"network\": {\"mode\": \"none\", \"allowed\": [\"x.org\"]}}",
	  "\"allowed\"", "network.allowed",
	  "unknown key, expected one of: mode, allow, deny, transparent, hosts, resolver, tls, tls_upstream_ca, max_url, max_headers, max_body (got [\"x.org\"])" },
	/* a key of another section: the list here does not say where */
	{ "a section's key at the top level",
	  "{\"memory\": \"1G\"}", "\"memory\"", "memory",
	  "identity; memory belongs in limits (limits.memory) (got \"1G\")" },
	{ "a top-level section under network",
	  "{\"network\": {\"mode\": \"proxy\", \"secrets\": []}}",
	  "\"secrets\"", "network.secrets",
	  "max_body; secrets belongs at the top level (got [])" },
	{ "another section's key",
	  "{\"limits\": {\"tripwires\": [\"/x\"]}}", "\"tripwires\"",
	  "limits.tripwires",
	  "open_files; tripwires belongs in abort (abort.tripwires) (got" },
	{ "section of the wrong type",
	  "{\n  \"env\": [\"A\"]\n}", "[\"A\"]", "env", "expected an object" },
	{ "pids of the wrong type",
	  "{\n  \"limits\": {\n    \"pids\": \"many\"\n  }\n}",
	  "\"many\"", "limits.pids",
	  "expected an integer from 1 to 4194304, or 0 or \"unlimited\" (got \"many\")" },
	{ "ro not an array",
	  "{\"filesystem\": {\"ro\": \"/usr\"}}", "\"/usr\"", "filesystem.ro",
	  "expected an array" },
	{ "ro element not a string",
	  "{\"filesystem\": {\"ro\": [\"/usr\",\n 42]}}", "42",
	  "filesystem.ro[1]", "expected a string (got 42)" },
	{ "description not a string",
	  "{\"description\": 1}", "1", "description", "expected a string" },
	{ "bad size",
	  "{\n  \"limits\": {\n    \"memory\": \"12XB\"\n  }\n}", "\"12XB\"",
	  "limits.memory",
	  "not a size, expected a number with an optional K/M/G/T suffix (got \"12XB\")" },
	{ "size too large",
	  "{\"limits\": {\"memory\": \"99999999999T\"}}", "\"9", "limits.memory",
	  "too large" },
	{ "memory below the minimum",
	  "{\n\t\"limits\": {\"memory\": \"1M\"}\n}", "\"1M\"", "limits.memory",
	  "minimum is 4 MiB" },
	{ "memory negative",
	  "{\"limits\": {\"memory\": -5}}", "-5", "limits.memory", "negative" },
	{ "memory as a fraction of bytes",
	  "{\"limits\": {\"memory\": 5.5e9}}", "5.5e9", "limits.memory",
	  "expected a size" },
	{ "pids too large",
	  "{\"limits\": {\n  \"pids\": 4194305}}", "4194305", "limits.pids",
	  "maximum is 4194304" },
	{ "pids negative",
	  "{\"limits\": {\"pids\": -1}}", "-1", "limits.pids", "negative" },
	{ "pids fractional",
	  "{\"limits\": {\"pids\": 1.5}}", "1.5", "limits.pids",
	  "expected an integer" },
	{ "cpus too large",
	  "{\"limits\": {\"cpus\": 1024.5}}", "1024.5", "limits.cpus",
	  "maximum is 1024" },
	{ "cpus negative",
	  "{\"limits\": {\"cpus\": -0.5}}", "-0.5", "limits.cpus", "negative" },
	{ "cpus as a string",
	  "{\"limits\": {\"cpus\": \"2\"}}", "\"2\"", "limits.cpus",
	  "expected a number" },
	{ "disk zero",
	  "{\"limits\": {\"disk\": 0}}", "0", "limits.disk", "more than 0" },
	{ "disk unlimited",
	  "{\"limits\": {\"disk\": \"unlimited\"}}", "\"unl", "limits.disk",
	  "not a size" },
	{ "disk too small",
	  "{\"limits\": {\"disk\": \"512K\"}}", "\"512K\"", "limits.disk",
	  "too small, the minimum is 1 MiB" },
	{ "disk too large",
	  "{\"limits\": {\"disk\": \"2T\"}}", "\"2T\"", "limits.disk",
	  "too large, the maximum is 1 TiB" },
	{ "timeout too long",
	  "{\"limits\": {\"timeout\": \"31d\"}}", "\"31d\"", "limits.timeout",
	  "maximum is 30 days" },
	{ "timeout too long in seconds",
	  "{\"limits\": {\"timeout\": 2592001}}", "2592001", "limits.timeout",
	  "maximum is 30 days" },
	{ "timeout negative",
	  "{\"limits\": {\"timeout\": -1}}", "-1", "limits.timeout", "negative" },
	{ "timeout bad string",
	  "{\"limits\": {\"timeout\": \"soon\"}}", "\"soon\"", "limits.timeout",
	  "not a duration" },
	{ "timeout wrong type",
	  "{\"limits\": {\"timeout\": true}}", "true", "limits.timeout",
	  "expected a duration" },
	{ "output too small",
	  "{\"limits\": {\"output\": 512}}", "512", "limits.output",
	  "too small, the minimum is 1 KiB" },
	{ "output too large",
	  "{\"limits\": {\"output\": \"2G\"}}", "\"2G\"", "limits.output",
	  "too large, the maximum is 1 GiB" },
	{ "connections zero",
	  "{\"limits\": {\"connections\": 0}}", "0", "limits.connections",
	  "must be at least 1" },
	{ "connections too many",
	  "{\"limits\": {\"connections\": 65537}}", "65537", "limits.connections",
	  "too large, the maximum is 65536" },
	{ "open_files too few",
	  "{\"limits\": {\"open_files\": 63}}", "63", "limits.open_files",
	  "too small, the minimum is 64: a command's processes each need a few dozen fds (got 63)" },
	{ "open_files negative",
	  "{\"limits\": {\"open_files\": -4096}}", "-4096", "limits.open_files",
	  "too small, the minimum is 64: a command's processes each need a few dozen fds (got -4096)" },
	{ "open_files past nr_open's most",
	  "{\"limits\": {\"open_files\": 2147483585}}", "2147483585", "limits.open_files",
	  "too large, the maximum is 2147483584 (the most fs.nr_open can be) (got 2147483585)" },
	{ "open_files 2^63-1",
	  "{\"limits\": {\"open_files\": 9223372036854775807}}", "9223", "limits.open_files",
	  "too large, the maximum is 2147483584 (the most fs.nr_open can be) (got 9223372036854775807)" },
	{ "open_files a float",
	  "{\"limits\": {\"open_files\": 4096.5}}", "4096.5", "limits.open_files",
	  "expected an integer from 64 to 2147483584 (got 4096.5)" },
	{ "open_files a string",
	  "{\"limits\": {\"open_files\": \"4096\"}}", "\"4096\"", "limits.open_files",
	  "expected an integer from 64 to 2147483584 (got \"4096\")" },
	{ "open_files unlimited",
	  "{\"limits\": {\"open_files\": \"unlimited\"}}", "\"unl", "limits.open_files",
	  "expected an integer from 64 to 2147483584 (got \"unlimited\")" },
	{ "connections unlimited",
	  "{\"limits\": {\"connections\": \"unlimited\"}}", "\"unl", "limits.connections",
	  "expected an integer from 1 to 65536" },
	{ "NUL in the description",
	  "{\n  \"description\": \"a\\u0000b\"\n}", "\"a\\", "description",
	  "contains a NUL byte (got \"a\\u0000b\")" },
	{ "NUL in a size",
	  "{\"limits\": {\"memory\": \"512M\\u0000junk\"}}", "\"512", "limits.memory",
	  "NUL" },
	{ "NUL in a bind",
	  "{\"filesystem\": {\"rw\": [\"/tmp\\u0000/x\"]}}", "\"/tmp", "filesystem.rw[0]",
	  "NUL" },
	{ "NUL in an env value",
	  "{\"env\": {\"set\": {\"A\": \"x\\u0000\"}}}", "\"x", "env.set.A", "NUL" },
	{ "bad env name",
	  "{\n  \"env\": {\n    \"set\": {\"OK\": \"1\", \"1BAD\": \"x\"}\n  }\n}",
	  "\"1BAD\"", "env.set.1BAD", "[A-Za-z_][A-Za-z0-9_]*" },
	{ "env name with a dash",
	  "{\"env\": {\"set\": {\"A-B\": \"x\"}}}", "\"A-B\"", "env.set.A-B",
	  "not a valid environment variable name" },
	{ "env name with a space",
	  "{\"env\": {\"set\": {\"A B\": \"x\"}}}", "\"A B\"", "env.set.\"A B\"",
	  "not a valid environment variable name" },
	{ "empty env name",
	  "{\"env\": {\"set\": {\"\": \"x\"}}}", "\"\"", "env.set.\"\"",
	  "name is empty" },
	{ "bad name to pass",
	  "{\"env\": {\"pass\": [\"PATH\", \"A=B\"]}}", "\"A=B\"", "env.pass[1]",
	  "not a valid environment variable name" },
	{ "env value not a string",
	  "{\"env\": {\"set\": {\"N\": 5}}}", "5", "env.set.N", "expected a string" },
	{ "dot-dot in a bind",
	  "{\n  \"filesystem\": {\n    \"ro\": [\"/usr\", \"/usr/../etc\"]\n  }\n}",
	  "\"/usr/../etc\"", "filesystem.ro[1]", "must not contain a \"..\"" },
	{ "relative bind",
	  "{\"filesystem\": {\"rw\": [\"out\"]}}", "\"out\"", "filesystem.rw[0]",
	  "host path must be absolute (got \"out\")" },
	{ "relative sandbox path",
	  "{\"filesystem\": {\"rw\": [\"/out:out\"]}}", "\"/out:", "filesystem.rw[0]",
	  "sandbox path must be absolute" },
	{ "bind onto /proc",
	  "{\n  \"filesystem\": {\n    \"rw\": [\"/tmp/p:/proc\"]\n  }\n}",
	  "\"/tmp/p", "filesystem.rw[0]", "cannot be /proc or lie under it" },
	{ "bind under /dev",
	  "{\"filesystem\": {\"ro\": [\"/dev/shm\"]}}", "\"/dev", "filesystem.ro[0]",
	  "cannot be /dev" },
	{ "relative workspace",
	  "{\"filesystem\": {\"workspace\": \"proj\"}}", "\"proj\"",
	  "filesystem.workspace", "workspace must be absolute" },
	{ "workspace of the wrong type",
	  "{\"filesystem\": {\"workspace\": false}}", "false",
	  "filesystem.workspace", "expected an absolute path or null" },
	{ "unknown network mode",
	  "{\"network\": {\"mode\": \"open\"}}", "\"open\"", "network.mode",
	  "unknown network mode, expected \"none\" or \"proxy\" (got \"open\")" },
	{ "network mode of the wrong type",
	  "{\"network\": {\"mode\": true}}", "true", "network.mode",
	  "expected a string (got true)" },
	{ "network section of the wrong type",
	  "{\"network\": \"proxy\"}", "\"proxy\"", "network",
	  "expected an object" },
	{ "allow pattern refused, at its element",
	  "{\n  \"network\": {\n    \"mode\": \"proxy\",\n"
	  "    \"allow\": [\"pypi.org\", \"*.x.org\", \"*.com\"]\n  }\n}",
	  "\"*.com\"", "network.allow[2]",
	  "a wildcard over a whole top-level domain is not allowed; use a domain "
	  "under it, as in \"*.example.com\" (got \"*.com\")" },
	{ "allow everything",
	  "{\"network\": {\"allow\": [\"*\"]}}", "\"*\"", "network.allow[0]",
	  "\"*\" would allow every host" },
	{ "allow a bare top-level domain",
	  "{\"network\": {\"allow\": [\"com\"]}}", "\"com\"", "network.allow[0]",
	  "a name of one label" },
	{ "allow a /0 network",
	  "{\"network\": {\"allow\": [\n\t\"0.0.0.0/0\"]}}", "\"0.0.0.0/0\"",
	  "network.allow[0]", "a /0 network would allow every address" },
	{ "allow with a bad port",
	  "{\"network\": {\"allow\": [\"a.example:99999\"]}}", "\"a.example:",
	  "network.allow[0]", "port must be a number from 1 to 65535" },
	{ "allow with userinfo",
	  "{\"network\": {\"allow\": [\"allowed.test@evil.test\"]}}", "\"allowed",
	  "network.allow[0]", "contains \"@\"" },
	{ "allow an unbracketed IPv6 address",
	  "{\"network\": {\"allow\": [\"2001:db8::1\"]}}", "\"2001",
	  "network.allow[0]", "an IPv6 address must be in brackets" },
	{ "NUL in an allow pattern",
	  "{\"network\": {\"allow\": [\"pypi.org\\u0000.evil\"]}}", "\"pypi",
	  "network.allow[0]", "contains a NUL byte" },
	{ "deny pattern refused",
	  "{\"network\": {\"deny\": [\"ok.example\",\n  \"a..b\"]}}", "\"a..b\"",
	  "network.deny[1]", "host name has an empty label (got \"a..b\")" },
	{ "allow not an array",
	  "{\"network\": {\"allow\": \"pypi.org\"}}", "\"pypi.org\"",
	  "network.allow", "expected an array of patterns" },
	{ "allow element not a string",
	  "{\"network\": {\"allow\": [\"pypi.org\", 443]}}", "443",
	  "network.allow[1]", "expected a string (got 443)" },
	{ "transparent not a boolean",
	  "{\"network\": {\"transparent\": \"yes\"}}", "\"yes\"",
	  "network.transparent", "expected true or false (got \"yes\")" },
	{ "hosts not an object",
	  "{\"network\": {\"hosts\": [\"a.test\"]}}", "[\"a.test\"]",
	  "network.hosts", "expected an object of \"name\": \"address\" pairs" },
	{ "hosts name not a name",
	  "{\"network\": {\"hosts\": {\"ok.test\": \"10.0.0.1\",\n"
	  "  \"bad name\": \"10.0.0.2\"}}}", "\"bad name\"",
	  "network.hosts.\"bad name\"",
	  "not a host name: contains a space (got \"bad name\")" },
	{ "hosts name is an address",
	  "{\"network\": {\"hosts\": {\"10.0.0.1\": \"10.0.0.2\"}}}",
	  "\"10.0.0.1\"", "network.hosts.\"10.0.0.1\"",
	  "an IP address, not a host name" },
	{ "hosts address not an address",
	  "{\"network\": {\"hosts\": {\"a.test\": \"example.com\"}}}",
	  "\"example.com\"", "network.hosts.\"a.test\"",
	  "not an IP address, expected an IPv4 dotted quad or an IPv6 address" },
	{ "hosts address in a loose spelling",
	  "{\"network\": {\"hosts\": {\"a.test\": \"0x0a000001\"}}}",
	  "\"0x0a", "network.hosts.\"a.test\"", "not an IP address" },
	{ "hosts address not a string",
	  "{\"network\": {\"hosts\": {\"a.test\": 167772161}}}",
	  "167772161", "network.hosts.\"a.test\"", "expected a string" },
	{ "unknown key under abort",
	  "{\"abort\": {\"max_denied_egress\": 1,\n  \"max_denials\": 2}}",
	  "\"max_denials\"", "abort.max_denials",
	  "unknown key, expected one of: max_denied_egress, "
	  "max_distinct_denied_destinations, window_seconds, max_denied_syscalls, "
	  "ignore_syscalls, tripwires, max_cpu_seconds, max_wall_seconds, on_abort (got 2)" },
	{ "abort section of the wrong type",
	  "{\"abort\": [\"kill\"]}", "[\"kill\"]", "abort", "expected an object" },
	{ "abort count as a string",
	  "{\"abort\": {\"max_denied_egress\": \"20\"}}", "\"20\"",
	  "abort.max_denied_egress",
	  "expected an integer from 0 to 1000000000 (0: no such criterion) (got \"20\")" },
	{ "abort count fractional",
	  "{\"abort\": {\"max_denied_syscalls\": 2.5}}", "2.5",
	  "abort.max_denied_syscalls", "expected an integer from 0 to 1000000000" },
	{ "abort count negative",
	  "{\"abort\": {\n  \"max_denied_syscalls\": -3}}", "-3",
	  "abort.max_denied_syscalls", "cannot be negative (got -3)" },
	{ "abort count too large",
	  "{\"abort\": {\"max_distinct_denied_destinations\": 1000000001}}",
	  "1000000001", "abort.max_distinct_denied_destinations",
	  "too large, the maximum is 1000000000" },
	{ "abort duration too long",
	  "{\"abort\": {\"max_wall_seconds\": \"31d\"}}", "\"31d\"",
	  "abort.max_wall_seconds", "too long, the maximum is 30 days" },
	{ "abort duration too long in seconds",
	  "{\"abort\": {\"max_cpu_seconds\": 2592000.5}}", "2592000.5",
	  "abort.max_cpu_seconds", "too long, the maximum is 30 days" },
	{ "abort duration negative",
	  "{\"abort\": {\"max_cpu_seconds\": -1}}", "-1",
	  "abort.max_cpu_seconds", "a duration cannot be negative" },
	{ "abort duration not a duration",
	  "{\"abort\": {\"max_denied_egress\": 3,\n \"window_seconds\": \"10 s\"}}",
	  "\"10 s\"", "abort.window_seconds", "not a duration" },
	{ "abort duration of the wrong type",
	  "{\"abort\": {\"window_seconds\": [10]}}", "[10]",
	  "abort.window_seconds", "expected a duration such as \"30s\"" },
	{ "distinct destinations beyond what is remembered",
	  "{\"abort\": {\"max_distinct_denied_destinations\": 4097}}", "4097",
	  "abort.max_distinct_denied_destinations", "too large, the maximum is 4096" },
	{ "window without its count",
	  "{\"abort\": {\n  \"max_distinct_denied_destinations\": 0,\n  \"window_seconds\": 10\n}}",
	  "10\n", "abort.window_seconds",
	  "a window needs max_distinct_denied_destinations, the count it applies to (got 10)" },
	{ "window left without its count by a later file",
	  "{\"abort\": {\"max_distinct_denied_destinations\": 0}}", "0}",
	  "abort.max_distinct_denied_destinations",
	  "cannot be 0 while window_seconds is set" },
	{ "unknown on_abort",
	  "{\"abort\": {\"on_abort\": \"hold\"}}", "\"hold\"", "abort.on_abort",
	  "unknown action, expected \"freeze\" (halt and hold) or \"kill\" (got \"hold\")" },
	{ "on_abort of the wrong type",
	  "{\"abort\": {\"on_abort\": true}}", "true", "abort.on_abort",
	  "expected a string (got true)" },
	{ "hide not an array",
	  "{\"filesystem\": {\"hide\": \"/workspace/.env\"}}", "\"/workspace", "filesystem.hide",
	  "expected an array of absolute paths" },
	{ "hide relative",
	  "{\"filesystem\": {\"hide\": [\".env\"]}}", "\".env",
	  "filesystem.hide[0]", "hidden path must be absolute" },
	{ "hide the root",
	  "{\"filesystem\": {\"hide\": [\"//\"]}}", "\"//\"",
	  "filesystem.hide[0]", "the root cannot be hidden" },
	{ "hide corral's own",
	  "{\"filesystem\": {\"hide\": [\"/proc/self\"]}}", "\"/proc/self",
	  "filesystem.hide[0]", "/proc is corral's own" },
	{ "tripwires not an array",
	  "{\"abort\": {\"tripwires\": \"/tmp/x\"}}", "\"/tmp/x\"", "abort.tripwires",
	  "expected an array of absolute paths" },
	{ "tripwire not a string",
	  "{\"abort\": {\"tripwires\": [\"/tmp/x\", {}]}}", "{}]",
	  "abort.tripwires[1]", "expected a string (got {})" },
	{ "tripwire relative",
	  "{\"abort\": {\"tripwires\": [\".aws/credentials\"]}}", "\".aws",
	  "abort.tripwires[0]", "tripwire path must be absolute (got \".aws/credentials\")" },
	{ "tripwire empty",
	  "{\"abort\": {\"tripwires\": [\"\"]}}", "\"\"]",
	  "abort.tripwires[0]", "tripwire path is empty" },
	{ "tripwire with dot-dot",
	  "{\"abort\": {\"tripwires\": [\n\t\"/home/agent/../../etc/passwd\"]}}",
	  "\"/home", "abort.tripwires[0]", "must not contain a \"..\" component" },
	{ "tripwire outside the writable areas",
	  "{\"abort\": {\"tripwires\": [\"/home/agent/.netrc\", \"/etc/shadow\"]}}",
	  "\"/etc", "abort.tripwires[1]",
	  "a tripwire must lie under /home/agent, /tmp or /workspace" },
	{ "tripwire in a look-alike directory",
	  "{\"abort\": {\"tripwires\": [\"/home/agent2/.netrc\"]}}", "\"/home",
	  "abort.tripwires[0]", "must lie under /home/agent, /tmp or /workspace" },
	{ "tripwire in another home",
	  "{\"abort\": {\"tripwires\": [\"/home/.netrc\"]}}", "\"/home",
	  "abort.tripwires[0]", "must lie under /home/agent" },
	{ "tripwire is a top directory",
	  "{\"abort\": {\"tripwires\": [\"/workspace/\"]}}", "\"/workspace/\"",
	  "abort.tripwires[0]", "a tripwire is a file" },
	{ "tripwire under another",
	  "{\"abort\": {\"tripwires\": [\"/tmp/a\", \"/tmp/a/b\"]}}", "\"/tmp/a/b\"",
	  "abort.tripwires[1]", "lies under the tripwire /tmp/a, which is a file" },
	{ "tripwire over another",
	  "{\"abort\": {\"tripwires\": [\"/tmp/a/b\",\n\"/tmp/a\"]}}", "\"/tmp/a\"]",
	  "abort.tripwires[1]", "the tripwire /tmp/a/b lies under it" },
	{ "tripwire with a control character",
	  "{\"abort\": {\"tripwires\": [\"/tmp/a\\nb\"]}}", "\"/tmp/a\\",
	  "abort.tripwires[0]", "contains a control character (got \"/tmp/a\\u000ab\")" },
	{ "tripwire with a NUL",
	  "{\"abort\": {\"tripwires\": [\"/tmp/a\\u0000b\"]}}", "\"/tmp/a\\",
	  "abort.tripwires[0]", "contains a NUL byte" },
	{ "top level is an array",
	  "[{\"limits\": {}}]", "[", "top level", "expected an object" },
	{ "columns count characters, not bytes",
	  "{\"description\": \"h\xc3\xa9h\xc3\xa9\", \"limits\": {\"pids\": -1}}",
	  "-1", "limits.pids", "negative" },
	{ "escaped key still located",
	  "{\"lim\\u0069ts\": {\"pids\": 1, \"x\": 1}}", "\"x\"",
	  "limits.x", "unknown key" },
};

/* Each row of load_errors counts, and reports, as a test of its own. */
static void run_load_error(size_t i)
{
	int before = unit_failed_checks;

	expect_error(load_errors[i].text, load_errors[i].marker,
		     load_errors[i].key, load_errors[i].want);
	if (unit_failed_checks == before) {
		unit_passed++;
		printf("ok - load error: %s\n", load_errors[i].what);
	} else {
		unit_failed++;
		printf("not ok - load error: %s\n", load_errors[i].what);
	}
}

TEST(tripwire_too_long)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	char text[512], path[300];

	/* 255 bytes is the most a tripwire path may have */
	memset(path, 'x', sizeof(path));
	memcpy(path, "/tmp/", 5);
	path[256] = '\0';
	snprintf(text, sizeof(text), "{\"abort\": {\"tripwires\": [\"%s\"]}}", path);
	expect_error(text, "\"/tmp/", "abort.tripwires[0]",
		     "tripwire path is longer than 255 bytes");
	path[255] = '\0';
	snprintf(text, sizeof(text), "{\"abort\": {\"tripwires\": [\"%s\"]}}", path);
	corral_policy_init(&p);
	CHECK(load(&p, text, &err) == 0);
	CHECK(p.abort.ntripwires == 1 && strlen(p.abort.tripwires[0]) == 255);
	corral_policy_free(&p);
}

TEST(env_value_too_long)
{
	size_t n = 40000;
	char *text = malloc(n + 64);

	snprintf(text, n + 64, "{\"env\": {\"set\": {\"BIG\": \"");
	memset(text + strlen(text), 'v', n);
	strcpy(text + strlen("{\"env\": {\"set\": {\"BIG\": \"") + n, "\"}}}");
	expect_error(text, "\"vvv", "env.set.BIG", "longer than 32 KiB");
	free(text);
}

TEST(got_is_cut_short)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	char text[400];

	snprintf(text, sizeof(text), "{\"limits\": {\"memory\": \"%0300d\"}}", 7);
	text[300] = 'X';	/* inside the digits: not a size */
	corral_policy_init(&p);
	CHECK(load(&p, text, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a size");
	CHECK_STR_CONTAINS(err.msg, "...)");
	CHECK(strlen(err.msg) < 200);
	CHECK(load(&p, "{\"limits\": {\"memory\": [1,2,3,4,5,6,7,8,9,10,11,12,"
		       "13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30]}}",
		   &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "(got [1,2,3,");
	CHECK_STR_CONTAINS(err.msg, "...)");
	corral_policy_free(&p);
}

/* the one escaper of the library's messages, in both its spellings */
TEST(quote_styles)
{
	static const char in[] = "a\"\\\n\x7f\xc2\x85\xc3\xa9";
	char buf[80], small[8];

	text_quote(in, sizeof(in) - 1, buf, sizeof(buf), 60, QUOTE_JSON);
	CHECK(!strcmp(buf, "\"a\\\"\\\\\\u000a\\u007f\\u0085\xc3\xa9\""));
	text_quote(in, sizeof(in) - 1, buf, sizeof(buf), 60, QUOTE_ASCII);
	CHECK(!strcmp(buf, "\"a\\\"\\\\\\x0a\\x7f\\xc2\\x85\\xc3\\xa9\""));
	/* cut: never half a UTF-8 character, and said */
	text_quote("ab\xc3\xa9", 4, buf, sizeof(buf), 3, QUOTE_JSON);
	CHECK(!strcmp(buf, "\"ab\"..."));
	text_quote("abcdef", 6, buf, sizeof(buf), 3, QUOTE_ASCII);
	CHECK(!strcmp(buf, "\"abc\"..."));
	/* a buffer too small for max gets nothing rather than an overflow */
	text_quote("abc", 3, small, sizeof(small), 60, QUOTE_JSON);
	CHECK(small[0] == '\0');
}

TEST(syntax_error_position)
{
	static const struct {
		const char *text, *marker, *want;
	} t[] = {
		/* jansson points at the last character of the token it stopped on */
		{ "{\n  \"limits\": {\n    \"memory\": \"1G\",\n  }\n}",
		  "}\n}", "string or '}' expected" },
		{ "{\n  \"limits\": {\n    \"memory\" \"1G\"\n  }\n}",
		  "\"\n  }", "':' expected" },
		{ "{\"a\": 1} x", "x", "end of file expected" },
		{ "{\n\"a\": tru }", "u }", "invalid token" },
	};
	struct corral_policy p, before;
	struct corral_err err = { 0 };
	char pos[32], prefix[64];
	size_t i;

	busy_policy(&p);
	busy_policy(&before);
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		pos_of(t[i].text, t[i].marker, pos, sizeof(pos));
		CHECK(load(&p, t[i].text, &err) == -EINVAL);
		snprintf(prefix, sizeof(prefix), "t.json:%s: ", pos);
		if (strncmp(err.msg, prefix, strlen(prefix)))
			fprintf(stderr, "  %s (expected %s)\n", err.msg, prefix);
		CHECK(!strncmp(err.msg, prefix, strlen(prefix)));
		CHECK_STR_CONTAINS(err.msg, t[i].want);
	}
	CHECK(load(&p, "", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "t.json:");
	CHECK(policy_equal(&p, &before));
	corral_policy_free(&p);
	corral_policy_free(&before);
}

TEST(duplicate_key)
{
	expect_error("{\n  \"limits\": {\n    \"pids\": 1,\n    \"pids\": 2\n  }\n}",
		     "\"pids\": 2", "limits.pids", "duplicate key");
	expect_error("{\"network\": {},\n \"network\": {}}", "\"network\": {}}",
		     "network", "duplicate key");
	/* the same key spelled two ways is still the same key */
	expect_error("{\"env\": {\"set\": {\"A\": \"1\", \"\\u0041\": \"2\"}}}",
		     "\"\\u0041\"", "env.set.\"\\u0041\"", "duplicate key");
}

TEST(failed_load_leaves_policy_unchanged)
{
	struct corral_policy p, before;
	struct corral_err err = { 0 };

	busy_policy(&p);
	busy_policy(&before);
	/* everything before the last key is valid and would have changed p */
	CHECK(load(&p, "{\"filesystem\": {\"workspace\": null, \"ro\": [\"/a\"]},"
		       " \"limits\": {\"memory\": \"1G\", \"pids\": 5},"
		       " \"env\": {\"set\": {\"KEEP\": \"new\"}, \"pass\": [\"P\"]},"
		       " \"network\": {\"mode\": \"proxy\", \"transparent\": true,"
		       " \"hosts\": {\"keep.test\": \"10.0.0.9\", \"n.test\": \"::1\"},"
		       " \"deny\": [\"d.example\"],"
		       " \"allow\": [\"pypi.org\", \"*\"]}}", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "network.allow[1]");
	CHECK(policy_equal(&p, &before));
	CHECK(load(&p, "{\"limits\": {\"memory\": \"1G\"}} trailing", &err) ==
	      -EINVAL);
	CHECK(policy_equal(&p, &before));
	corral_policy_free(&p);
	corral_policy_free(&before);
}

/* ---- files ----------------------------------------------------------- */

TEST(load_file_errors)
{
	char dir[] = "/tmp/corral-unit-XXXXXX", path[64];
	struct corral_policy p, before;
	struct corral_err err = { 0 };
	FILE *f;

	CHECK(mkdtemp(dir) != NULL);
	busy_policy(&p);
	busy_policy(&before);

	snprintf(path, sizeof(path), "%s/missing.json", dir);
	CHECK(corral_policy_load_file(&p, path, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, path);
	CHECK_STR_CONTAINS(err.msg, "No such file or directory");

	CHECK(corral_policy_load_file(&p, dir, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a regular file");

	/* a FIFO nobody writes to must be refused, not waited on */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK(mkfifo(path, 0600) == 0);
	CHECK(corral_policy_load_file(&p, path, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a regular file");
	unlink(path);

	snprintf(path, sizeof(path), "%s/big.json", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("{\"description\": \"", f);
		for (int i = 0; i < 1024 * 1024; i++)
			fputc('x', f);
		fputs("\"}", f);
		fclose(f);
	}
	CHECK(corral_policy_load_file(&p, path, &err) == -EFBIG);
	CHECK_STR_CONTAINS(err.msg, "larger than 1 MiB");
	unlink(path);

	snprintf(path, sizeof(path), "%s/bad.json", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("{\n  \"limits\": {\"pids\": 0.5}\n}\n", f);
		fclose(f);
	}
	CHECK(corral_policy_load_file(&p, path, &err) == -EINVAL);
	CHECK(!strncmp(err.msg, path, strlen(path)));
	CHECK_STR_CONTAINS(err.msg, ":2:22: limits.pids: ");
	unlink(path);

	CHECK(policy_equal(&p, &before));
	rmdir(dir);
	corral_policy_free(&p);
	corral_policy_free(&before);
}

/* ---- the locator on its own ------------------------------------------ */

TEST(jsonpos_locates)
{
	static const char text[] =
		"{\"a\": {\"b\": [10, {\"c\": \"x\"}]},\n"
		" \"m\\u0065m\": 1, \"e\": [], \"o\": {}}";
	const struct jsonpos_step abc[] = {
		{ .key = "a" }, { .key = "b" }, { .index = 1 }, { .key = "c" },
	};
	const struct jsonpos_step mem[] = { { .key = "mem" } };
	const struct jsonpos_step miss[] = { { .key = "a" }, { .key = "z" } };
	const struct jsonpos_step idx[] = { { .key = "e" }, { .index = 0 } };
	struct jsonpos pos;
	char dotted[64];

	CHECK(jsonpos_locate(text, strlen(text), abc, 4, false, &pos) == 0);
	CHECK(pos.line == 1 && pos.col == 24);
	CHECK(jsonpos_locate(text, strlen(text), abc, 4, true, &pos) == 0);
	CHECK(pos.line == 1 && pos.col == 19);
	CHECK(jsonpos_locate(text, strlen(text), abc, 3, false, &pos) == 0);
	CHECK(pos.line == 1 && pos.col == 18);
	CHECK(jsonpos_locate(text, strlen(text), abc, 0, false, &pos) == 0);
	CHECK(pos.line == 1 && pos.col == 1);
	CHECK(jsonpos_locate(text, strlen(text), mem, 1, true, &pos) == 0);
	CHECK(pos.line == 2 && pos.col == 2);
	CHECK(jsonpos_locate(text, strlen(text), miss, 2, false, &pos) == -ENOENT);
	CHECK(jsonpos_locate(text, strlen(text), idx, 2, false, &pos) == -ENOENT);

	/* the key "c" ends at the byte after its closing quote */
	CHECK(jsonpos_key_ending_at(text, strlen(text),
				    strstr(text, "\"c\"") - text + 3,
				    &pos, dotted, sizeof(dotted)) == 0);
	CHECK(pos.line == 1 && pos.col == 19);
	CHECK(!strcmp(dotted, "a.b[1].c"));
	CHECK(jsonpos_key_ending_at(text, strlen(text), 5, &pos, dotted,
				    sizeof(dotted)) == -ENOENT);
}

/* Every prefix and some garbage: no crash, no read past the end (ASan). */
TEST(jsonpos_survives_anything)
{
	static const char *const texts[] = {
		full_policy, "", "{", "[", "\"", "\"\\", "{\"a\\u12", "{\"a\":",
		"{\"a\" 1}", "]]]]", "}}}", "{\"a\":1,,}", "\\u0000",
		"{\"limits\":{\"memory\":\"\\ud800\\udc00\"}}",
	};
	const struct jsonpos_step path[] = {
		{ .key = "limits" }, { .key = "memory" },
	};
	struct jsonpos pos;
	char dotted[16];
	size_t i, n, len;
	char *deep, *copy;

	for (i = 0; i < ARRAY_SIZE(texts); i++) {
		len = strlen(texts[i]);
		for (n = 0; n <= len; n++) {
			copy = malloc(n ? n : 1);
			memcpy(copy, texts[i], n);
			jsonpos_locate(copy, n, path, 2, false, &pos);
			jsonpos_locate(copy, n, path, 2, true, &pos);
			jsonpos_key_ending_at(copy, n, n, &pos, dotted,
					      sizeof(dotted));
			free(copy);
		}
	}
	/* nesting far past JSONPOS_MAX_DEPTH, as arrays and as objects */
	n = 100000;
	deep = malloc(6 * n);
	memset(deep, '[', n);
	memset(deep + n, ']', n);
	CHECK(jsonpos_locate(deep, 2 * n, path, 2, false, &pos) == -ENOENT);
	CHECK(jsonpos_key_ending_at(deep, 2 * n, n, &pos, dotted,
				    sizeof(dotted)) == -ENOENT);
	for (i = 0; i < n; i++)
		memcpy(deep + 5 * i, "{\"a\":", 5);
	memset(deep + 5 * n, '}', n);
	CHECK(jsonpos_locate(deep, 6 * n, path, 2, false, &pos) == -ENOENT);
	CHECK(jsonpos_key_ending_at(deep, 6 * n, 5 * n - 1, &pos, dotted,
				    sizeof(dotted)) == -ENOENT);
	/* the fourth key: opening quote at byte 16, closing one at 18 */
	CHECK(jsonpos_key_ending_at(deep, 6 * n, 5 * 3 + 4, &pos, dotted,
				    sizeof(dotted)) == 0);
	CHECK(pos.line == 1 && pos.col == 17);
	CHECK(!strcmp(dotted, "a.a.a.a"));
	free(deep);
	CHECK(jsonpos_locate(NULL, 5, path, 2, false, &pos) == -ENOENT);
}


/* The CLI's limit flags go through the file's checks. */
TEST(set_limit_from_flags)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(corral_policy_set_limit(&p, "memory", "256M", &err) == 0);
	CHECK(p.memory_bytes == 256ull << 20);
	CHECK(corral_policy_set_limit(&p, "pids", "64", &err) == 0 && p.pids == 64);
	CHECK(corral_policy_set_limit(&p, "cpus", "1.5", &err) == 0 && p.cpus == 1.5);
	CHECK(corral_policy_set_limit(&p, "timeout", "0.2", &err) == 0 && p.timeout_ms == 200);
	CHECK(corral_policy_set_limit(&p, "timeout", "2m", &err) == 0 && p.timeout_ms == 120000);
	CHECK(corral_policy_set_limit(&p, "memory", "0", &err) == 0 && p.memory_bytes == 0);
	CHECK(corral_policy_set_limit(&p, "disk", "8M", &err) == 0 && p.disk_bytes == 8u << 20);

	CHECK(corral_policy_set_limit(&p, "memory", "12XB", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "limits.memory: not a size");
	CHECK(strncmp(err.msg, "limits.memory: ", 15) == 0);
	CHECK(p.memory_bytes == 0);	/* unchanged */
	CHECK(corral_policy_set_limit(&p, "pids", "-3", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.pids:");
	CHECK(corral_policy_set_limit(&p, "cpus", "0.001", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "the minimum is 0.01");
	CHECK(corral_policy_set_limit(&p, "output", "5", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "the minimum is 1 KiB");
	CHECK(corral_policy_set_limit(&p, "bogus", "1", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "unknown key");
	CHECK(p.pids == 64 && p.disk_bytes == 8u << 20);
	corral_policy_free(&p);
}

TEST(open_files_from_flags)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(corral_policy_set_limit(&p, "open_files", "4096", &err) == 0 &&
	      p.open_files == 4096);
	CHECK(corral_policy_set_limit(&p, "open_files", "-5", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.open_files: expected an integer from 64 to 2147483584 (got \"-5\")");
	CHECK(corral_policy_set_limit(&p, "open_files", "9223372036854775808", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.open_files: expected an integer");
	CHECK_STR_CONTAINS(err.msg, "9223372036854775808");
	CHECK(p.open_files == 4096);
	/* 2^63 in a file: past what jansson reads as an integer, still named */
	CHECK(load(&p, "{\"limits\": {\"open_files\": 9223372036854775808}}", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "9223372036854775808");
	CHECK(p.open_files == 4096);
	corral_policy_free(&p);
}

/*
 * limits.open_files against the host, when a sandbox starts: the share
 * of a quarter of fs.file-max over pids (this host's 2466248 as the
 * example), and half of the caller's hard limit (init keeps the rest).
 */
TEST(open_files_share)
{
	struct corral_err err = { 0 };
	rlim_t cap;

	/* without open_files: as before, the share, not below 1024 */
	CHECK(nofile_cap_of(0, 1024, 2466248, 20000, &cap, &err) == 0 && cap == 1024);
	CHECK(nofile_cap_of(0, 10, 2466248, 20000, &cap, &err) == 0 && cap == 61656);
	CHECK(nofile_cap_of(0, 0, 2466248, 20000, &cap, &err) == 0 && cap == 0);
	CHECK(nofile_cap_of(0, 10, 0, 20000, &cap, &err) == 0 && cap == 0);
	/* within the share: exactly what was asked */
	CHECK(nofile_cap_of(4096, 100, 2466248, 20000, &cap, &err) == 0 && cap == 4096);
	CHECK(nofile_cap_of(4096, 150, 2466248, 20000, &cap, &err) == 0 && cap == 4096);
	/* less than the default gives is never refused, nor is the default */
	CHECK(nofile_cap_of(64, 1024, 2466248, 20000, &cap, &err) == 0 && cap == 64);
	CHECK(nofile_cap_of(1024, 1024, 2466248, 20000, &cap, &err) == 0 && cap == 1024);
	/* past it: refused with both values and the host's bound */
	CHECK(nofile_cap_of(10000, 1024, 2466248, 20000, &cap, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "limits.open_files 10000 x limits.pids 1024 is "
			   "10240000 files, more than a quarter of this host's file "
			   "table (616562 of fs.file-max 2466248): lower one of them");
	CHECK(nofile_cap_of(1025, 1024, 2466248, 20000, &cap, &err) == -EINVAL);
	CHECK(nofile_cap_of(4096, 151, 2466248, 20000, &cap, &err) == -EINVAL);
	/* the largest of both: no overflow of the product */
	CHECK(nofile_cap_of(2147483584ULL, 4194304, 2466248, RLIM_INFINITY, &cap, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "is 9007198986305536 files");
	/* more than half of the caller's hard limit: refused, what to do said */
	CHECK(nofile_cap_of(10001, 2, 2466248, 20000, &cap, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "limits.open_files 10001 is more than half of "
			   "corral's own hard open-files limit (20000)");
	CHECK_STR_CONTAINS(err.msg, "ulimit -Hn 20002");
	CHECK(nofile_cap_of(10000, 2, 2466248, 20000, &cap, &err) == 0 && cap == 10000);
	/* no pids limit: no share to keep (as without open_files), the rest holds */
	CHECK(nofile_cap_of(9000, 0, 2466248, 20000, &cap, &err) == 0 && cap == 9000);
	CHECK(nofile_cap_of(10001, 0, 2466248, 20000, &cap, &err) == -EINVAL);
}

/* identity.user: agent (the default) or root; nothing else */
TEST(identity_section)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(!p.root_inside);
	CHECK(load(&p, "{\"identity\": {\"user\": \"root\"}}", &err) == 0);
	CHECK(p.root_inside);
	CHECK(load(&p, "{\"identity\": {}}", &err) == 0);
	CHECK(p.root_inside);
	CHECK(load(&p, "{\"identity\": {\"user\": \"agent\"}}", &err) == 0);
	CHECK(!p.root_inside);
	CHECK(load(&p, "{\"identity\": {\"user\": \"admin\"}}", &err) != 0);
	CHECK(strstr(err.msg, "identity.user") && strstr(err.msg, "\"root\""));
	CHECK(load(&p, "{\"identity\": {\"user\": 0}}", &err) != 0);
	CHECK(load(&p, "{\"identity\": {\"uid\": 0}}", &err) != 0);
	CHECK(!p.root_inside);
	corral_policy_free(&p);
}

/* The daemon compares a TCP client's host path with a prefix so spelled. */
TEST(path_normalise)
{
	struct corral_err err = { 0 };
	char *out = NULL;

	CHECK(corral_path_normalise("/a//b/./c/", &out, &err) == 0);
	CHECK(out && !strcmp(out, "/a/b/c"));
	free(out);
	CHECK(corral_path_normalise("//", &out, &err) == 0);
	CHECK(out && !strcmp(out, "/"));
	free(out);
	CHECK(corral_path_normalise("a/b", &out, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "must be absolute");
	CHECK(corral_path_normalise("/a/../b", &out, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "\"..\"");
}

/* over_text laid over base_text by corral_json_merge, loaded into p */
static void load_merged(struct corral_policy *p, const char *base_text,
			const char *over_text)
{
	struct corral_err err = { 0 };
	json_t *eff = json_loads(base_text, 0, NULL);
	json_t *over = json_loads(over_text, 0, NULL);
	char *text;

	CHECK(eff && over && corral_json_merge(eff, over) == 0);
	text = json_dumps(eff, JSON_COMPACT);
	CHECK(text && load(p, text, &err) == 0);
	free(text);
	json_decref(eff);
	json_decref(over);
}

/*
 * The bound of what another party may ask (policy_bounds.c, shared by
 * corral mcp and corral serve): narrowing passes, each widening is
 * refused naming the field, the bound and what was asked.
 */
static void within_case(const char *bound_text, const char *asked_text,
			const char *want)
{
	struct corral_policy bound, asked;
	struct corral_err err = { 0 };
	int r;

	corral_policy_init(&bound);
	corral_policy_init(&asked);
	CHECK(load(&bound, bound_text, &err) == 0);
	/* the asked object laid over the bound's, then loaded: as both front ends do */
	load_merged(&asked, bound_text, asked_text);
	r = corral_policy_within(&asked, &bound, &err);
	if (!want) {
		CHECK(r == 0);
	} else {
		CHECK(r == -EPERM && err.code == -EPERM);
		CHECK_STR_CONTAINS(err.msg, want);
	}
	corral_policy_free(&bound);
	corral_policy_free(&asked);
}

TEST(policy_within)
{
	static const char op[] = "{\"limits\": {\"memory\": \"256M\", \"pids\": 64, "
		"\"cpus\": 1, \"timeout\": \"60s\"}, \"network\": {\"mode\": \"proxy\", "
		"\"allow\": [\"a.test\", \"b.test\"], \"deny\": [\"x.a.test\"]}, "
		"\"abort\": {\"max_denied_egress\": 5, \"tripwires\": [\"/tmp/.env\"], "
		"\"on_abort\": \"freeze\"}}";

	within_case(op, "{}", NULL);
	within_case(op, "{\"limits\": {\"pids\": 32, \"memory\": \"64M\", \"cpus\": 0.5}, "
		    "\"network\": {\"allow\": [\"b.test\"]}, "
		    "\"abort\": {\"max_denied_egress\": 1}}", NULL);
	within_case(op, "{\"network\": {\"mode\": \"none\"}}", NULL);
	within_case(op, "{\"limits\": {\"pids\": 65}}",
		    "limits.pids: the operator's policy allows at most 64 (got 65)");
	within_case(op, "{\"limits\": {\"pids\": \"unlimited\"}}",
		    "limits.pids: the operator's policy sets at most 64; it cannot be removed");
	within_case(op, "{\"limits\": {\"memory\": \"unlimited\"}}", "limits.memory (bytes)");
	within_case(op, "{\"limits\": {\"cpus\": \"unlimited\"}}",
		    "limits.cpus: the operator's policy allows at most 1 (got unlimited)");
	within_case(op, "{\"limits\": {\"cpus\": 1.5}}",
		    "limits.cpus: the operator's policy allows at most 1 (got 1.5)");
	within_case(op, "{\"limits\": {\"timeout\": \"none\"}}", "limits.timeout (ms)");
	within_case(op, "{\"network\": {\"allow\": [\"c.test\"]}}",
		    "network.allow: \"c.test\" is not in the operator's allowlist (2 pattern(s))");
	within_case(op, "{\"network\": {\"deny\": []}}",
		    "network.deny: the operator's denial \"x.a.test\" cannot be removed");
	within_case(op, "{\"network\": {\"transparent\": false}}", "network.transparent");
	within_case(op, "{\"abort\": {\"max_denied_egress\": 6}}",
		    "abort.max_denied_egress: the operator's policy allows at most 5 (got 6)");
	within_case(op, "{\"abort\": {\"tripwires\": []}}",
		    "abort.tripwires: the operator's tripwire /tmp/.env cannot be removed");
	within_case(op, "{\"abort\": {\"on_abort\": \"kill\"}}", "abort.on_abort");
	/* the operator's hidden paths stay hidden: a client's list replaces, never drops */
	within_case("{\"filesystem\": {\"hide\": [\"/workspace/.env\"]}}",
		    "{\"filesystem\": {\"hide\": [\"/workspace/.env\", \"/workspace/k\"]}}", NULL);
	within_case("{\"filesystem\": {\"hide\": [\"/workspace/.env\"]}}",
		    "{\"filesystem\": {\"hide\": []}}",
		    "filesystem.hide: the operator's hidden path /workspace/.env cannot be shown");
	within_case("{\"filesystem\": {\"hide\": [\"/workspace/.env\"]}}",
		    "{\"filesystem\": {\"hide\": [\"/workspace/k\"]}}",
		    "filesystem.hide: the operator's hidden path /workspace/.env cannot be shown");
	within_case("{}", "{\"network\": {\"mode\": \"proxy\", \"allow\": [\"a.test\"]}}",
		    "network.mode: the operator's policy allows no network");
	within_case("{}", "{\"limits\": {\"pids\": 1025}}", "limits.pids");
}

/*
 * A front end names its bound (corral serve's built-in default for a TCP
 * client without --policy): the refusal says that bound, never "the
 * operator's policy" where there is none.
 */
/* corral serve's name for its built-in bound, as api_sandboxes.c gives it */
static const struct corral_bound_name default_bound = {
	.policy = "the daemon's default bound", .owner = "the default bound's",
};

TEST(policy_within_named)
{
	const struct corral_bound_name *name = &default_bound;
	struct corral_policy bound, asked;
	struct corral_err err = { 0 };

	corral_policy_init(&bound);
	corral_policy_init(&asked);
	CHECK(load(&bound, "{\"limits\": {\"pids\": 64}, \"abort\": "
		   "{\"tripwires\": [\"/tmp/.env\"]}}", &err) == 0);
	CHECK(load(&asked, "{\"limits\": {\"pids\": 65}, \"abort\": "
		   "{\"tripwires\": [\"/tmp/.env\"]}}", &err) == 0);
	CHECK(corral_policy_within_named(&asked, &bound, name, &err) == -EPERM);
	CHECK_STR_CONTAINS(err.msg, "limits.pids: the daemon's default bound allows at most 64 (got 65)");
	CHECK(!strstr(err.msg, "operator"));
	corral_policy_free(&asked);
	corral_policy_init(&asked);
	CHECK(load(&asked, "{\"limits\": {\"pids\": 64}, \"abort\": {\"tripwires\": []}}",
		   &err) == 0);
	CHECK(corral_policy_within_named(&asked, &bound, name, &err) == -EPERM);
	CHECK_STR_CONTAINS(err.msg, "abort.tripwires: the default bound's tripwire /tmp/.env cannot be removed");
	/* NULL: the operator's, as corral_policy_within says it */
	CHECK(corral_policy_within_named(&asked, &bound, NULL, &err) == -EPERM);
	CHECK_STR_CONTAINS(err.msg, "abort.tripwires: the operator's tripwire /tmp/.env");
	corral_policy_free(&bound);
	corral_policy_free(&asked);
}

/*
 * The TLS part's refusals name the bound too: under corral serve's
 * built-in default none of them may say "the operator's policy".  The
 * public corral_policy_tls_within keeps the operator's sentence.
 */
static void tls_case(const char *bound_text, const char *asked_text,
		     const char *named, const char *operators)
{
	const struct corral_bound_name *name = &default_bound;
	struct corral_policy bound, asked;
	struct corral_err err = { 0 };

	corral_policy_init(&bound);
	corral_policy_init(&asked);
	CHECK(load(&bound, bound_text, &err) == 0);
	CHECK(load(&asked, asked_text, &err) == 0);
	CHECK(corral_policy_within_named(&asked, &bound, name, &err) == -EPERM);
	CHECK_STR_CONTAINS(err.msg, named);
	CHECK(!strstr(err.msg, "operator"));
	CHECK(corral_policy_within(&asked, &bound, &err) == -EPERM);
	CHECK_STR_CONTAINS(err.msg, operators);
	CHECK(corral_policy_tls_within(&asked, &bound) != NULL);
	CHECK_STR_CONTAINS(corral_policy_tls_within(&asked, &bound), operators);
	CHECK(corral_policy_within_named(&bound, &bound, name, &err) == 0);
	CHECK(corral_policy_tls_within(&bound, &bound) == NULL);
	corral_policy_free(&bound);
	corral_policy_free(&asked);
}

TEST(policy_tls_within_named)
{
	static const char net[] = "{\"network\": {\"mode\": \"proxy\", \"allow\": [\"a.test\"]";

	char b[512], a[512];

	snprintf(b, sizeof(b), "%s, \"tls\": \"terminate\"}}", net);
	snprintf(a, sizeof(a), "%s}}", net);
	tls_case(b, a, "network.tls: the default bound's \"terminate\" cannot be turned off",
		 "network.tls: the operator's \"terminate\" cannot be turned off");
	snprintf(b, sizeof(b), "%s, \"tls_upstream_ca\": \"/etc/ca.pem\"}}", net);
	snprintf(a, sizeof(a), "%s, \"tls_upstream_ca\": \"/tmp/mine.pem\"}}", net);
	tls_case(b, a, "network.tls_upstream_ca: fixed by the daemon's default bound",
		 "network.tls_upstream_ca: fixed by the operator's policy");
	snprintf(b, sizeof(b), "%s, \"max_body\": 1000}}", net);
	snprintf(a, sizeof(a), "%s, \"max_body\": 2000}}", net);
	tls_case(b, a, "network.max_url, max_headers, max_body: at most the default bound's",
		 "network.max_url, max_headers, max_body: at most the operator's");
	snprintf(b, sizeof(b), "{\"network\": {\"mode\": \"proxy\", \"allow\": [{\"host\": "
		 "\"a.test\", \"tls\": \"terminate\", \"methods\": [\"GET\"]}]}}");
	snprintf(a, sizeof(a), "{\"network\": {\"mode\": \"proxy\", \"allow\": [{\"host\": "
		 "\"a.test\", \"tls\": \"terminate\", \"methods\": [\"GET\", \"POST\"]}]}}");
	tls_case(b, a, "network.allow: entries that are objects (tls, methods, paths, max_body) "
		 "are fixed by the daemon's default bound",
		 "are fixed by the operator's policy");
	snprintf(b, sizeof(b), "%s}, \"secrets\": [{\"name\": \"K\", \"from_env\": \"K\", "
		 "\"hosts\": [\"a.test\"], \"header\": \"Authorization\"}]}", net);
	snprintf(a, sizeof(a), "%s}}", net);
	tls_case(b, a, "secrets: fixed by the daemon's default bound",
		 "secrets: fixed by the operator's policy");
}

/* ---- layers: one policy loaded over another --------------------------- */

static const char layer_base[] =
	"{\"filesystem\": {\"ro\": [\"/opt/a\"], \"rw\": [\"/srv/b\"]},"
	" \"env\": {\"set\": {\"A\": \"1\"}, \"pass\": [\"TERM\"]},"
	" \"network\": {\"mode\": \"proxy\", \"hosts\": {\"h.test\": \"192.0.2.1\"},"
	"  \"allow\": [\"a.test\", {\"host\": \"api.test\", \"tls\": \"terminate\","
	"   \"methods\": [\"GET\"]}], \"deny\": [\"x.a.test\"]},"
	" \"abort\": {\"tripwires\": [\"/tmp/.env\"], \"ignore_syscalls\": [\"ptrace\"]},"
	" \"export\": {\"hold\": [\"**/.envrc2\"]},"
	" \"secrets\": [{\"name\": \"K\", \"from_env\": \"K\", \"hosts\": [\"api.test\"],"
	"  \"header\": \"Authorization\"}]}";

static size_t tls_rules(const struct corral_policy *p)
{
	return p->net_tls ? json_array_size(json_object_get(p->net_tls->net, "rules")) : 0;
}

static size_t tls_secrets(const struct corral_policy *p)
{
	return p->net_tls ? json_array_size(p->net_tls->secrets) : 0;
}

/*
 * layer over layer_base, loaded as two documents, is what the front ends
 * get from corral_json_merge of the two, loaded as one.
 */
static void layer_case(const char *layer)
{
	struct corral_policy two, one;
	struct corral_err err = { 0 };
	size_t i;

	corral_policy_init(&two);
	corral_policy_init(&one);
	CHECK(load(&two, layer_base, &err) == 0);
	CHECK(load(&two, layer, &err) == 0);
	load_merged(&one, layer_base, layer);
	CHECK(policy_equal(&two, &one));
	CHECK(two.abort.nignore_syscalls == one.abort.nignore_syscalls);
	for (i = 0; i < two.abort.nignore_syscalls && i < one.abort.nignore_syscalls; i++)
		CHECK(!strcmp(two.abort.ignore_syscalls[i], one.abort.ignore_syscalls[i]));
	CHECK(two.export.nhold == one.export.nhold);
	for (i = 0; i < two.export.nhold && i < one.export.nhold; i++)
		CHECK(!strcmp(two.export.hold[i].path, one.export.hold[i].path));
	CHECK(tls_rules(&two) == tls_rules(&one));
	CHECK(tls_secrets(&two) == tls_secrets(&one));
	corral_policy_free(&two);
	corral_policy_free(&one);
}

TEST(layer_lists_replace_as_json_merge)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	layer_case("{}");
	layer_case("{\"abort\": {\"tripwires\": []}}");
	layer_case("{\"abort\": {\"tripwires\": [\"/tmp/.netrc\"], \"ignore_syscalls\": []}}");
	layer_case("{\"network\": {\"allow\": []}}");
	layer_case("{\"network\": {\"allow\": [\"b.test\"], \"deny\": [\"y.b.test\"]}}");
	layer_case("{\"network\": {\"hosts\": {\"g.test\": \"192.0.2.2\"}}}");
	layer_case("{\"filesystem\": {\"ro\": []}}");
	layer_case("{\"filesystem\": {\"rw\": [\"/srv/c\"]}}");
	layer_case("{\"env\": {\"pass\": [], \"set\": {\"B\": \"2\"}}}");
	layer_case("{\"export\": {\"hold\": []}}");
	layer_case("{\"secrets\": []}");

	/* each list by itself: what the layer says, the rest as it was */
	corral_policy_init(&p);
	CHECK(load(&p, layer_base, &err) == 0);
	CHECK(p.abort.ntripwires == 1 && tls_rules(&p) == 1 && tls_secrets(&p) == 1);
	CHECK(load(&p, "{\"abort\": {\"tripwires\": []}}", &err) == 0);
	CHECK(p.abort.ntripwires == 0 && p.abort.nignore_syscalls == 1);
	CHECK(load(&p, "{\"filesystem\": {\"ro\": [\"/opt/c\"]}}", &err) == 0);
	CHECK(p.nbinds == 2);
	for (size_t i = 0; i < p.nbinds; i++)
		CHECK(!strcmp(p.binds[i].src, p.binds[i].writable ? "/srv/b" : "/opt/c"));
	/* the allowlist's objects go with it: api.test is no longer terminated */
	CHECK(load(&p, "{\"network\": {\"allow\": [\"a.test\"]}}", &err) == 0);
	CHECK(p.nnet_allow == 1 && tls_rules(&p) == 0 && p.nnet_deny == 1);
	CHECK(load(&p, "{\"secrets\": []}", &err) == 0);
	CHECK(tls_secrets(&p) == 0 && !tls_policy_active(&p));
	CHECK(load(&p, "{\"export\": {\"hold\": []}, \"env\": {\"pass\": []}}", &err) == 0);
	CHECK(p.export.nhold == 0 && p.nenv_pass == 0 && p.nenv == 1);
	corral_policy_free(&p);
}

/*
 * A layer someone else chose (corral oci's io.corral.policy) may widen
 * the base but not take its denials away: corral_policy_keeps_denials.
 */
static void keeps_case(const char *layer, const char *want)
{
	struct corral_policy base, p;
	struct corral_err err = { 0 };
	int r;

	corral_policy_init(&base);
	CHECK(load(&base, layer_base, &err) == 0);
	CHECK(corral_policy_copy(&p, &base, &err) == 0);
	CHECK(policy_equal(&p, &base));
	CHECK(load(&p, layer, &err) == 0);
	r = corral_policy_keeps_denials(&p, &base, &err);
	if (!want) {
		CHECK(r == 0);
	} else {
		CHECK(r == -EPERM);
		CHECK_STR_CONTAINS(err.msg, want);
	}
	corral_policy_free(&base);
	corral_policy_free(&p);
}

TEST(layer_keeps_denials)
{
	keeps_case("{}", NULL);
	/* widening is not this check's business */
	keeps_case("{\"network\": {\"allow\": [\"a.test\", \"b.test\"]},"
		   " \"limits\": {\"pids\": 4096}, \"abort\": {\"ignore_syscalls\": [\"bpf\"]}}", NULL);
	keeps_case("{\"network\": {\"deny\": [\"x.a.test\", \"z.test\"]},"
		   " \"abort\": {\"tripwires\": [\"/tmp/.env\", \"/tmp/.netrc\"]}}", NULL);
	keeps_case("{\"network\": {\"deny\": []}}",
		   "network.deny: the operator's denial \"x.a.test\" cannot be removed");
	keeps_case("{\"network\": {\"deny\": [\"z.test\"]}}",
		   "network.deny: the operator's denial \"x.a.test\" cannot be removed");
	keeps_case("{\"abort\": {\"tripwires\": []}}",
		   "abort.tripwires: the operator's tripwire /tmp/.env cannot be removed");
	keeps_case("{\"abort\": {\"tripwires\": [\"/tmp/.netrc\"]}}",
		   "abort.tripwires: the operator's tripwire /tmp/.env cannot be removed");
	keeps_case("{\"export\": {\"hold\": [\"x\"]}}",
		   "export.hold: the operator's rule **/.envrc2 (always) cannot be removed");
}

/* An srt settings file adds to the policy, on purpose (srt.c). */
TEST(layer_srt_adds)
{
	char path[] = "/tmp/corral-unit-srt.XXXXXX", *report = NULL;
	struct corral_srt_made *made = NULL;
	static const char srt[] = "{\"network\": {\"allowedDomains\": [\"b.test\"],"
				  " \"deniedDomains\": [\"y.b.test\"]}}";
	struct corral_policy p;
	struct corral_err err = { 0 };
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, srt, strlen(srt)) == (ssize_t)strlen(srt));
	close(fd);
	corral_policy_init(&p);
	CHECK(load(&p, layer_base, &err) == 0);
	CHECK(corral_policy_load_srt_file(&p, path, &report, &made, &err) == 0);
	corral_srt_made_remove(made);
	free(report);
	unlink(path);
	CHECK(p.nnet_allow == 3 && p.nnet_deny == 2 && tls_rules(&p) == 1);
	corral_policy_free(&p);
}

/*
 * A settings file that is not there is said as a policy file's is: the
 * path and errno's text, not jansson's "PATH:-1:-1: unable to open PATH".
 */
TEST(layer_srt_missing_file)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	struct corral_srt_made *made = NULL;
	char *report = NULL;

	corral_policy_init(&p);
	CHECK(corral_policy_load_srt_file(&p, "/nonexistent/srt.json", &report,
					  &made, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/srt.json: No such file or directory");
	CHECK(strstr(err.msg, ":-1:") == NULL);
	CHECK(report == NULL);
	CHECK(made == NULL);
	free(report);
	corral_policy_free(&p);
}

TEST(json_merge)
{
	json_t *dst = json_pack("{s:{s:i, s:i}, s:[s], s:i}", "limits", "pids", 64,
				"memory", 1, "list", "a", "n", 1);
	json_t *src = json_pack("{s:{s:i}, s:[], s:{}}", "limits", "pids", 32,
				"list", "n");
	json_t *want = json_pack("{s:{s:i, s:i}, s:[], s:{}}", "limits", "pids", 32,
				 "memory", 1, "list", "n");

	CHECK(corral_json_merge(dst, src) == 0);
	CHECK(json_equal(dst, want));
	CHECK(corral_json_merge(dst, json_object_get(src, "list")) == -EINVAL);
	json_decref(dst);
	json_decref(src);
	json_decref(want);
}

int main(void)
{
	unit_run_all();
	for (size_t i = 0; i < ARRAY_SIZE(load_errors); i++)
		run_load_error(i);
	UNIT_DONE();
}
