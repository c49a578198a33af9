/*
 * unit_image.c - image names as archives tag them and users type them,
 * normalised the way docker does, and the ones that must be refused.
 */
#include "corral.h"
#include "image.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char hex64[] =
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static void check_norm(const char *in, const char *want, int line)
{
	char out[512];
	struct corral_err err = { 0 };
	int r = corral_image_ref_normalize(in, out, sizeof(out), &err);

	if (r != 0 || strcmp(out, want) != 0) {
		fprintf(stderr, "  line %d: \"%s\" -> \"%s\" (%s), want \"%s\"\n", line, in,
			r ? "error" : out, r ? err.msg : "ok", want);
		unit_failed_checks++;
	}
}

static void check_bad(const char *in, const char *why, int line)
{
	char out[512];
	struct corral_err err = { 0 };
	int r = corral_image_ref_normalize(in, out, sizeof(out), &err);

	if (r == 0 || !strstr(err.msg, why)) {
		fprintf(stderr, "  line %d: \"%s\" accepted or wrong reason (\"%s\"), want \"%s\"\n",
			line, in, r ? err.msg : out, why);
		unit_failed_checks++;
	}
}

#define NORM(in, want) check_norm(in, want, __LINE__)
#define BAD(in, why) check_bad(in, why, __LINE__)

TEST(docker_hub_short_names)
{
	NORM("busybox", "docker.io/library/busybox:latest");
	NORM("busybox:1.36", "docker.io/library/busybox:1.36");
	NORM("docker.io/busybox", "docker.io/library/busybox:latest");
	NORM("docker.io/library/busybox:1", "docker.io/library/busybox:1");
	NORM("index.docker.io/library/busybox", "docker.io/library/busybox:latest");
	NORM("user/app:v2", "docker.io/user/app:v2");
	NORM("docker.io/user/app", "docker.io/user/app:latest");
}

TEST(registries_and_ports)
{
	NORM("quay.io/org/app:1.0", "quay.io/org/app:1.0");
	NORM("localhost/app", "localhost/app:latest");
	NORM("localhost:5000/app:dev", "localhost:5000/app:dev");
	NORM("registry.example.com:443/a/b/c", "registry.example.com:443/a/b/c:latest");
	/* a first component without . or : is a path, not a registry */
	NORM("myregistry/app", "docker.io/myregistry/app:latest");
}

TEST(digests)
{
	char in[256], want[256];

	snprintf(in, sizeof(in), "busybox@sha256:%s", hex64);
	snprintf(want, sizeof(want), "docker.io/library/busybox@sha256:%s", hex64);
	NORM(in, want);
	snprintf(in, sizeof(in), "quay.io/a/b:1@sha256:%s", hex64);
	snprintf(want, sizeof(want), "quay.io/a/b:1@sha256:%s", hex64);
	NORM(in, want);
	snprintf(in, sizeof(in), "sha256:%s", hex64);
	BAD(in, "is a digest, not a name");
	BAD("busybox@sha256:abc", "bad digest");
	BAD("busybox@md5:0123456789abcdef0123456789abcdef", "bad digest");
}

TEST(components)
{
	NORM("a/b-c__d.e/f", "docker.io/a/b-c__d.e/f:latest");
	NORM("a---b", "docker.io/library/a---b:latest");
	BAD("BusyBox", "bad component");
	BAD("a/-b", "bad component");
	BAD("a/b_", "bad component");
	BAD("a//b", "bad component");
	BAD("a/b___c", "bad component");
	BAD("/abs", "bad component");
	BAD("", "bad component");
	BAD("a/..", "bad component");
}

TEST(tags)
{
	NORM("app:V1.2-rc_3", "docker.io/library/app:V1.2-rc_3");
	BAD("app:", "bad tag");
	BAD("app:-x", "bad tag");
	BAD("app:a/b", "bad registry");
	BAD("app:a!", "bad tag");
	{
		char in[300];

		memset(in, 'x', sizeof(in));
		memcpy(in, "app:", 4);
		in[4 + 129] = '\0';
		BAD(in, "bad tag");
	}
}

