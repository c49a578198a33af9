/*
 * fuzz_ociconfig.c - libFuzzer target for a bundle's config.json as
 * `corral oci create` reads it (src/cli/oci_config.c, compiled in: it is
 * the CLI's), and the same bytes as `exec --process`'s process.json.
 * Whatever the bytes: no crash, no leak, a load that fails says why, and
 * one that succeeds has a command and a rootfs.  Two operators: corral's
 * defaults, and one that allows binds beneath the bundle and joins a
 * pod's network namespace (so the paths config.json names are opened).
 *
 *   make fuzz FUZZ_SECONDS=60
 */
#include "oci.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/corral-fuzz-oci.XXXXXX";
static char config[sizeof(dir) + 32], rootfs[sizeof(dir) + 32];

/* libFuzzer ends a timed run with exit(): nothing of ours stays in /tmp */
static void remove_dir(void)
{
	unlink(config);
	rmdir(rootfs);
	rmdir(dir);
}

static void setup(void)
{
	if (!mkdtemp(dir) || atexit(remove_dir) != 0)
		abort();
	snprintf(config, sizeof(config), "%s/config.json", dir);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", dir);
	if (mkdir(rootfs, 0755) < 0)
		abort();
}

static void write_config(const uint8_t *data, size_t size)
{
	int fd = open(config, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) < 0)
		abort();
}

static void check(int r, const struct oci_spec *s, const struct corral_err *err)
{
	if (r < 0 && !err->msg[0])
		abort();	/* a refusal always says why */
	if (r == 0 && (!s->argv || !s->argv[0] || !s->rootfs || s->rootfs[0] != '/' ||
		       !s->cwd || s->cwd[0] != '/'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	char *allow[] = { dir, NULL };
	struct oci_operator ops[2] = {
		{ .egress_annotation = true },
		{ .egress_annotation = true, .allow_bind = allow, .nallow_bind = 1,
		  .join_pod_network = true },
	};
	struct corral_err err;
	struct oci_spec s;
	int r;

	if (!ready) {
		setup();
		ready = true;
	}
	write_config(data, size);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		memset(&err, 0, sizeof(err));
		r = oci_spec_load(&ops[i], dir, NULL, &s, &err);
		check(r, &s, &err);
		oci_spec_free(&s);
	}
	/* exec --process: the same reader of process, on a spec of its own */
	memset(&err, 0, sizeof(err));
	memset(&s, 0, sizeof(s));
	s.net_fd = -1;
	r = oci_process_load(&ops[0], config, &s, &err);
	if (r < 0 && !err.msg[0])
		abort();
	oci_spec_free(&s);
	return 0;
}
