/*
 * oci_config.c - a bundle's config.json as a corral policy.
 *
 * The base is the operator's corral policy (or corral's default), then
 * the one the io.corral.policy annotation names in the operator's
 * directory; config.json adds its root, process, hostname, limits and
 * binds.  corral's own layers stay on top whatever config.json says: its
 * seccomp table, Landlock, no capabilities, its /dev and /proc, new
 * namespaces of every kind.  What would weaken them is refused, each
 * with the field that asked: capabilities beyond the engines' default
 * set (unless the operator lists them, and even then none is granted),
 * host or joined namespaces, device nodes, host binds outside the
 * operator's allowlist, sysctls, hooks (host programs run as root).
 */
#include "oci.h"

#include <errno.h>
#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the operator ----------------------------------------------------- */

static int str_array(json_t *a, const char *key, char ***out, size_t *n,
		     struct corral_err *err)
{
	size_t i;
	json_t *v;

	if (!a)
		return 0;
	if (!json_is_array(a))
		return corral_set_err(err, -EINVAL, "%s: an array of strings", key);
	*out = calloc(json_array_size(a) + 1, sizeof(char *));
	if (!*out)
		return corral_set_err(err, -ENOMEM, "out of memory for %s", key);
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return corral_set_err(err, -EINVAL, "%s[%zu]: not a string", key, i);
		if (!((*out)[i] = strdup(json_string_value(v))))
			return corral_set_err(err, -ENOMEM, "out of memory for %s", key);
		*n = i + 1;
	}
	return 0;
}

static char *dup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

int oci_operator_load(struct oci_operator *op, const char *path,
		      struct corral_err *err)
{
	bool named = path || getenv("CORRAL_OCI_CONFIG");
	const char *policy = NULL, *dir = NULL, *audit = NULL;
	json_t *o, *binds = NULL, *caps = NULL;
	json_error_t je;
	int egress = 1, podnet = 0, r;

	memset(op, 0, sizeof(*op));
	op->egress_annotation = true;
	if (!path)
		path = getenv("CORRAL_OCI_CONFIG");
	if (!path)
		path = OCI_OPERATOR_CONFIG;
	if (!named && access(path, F_OK) < 0 && errno == ENOENT)
		return 0;	/* corral's defaults: nothing more allowed */
	o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return corral_set_err(err, -EINVAL, "%s:%d:%d: %s", path, je.line,
				      je.column, je.text);
	r = json_unpack_ex(o, &je, JSON_STRICT, "{s?s, s?s, s?o, s?o, s?b, s?s, s?b}",
			   "policy", &policy, "policies_dir", &dir,
			   "allow_bind", &binds, "allow_caps", &caps,
			   "egress_annotation", &egress, "audit_dir", &audit,
			   "join_pod_network", &podnet);
	if (r < 0) {
		r = corral_set_err(err, -EINVAL, "%s: %s (keys: policy, policies_dir, "
				   "allow_bind, allow_caps, egress_annotation, "
				   "audit_dir, join_pod_network)", path, je.text);
		json_decref(o);
		return r;
	}
	op->policy = dup_opt(policy);
	op->policies_dir = dup_opt(dir);
	op->audit_dir = dup_opt(audit);
	op->egress_annotation = egress;
	op->join_pod_network = podnet;
	r = str_array(binds, "allow_bind", &op->allow_bind, &op->nallow_bind, err);
	if (r == 0)
		r = str_array(caps, "allow_caps", &op->allow_caps, &op->nallow_caps, err);
	json_decref(o);
	return r;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void oci_operator_free(struct oci_operator *op)
{
	free(op->policy);
	free(op->policies_dir);
	free(op->audit_dir);
	free_strv(op->allow_bind);
	free_strv(op->allow_caps);
}

/* ---- what is refused -------------------------------------------------- */

/* What containerd, docker and podman give every container by default. */
static const char *const default_caps[] = {
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
	"CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP",
	"CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
	"CAP_AUDIT_WRITE", NULL,
};

static bool in_list(const char *s, char *const *list)
{
	for (size_t i = 0; list && list[i]; i++)
		if (!strcasecmp(list[i], s))
			return true;
	return false;
}

/*
 * Capabilities: the default set is accepted and dropped like every other
 * (corral's processes have none); more is refused unless the operator
 * lists it, and is then dropped all the same: the boundary does not move.
 */
static int check_caps(const struct oci_operator *op, json_t *caps,
		      struct corral_err *err)
{
	static const char *const sets[] = {
		"bounding", "effective", "inheritable", "permitted", "ambient",
	};
	size_t i;
	json_t *v;

	if (!caps)
		return 0;
	for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++) {
		json_array_foreach(json_object_get(caps, sets[k]), i, v) {
			const char *c = json_string_value(v);

			if (!c)
				return corral_set_err(err, -EINVAL, "process.capabilities."
						      "%s[%zu]: not a string", sets[k], i);
			if (in_list(c, (char *const *)default_caps) ||
			    in_list(c, op->allow_caps))
				continue;
			return corral_set_err(err, -EPERM, "process.capabilities.%s: "
					      "%s refused: corral gives a container no "
					      "capabilities beyond the default set, and the "
					      "operator's allow_caps does not list it",
					      sets[k], c);
		}
	}
	return 0;
}

/*
 * A pod's network namespace is never the host's: Kubernetes gives a
 * hostNetwork pod none (refused as the host's), but Docker's `--network
 * host` names the host's by a path, a bind of it in its exec root, and
 * join_pod_network joined it: the container on the host's interfaces and
 * loopback listeners, past corral's egress.  The host's is the runtime's
 * own (the shim's, the engine's) and that of pid 1 (the host's init), by
 * inode.
 */