TEST(hostile_bytes)
{
	BAD("busy box", "a space or control byte");
	BAD("busybox\n", "a space or control byte");
	BAD("bus\x7f", "a space or control byte");
	BAD("bad_registry.io:99999/x", "bad registry");
	BAD("-bad.io/x", "bad registry");
	{
		char in[600];

		memset(in, 'a', sizeof(in));
		in[sizeof(in) - 1] = '\0';
		BAD(in, "too long");
		in[300] = '\0';
		BAD(in, "longer than 255 bytes");
	}
}

TEST(store_path_rule)
{
	char *p;
	const char *home = getenv("HOME");

	p = corral_image_store_path("/srv/state");
	CHECK(p && !strcmp(p, "/srv/state/images"));
	free(p);
	if (geteuid() == 0) {
		p = corral_image_store_path(NULL);
		CHECK(p && !strcmp(p, "/var/lib/corral/images"));
		free(p);
		return;
	}
	setenv("XDG_DATA_HOME", "/x/data", 1);
	p = corral_image_store_path(NULL);
	CHECK(p && !strcmp(p, "/x/data/corral/images"));
	free(p);
	unsetenv("XDG_DATA_HOME");
	setenv("HOME", "/h", 1);
	p = corral_image_store_path(NULL);
	CHECK(p && !strcmp(p, "/h/.local/share/corral/images"));
	free(p);
	if (home)
		setenv("HOME", home, 1);
}

TEST(limits_defaults)
{
	struct corral_image_limits l;

	corral_image_limits_init(&l);
	CHECK(l.max_bytes == 16ull << 30);
	CHECK(l.max_files == 1000000);
	CHECK(l.max_ratio == 100);
	CHECK(l.ratio_after == 32ull << 20);
}

TEST(policy_root_and_workdir)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	char *good[] = { "/var/lib/corral/images/layers/ab/root", "/srv/tree" };
	char *bad_rel[] = { "relative/dir" };
	char *bad_opt[] = { "/a,upperdir=/etc" };
	const char *json = "{\"filesystem\": {\"root_writable\": true}}";

	corral_policy_init(&p);
	CHECK(corral_policy_set_root(&p, good, 2, &err) == 0);
	CHECK(p.nroot_layers == 2 && !strcmp(p.root_layers[1], "/srv/tree"));
	CHECK(corral_policy_set_root(&p, bad_rel, 1, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "not an absolute path");
	/* a layer path must not smuggle overlay options in */
	CHECK(corral_policy_set_root(&p, bad_opt, 1, &err) < 0);
	CHECK(p.nroot_layers == 2);
	CHECK(corral_policy_set_workdir(&p, "/srv/app", &err) == 0);
	CHECK(!strcmp(p.workdir, "/srv/app"));
	CHECK(corral_policy_set_workdir(&p, "srv", &err) < 0);
	CHECK(corral_policy_set_workdir(&p, "/srv/../etc", &err) < 0);
	CHECK(corral_policy_set_workdir(&p, "/srv/..", &err) < 0);
	CHECK(corral_policy_set_workdir(&p, "/srv/", &err) < 0);
	CHECK(corral_policy_set_workdir(&p, "/srv//x", &err) < 0);
	CHECK(corral_policy_set_workdir(&p, "/", &err) == 0);
	CHECK(!p.root_writable);
	CHECK(corral_policy_load_string(&p, json, strlen(json), "t.json", &err) == 0);
	CHECK(p.root_writable);
	/* a load is a deep copy: the layers survive it */
	CHECK(p.nroot_layers == 2 && !strcmp(p.root_layers[0], good[0]));
	json = "{\"filesystem\": {\"root_writable\": 1}}";
	CHECK(corral_policy_load_string(&p, json, strlen(json), "t.json", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "root_writable");
	corral_policy_free(&p);
}

TEST(policy_image_key)
{
	static const char *const good[] = {
		"{\"filesystem\": {\"image\": \"debian:12\"}}",
		"{\"filesystem\": {\"image\": \"ghcr.io/a/b@sha256:"
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}}",
		"{\"filesystem\": {\"image\": \"0123456789abcdef\"}}",
	};
	static const char *const bad[] = {
		"{\"filesystem\": {\"image\": \"/tmp/debian.tar\"}}",
		"{\"filesystem\": {\"image\": \"../x\"}}",
		"{\"filesystem\": {\"image\": 12}}",
		"{\"filesystem\": {\"image\": \"\"}}",
	};
	struct corral_policy p, q;
	struct corral_err err = { 0 };
	struct corral_image *img = (void *)1;

	corral_policy_init(&p);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		CHECK(corral_policy_load_string(&p, good[i], strlen(good[i]), "t.json", &err) == 0);
		CHECK(p.image != NULL);
	}
	CHECK(!strcmp(p.image, "0123456789abcdef"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(corral_policy_load_string(&p, bad[i], strlen(bad[i]), "t.json", &err) < 0);
		CHECK_STR_CONTAINS(err.msg, "filesystem.image");
		/* a failed load leaves the policy as it was */
		CHECK(!strcmp(p.image, "0123456789abcdef"));
	}
	corral_policy_free(&p);
	/* no image named: nothing resolved, no store opened */
	corral_policy_init(&q);
	CHECK(corral_policy_use_image(&q, "/nonexistent/state", &img, &err) == 0);
	CHECK(img == NULL && q.nroot_layers == 0);
	corral_policy_free(&q);
}

