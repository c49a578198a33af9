/*
 * localfile.c - the client's local files, read and written whole: what
 * `corral cp` copies and what `corral exec -i` sends as stdin.  The API
 * carries a file in one body, so a file is in memory once, bounded; it
 * is written to a new file that takes its name once whole, over an old
 * one too.  And one written as it comes (an export's patch, as large as
 * the sandbox made it), which takes its name the same way.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* All of fd, up to max bytes; name is for messages. */
static int read_all(int fd, const char *name, size_t max, char **out,
		    size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap), *p;
	ssize_t got;

	if (!buf)
		return out_of_memory("reading a local file");
	for (;;) {
		if (n == cap) {
			cap *= 2;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return out_of_memory("reading a local file");
			}
			buf = p;
		}
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;

			cli_error("reading %s: %s", name, strerror(e));
			cli_json_errno(e);
			free(buf);
			return EXIT_CORRAL;
		}
		if (got == 0)
			break;
		n += got;
		if (n > max) {
			char size[32];

			corral_format_size(max, size, sizeof(size));
			cli_error("%s is larger than %s, the most the daemon takes",
				  name, size);
			cli_json_code("too_large");
			free(buf);
			return EXIT_CORRAL;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

/*
 * path opened to read by corral_path_open's rule: no symlink in the
 * sandbox's rw directories followed.  -1 (said) if it cannot be.
 */
static int open_judged(const char *path, const struct corral_dir_id *rw, size_t nrw)
{
	struct corral_err err = { 0 };
	char proc[64];
	struct stat st;
	int obj, fd;

	obj = corral_path_open(rw, nrw, "the local file", path, &err);
	if (obj < 0) {
		cli_error("%s", err.msg);
		cli_json_errno(err.code);
		return -1;
	}
	if (fstat(obj, &st) < 0 || !S_ISREG(st.st_mode)) {
		cli_error("%s: not a regular file; one file is copied at a time", path);
		cli_json_code("not_supported");
		close(obj);
		return -1;
	}
	/* the object judged, opened again for what we do with it */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", obj);
	fd = open(proc, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		cli_error("%s: %s", path, strerror(e));
		cli_json_errno(e);
	}
	close(obj);
	return fd;
}

int read_local(const char *path, size_t max, char **out, size_t *len,
	       const struct corral_dir_id *rw, size_t nrw)
{
	int fd, code;

	if (!strcmp(path, "-"))
		return read_all(STDIN_FILENO, "standard input", max, out, len);
	fd = open_judged(path, rw, nrw);
	if (fd < 0)
		return EXIT_CORRAL;
	code = read_all(fd, path, max, out, len);
	close(fd);
	return code;
}

static int write_all(int fd, const char *name, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			cli_error("writing %s: %s", name, strerror(e));
			cli_json_errno(e);
			return EXIT_CORRAL;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* The path the kernel has for what fd holds; NULL (said) if it has none. */
static char *fd_path(int fd, const char *path)
{
	char proc[64], *buf = malloc(PATH_MAX);
	ssize_t n;

	if (!buf) {
		out_of_memory("naming the local file");
		return NULL;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, buf, PATH_MAX - 1);
	if (n < 0 || n == 0 || buf[0] != '/') {
		cli_error("%s: where it lies cannot be read (%s)", path,
			  n < 0 ? strerror(errno) : "not a path");
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* The old way: the file itself truncated and written (a device, or no other). */
static int write_through(int obj, const char *path, const char *buf, size_t len)
{
	char proc[64];
	int fd, code;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", obj);
	fd = open(proc, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		cli_error("%s: %s", path, strerror(e));
		cli_json_errno(e);
		return EXIT_CORRAL;
	}
	code = write_all(fd, path, buf, len);
	if (close(fd) < 0 && !code) {
		int e = errno;

		cli_error("writing %s: %s", path, strerror(e));
		cli_json_errno(e);
		code = EXIT_CORRAL;
	}
	return code;
}

static void out_catch(struct corral_newfile *nf);
static void out_release(void);
static void out_block(sigset_t *old);

/*
 * A new file beside where path lies (its directory judged as `where`),
 * written whole, then renamed onto it: a copy that fails or is killed
 * midway leaves the old file whole, or no file.  old: the file replaced
 * (NULL: none), whose mode (less setuid and setgid: the content is the
 * sandbox's) and owner the new one takes, as cp(1)'s write through kept
 * them.  1 when it cannot be done so and nothing was written (the
 * directory is not ours to write, the owner cannot be kept, the file is
 * a mount point), 0 done, else the exit code (said).
 */
static int replace_file(const char *path, const char *where, const struct stat *old,
			const char *buf, size_t len, const struct corral_dir_id *rw,
			size_t nrw)
{
	struct corral_err err = { 0 };
	struct corral_newfile nf;
	struct stat now;
	sigset_t mask;
	char *name;
	int dir, fd, code = 0;

	dir = corral_dest_parent(rw, nrw, "the local file", where, false, &name, &err);
	if (dir < 0) {
		cli_error("%s", err.msg);
		cli_json_errno(err.code);
		return EXIT_CORRAL;
	}
	/* what lies at where now is what was judged, not something put there since */
	if (old && (fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
		    now.st_dev != old->st_dev || now.st_ino != old->st_ino)) {
		cli_error("%s: %s was moved or replaced while it was being copied",
			  path, where);
		cli_json_code("forbidden");
		code = EXIT_CORRAL;
		goto out;
	}
	/* nothing was found there: a symlink to nothing, which cp(1) too refuses */
	if (!old && fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) == 0) {
		cli_error("%s: %s, not written through", path, S_ISLNK(now.st_mode) ?
			  "a symlink to nothing" : "made while it was being copied");
		cli_json_code("forbidden");
		code = EXIT_CORRAL;
		goto out;
	}
	out_block(&mask);
	fd = corral_newfile_open(&nf, dir, name, old ? 0600 : 0666, &err);
	if (fd >= 0)
		out_catch(&nf);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	if (fd < 0) {
		/* a file we may write in a directory we may not: written through */
		if (old && (err.code == -EACCES || err.code == -EPERM ||
			    err.code == -EROFS)) {
			code = 1;
			goto out;
		}
		cli_error("%s: %s", path, err.msg);
		cli_json_errno(err.code);
		code = EXIT_CORRAL;
		goto out;
	}
	if (old && ((old->st_uid != geteuid() || old->st_gid != getegid()) &&
		    fchown(fd, old->st_uid, old->st_gid) < 0)) {
		code = errno == EPERM ? 1 : EXIT_CORRAL;
		if (code != 1)
			cli_error("%s: keeping its owner: %s", path, strerror(errno));
	}
	if (!code && old && fchmod(fd, old->st_mode & 0777) < 0) {
		cli_error("%s: keeping its mode: %s", path, strerror(errno));
		code = EXIT_CORRAL;
	}
	if (!code)
		code = write_all(fd, path, buf, len);
	out_block(&mask);
	if (!code && corral_newfile_keep(&nf, &err) < 0) {
		/* EBUSY: a file mounted over (a bind); its mount point stays */
		code = old && err.code == -EBUSY ? 1 : EXIT_CORRAL;
		if (code != 1)
			cli_error("%s: %s", path, err.msg);
	} else if (code) {
		corral_newfile_drop(&nf);
	}
	out_release();
	sigprocmask(SIG_SETMASK, &mask, NULL);
out:
	close(dir);
	free(name);
	return code;
}

/*
 * What cp(1) writes, but never in place: an existing regular file is
 * replaced by a new one renamed onto where it lies (through a symlink:
 * the link stays, its target is replaced), so a copy that fails or is
 * killed midway leaves it whole.  Its hard links keep the old content.
 * A character device (/dev/null) is written through; anything else is
 * refused, as a directory is.
 */
int write_local(const char *path, const char *buf, size_t len,
		const struct corral_dir_id *rw, size_t nrw)
{
	struct corral_err err = { 0 };
	struct local_out out;
	struct stat st;
	char *where = NULL;
	int obj, code;

	/*
	 * On a terminal the sandbox's bytes are shown as a patch is
	 * (write_shown): a file's ESC ] 52 set the operator's clipboard, its
	 * ESC ] 0 the window's title, its CSI 2 J cleared what `cp ... -`
	 * was to show.  To a file or a pipe they go as they are.
	 */
	if (!strcmp(path, "-")) {
		code = local_out_open(&out, "-", NULL, 0);
		if (code)
			return code;
		local_out_for_reading(&out);
		code = local_out_write(&out, buf, len);
		if (local_out_close(&out, true) && !code)
			code = EXIT_CORRAL;
		return code;
	}
	obj = corral_path_open(rw, nrw, "the local file", path, &err);
	if (obj == -ENOENT)
		return replace_file(path, path, NULL, buf, len, rw, nrw);
	if (obj < 0) {
		cli_error("%s", err.msg);
		cli_json_errno(err.code);
		return EXIT_CORRAL;
	}
	if (fstat(obj, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
		cli_error("%s: not a regular file; one file is copied at a time", path);
		cli_json_code("not_supported");
		close(obj);
		return EXIT_CORRAL;
	}
	code = S_ISCHR(st.st_mode) ? write_through(obj, path, buf, len) : 0;
	if (S_ISREG(st.st_mode)) {
		char proc[64];

		/* as cp(1): a file we may not write is refused, not replaced */
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", obj);
		if (faccessat(AT_FDCWD, proc, W_OK, AT_EACCESS) < 0 && errno == EACCES) {
			cli_error("%s: %s", path, strerror(EACCES));
			cli_json_code("forbidden");
			code = EXIT_CORRAL;
		} else if (!(where = fd_path(obj, path))) {
			code = EXIT_CORRAL;
		} else {
			code = replace_file(path, where, &st, buf, len, rw, nrw);
			if (code == 1)
				code = write_through(obj, path, buf, len);
		}
	}
	free(where);
	close(obj);
	return code;
}

/* ---- a local file written as it comes ---------------------------------- */

/*
 * A signal that ends us while a named new file is written (a filesystem
 * without O_TMPFILE, or in the instant before its rename) takes the file
 * with it: nothing of ours stays beside FILE.  One the caller ignores
 * (nohup: SIGHUP) stays ignored.
 */
static const int out_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NOUT_SIGNALS (sizeof(out_signals) / sizeof(out_signals[0]))
static struct sigaction out_old[NOUT_SIGNALS];
static struct corral_newfile *volatile out_nf;

/* Only unlink and raise: a signal handler.  SA_RESETHAND: raise kills. */
static void out_ended(int sig)
{
	struct corral_newfile *nf = out_nf;

	if (nf && nf->named)
		unlinkat(nf->dir, nf->tmp, 0);
	raise(sig);
}

static void out_catch(struct corral_newfile *nf)
{
	struct sigaction sa = { .sa_handler = out_ended, .sa_flags = SA_RESETHAND };

	sigfillset(&sa.sa_mask);
	out_nf = nf;
	for (size_t i = 0; i < NOUT_SIGNALS; i++)
		if (sigaction(out_signals[i], NULL, &out_old[i]) == 0 &&
		    out_old[i].sa_handler != SIG_IGN)
			sigaction(out_signals[i], &sa, NULL);
}

static void out_release(void)
{
	for (size_t i = 0; i < NOUT_SIGNALS; i++)
		if (out_old[i].sa_handler != SIG_IGN)
			sigaction(out_signals[i], &out_old[i], NULL);
	out_nf = NULL;
}

/* The out signals held while f->named may change under the handler. */
static void out_block(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < NOUT_SIGNALS; i++)
		sigaddset(&set, out_signals[i]);
	sigprocmask(SIG_BLOCK, &set, old);
}

int local_out_open(struct local_out *o, const char *path,
		   const struct corral_dir_id *rw, size_t nrw)
{
	struct corral_err err = { 0 };
	sigset_t old;

	*o = (struct local_out){ .path = path, .fd = -1, .dir = -1 };
	if (!strcmp(path, "-")) {
		/* what stdio holds goes first; a failed flush is the answer */
		if (fflush(stdout) == EOF)
			return verb_finish(0);
		o->fd = STDOUT_FILENO;
		return 0;
	}
	/* its directory now: what the sandbox does meanwhile cannot move it */
	o->dir = corral_dest_parent(rw, nrw, "the local file", path, false, &o->name, &err);
	if (o->dir < 0) {
		cli_error("%s", err.msg);
		cli_json_errno(err.code);
		return EXIT_CORRAL;
	}
	out_block(&old);
	o->fd = corral_newfile_open(&o->nf, o->dir, o->name, 0666, &err);
	if (o->fd >= 0) {
		o->file = true;
		out_catch(&o->nf);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (o->fd < 0) {
		cli_error("%s: %s", path, err.msg);
		cli_json_errno(err.code);
		local_out_close(o, false);
		return EXIT_CORRAL;
	}
	return 0;
}

void local_out_for_reading(struct local_out *o)
{
	o->shown = !o->file && o->fd == STDOUT_FILENO && isatty(STDOUT_FILENO);
}

/* how many of the last bytes of s begin a character they do not finish */
static size_t unfinished(const char *s, size_t n)
{
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		unsigned char c = (unsigned char)s[n - k];
		size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;

		if (c < 0x80 || want)
			return want > k ? k : 0;
	}
	return 0;
}

/*
 * A patch shown on the operator's terminal is what they review before
 * they apply it: a file's "curl ... | sh # ESC[2K CR +echo hello" showed
 * as "+echo hello" there, the line that runs erased by its own bytes.
 * Each chunk as printable_lines() shows it; a character the chunk cuts
 * off is held for the next one.
 */
static int write_shown(struct local_out *o, const char *buf, size_t len)
{
	size_t n = o->nheld + len, keep;
	char *all = malloc(n ? n : 1), *text;
	int code;

	if (!all)
		return out_of_memory("showing it on the terminal");
	memcpy(all, o->held, o->nheld);
	memcpy(all + o->nheld, buf, len);
	keep = len ? unfinished(all, n) : 0;
	o->nheld = keep;
	memcpy(o->held, all + n - keep, keep);
	text = printable_lines(all, n - keep);
	free(all);
	if (!text)
		return out_of_memory("showing it on the terminal");
	code = write_all(o->fd, "standard output", text, strlen(text));
	free(text);
	return code;
}

int local_out_write(struct local_out *o, const char *buf, size_t len)
{
	if (o->shown)
		return write_shown(o, buf, len);
	return write_all(o->fd, o->file ? o->path : "standard output", buf, len);
}

int local_out_close(struct local_out *o, bool keep)
{
	struct corral_err err;
	sigset_t old;
	int code = 0;

	/* a character cut off at the end: its bytes, shown */
	if (o->shown && o->nheld && write_shown(o, "", 0))
		code = EXIT_CORRAL;
	if (!o->file)
		goto out;	/* stdout, or nothing opened */
	out_block(&old);
	if (keep && corral_newfile_keep(&o->nf, &err) < 0) {
		cli_error("%s: %s", o->path, err.msg);
		code = EXIT_CORRAL;
	} else if (!keep) {
		corral_newfile_drop(&o->nf);
	}
	out_release();
	sigprocmask(SIG_SETMASK, &old, NULL);
	o->file = false;
	o->fd = -1;
out:
	if (o->dir >= 0)
		close(o->dir);
	o->dir = -1;
	free(o->name);
	o->name = NULL;
	return code;
}