static int refuse_host_netns(int fd, const char *path, struct corral_err *err)
{
	static const char *const host[] = { "/proc/self/ns/net", "/proc/1/ns/net" };
	struct stat st, h;

	if (fstat(fd, &st) < 0)
		return corral_set_errno(err, errno, "linux.namespaces: network %s", path);
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
		/*
		 * pid 1's may be closed to root (a VM's init, non-dumpable
		 * under an LSM: EACCES here): then the runtime's own, the
		 * engine's, which Docker's bind is, is what is compared
		 */
		if (stat(host[i], &h) < 0) {
			if (i > 0 && errno == EACCES)
				continue;
			return corral_set_errno(err, errno, "linux.namespaces: %s", host[i]);
		}
		if (st.st_dev == h.st_dev && st.st_ino == h.st_ino)
			return corral_set_err(err, -EPERM, "linux.namespaces: joining the "
					      "network namespace %s refused: it is the "
					      "host's (%s), never a pod's", path, host[i]);
	}
	return 0;
}

/* A pod's network namespace, opened and checked to be one. */
static int open_netns(const char *path, int *fd, struct corral_err *err)
{
	struct statfs sf;
	char self[64];
	int pfd;

	/*
	 * Opened for real only once it is known to be a namespace: config.json
	 * names the path, and opening a device (a watchdog) or a FIFO as root
	 * can do something, or hang create.
	 */
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return corral_set_errno(err, errno, "linux.namespaces: network %s", path);
	if (fstatfs(pfd, &sf) < 0 || sf.f_type != NSFS_MAGIC) {
		close(pfd);
		*fd = -1;
		return corral_set_err(err, -EINVAL, "linux.namespaces: %s is not a "
				      "network namespace", path);
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	*fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	close(pfd);
	if (*fd < 0)
		return corral_set_errno(err, errno, "linux.namespaces: network %s", path);
	if (ioctl(*fd, NS_GET_NSTYPE) != CLONE_NEWNET)
		return corral_set_err(err, -EINVAL, "linux.namespaces: %s is not a "
				      "network namespace", path);
	return refuse_host_netns(*fd, path, err);
}

/*
 * A type corral makes (features lists them): any other is refused, as
 * runc refuses one it does not know.  Passed over, "time" left the
 * container the host's clocks and linux.timeOffsets unapplied, and a
 * misspelt type began a container that was not the one asked for, with
 * create's exit 0.
 */
static bool known_namespace(const char *type, size_t i, struct corral_err *err)
{
	static const char *const kinds[] = { "pid", "network", "ipc", "uts", "mount",
					     "user", "cgroup", NULL };

	for (size_t k = 0; kinds[k]; k++)
		if (!strcmp(type, kinds[k]))
			return true;
	if (!strcmp(type, "time"))
		corral_set_err(err, -EINVAL, "linux.namespaces[%zu]: a time namespace "
			       "refused: corral makes none, and the container would "
			       "keep the host's clocks", i);
	else
		corral_set_err(err, -EINVAL, "linux.namespaces[%zu]: unknown namespace "
			       "type \"%s\"", i, type);
	return false;
}

/*
 * Every namespace new: none missing (the host's), none joined by path;
 * but a pod's (network joined, ipc and uts its own) where the operator
 * lets pods run.
 */
static int check_namespaces(const struct oci_operator *op, json_t *lnx,
			    struct oci_spec *s, struct corral_err *err)
{
	static const char *const needed[] = { "pid", "network", "ipc", "uts",
					       "mount", NULL };
	json_t *ns = json_object_get(lnx, "namespaces"), *v;
	size_t i;

	json_array_foreach(ns, i, v) {
		const char *type = json_string_value(json_object_get(v, "type"));
		const char *path = json_string_value(json_object_get(v, "path"));

		if (!type)
			return corral_set_err(err, -EINVAL, "linux.namespaces[%zu]: no type", i);
		if (!known_namespace(type, i, err))
			return err->code;
		if (!path || !path[0])
			continue;
		if (op->join_pod_network && !strcmp(type, "network")) {
			if (open_netns(path, &s->net_fd, err) < 0)
				return err->code;
			continue;
		}
		if (op->join_pod_network && (!strcmp(type, "ipc") || !strcmp(type, "uts")))
			continue;
		return corral_set_err(err, -EPERM, "linux.namespaces[%zu]: joining "
				      "the %s namespace %s refused: a corral "
				      "container's namespaces are all its own%s",
				      i, type, path, !strcmp(type, "network") ?
				      " (a pod's network: the operator's "
				      "join_pod_network)" : "");
	}
	for (size_t k = 0; needed[k]; k++) {
		bool found = false;

		json_array_foreach(ns, i, v)
			if (!strcmp(json_string_value(json_object_get(v, "type")), needed[k]))
				found = true;
		if (!found)
			return corral_set_err(err, -EPERM, "linux.namespaces: the host's "
					      "%s namespace refused: a corral container "
					      "gets a new one of each kind", needed[k]);
	}
	if (s->net_fd >= 0 && s->p.net == CORRAL_NET_PROXY)
		return corral_set_err(err, -EPERM, "io.corral.allow with the pod's "
				      "network namespace refused: corral's egress "
				      "proxy needs the container's own");
	return 0;
}

/* The nodes corral's own /dev has; any other is refused. */
static int check_devices(json_t *lnx, struct corral_err *err)
{
	static const char *const own[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
		"/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/console", NULL,
	};
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(lnx, "devices"), i, v) {
		const char *path = json_string_value(json_object_get(v, "path"));

		if (!path || !in_list(path, (char *const *)own))
			return corral_set_err(err, -EPERM, "linux.devices[%zu]: device %s "
					      "refused: a corral container has only the "
					      "nodes of its own /dev", i, path ? path : "?");
	}
	return 0;
}