/* What the unpacking child is, as it sees itself. */
struct unpacker_view {
	pid_t pid;
	uid_t uid, euid;
	gid_t gid;
	int ngroups, nnp, open_errno, kill_errno;
};

static int look_around(void *arg, void *out, struct corral_err *err)
{
	struct unpacker_view *v = out;
	int fd;

	v->pid = getpid();
	v->uid = getuid();
	v->euid = geteuid();
	v->gid = getgid();
	v->ngroups = getgroups(0, NULL);
	v->nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	v->open_errno = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	v->kill_errno = kill(*(pid_t *)arg, 0) < 0 ? errno : 0;
	return 0;
}

/*
 * As root the unpacker is the store's owner (a range id, an agent's) with
 * no groups, no_new_privs and Landlock, alone in a pid namespace: a
 * process of the same uid (a sandbox's agent) is not there to signal.
 */
TEST(unpacker_confinement)
{
	struct unpacker_view v = { 0 };
	struct corral_err err = { 0 };
	char dir[] = "/tmp/unit-image-unpacker.XXXXXX";
	pid_t peer;
	int r;

	if (geteuid() != 0)
		return;	/* unprivileged, it is the caller (tests/image.sh) */
	CHECK(mkdtemp(dir) != NULL);
	peer = fork();
	if (peer == 0) {
		if (setresgid(IMAGE_OWNER_GID, IMAGE_OWNER_GID, IMAGE_OWNER_GID) == 0 &&
		    setresuid(IMAGE_OWNER_UID, IMAGE_OWNER_UID, IMAGE_OWNER_UID) == 0)
			pause();
		_exit(1);
	}
	CHECK(peer > 0);
	r = image_unprivileged(dir, IMAGE_OWNER_UID, IMAGE_OWNER_GID, look_around, &peer,
			       &v, sizeof(v), &err);
	kill(peer, SIGKILL);
	waitpid(peer, NULL, 0);
	rmdir(dir);
	CHECK(r == 0);
	CHECK(v.uid == IMAGE_OWNER_UID && v.euid == IMAGE_OWNER_UID);
	CHECK(v.gid == IMAGE_OWNER_GID);
	CHECK(v.ngroups == 0);
	CHECK(v.nnp == 1);
	CHECK(v.open_errno == EACCES);		/* Landlock: only dir */
	CHECK(v.pid == 1);			/* its own pid namespace */
	CHECK(v.kill_errno == ESRCH);		/* the same uid's process: not there */
}

