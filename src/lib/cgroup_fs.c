/*
 * cgroup_fs.c - reading and writing the small files of cgroupfs.
 *
 * Every write is one write(2) of the whole value, as the kernel wants it;
 * an error names the file and the value.
 */
#include "cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const cg_ctrl_name[C_COUNT] = {
	[C_MEMORY] = "memory",
	[C_PIDS] = "pids",
	[C_CPU] = "cpu",
	[C_CPUACCT] = "cpuacct",
	[C_FREEZER] = "freezer",
};

void cg_sleep_ms(unsigned ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000,
	};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

char *cg_path_join(const char *a, const char *b)
{
	char *p;

	if (asprintf(&p, "%s/%s", a, b) < 0)
		return NULL;
	return p;
}

void cg_appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

int cg_file_path(char *buf, size_t len, const char *dir, const char *file)
{
	int n = snprintf(buf, len, "%s/%s", dir, file);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

bool cg_file_exists(const char *dir, const char *file)
{
	char path[PATH_MAX];

	if (cg_file_path(path, sizeof(path), dir, file) < 0)
		return false;
	return access(path, F_OK) == 0;
}

bool cg_dir_writable(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return false;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return false;
	}
	return faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) == 0;
}

ssize_t cg_read_file(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, r;

	r = cg_file_path(path, sizeof(path), dir, file);
	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	close(fd);
	buf[n] = '\0';
	return n;
}

/* optional: a file this kernel lacks (the open's ENOENT) is 0, not an error */
static int write_file(const char *dir, const char *file, const char *val,
		      bool optional, struct corral_err *err)
{
	char path[PATH_MAX];
	size_t len = strlen(val);
	ssize_t n;
	int fd, r;

	r = cg_file_path(path, sizeof(path), dir, file);
	if (r < 0)
		return corral_set_err(err, r, "cgroup path %s/%s is too long",
				      dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && optional && errno == ENOENT)
		return 0;
	if (fd < 0) {
		r = -errno;
		return corral_set_errno(err, -r, "cannot open %s", path);
	}
	do
		n = write(fd, val, len);
	while (n < 0 && errno == EINTR);
	r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return corral_set_errno(err, -r, "cannot write \"%s\" to %s",
				      val, path);
	if ((size_t)n != len)
		return corral_set_err(err, -EIO,
				      "short write of \"%s\" to %s", val, path);
	return 0;
}

int cg_write_file(const char *dir, const char *file, const char *val,
		  struct corral_err *err)
{
	return write_file(dir, file, val, false, err);
}

int cg_write_u64(const char *dir, const char *file, uint64_t v,
		 struct corral_err *err)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return write_file(dir, file, buf, false, err);
}

/* One open, where an access() first and then the open made two. */
int cg_write_u64_if_there(const char *dir, const char *file, uint64_t v,
			  struct corral_err *err)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return write_file(dir, file, buf, true, err);
}

uint64_t cg_read_u64(const char *dir, const char *file)
{
	char buf[32], *end;
	uint64_t v;

	if (cg_read_file(dir, file, buf, sizeof(buf)) <= 0)
		return 0;
	errno = 0;
	v = strtoull(buf, &end, 10);
	return errno || end == buf ? 0 : v;
}

int cg_kv_get(const char *buf, const char *key, uint64_t *val)
{
	size_t klen = strlen(key);
	const char *p = buf;

	while (*p) {
		if (!strncmp(p, key, klen) && p[klen] == ' ') {
			*val = strtoull(p + klen + 1, NULL, 10);
			return 0;
		}
		p = strchrnul(p, '\n');
		if (*p)
			p++;
	}
	return -ENOENT;
}

/* A counter's text: a number, or key's value in "key value" lines. */
static int kv_take(const char *buf, ssize_t n, const char *key, uint64_t *val)
{
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return (int)n;
	if (!key) {
		*val = strtoull(buf, NULL, 10);
		return 0;
	}
	cg_kv_get(buf, key, val);
	return 0;
}

int cg_read_kv(const char *dir, const char *file, const char *key,
	       uint64_t *val)
{
	char buf[4096];

	return kv_take(buf, cg_read_file(dir, file, buf, sizeof(buf)), key, val);
}

ssize_t cg_counter_file(struct cg *cg, size_t slot, const char *dir,
			const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	int *fd, r;
	ssize_t n;

	if (!cg->counters_kept || slot >= CG_COUNTERS_MAX)
		return cg_read_file(dir, file, buf, len);
	fd = &cg->counter_fd[slot];
	if (*fd == CG_COUNTER_ABSENT)
		return -ENOENT;
	if (*fd < 0) {
		r = cg_file_path(path, sizeof(path), dir, file);
		if (r < 0)
			return r;
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0) {
			r = -errno;
			*fd = r == -ENOENT ? CG_COUNTER_ABSENT : -1;
			return r;
		}
	}
	/* a cgroup file's text is made afresh by each read from offset 0 */
	do
		n = pread(*fd, buf, len - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

int cg_counter_kv(struct cg *cg, size_t slot, const char *dir,
		  const char *file, const char *key, uint64_t *val)
{
	char buf[4096];

	return kv_take(buf, cg_counter_file(cg, slot, dir, file, buf, sizeof(buf)),
		       key, val);
}

unsigned cg_read_ctrl_list(const char *dir, const char *file)
{
	char buf[1024], *tok, *save = NULL;
	unsigned bits = 0;

	if (cg_read_file(dir, file, buf, sizeof(buf)) < 0)
		return 0;
	for (tok = strtok_r(buf, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		for (int c = 0; c < C_COUNT; c++)
			if (!strcmp(tok, cg_ctrl_name[c]))
				bits |= C_BIT(c);
	}
	return bits;
}