/*
 * Where corral mounts its own (or, for /sys, nothing): a mount config.json
 * asks for there, of any type (podman binds its /dev/shm, engines their
 * /etc/hosts and resolv.conf), is not made: corral writes its own /etc
 * entries (names resolve through its proxy, or not at all).  Leaving one
 * out never weakens the boundary.  /run is the image's: a mount beneath
 * it is made or refused as anywhere else.  Left out there are only the
 * engines' own: the tmpfs on /run itself (containerd's default spec,
 * podman's systemd mode; the image's /run is what the container gets, as
 * before) and podman's note that the container is its, /run/.containerenv.
 */
static bool own_mount(const char *dst, const char *type)
{
	static const char *const own[] = {
		"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/tmp",
		"/run/.containerenv", NULL,
	};
	/* these trees are corral's whole */
	static const char *const trees[] = { "/proc", "/dev", "/sys" };

	if (type && !strcmp(type, "tmpfs") && !strcmp(dst, "/run"))
		return true;

	for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
		size_t n = strlen(trees[i]);

		if (!strncmp(dst, trees[i], n) && (dst[n] == '\0' || dst[n] == '/'))
			return true;
	}
	return in_list(dst, (char *const *)own);
}

static bool has_option(json_t *opts, const char *want)
{
	size_t i;
	json_t *v;

	json_array_foreach(opts, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), want))
			return true;
	return false;
}

/*
 * A bind's source, opened once (its symlinks followed, as realpath
 * would) and judged by where the object it opened lies: beneath an
 * allowed prefix (resolved too).  That fd is what the sandbox gets (or
 * nothing): a path judged now and opened again when the sandbox is built
 * could be swapped in between by whoever may write a directory on it.
 */
static int open_allowed(const struct oci_operator *op, const char *src)
{
	char self[64], real[PATH_MAX], pre[PATH_MAX];
	ssize_t n;
	int fd;

	fd = open(src, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, real, sizeof(real) - 1);
	if (n < 0 || real[0] != '/') {
		close(fd);
		return -EPERM;
	}
	real[n] = '\0';
	for (size_t i = 0; i < op->nallow_bind; i++) {
		size_t len;

		if (!realpath(op->allow_bind[i], pre))
			continue;
		len = strlen(pre);
		if (!strncmp(real, pre, len) && (real[len] == '/' || real[len] == '\0' ||
						 !strcmp(pre, "/")))
			return fd;
	}
	close(fd);
	return -EPERM;
}

/*
 * A tmpfs mount (docker and podman --tmpfs): a fresh directory of the
 * sandbox's scratch at its destination, in the container's disk budget
 * (corral_policy_add_tmpfs says which options it honours); its options
 * strings only, as the engines write them.
 */
static int add_tmpfs(json_t *opts, const char *dst, size_t i, struct oci_spec *s,
		     struct corral_err *err)
{
	const char *o[64];
	size_t n = json_array_size(opts);
	json_t *v;
	size_t k;

	if (opts && !json_is_array(opts))
		return corral_set_err(err, -EINVAL, "mounts[%zu]: options: not an "
				      "array", i);
	if (n > sizeof(o) / sizeof(o[0]))
		return corral_set_err(err, -EINVAL, "mounts[%zu]: %zu options, more "
				      "than %zu", i, n, sizeof(o) / sizeof(o[0]));
	json_array_foreach(opts, k, v) {
		if (!json_is_string(v))
			return corral_set_err(err, -EINVAL, "mounts[%zu]: options[%zu]: "
					      "not a string", i, k);
		o[k] = json_string_value(v);
	}
	if (corral_policy_add_tmpfs(&s->p, dst, o, n, err) < 0) {
		char why[CORRAL_ERR_MAX];

		snprintf(why, sizeof(why), "%s", err->msg);
		return corral_set_err(err, err->code, "mounts[%zu]: %s", i, why);
	}
	return 0;
}

/*
 * An engine's init: `docker run --init` binds the host's tini at
 * /sbin/docker-init, `podman run --init` its catatonit at
 * /run/podman-init, and each puts "INIT --" before the command.  corral's
 * own init is already PID 1 of every container and does what they do
 * (reaps orphans, forwards signals, exits with the command's status), so
 * the wrapper is dropped with its bind and no host file enters.  Only
 * that exact shape: the bind at the path the command starts with.
 */
static const char *const engine_inits[] = { "/sbin/docker-init", "/run/podman-init" };

static bool is_engine_init(const char *path)
{
	for (size_t i = 0; i < sizeof(engine_inits) / sizeof(engine_inits[0]); i++)
		if (!strcmp(path, engine_inits[i]))
			return true;
	return false;
}

/* a mount of config.json that binds, by its type or its options */
static bool is_bind(json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "type"));
	json_t *opts = json_object_get(m, "options");

	return (type && !strcmp(type, "bind")) || has_option(opts, "bind") ||
	       has_option(opts, "rbind");
}