/* A file of n bytes 'x', open for reading, unlinked. */
static int file_of(size_t n)
{
	char path[] = "/tmp/corral-unit-image.XXXXXX";
	int fd = mkstemp(path);
	char *buf = malloc(n + 1);

	if (fd < 0 || !buf)
		abort();
	memset(buf, 'x', n);
	if (write(fd, buf, n) != (ssize_t)n || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	unlink(path);
	free(buf);
	return fd;
}

/* Whole, NUL-ended, bounded; sized by fstat where it can be, else grown. */
TEST(read_fd_whole_and_bounded)
{
	char *out = NULL;
	size_t len = 0;
	json_error_t je;
	int fd, p[2], r;
	json_t *j;

	fd = file_of(1000);
	CHECK(image_read_fd(fd, 1000, &out, &len) == 0 && len == 1000 && out[1000] == '\0');
	free(out);
	close(fd);
	fd = file_of(1001);
	CHECK(image_read_fd(fd, 1000, &out, &len) == -EFBIG);
	close(fd);
	fd = file_of(0);
	CHECK(image_read_fd(fd, 1000, &out, &len) == 0 && len == 0 && out[0] == '\0');
	free(out);
	close(fd);
	/* no size to go by: grown to it, and refused one past the bound */
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "{\"a\": [1, 2, 3]}", 16) == 16);
	close(p[1]);
	j = image_json_fd(p[0], 16, &je, &r);
	CHECK(j && json_array_size(json_object_get(j, "a")) == 3 && r == 0);
	json_decref(j);
	close(p[0]);
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "{\"a\": [1, 2, 3]}", 16) == 16);
	close(p[1]);
	CHECK(!image_json_fd(p[0], 15, &je, &r) && r == -EFBIG);
	close(p[0]);
	/* duplicate keys are refused, as json_loadfd was told to */
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "{\"a\": 1, \"a\": 2}", 16) == 16);
	close(p[1]);
	CHECK(!image_json_fd(p[0], 100, &je, &r) && r == -EINVAL);
	CHECK(strstr(je.text, "duplicate") != NULL);
	close(p[0]);
}

/*
 * The image's User found in its layers with no host path looked up: a
 * layer's etc -> "/DIR" (the host's) had the caller stat DIR/passwd, and
 * a device there (0:0, a whiteout's) hid the lower layer's passwd, so
 * the host's file chose the user's home.  Now no host path is looked up,
 * and the image's /etc being a link, corral's own merge of its passwd
 * (mount.c) reads none there: no home of the image's (nor the lower
 * layer's file, which that link hides).
 */
TEST(image_user_judged_by_no_host_file)
{
	char dir[] = "/tmp/unit-image-user.XXXXXX", path[256], host[128];
	char l0[128], l1[128], *layers[2] = { l0, l1 };
	struct corral_image img = { 0 };
	struct corral_err err = { 0 };
	struct corral_policy p;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l0, sizeof(l0), "%s/l0", dir);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	snprintf(host, sizeof(host), "%s/host", dir);
	CHECK(mkdir(l0, 0755) == 0 && mkdir(l1, 0755) == 0 && mkdir(host, 0755) == 0);
	snprintf(path, sizeof(path), "%s/etc", l0);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/etc/passwd", l0);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(fd >= 0 && write(fd, "app:x:1000:1000:app:/home/app:/bin/sh\n", 38) == 38);
	close(fd);
	snprintf(path, sizeof(path), "%s/etc", l1);
	CHECK(symlink(host, path) == 0);
	snprintf(path, sizeof(path), "%s/passwd", host);
	/* a whiteout: anyone may make one (Linux 5.8) */
	CHECK(mknod(path, S_IFCHR | 0600, makedev(0, 0)) == 0);
	img.layers = layers;
	img.nlayers = 2;
	img.config.user = "app";
	corral_policy_init(&p);
	CHECK(image_user_apply(&p, &img, &err) == 0);
	CHECK(p.user_name && !strcmp(p.user_name, "app"));
	CHECK(p.user_home == NULL);
	corral_policy_free(&p);
	unlink(path);
	snprintf(path, sizeof(path), "%s/etc", l1);
	unlink(path);
	snprintf(path, sizeof(path), "%s/etc/passwd", l0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/etc", l0);
	rmdir(path);
	rmdir(l0);
	rmdir(l1);
	rmdir(host);
	rmdir(dir);
}

