/*
 * fuzz_layer.c - libFuzzer target for image_unpack.c: an image layer (a
 * tar, plain, gzip or zstd) from an image archive anyone may have made,
 * unpacked into a temporary directory beside a canary tree.  The symlinks
 * a layer plants are kept as written ("../../canary" reaches the canary
 * from the layer's top, were it followed).  Whatever the bytes, after each
 * input:
 *
 *   - the canary tree is as it was and nothing new is beside it: no
 *     entry wrote, linked, removed or changed anything outside the layer;
 *   - a refusal says why, with its code;
 *   - a layer taken holds no device but whiteouts (0/0 character
 *     devices), no setuid or setgid file, no setuid directory, and its
 *     report stays within the budget.
 *
 * The work is unpack_run, which image_unpack runs in a forked, least
 * privileged child: forked, its coverage would never reach libFuzzer, so
 * image_unpack.c is compiled into this target (unpack_run is static)
 * and run in process, without the child's Landlock, so that an escape
 * shows rather than being stopped.  As root it runs with the fs ids of
 * uid 65534, which owns the layer's directory and the canary, as the
 * child runs as the store's owner.  The tree is removed at exit.
 *
 *   make fuzz FUZZ_SECONDS=60 FUZZ_TARGETS=layer
 */
#include "image_unpack.c"
#include "tree.h"

#include <sys/fsuid.h>
#include <sys/mman.h>

#define SNAP_MAX	(64 * 1024)	/* a snapshot of the canary */
#define UNPACKER	65534		/* the store's owner, as root */

static char top[] = "/tmp/corral-fuzz-layer.XXXXXX";
static int topfd = -1, blobfd = -1;
static uid_t uid;
static gid_t gid;
static struct corral_image_limits lim;
static char before[SNAP_MAX];

static void own(int dirfd, const char *rel)
{
	if (geteuid() == 0 && fchownat(dirfd, rel, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		abort();
}

/* libFuzzer ends a timed run with exit(): nothing of ours stays in /tmp */
static void remove_top(void)
{
	tree_remove(topfd, "dest");
	tree_remove(topfd, "canary");
	close(topfd);
	close(blobfd);
	rmdir(top);
}

/* a finding: said, and the tree removed before the abort libFuzzer records */
static void finding(const char *why, const char *what)
{
	fprintf(stderr, "fuzz_layer: %s%s\n", why, what);
	remove_top();
	abort();
}

static void setup(void)
{
	uid = geteuid() == 0 ? UNPACKER : geteuid();
	gid = geteuid() == 0 ? UNPACKER : getegid();
	if (!mkdtemp(top) || atexit(remove_top) != 0)
		abort();
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* mkdtemp's 0700 would keep the unpacker's uid from the canary */
	if (topfd < 0 || fchmod(topfd, 0755) < 0 || mkdirat(topfd, "canary", 0755) < 0 ||
	    mkdirat(topfd, "canary/sub", 0755) < 0)
		abort();
	tree_write_file(topfd, "canary/secret", "canary\n");
	tree_write_file(topfd, "canary/sub/x", "canary\n");
	own(topfd, "canary");
	own(topfd, "canary/sub");
	own(topfd, "canary/secret");
	own(topfd, "canary/sub/x");
	blobfd = memfd_create("layer", MFD_CLOEXEC);
	if (blobfd < 0)
		abort();
	/* budgets an input of a few KB can reach, sparse files included */
	corral_image_limits_init(&lim);
	lim.max_bytes = 8 << 20;
	lim.max_files = 1024;
	lim.ratio_after = 1 << 20;
	before[0] = '\0';
	tree_snapshot(topfd, ".", "dest", before, sizeof(before));
}

static void as_unpacker(bool on)
{
	if (geteuid() != 0)
		return;
	setfsgid(on ? gid : 0);
	setfsuid(on ? uid : 0);
}

/* a layer taken: no device but whiteouts, no setuid or setgid file */
static void check_taken(const char *rel)
{
	char sub[TREE_PATH];
	struct tree_names ns;
	struct stat st;

	tree_names(topfd, rel, &ns);
	for (size_t i = 0; i < ns.n; i++) {
		if (!tree_join(sub, sizeof(sub), rel, ns.v[i]) ||
		    fstatat(topfd, sub, &st, AT_SYMLINK_NOFOLLOW) < 0)
			abort();
		if (S_ISBLK(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev != 0))
			finding("a device in the layer: ", sub);
		if (!S_ISDIR(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)))
			finding("a setuid or setgid file in the layer: ", sub);
		if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISUID))
			finding("a setuid directory in the layer: ", sub);
		if (S_ISDIR(st.st_mode))
			check_taken(sub);
	}
	tree_names_free(&ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char after[SNAP_MAX];
	struct corral_err err = { 0 };
	struct unpack_report rep;
	int destfd, r;

	if (topfd < 0)
		setup();
	if (ftruncate(blobfd, 0) < 0 ||
	    (size && pwrite(blobfd, data, size, 0) != (ssize_t)size) ||
	    lseek(blobfd, 0, SEEK_SET) < 0 || mkdirat(topfd, "dest", 0755) < 0)
		abort();
	own(topfd, "dest");
	destfd = openat(topfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (destfd < 0)
		abort();
	as_unpacker(true);
	r = unpack_run(blobfd, NULL, NULL, destfd, &lim, &rep, &err);
	as_unpacker(false);
	close(destfd);
	after[0] = '\0';
	tree_snapshot(topfd, ".", "dest", after, sizeof(after));
	if (strcmp(before, after) != 0) {
		fprintf(stderr, "before:\n%safter:\n%s", before, after);
		finding("outside the layer changed", "");
	}
	if (r < 0 && (!err.msg[0] || err.code != r))
		finding("a refusal without its reason or code: ", err.msg);
	if (r == 0) {
		if (rep.files > lim.max_files || rep.bytes > lim.max_bytes)
			finding("a layer taken past its budget", "");
		check_taken("dest/" LAYER_ROOT);
	}
	tree_remove(topfd, "dest");
	return 0;
}