static bool binds_at(json_t *mounts, const char *dst)
{
	size_t i;
	json_t *m;

	json_array_foreach(mounts, i, m) {
		const char *d = json_string_value(json_object_get(m, "destination"));

		if (d && !strcmp(d, dst) && is_bind(m))
			return true;
	}
	return false;
}

static void drop_engine_init(json_t *mounts, struct oci_spec *s)
{
	char **v = s->argv;
	size_t n = 0;

	if (!v[1] || !v[2] || strcmp(v[1], "--") || !is_engine_init(v[0]) ||
	    !binds_at(mounts, v[0]))
		return;
	s->init = v[0];
	free(v[1]);
	while (v[n + 2]) {
		v[n] = v[n + 2];
		n++;
	}
	v[n] = NULL;
}

static int add_mounts(const struct oci_operator *op, json_t *mounts,
		      struct oci_spec *s, struct corral_err *err)
{
	size_t i;
	json_t *m;

	json_array_foreach(mounts, i, m) {
		const char *given = json_string_value(json_object_get(m, "destination"));
		const char *type = json_string_value(json_object_get(m, "type"));
		const char *src = json_string_value(json_object_get(m, "source"));
		json_t *opts = json_object_get(m, "options");
		bool bind = is_bind(m);
		char dst[PATH_MAX];
		int fd;

		if (!given || given[0] != '/')
			return corral_set_err(err, -EINVAL, "mounts[%zu]: destination "
					      "must be an absolute path", i);
		if (bind && s->init && !strcmp(given, s->init))
			continue;
		/* where runc mounts: through the image's links, inside its tree */
		if (corral_path_in_root(s->p.root_fd, given, dst, sizeof(dst)) < 0)
			return corral_set_err(err, -ENAMETOOLONG, "mounts[%zu]: "
					      "destination %s: too long", i, given);
		if (own_mount(dst, type))
			continue;
		if (!bind && type && !strcmp(type, "tmpfs")) {
			if (add_tmpfs(opts, dst, i, s, err) < 0)
				return err->code;
			continue;
		}
		if (!bind)
			return corral_set_err(err, -EPERM, "mounts[%zu]: a %s mount on %s "
					      "refused: corral mounts only its own kernel "
					      "filesystems and allowed binds", i,
					      type ? type : "typeless", dst);
		fd = src ? open_allowed(op, src) : -EPERM;
		/* named as config.json names it, not where it would land */
		if (fd < 0)
			return corral_set_err(err, -EPERM, "mounts[%zu]: the host's %s "
					      "bound on %s refused: not beneath the "
					      "operator's allow_bind", i, src ? src : "?", given);
		/* the policy's fd now: the sandbox gets that object or none */
		if (corral_policy_add_pinned_bind(&s->p, fd, dst, !has_option(opts, "ro"),
						  err) < 0)
			return err->code;
	}
	return 0;
}

/* ---- the spec --------------------------------------------------------- */

/*
 * A JSON file of the bundle, refused unread when it is far larger than
 * any engine writes (a config.json is a few KB; Kubernetes caps a pod's
 * annotations at 256 KB): jansson would hold all of it, several times.
 */
static json_t *load_bounded(int dir, const char *name, const char *path,
			    struct stat *read, struct corral_err *err)
{
	json_error_t je;
	struct stat st;
	json_t *o;
	/* O_NONBLOCK: a FIFO there is refused below, not waited on */
	int fd = openat(dir, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "r");

	if (!f) {
		corral_set_errno(err, errno, "%s", path);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > OCI_JSON_MAX) {
		corral_set_err(err, -EFBIG, "%s: %lld bytes, not a regular file no "
			       "larger than %d", path, (long long)st.st_size,
			       OCI_JSON_MAX);
		fclose(f);
		return NULL;
	}
	if (read)
		*read = st;	/* the file that was read, judged by its owner */
	o = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (!o)
		corral_set_err(err, -EINVAL, "%s:%d:%d: %s", path, je.line,
			       je.column, je.text);
	return o;
}

static int dup_strv(json_t *a, const char *key, char ***out, struct corral_err *err)
{
	size_t n = 0;

	if (a && !json_is_array(a))
		return corral_set_err(err, -EINVAL, "%s: an array of strings", key);
	return str_array(a, key, out, &n, err);
}