/* dir/rel, its directories made first; text NULL: a directory. */
static void put(const char *dir, const char *rel, const char *text)
{
	char path[512];
	int fd;

	CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
		*s = '/';
	}
	if (!text) {
		CHECK(mkdir(path, 0755) == 0);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static void rm_tree(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

/* The image's User with layers l0 (lower) and l1 as given; its home. */
static char *home_of(char **layers)
{
	struct corral_image img = { .layers = layers, .nlayers = 2 };
	struct corral_err err = { 0 };
	struct corral_policy p;
	char *home;

	img.config.user = "app";
	corral_policy_init(&p);
	CHECK(image_user_apply(&p, &img, &err) == 0);
	home = p.user_home ? strdup(p.user_home) : NULL;
	corral_policy_free(&p);
	return home;
}

/*
 * The image's passwd as corral's merge in the sandbox reads it (no link
 * followed, the overlay's marks heeded).  Resolved in each layer alone,
 * the upper layer's etc -> usr/etc had a lower layer's etc/passwd, which
 * that link hides, choose the home (/home/hidden), or the upper's own
 * usr/etc/passwd, which /etc/passwd never shows (/home/inlayer).
 */
TEST(image_user_as_the_merge_reads_it)
{
	char dir[] = "/tmp/unit-image-merge.XXXXXX", l0[128], l1[128], path[256];
	char *layers[2] = { l0, l1 }, *home;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l0, sizeof(l0), "%s/l0", dir);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	put(l0, "etc/passwd", "app:x:1000:1000:app:/home/hidden:/bin/sh\n");
	put(l0, "usr/etc/passwd", "app:x:1000:1000:app:/home/linked:/bin/sh\n");
	put(l1, "usr", NULL);
	snprintf(path, sizeof(path), "%s/etc", l1);
	CHECK(symlink("usr/etc", path) == 0);
	home = home_of(layers);
	CHECK(home == NULL);
	free(home);
	put(l1, "usr/etc/passwd", "app:x:1000:1000:app:/home/inlayer:/bin/sh\n");
	home = home_of(layers);
	CHECK(home == NULL);
	free(home);
	/* an opaque etc/ without the file: the lower's is hidden */
	CHECK(unlink(path) == 0);
	put(l1, "etc", NULL);
	CHECK(setxattr(path, "user.overlay.opaque", "y", 1, 0) == 0);
	home = home_of(layers);
	CHECK(home == NULL);
	free(home);
	/* and without the mark, the lower layer's file is the image's */
	CHECK(removexattr(path, "user.overlay.opaque") == 0);
	home = home_of(layers);
	CHECK(home && !strcmp(home, "/home/hidden"));
	free(home);
	rm_tree(dir);
}

/*
 * layer_open past an opaque directory (an image's ".wh..wh..opq"): the
 * overlay looks for nothing beneath it in lower layers, so a lower
 * layer's file there is not what the sandbox sees at that path (the
 * upper's is, a file corral made there), and the hide (hideview.c) and
 * the export (hidden_in_root) judged that hidden file for it.
 */
TEST(layer_open_stops_below_an_opaque_dir)
{
	char dir[] = "/tmp/unit-image-opaque.XXXXXX", l0[128], l1[128], path[256];
	int fd = -1;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l0, sizeof(l0), "%s/l0", dir);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	put(l0, "d/e/f", "lower\n");
	put(l1, "d/e", NULL);
	/* no mark: the lower's is the one to find */
	CHECK(layer_open("/proc", l1, "/d/e/f", &fd) == 0);
	CHECK(layer_open("/proc", l0, "/d/e/f", &fd) == 1 && fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/d", l1);
	CHECK(setxattr(path, "user.overlay.opaque", "y", 1, 0) == 0);
	/* opaque two levels up, or at the file's own directory */
	CHECK(layer_open("/proc", l1, "/d/e/f", &fd) == -1);
	CHECK(layer_open("/proc", l1, "/d/x", &fd) == -1);
	/* what the opaque layer has itself is found */
	CHECK(layer_open("/proc", l1, "/d/e", &fd) == 1 && fd >= 0);
	close(fd);
	CHECK(layer_open("/proc", l1, "/", &fd) == 1 && fd >= 0);
	close(fd);
	/* not below the opaque one: lower layers still looked at */
	CHECK(layer_open("/proc", l1, "/other", &fd) == 0);
	rm_tree(dir);
}

/*
 * An xattr whiteout (overlayfs 6.7+, userxattr): an empty regular file
 * with user.overlay.whiteout, which the kernel's lookup takes for a
 * whiteout in any layer (a --rootfs made from a composefs tree or from
 * a layer kept on an overlay: this kernel hid such a file there, and
 * the lower's of two layers).
 * layer_open took it for the file the sandbox sees, the lower's hidden
 * behind it unjudged.  An empty file without the mark, or one with data,
 * is a file; a directory's opaque "x" (it holds xattr whiteouts) is not
 * opaque.
 */
TEST(layer_open_knows_xattr_whiteouts)
{
	char dir[] = "/tmp/unit-image-xwhiteout.XXXXXX", l0[128], l1[128], path[256];
	int fd = -1;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l0, sizeof(l0), "%s/l0", dir);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	put(l0, "d/f", "deleted\n");
	put(l0, "d/g", "kept\n");
	put(l1, "d/f", "");
	put(l1, "d/e", "");
	put(l1, "d/full", "data\n");
	snprintf(path, sizeof(path), "%s/d", l1);
	CHECK(setxattr(path, "user.overlay.opaque", "x", 1, 0) == 0);
	snprintf(path, sizeof(path), "%s/d/f", l1);
	CHECK(setxattr(path, "user.overlay.whiteout", "", 0, 0) == 0);
	snprintf(path, sizeof(path), "%s/d/full", l1);
	CHECK(setxattr(path, "user.overlay.whiteout", "", 0, 0) == 0);
	/* the whiteout: nothing at or below it is what the sandbox sees */
	CHECK(layer_open("/proc", l1, "/d/f", &fd) == -1 && fd < 0);
	CHECK(layer_open("/proc", l1, "/d/f/x", &fd) == -1);
	/* "x" is no opaque mark: the lower's g is found below */
	CHECK(layer_open("/proc", l1, "/d/g", &fd) == 0);
	CHECK(layer_open("/proc", l0, "/d/g", &fd) == 1 && fd >= 0);
	close(fd);
	/* empty, unmarked; marked, not empty: files */
	CHECK(layer_open("/proc", l1, "/d/e", &fd) == 1 && fd >= 0);
	close(fd);
	CHECK(layer_open("/proc", l1, "/d/full", &fd) == 1 && fd >= 0);
	close(fd);
	rm_tree(dir);
}

