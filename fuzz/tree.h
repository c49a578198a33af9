/*
 * tree.h - a directory tree for the fuzz targets that write files
 * (fuzz_untar.c, fuzz_layer.c): read, described and removed by name
 * from a directory fd, with nothing followed.  Static inline functions,
 * so that each target and its replay (fuzz/replay.c) stay one source
 * file and need not use them all; a target that cannot go on aborts,
 * which libFuzzer records.
 */
#ifndef CORRAL_FUZZ_TREE_H
#define CORRAL_FUZZ_TREE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TREE_PATH	4200	/* a name beneath the tree's top, and then some */

struct tree_names {
	char **v;
	size_t n;
};

static inline void tree_names_free(struct tree_names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	ns->v = NULL;
	ns->n = 0;
}

static inline int tree_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dirfd's rel, sorted; the directory is closed before any use. */
static inline void tree_names(int dirfd, const char *rel, struct tree_names *ns)
{
	struct dirent *de;
	DIR *d;
	int fd;

	ns->v = NULL;
	ns->n = 0;
	fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd)))
		abort();
	while ((de = readdir(d))) {
		char **v;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		v = realloc(ns->v, (ns->n + 1) * sizeof(*v));
		if (!v || !(v[ns->n] = strdup(de->d_name)))
			abort();
		ns->v = v;
		ns->n++;
	}
	closedir(d);
	if (ns->n)
		qsort(ns->v, ns->n, sizeof(*ns->v), tree_cmp);
}

/* rel and name joined in buf; false if it would not fit */
static inline bool tree_join(char *buf, size_t len, const char *rel, const char *name)
{
	return (size_t)snprintf(buf, len, "%s/%s", rel, name) < len;
}

/* rm -rf rel beneath dirfd; a directory is made ours to read first */
static inline void tree_remove(int dirfd, const char *rel)
{
	char sub[TREE_PATH];
	struct tree_names ns;
	struct stat st;

	if (fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return;
		abort();
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, rel, 0) < 0)
			abort();
		return;
	}
	/* a directory, as fstatat just said: nothing here swaps it */
	if (fchmodat(dirfd, rel, 0700, 0) < 0)
		abort();
	tree_names(dirfd, rel, &ns);
	for (size_t i = 0; i < ns.n; i++)
		if (tree_join(sub, sizeof(sub), rel, ns.v[i]))
			tree_remove(dirfd, sub);
	tree_names_free(&ns);
	if (unlinkat(dirfd, rel, AT_REMOVEDIR) < 0)
		abort();
}

/*
 * One line an entry beneath rel, in name order, appended to out: its
 * type and mode, size, mtime, links, and a link's target or the start of
 * a file.  skip: a name at the top not described.
 */
static inline void tree_snapshot(int dirfd, const char *rel, const char *skip,
				 char *out, size_t len)
{
	char sub[TREE_PATH], what[256];
	struct tree_names ns;
	struct stat st;

	tree_names(dirfd, rel, &ns);
	for (size_t i = 0; i < ns.n; i++) {
		size_t used = strlen(out);

		if (skip && !strcmp(ns.v[i], skip))
			continue;
		if (!tree_join(sub, sizeof(sub), rel, ns.v[i]) ||
		    fstatat(dirfd, sub, &st, AT_SYMLINK_NOFOLLOW) < 0)
			abort();
		what[0] = '\0';
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dirfd, sub, what, sizeof(what) - 1);

			what[n < 0 ? 0 : n] = '\0';
		} else if (S_ISREG(st.st_mode)) {
			int fd = openat(dirfd, sub, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			ssize_t n = fd < 0 ? -1 : read(fd, what, sizeof(what) - 1);

			what[n < 0 ? 0 : n] = '\0';
			if (fd >= 0)
				close(fd);
		}
		snprintf(out + used, len - used, "%s %o %lld %lld.%ld %lu %s\n", sub,
			 st.st_mode, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec, (unsigned long)st.st_nlink, what);
		if (S_ISDIR(st.st_mode))
			tree_snapshot(dirfd, sub, NULL, out, len);
	}
	tree_names_free(&ns);
}

static inline void tree_write_file(int dirfd, const char *rel, const char *text)
{
	int fd = openat(dirfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
}

#endif