/* process.rlimits: [{type: "RLIMIT_NOFILE", soft, hard}] */
static int load_rlimits(json_t *a, struct oci_spec *s, struct corral_err *err)
{
	static const struct { const char *name; int res; } names[] = {
		{ "RLIMIT_AS", RLIMIT_AS }, { "RLIMIT_CORE", RLIMIT_CORE },
		{ "RLIMIT_CPU", RLIMIT_CPU }, { "RLIMIT_DATA", RLIMIT_DATA },
		{ "RLIMIT_FSIZE", RLIMIT_FSIZE }, { "RLIMIT_LOCKS", RLIMIT_LOCKS },
		{ "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK }, { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
		{ "RLIMIT_NICE", RLIMIT_NICE }, { "RLIMIT_NOFILE", RLIMIT_NOFILE },
		{ "RLIMIT_NPROC", RLIMIT_NPROC }, { "RLIMIT_RSS", RLIMIT_RSS },
		{ "RLIMIT_RTPRIO", RLIMIT_RTPRIO }, { "RLIMIT_RTTIME", RLIMIT_RTTIME },
		{ "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING }, { "RLIMIT_STACK", RLIMIT_STACK },
	};
	size_t i;
	json_t *v;

	free(s->rlimits);
	s->rlimits = NULL;
	s->nrlimits = 0;
	if (!json_array_size(a))
		return 0;
	s->rlimits = calloc(json_array_size(a), sizeof(*s->rlimits));
	if (!s->rlimits)
		return corral_set_err(err, -ENOMEM, "out of memory for process.rlimits");
	json_array_foreach(a, i, v) {
		const char *type = json_string_value(json_object_get(v, "type"));
		json_t *soft = json_object_get(v, "soft"), *hard = json_object_get(v, "hard");
		size_t k = 0;

		while (type && k < sizeof(names) / sizeof(names[0]) &&
		       strcmp(type, names[k].name))
			k++;
		if (!type || k == sizeof(names) / sizeof(names[0]) ||
		    !json_is_integer(soft) || !json_is_integer(hard))
			return corral_set_err(err, -EINVAL, "process.rlimits[%zu]: "
					      "{type: RLIMIT_*, soft, hard} expected (got %s)",
					      i, type ? type : "no type");
		/* -1 would read as RLIM_INFINITY; soft above hard is no limit */
		if (json_integer_value(soft) < 0 || json_integer_value(hard) < 0 ||
		    json_integer_value(soft) > json_integer_value(hard))
			return corral_set_err(err, -EINVAL, "process.rlimits[%zu]: %s "
					      "soft %lld, hard %lld refused: 0 <= soft "
					      "<= hard", i, type,
					      (long long)json_integer_value(soft),
					      (long long)json_integer_value(hard));
		s->rlimits[s->nrlimits++] = (struct corral_rlimit){ names[k].res,
			(uint64_t)json_integer_value(soft), (uint64_t)json_integer_value(hard) };
	}
	return 0;
}

/*
 * process.consoleSize: the pty's size from its start, as runc sets it
 * (Docker 23 and later send the client's, for run and exec).  Without it
 * the pty is 0x0 until the engine's first resize, after the process has
 * begun: a `stty size` or a line editor that asks at once gets none.
 */
static int load_console_size(json_t *proc, struct oci_spec *s, struct corral_err *err)
{
	json_t *cs = json_object_get(proc, "consoleSize");
	json_t *h = json_object_get(cs, "height"), *w = json_object_get(cs, "width");

	/* an exec's own or none, never its container's */
	s->console_rows = s->console_cols = 0;
	if (!cs)
		return 0;
	if (!json_is_integer(h) || !json_is_integer(w) ||
	    json_integer_value(h) < 0 || json_integer_value(h) > USHRT_MAX ||
	    json_integer_value(w) < 0 || json_integer_value(w) > USHRT_MAX)
		return corral_set_err(err, -EINVAL, "process.consoleSize: a height "
				      "and a width, each 0 to %u", USHRT_MAX);
	s->console_rows = (unsigned short)json_integer_value(h);
	s->console_cols = (unsigned short)json_integer_value(w);
	return 0;
}

static int load_process(const struct oci_operator *op, json_t *proc,
			struct oci_spec *s, struct corral_err *err)
{
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	int r;

	if (!json_is_object(proc))
		return corral_set_err(err, -EINVAL, "process: missing");
	r = dup_strv(json_object_get(proc, "args"), "process.args", &s->argv, err);
	if (r == 0 && (!s->argv || !s->argv[0]))
		r = corral_set_err(err, -EINVAL, "process.args: no command to run");
	if (r == 0)
		r = dup_strv(json_object_get(proc, "env"), "process.env", &s->env, err);
	if (r == 0)
		r = check_caps(op, json_object_get(proc, "capabilities"), err);
	if (r == 0)
		r = load_rlimits(json_object_get(proc, "rlimits"), s, err);
	if (r == 0)
		r = load_console_size(proc, s, err);
	if (r < 0)
		return r;
	s->tty = json_is_true(json_object_get(proc, "terminal"));
	s->cwd = strdup(cwd && cwd[0] == '/' ? cwd : "/");
	if (!s->cwd)
		return corral_set_err(err, -ENOMEM, "out of memory for process.cwd");
	return 0;
}

/*
 * The operator's base policy, then the annotation's named one over it: its
 * lists replace the base's (corral_policy_load_file).  The named policy is
 * the operator's, but the bundle chooses it: it may widen the base (that
 * is what a "python-agent" policy is for), never drop one of the base's
 * denials, which the operator set for every container.
 */
static int load_policies(const struct oci_operator *op, struct oci_spec *s,
			 struct corral_err *err)
{
	const char *name = json_string_value(json_object_get(s->annotations,
							     "io.corral.policy"));
	struct corral_policy base;
	char path[PATH_MAX];
	int r;

	corral_policy_init(&s->p);
	if (op->policy && (r = corral_policy_load_file(&s->p, op->policy, err)) < 0)
		return r;
	if (!name)
		return 0;
	if (!op->policies_dir)
		return corral_set_err(err, -EPERM, "annotation io.corral.policy=%s: "
				      "the operator names no policies_dir", name);
	if (!name[0] || strchr(name, '/') || name[0] == '.')
		return corral_set_err(err, -EINVAL, "annotation io.corral.policy=%s: "
				      "a policy's name, not a path", name);
	snprintf(path, sizeof(path), "%s/%s.json", op->policies_dir, name);
	r = corral_policy_copy(&base, &s->p, err);
	if (r < 0)
		return r;
	r = corral_policy_load_file(&s->p, path, err);
	if (r == 0 && corral_policy_keeps_denials(&s->p, &base, err) < 0) {
		char why[sizeof(err->msg)];

		memcpy(why, err->msg, sizeof(why));
		r = corral_set_err(err, -EPERM, "annotation io.corral.policy=%s: %s, "
				   "over the base %s: %s", name, path,
				   op->policy ? op->policy : "(the default)", why);
	}
	corral_policy_free(&base);
	return r;
}

/* io.corral.allow: "pypi.org,*.github.com:443": egress through the proxy. */
static int load_egress(const struct oci_operator *op, struct oci_spec *s,
		       struct corral_err *err)
{
	const char *allow = json_string_value(json_object_get(s->annotations,
							      "io.corral.allow"));
	char *copy, *tok, *save = NULL;
	int r = 0;

	if (!allow)
		return 0;
	if (!op->egress_annotation)
		return corral_set_err(err, -EPERM, "annotation io.corral.allow: the "
				      "operator does not let annotations open egress");
	copy = strdup(allow);
	if (!copy)
		return corral_set_err(err, -ENOMEM, "out of memory for io.corral.allow");
	r = corral_policy_set_net(&s->p, "proxy", err);
	for (tok = strtok_r(copy, ", ", &save); r == 0 && tok;
	     tok = strtok_r(NULL, ", ", &save))
		r = corral_policy_add_allow(&s->p, tok, err);
	free(copy);
	return r;
}

static int load_resources(json_t *res, struct corral_policy *p,
			  struct corral_err *err)
{
	json_int_t mem = json_integer_value(json_object_get(json_object_get(res,
						"memory"), "limit"));
	json_int_t pids = json_integer_value(json_object_get(json_object_get(res,
						"pids"), "limit"));
	json_t *cpu = json_object_get(res, "cpu");
	json_int_t quota = json_integer_value(json_object_get(cpu, "quota"));
	json_int_t period = json_integer_value(json_object_get(cpu, "period"));

	/* only tighter than the operator's: a container cannot raise them */
	if (mem > 0 && (!p->memory_bytes || (uint64_t)mem < p->memory_bytes))
		p->memory_bytes = mem;
	if (pids > 0 && (!p->pids || (uint64_t)pids < p->pids))
		p->pids = pids;
	if (quota > 0 && period > 0 &&
	    (!(p->cpus > 0) || (double)quota / period < p->cpus))
		p->cpus = (double)quota / period;
	(void)err;
	return 0;
}

/*
 * The bundle as it was read: its directory, opened once, and config.json
 * read through it.  By its name again, the bundle in a directory its
 * tenant writes (a home) was swapped after config.json was read for a
 * link to root's "/", whose writer is no one: a root.path of the
 * tenant's went unjudged.
 */
struct bundle_read {
	int dir;
	struct stat dir_st, cfg_st;
	bool has_cfg;
};

/*
 * The rootfs, opened once (the name itself, not a link there) and judged
 * by what was opened: that directory is the container's root, or none
 * (corral_policy_pin_root).  Judged by its path and mounted by it again
 * later, a bundle's owner could swap it in between, for a link to a tree
 * only root may read or another tree renamed over it.
 */
static int load_root(const char *bundle, const struct bundle_read *b, json_t *root,
		     struct oci_spec *s, struct corral_err *err)
{
	const char *path = json_string_value(json_object_get(root, "path"));
	struct stat st, host;
	char joined[PATH_MAX], rel[PATH_MAX], what[PATH_MAX + 16];
	int fd;

	if (!path)
		return corral_set_err(err, -EINVAL, "root.path: missing");
	if (path[0] == '/')
		snprintf(joined, sizeof(joined), "%s", path);
	else
		snprintf(joined, sizeof(joined), "%s/%s", bundle, path);
	/* "rootfs/" would have the open follow the link: the name itself is opened */
	for (size_t n = strlen(joined); n > 1 && joined[n - 1] == '/'; n--)
		joined[n - 1] = '\0';
	/* a relative one in the directory config.json was read from */
	if ((size_t)snprintf(rel, sizeof(rel), "%s", path) >= sizeof(rel))
		return corral_set_err(err, -ENAMETOOLONG, "root.path %s: too long", path);
	for (size_t n = strlen(rel); n > 1 && rel[n - 1] == '/'; n--)
		rel[n - 1] = '\0';
	if (path[0] != '/' && b->dir < 0)	/* an exec's, the bundle gone since */
		return corral_set_errno(err, ENOENT, "root.path %s", joined);
	fd = openat(path[0] == '/' ? AT_FDCWD : b->dir, path[0] == '/' ? joined :
		    rel[0] ? rel : ".", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return corral_set_errno(err, errno, "root.path %s", joined);
	/* before the fstat: a FUSE daemon of the bundle's owner may never answer */
	snprintf(what, sizeof(what), "root.path %s", joined);
	if (corral_root_fd_check(fd, what, err) < 0)
		goto refused;
	if (fstat(fd, &st) < 0 || stat("/", &host) < 0) {
		corral_set_errno(err, errno, "root.path %s", joined);
		goto refused;
	}
	if (S_ISLNK(st.st_mode)) {
		corral_set_err(err, -EPERM, "root.path %s is a symbolic link: "
			       "refused, a rootfs is the directory the engine "
			       "made of the image", joined);
		goto refused;
	}
	if (st.st_dev == host.st_dev && st.st_ino == host.st_ino) {
		corral_set_err(err, -EPERM, "root.path %s: the host's root "
			       "refused: a container sees its image, not the "
			       "host", path);
		goto refused;
	}
	if (!S_ISDIR(st.st_mode)) {
		corral_set_err(err, -ENOTDIR, "root.path %s: not a directory", joined);
		goto refused;
	}
	/* a tenant's bundle: only a tree its writer could reach (oci_reach.c) */
	if (oci_writer_reaches(fd, b->dir >= 0 ? &b->dir_st : NULL,
			       b->has_cfg ? &b->cfg_st : NULL, joined, err) < 0)
		goto refused;
	/* the fd is the policy's now, whatever this returns */
	if (corral_policy_pin_root(&s->p, fd, err) < 0)
		return err->code;
	s->rootfs = strdup(s->p.root_layers[0]);
	if (!s->rootfs)
		return corral_set_err(err, -ENOMEM, "out of memory for root.path");
	s->p.root_writable = !json_is_true(json_object_get(root, "readonly"));
	return 0;
refused:
	close(fd);
	return err->code;
}

/*
 * linux.maskedPaths and readonlyPaths: the engines' lists name /proc and
 * /sys, which corral builds its own way (its /proc is its pid namespace's,
 * with its own masks; no /sys).  Anywhere else the operator would hide a
 * file of the image or keep a tree read-only, which corral does not do:
 * refused, where the container ran with that file readable and writable.
 */
static bool in_kernel_tree(const char *path)
{
	const char *rest = !strncmp(path, "/proc", 5) ? path + 5 :
			   !strncmp(path, "/sys", 4) ? path + 4 : NULL;

	if (!rest || (*rest != '/' && *rest != '\0'))
		return false;
	for (const char *d = rest; (d = strstr(d, "/..")); d += 3)
		if (d[3] == '/' || d[3] == '\0')
			return false;
	return true;
}

static int check_masks(json_t *lnx, struct corral_err *err)
{
	static const char *const keys[] = { "maskedPaths", "readonlyPaths" };

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		size_t i;
		json_t *v;

		json_array_foreach(json_object_get(lnx, keys[k]), i, v) {
			const char *path = json_string_value(v);

			if (!path || !in_kernel_tree(path))
				return corral_set_err(err, -EPERM, "linux.%s[%zu] %s "
						      "refused: corral masks and makes "
						      "read-only only beneath its own /proc "
						      "and /sys", keys[k], i,
						      path ? path : "(not a string)");
		}
	}
	return 0;
}

/*
 * Docker's own hook, which every `docker run` has (`--network none`
 * too): dockerd runs itself again, `/proc/<its pid>/exe libnetwork-setkey
 * -exec-root=DIR ID CONTROLLER`, with the container's state on stdin, to
 * learn its network namespace and move its network's interface (a
 * bridge's veth) in.  corral does not run it, and passing over it weakens
 * nothing: the container's network is corral's own (loopback, or the
 * policy's proxy) whatever Docker's network says.  Refused, it was the
 * end of every container Docker started.  Only this shape is passed
 * over; any other hook, or this one among others, is refused.
 */
static bool docker_network_hook(const char *stage, json_t *hook)
{
	const char *path = json_string_value(json_object_get(hook, "path"));
	json_t *args = json_object_get(hook, "args");
	const char *a0 = json_string_value(json_array_get(args, 0));
	const char *a1 = json_string_value(json_array_get(args, 1));
	const char *p;

	if (strcmp(stage, "prestart") || !path || json_array_size(args) != 4 ||
	    json_object_get(hook, "env") || json_object_get(hook, "timeout"))
		return false;
	/* /proc/<pid>/exe: dockerd's own binary, by its pid */
	if (strncmp(path, "/proc/", 6) || path[6] < '1' || path[6] > '9')
		return false;
	for (p = path + 6; *p >= '0' && *p <= '9'; p++)
		;
	if (strcmp(p, "/exe"))
		return false;
	return a0 && !strcmp(a0, "libnetwork-setkey") && a1 &&
	       !strncmp(a1, "-exec-root=/", 12) &&
	       json_is_string(json_array_get(args, 2)) &&
	       json_is_string(json_array_get(args, 3));
}

static int refuse_hooks(json_t *hooks, struct corral_err *err)
{
	const char *key;
	json_t *v;

	json_object_foreach(hooks, key, v) {
		if (!json_array_size(v))
			continue;
		if (json_array_size(v) == 1 && docker_network_hook(key, json_array_get(v, 0)))
			continue;
		return corral_set_err(err, -EPERM, "hooks.%s refused: hooks run "
				      "host programs as root", key);
	}
	return 0;
}

static int refuse_extras(json_t *doc, json_t *lnx, struct corral_err *err)
{
	const char *key;
	json_t *v;
	int r = check_masks(lnx, err);

	if (r == 0)
		r = refuse_hooks(json_object_get(doc, "hooks"), err);
	if (r < 0)
		return r;
	/*
	 * net.*: the container's own network namespace, which has only
	 * loopback (podman sets net.ipv4.ping_group_range for every one):
	 * left at the kernel's defaults, not refused.  Anything else
	 * would be the host's kernel.
	 */
	json_object_foreach(json_object_get(lnx, "sysctl"), key, v)
		if (strncmp(key, "net.", 4))
			return corral_set_err(err, -EPERM, "linux.sysctl %s refused: "
					      "corral sets no kernel parameters for a "
					      "container", key);
	return 0;
}

/*
 * process.cwd where runc's chdir in the container finds it: through the
 * image's links, inside the rootfs (corral_path_in_root), as the mounts'
 * destinations.  Its form is judged as written first: a "..", "." or
 * "//" is refused, not made plain by the walk.
 */
static int set_cwd(struct oci_spec *s, struct corral_err *err)
{
	char dir[PATH_MAX];

	if (corral_policy_set_workdir(&s->p, s->cwd, err) < 0)
		return err->code;
	if (corral_path_in_root(s->p.root_fd, s->cwd, dir, sizeof(dir)) < 0)
		return corral_set_err(err, -ENAMETOOLONG, "process.cwd %s: too long",
				      s->cwd);
	return corral_policy_set_workdir(&s->p, dir, err);
}

int oci_spec_load(const struct oci_operator *op, const char *bundle, json_t *config,
		  struct oci_spec *s, struct corral_err *err)
{
	struct bundle_read b = { .dir = -1 };
	char path[PATH_MAX], what[PATH_MAX + 16];
	json_t *lnx, *env;
	size_t i;
	int r;

	memset(s, 0, sizeof(*s));
	s->net_fd = -1;
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	b.dir = open(bundle, O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* before the fstat: the bundle may be its owner's FUSE mount (create's, exec's) */
	snprintf(what, sizeof(what), "the bundle %s", bundle);
	if (b.dir >= 0 && corral_root_fd_check(b.dir, what, err) < 0) {
		close(b.dir);
		return err->code;
	}
	if (b.dir >= 0 && fstat(b.dir, &b.dir_st) < 0) {
		close(b.dir);
		b.dir = -1;
	}
	if (b.dir < 0 && !config)
		return corral_set_errno(err, errno, "the bundle %s", bundle);
	/*
	 * config: create's copy (an exec's); the bundle's file, as before,
	 * says its writer, and a bundle gone since has none
	 */
	if (config)
		b.has_cfg = b.dir >= 0 && fstatat(b.dir, "config.json", &b.cfg_st, 0) == 0;
	else
		b.has_cfg = (s->doc = load_bounded(b.dir, "config.json", path,
						   &b.cfg_st, err)) != NULL;
	s->doc = config ? json_incref(config) : s->doc;
	if (!s->doc) {
		close(b.dir);	/* open: without create's copy, load_bounded failed */
		return err->code;
	}
	s->annotations = json_incref(json_object_get(s->doc, "annotations"));
	if (!json_is_object(s->annotations)) {
		json_decref(s->annotations);
		s->annotations = json_object();
	}
	lnx = json_object_get(s->doc, "linux");
	r = load_policies(op, s, err);
	if (r == 0)
		r = load_egress(op, s, err);
	if (r == 0)
		r = load_process(op, json_object_get(s->doc, "process"), s, err);
	if (r == 0)
		r = check_namespaces(op, lnx, s, err);
	if (r == 0)
		r = check_devices(lnx, err);
	if (r == 0)
		r = refuse_extras(s->doc, lnx, err);
	if (r == 0)
		r = load_root(bundle, &b, json_object_get(s->doc, "root"), s, err);
	if (b.dir >= 0)
		close(b.dir);
	if (r == 0) {
		drop_engine_init(json_object_get(s->doc, "mounts"), s);
		r = add_mounts(op, json_object_get(s->doc, "mounts"), s, err);
	}
	if (r == 0)
		r = load_resources(json_object_get(lnx, "resources"), &s->p, err);
	json_array_foreach(json_object_get(json_object_get(s->doc, "process"), "env"),
			   i, env) {
		if (r == 0)
			r = corral_policy_set_env(&s->p, json_string_value(env), err);
	}
	if (r == 0 && strcmp(s->cwd, "/"))
		r = set_cwd(s, err);
	if (r == 0 && json_string_value(json_object_get(s->doc, "hostname")) &&
	    !(s->hostname = strdup(json_string_value(json_object_get(s->doc,
									"hostname")))))
		r = corral_set_err(err, -ENOMEM, "out of memory for hostname");
	if (r == 0 && !s->p.workdir)
		r = corral_policy_set_workdir(&s->p, "/", err);
	return r;
}

int oci_process_load(const struct oci_operator *op, const char *path,
		     struct oci_spec *s, struct corral_err *err)
{
	json_t *proc = load_bounded(AT_FDCWD, path, path, NULL, err);
	int r;

	if (!proc)
		return err->code;
	free_strv(s->argv);
	free_strv(s->env);
	free(s->cwd);
	s->argv = s->env = NULL;
	s->cwd = NULL;
	r = load_process(op, proc, s, err);
	json_decref(proc);
	return r;
}

void oci_spec_free(struct oci_spec *s)
{
	corral_policy_free(&s->p);
	free_strv(s->argv);
	free(s->init);
	free_strv(s->env);
	free(s->cwd);
	free(s->hostname);
	free(s->rootfs);
	free(s->rlimits);
	json_decref(s->annotations);
	json_decref(s->doc);
	if (s->net_fd >= 0)
		close(s->net_fd);
	memset(s, 0, sizeof(*s));
	s->net_fd = -1;
}

int oci_signal_parse(const char *s, struct corral_err *err)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
		{ "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
		{ "TERM", SIGTERM }, { "CONT", SIGCONT }, { "STOP", SIGSTOP },
		{ "WINCH", SIGWINCH }, { "ALRM", SIGALRM }, { "PIPE", SIGPIPE },
		{ "CHLD", SIGCHLD }, { "ABRT", SIGABRT },
	};
	char *end;
	long n;

	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name))
			return names[i].sig;
	n = strtol(s, &end, 10);
	if (*s && !*end && n > 0 && n < NSIG)
		return (int)n;
	return corral_set_err(err, -EINVAL, "invalid signal \"%s\"", s);
}
