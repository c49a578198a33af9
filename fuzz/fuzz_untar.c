/*
 * fuzz_untar.c - libFuzzer target for corral_box_untar (boxarchive.c): the
 * tar (plain or gzip) a client of the daemon sends into a sandbox,
 * unpacked into "/d" beneath a sandbox root that is a temporary directory
 * here.  /d holds, before each input, what an agent may have planted:
 * a symlink out of the root by its host path, one to "..", one to an
 * absolute name, a file and a directory.  Beside the root, outside it,
 * is a canary tree.  Whatever the bytes, after each input:
 *
 *   - the canary tree and everything in the root but /d are as they were
 *     (names, types, modes, sizes, times, contents, link targets): no
 *     entry wrote, linked, removed or changed anything outside /d;
 *   - a refused archive left no new name in /d (it undoes what it made;
 *     what it replaced may stay replaced);
 *   - a refusal says why.
 *
 * The box is synthetic: a struct corral_box whose sandbox has only its
 * root (rootfd) and a disk to measure (scratchfd), as tests/unit_box.c
 * builds them.  Run as root, the sandbox's user is uid 65534 and owns the
 * root and the canary, as the daemon unpacks with the agent's fs uid (no
 * DAC override): what the agent could write, an escape could reach.  The
 * tree is removed at exit.
 *
 *   make fuzz FUZZ_SECONDS=60 FUZZ_TARGETS=untar
 */
#include "box.h"
#include "sandbox.h"
#include "tree.h"

#define SNAP_MAX	(64 * 1024)	/* a snapshot of the fixed trees */

static char top[] = "/tmp/corral-fuzz-untar.XXXXXX";
static int topfd = -1, rootfd = -1;
static struct sandbox sb;
static struct corral_box box;
static char outside[sizeof(top) + 16];	/* the canary's host path */
static char before[SNAP_MAX];		/* root but /d, and the canary */

static void snapshot_all(char *out, size_t len)
{
	out[0] = '\0';
	tree_snapshot(topfd, "root", "d", out, len);
	tree_snapshot(topfd, "canary", NULL, out, len);
}

/* the sandbox's user's, as a name the agent made would be */
static void own(int dirfd, const char *rel)
{
	if (geteuid() == 0 &&
	    fchownat(dirfd, rel, sb.host_uid, sb.host_gid, AT_SYMLINK_NOFOLLOW) < 0)
		abort();
}

static void write_file(int dirfd, const char *rel, const char *text)
{
	tree_write_file(dirfd, rel, text);
	own(dirfd, rel);
}

/* /d as the agent left it; the names in it, for after a refusal */
static const char *const planted[] = {
	"d/abs", "d/esc", "d/f", "d/sub", "d/sub/g", "d/up",
};

static void plant(void)
{
	if (mkdirat(rootfd, "d", 0755) < 0 || mkdirat(rootfd, "d/sub", 0755) < 0 ||
	    symlinkat(outside, rootfd, "d/esc") < 0 ||
	    symlinkat("..", rootfd, "d/up") < 0 ||
	    symlinkat("/keep", rootfd, "d/abs") < 0)
		abort();
	own(rootfd, "d");
	own(rootfd, "d/sub");
	own(rootfd, "d/esc");
	own(rootfd, "d/up");
	own(rootfd, "d/abs");
	write_file(rootfd, "d/f", "planted\n");
	write_file(rootfd, "d/sub/g", "planted\n");
}

static bool was_planted(const char *rel)
{
	for (size_t i = 0; i < sizeof(planted) / sizeof(*planted); i++)
		if (!strcmp(planted[i], rel))
			return true;
	return false;
}

/* libFuzzer ends a timed run with exit(): nothing of ours stays in /tmp */
static void remove_top(void)
{
	tree_remove(topfd, "root");
	tree_remove(topfd, "canary");
	close(rootfd);
	close(topfd);
	rmdir(top);
}

/* a finding: said, and the tree removed before the abort libFuzzer records */
static void fail(const char *why, const char *what)
{
	fprintf(stderr, "fuzz_untar: %s%s\n", why, what);
	remove_top();
	abort();
}

/* after a refusal: every name beneath /d one that was planted */
static void check_nothing_new(const char *rel)
{
	char sub[TREE_PATH];
	struct tree_names ns;
	struct stat st;

	tree_names(rootfd, rel, &ns);
	for (size_t i = 0; i < ns.n; i++) {
		if (!tree_join(sub, sizeof(sub), rel, ns.v[i]) || !was_planted(sub))
			fail("a refused archive left ", sub);
		if (fstatat(rootfd, sub, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			check_nothing_new(sub);
	}
	tree_names_free(&ns);
}

static void setup(void)
{
	sb.host_uid = geteuid() == 0 ? 65534 : geteuid();
	sb.host_gid = geteuid() == 0 ? 65534 : getegid();
	if (!mkdtemp(top) || atexit(remove_top) != 0)
		abort();
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* mkdtemp's 0700 would keep the agent's uid from the canary */
	if (topfd < 0 || fchmod(topfd, 0755) < 0 || mkdirat(topfd, "root", 0755) < 0 ||
	    mkdirat(topfd, "canary", 0755) < 0 ||
	    mkdirat(topfd, "canary/sub", 0755) < 0)
		abort();
	own(topfd, "root");
	own(topfd, "canary");
	own(topfd, "canary/sub");
	snprintf(outside, sizeof(outside), "%s/canary", top);
	write_file(topfd, "canary/secret", "canary\n");
	write_file(topfd, "canary/sub/x", "canary\n");
	rootfd = openat(topfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		abort();
	write_file(rootfd, "keep", "keep\n");
	if (symlinkat(outside, rootfd, "out") < 0)
		abort();
	own(rootfd, "out");
	sb.rootfd = rootfd;
	sb.scratchfd = topfd;	/* the disk the room is measured on */
	box.sb = &sb;
	box.state = CORRAL_BOX_IDLE;
	snapshot_all(before, sizeof(before));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char after[SNAP_MAX];
	struct corral_err err = { 0 };
	struct corral_untar st;
	int r;

	if (topfd < 0)
		setup();
	plant();
	r = corral_box_untar(&box, "/d", data, size, &st, &err);
	snapshot_all(after, sizeof(after));
	if (strcmp(before, after) != 0) {
		fprintf(stderr, "before:\n%safter:\n%s", before, after);
		fail("outside /d changed", "");
	}
	if (r < 0 && (!err.msg[0] || err.code != r))
		fail("a refusal without its reason or code: ", err.msg);
	if (r < 0)
		check_nothing_new("d");
	tree_remove(rootfd, "d");
	return 0;
}