/* path's whole text: true if written */
static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* our own mount namespace (a user namespace's too, unprivileged) */
static bool own_mount_ns(void)
{
	char umap[32], gmap[32];

	if (geteuid() == 0)
		return unshare(CLONE_NEWNS) == 0 &&
		       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
	/* taken before: in the new namespace both are the overflow id */
	snprintf(umap, sizeof(umap), "0 %u 1\n", (unsigned)geteuid());
	snprintf(gmap, sizeof(gmap), "0 %u 1\n", (unsigned)getegid());
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return false;
	/* the gid too: a file is made only by a mapped uid and gid */
	if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/gid_map", gmap))
		return false;
	return write_file("/proc/self/uid_map", umap) &&
	       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

/*
 * A mount in a layer (a FUSE mount the owner of a --rootfs tree made
 * there during a run): the overlay's lookup never crosses it, the
 * sandbox sees the directory it covers, and layer_open walked into it,
 * judging the mount's file, and on a FUSE mount whose daemon never
 * answered held the export (a root supervisor) past SIGTERM until the
 * daemon went away.  Mounted in a child, in its own mount namespace.
 */
TEST(layer_open_crosses_no_mount)
{
	char dir[] = "/tmp/unit-image-xdev.XXXXXX", l1[128], path[256];
	int status = -1;
	pid_t pid;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	put(l1, "d/f", "covered\n");
	put(l1, "e", "kept\n");
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = -1, bad = 0;

		snprintf(path, sizeof(path), "%s/d", l1);
		if (!own_mount_ns() || mount("t", path, "tmpfs", 0, NULL) < 0)
			_exit(2);
		snprintf(path, sizeof(path), "%s/d/f", l1);
		if (!write_file(path, "mounted\n"))
			_exit(3);
		/* the mount's file, and the mount itself: not judged */
		if (layer_open("/proc", l1, "/d/f", &fd) != -1)
			bad += fprintf(stderr, "  /d/f judged: the mount's file\n") > 0;
		if (layer_open("/proc", l1, "/d", &fd) != -1)
			bad += fprintf(stderr, "  /d judged: the mount\n") > 0;
		/* beside the mount: found */
		if (layer_open("/proc", l1, "/e", &fd) != 1)
			bad += fprintf(stderr, "  /e not found\n") > 0;
		_exit(bad ? 1 : 0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rm_tree(dir);
}

/* fd's text (at most 15 bytes), "dir" for a directory; NULL: no stat */
static char *seen_fd(int fd, char *buf)
{
	char self[64];
	struct stat st;
	ssize_t n;
	int rd;

	if (fstat(fd, &st) < 0)
		return NULL;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	rd = S_ISREG(st.st_mode) ? open(self, O_RDONLY | O_CLOEXEC) : -1;
	n = rd >= 0 ? read(rd, buf, 15) : -1;
	snprintf(buf + (n > 0 ? n : 0), 16 - (n > 0 ? n : 0), "%s",
		 S_ISDIR(st.st_mode) ? "dir" : n < 0 ? "?" : "");
	if (rd >= 0)
		close(rd);
	return buf;
}

/* what dir shows at path, walked with no link followed; NULL: nothing */
static char *seen(int dir, const char *path, char *buf)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH,
	};
	int fd = (int)syscall(SYS_openat2, dir, path, &how, sizeof(how));
	char *r;

	if (fd < 0)
		return NULL;
	r = seen_fd(fd, buf);
	close(fd);
	return r;
}

/*
 * What the sandbox sees at path by layer_open, the topmost layer that
 * has it, as seen() says it; NULL where it says none does.
 */
static char *seen_by_layer_open(char *const *layers, size_t n, const char *path,
				char *buf)
{
	char canon[256];
	char *r = NULL;
	int fd, has = 0;

	snprintf(canon, sizeof(canon), "/%s", path);
	for (size_t i = 0; i < n && has == 0; i++) {
		has = layer_open("/proc", layers[i], canon, &fd);
		if (has == 1) {
			r = seen_fd(fd, buf);
			close(fd);
		}
	}
	return r;
}

/*
 * layer_open against the kernel's own lookup (Linux 6.18's overlayfs,
 * userxattr, as corral mounts the root's layers): for each path, what an
 * overlay of the same two layers shows, or that it shows nothing, and
 * what layer_open finds, must agree.  The cases the two could read
 * differently: an xattr whiteout in a directory not marked
 * user.overlay.opaque="x" (the kernel's lookup honours it in any
 * directory of any layer; the mark is for readdir only, which lists the
 * name it cannot stat), with a value, at the root; one that is not
 * empty, a directory, or the escaped user.overlay.overlay.whiteout;
 * opaque values "y", "yes", "Y", "yy", "x"; a file over a directory and
 * a directory over a file.  Mounted in a child of its own mount (and,
 * unprivileged, user) namespace.
 */
TEST(layer_open_agrees_with_the_kernels_lookup)
{
	static const char *const paths[] = {
		"a/f", "b/f", "c/g", "d/g", "e/g", "e/h", "n/g", "n/f", "o2/g",
		"wroot", "full", "empty", "esc", "wdir", "wdir/g", "fd", "fd/x",
		"fl", "fl/x", "nope", "a", "n",
	};
	static const char *const marks[][3] = {
		{ "l1/a/f", "user.overlay.whiteout", "" },
		{ "l1/b/f", "user.overlay.whiteout", "yes" },
		{ "l1/c", "user.overlay.opaque", "yes" },
		{ "l1/d", "user.overlay.opaque", "Y" },
		{ "l1/e", "user.overlay.opaque", "y" },
		{ "l1/n", "user.overlay.opaque", "x" },
		{ "l1/n/f", "user.overlay.whiteout", "" },
		{ "l1/o2", "user.overlay.opaque", "yy" },
		{ "l1/wroot", "user.overlay.whiteout", "" },
		{ "l1/full", "user.overlay.whiteout", "" },
		{ "l1/esc", "user.overlay.overlay.whiteout", "" },
		{ "l1/wdir", "user.overlay.whiteout", "" },
	};
	char dir[] = "/tmp/unit-image-kernel.XXXXXX", l0[128], l1[128], m[128], path[256];
	int status = -1;
	pid_t pid;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l0, sizeof(l0), "%s/l0", dir);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	snprintf(m, sizeof(m), "%s/m", dir);
	CHECK(mkdir(m, 0755) == 0);
	for (const char *const *p = (const char *const[]){ "a/f", "b/f", "c/g", "d/g",
	     "e/g", "n/g", "n/f", "o2/g", "wroot", "full", "empty", "esc", "wdir/g",
	     "fd/x", "fl", NULL }; *p; p++)
		put(l0, *p, "L0");
	put(l1, "a/f", "");
	put(l1, "b/f", "");
	put(l1, "c", NULL);
	put(l1, "d", NULL);
	put(l1, "e/h", "L1");
	put(l1, "n/f", "");
	put(l1, "o2", NULL);
	put(l1, "wroot", "");
	put(l1, "full", "L1");
	put(l1, "empty", "");
	put(l1, "esc", "");
	put(l1, "wdir", NULL);
	put(l1, "fd", "L1");
	put(l1, "fl", NULL);
	for (size_t i = 0; i < ARRAY_LEN(marks); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, marks[i][0]);
		CHECK(setxattr(path, marks[i][1], marks[i][2], strlen(marks[i][2]), 0) == 0);
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char opts[512], kbuf[16], lbuf[16], *layers[] = { l1, l0 };
		int bad = 0, mfd;

		snprintf(opts, sizeof(opts), "userxattr,lowerdir=%s:%s", l1, l0);
		if (!own_mount_ns() || mount("overlay", m, "overlay", 0, opts) < 0) {
			fprintf(stderr, "  cannot mount the overlay: %s\n", strerror(errno));
			_exit(2);
		}
		mfd = open(m, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (mfd < 0)
			_exit(3);
		for (size_t i = 0; i < ARRAY_LEN(paths); i++) {
			const char *k = seen(mfd, paths[i], kbuf);
			const char *l = seen_by_layer_open(layers, 2, paths[i], lbuf);

			if (!k != !l || (k && strcmp(k, l)))
				bad += fprintf(stderr, "  /%s: the overlay shows %s, layer_open "
					       "finds %s\n", paths[i], k ? k : "nothing",
					       l ? l : "nothing") > 0;
		}
		_exit(bad ? 1 : 0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rm_tree(dir);
}

/*
 * The layer's xattrs (opaque, whiteout) are read without opening any of
 * its files: reopened by name after the fstat, a file its owner swapped
 * in (a FIFO, a FUSE file, a mount on the name) was opened by a root
 * supervisor.  inotify sees every open of a file or directory for
 * reading (an O_PATH one is no open): none.
 */
TEST(layer_open_opens_nothing)
{
	char dir[] = "/tmp/unit-image-noopen.XXXXXX", l1[128], path[256];
	char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int fd = -1, in, wd1, wd2;
	ssize_t n;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(l1, sizeof(l1), "%s/l1", dir);
	put(l1, "d/e", "");
	put(l1, "d/f", "");
	snprintf(path, sizeof(path), "%s/d/f", l1);
	CHECK(setxattr(path, "user.overlay.whiteout", "", 0, 0) == 0);
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	CHECK(in >= 0);
	wd1 = inotify_add_watch(in, l1, IN_OPEN);
	snprintf(path, sizeof(path), "%s/d", l1);
	wd2 = inotify_add_watch(in, path, IN_OPEN);
	CHECK(wd1 >= 0 && wd2 >= 0);
	/* still judged as before: a file, a whiteout */
	CHECK(layer_open("/proc", l1, "/d/e", &fd) == 1 && fd >= 0);
	close(fd);
	CHECK(layer_open("/proc", l1, "/d/f", &fd) == -1);
	n = read(in, ev, sizeof(ev));
	CHECK(n < 0 && errno == EAGAIN);
	for (ssize_t k = 0; n > 0 && k < n;) {
		const struct inotify_event *e = (const void *)(ev + k);

		fprintf(stderr, "  opened: %s%s%s\n", e->wd == wd1 ? "l1" : "l1/d",
			e->len ? "/" : "", e->len ? e->name : "");
		k += (ssize_t)sizeof(*e) + e->len;
	}
	close(in);
	rm_tree(dir);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
