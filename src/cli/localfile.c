/*
 * localfile.c - the client's local files, read and written whole: what
 * `corral cp` copies and what `corral exec -i` sends as stdin.  The API
 * carries a file in one body, so a file is in memory once, bounded.  And
 * one written as it comes (an export's patch, as large as the sandbox
 * made it), which takes its name once whole.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
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
			cli_error("reading %s: %s", name, strerror(errno));
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
			free(buf);
			return EXIT_CORRAL;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

/*
 * path opened to read or write by corral_path_open's rule: no symlink in
 * the sandbox's rw directories followed.  mode: O_RDONLY or O_WRONLY (an
 * existing file, then truncated).  -1 with errno ENOENT (nothing said) if
 * nothing is there and quiet_enoent, else said.
 */
static int open_judged(const char *path, int mode, const struct corral_dir_id *rw,
		       size_t nrw, bool quiet_enoent)
{
	struct corral_err err = { 0 };
	char proc[64];
	struct stat st;
	int obj, fd;

	obj = corral_path_open(rw, nrw, "the local file", path, &err);
	if (obj < 0) {
		if (!(quiet_enoent && obj == -ENOENT))
			cli_error("%s", err.msg);
		errno = -obj;
		return -1;
	}
	if (fstat(obj, &st) < 0 || !(S_ISREG(st.st_mode) ||
				     (mode != O_RDONLY && S_ISCHR(st.st_mode)))) {
		cli_error("%s: not a regular file; one file is copied at a time", path);
		close(obj);
		errno = EINVAL;
		return -1;
	}
	/* the object judged, opened again for what we do with it */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", obj);
	fd = open(proc, mode | O_CLOEXEC | (mode == O_WRONLY ? O_TRUNC : 0));
	if (fd < 0)
		cli_error("%s: %s", path, strerror(errno));
	close(obj);
	return fd;
}

int read_local(const char *path, size_t max, char **out, size_t *len,
	       const struct corral_dir_id *rw, size_t nrw)
{
	int fd, code;

	if (!strcmp(path, "-"))
		return read_all(STDIN_FILENO, "standard input", max, out, len);
	fd = open_judged(path, O_RDONLY, rw, nrw, false);
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
			cli_error("writing %s: %s", name, strerror(errno));
			return EXIT_CORRAL;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

int write_local(const char *path, const char *buf, size_t len,
		const struct corral_dir_id *rw, size_t nrw)
{
	struct corral_err err = { 0 };
	struct local_out out;
	char *name;
	int fd, dir, code;

	if (!strcmp(path, "-")) {
		code = local_out_open(&out, "-", NULL, 0);
		return code ? code : local_out_write(&out, buf, len);
	}
	/* a file there is written through, as cp(1) does; else a new one */
	fd = open_judged(path, O_WRONLY, rw, nrw, true);
	if (fd < 0 && errno != ENOENT)
		return EXIT_CORRAL;
	if (fd < 0) {
		dir = corral_dest_parent(rw, nrw, "the local file", path, false, &name, &err);
		if (dir < 0) {
			cli_error("%s", err.msg);
			return EXIT_CORRAL;
		}
		fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0666);
		if (fd < 0)
			cli_error("%s: %s", path, strerror(errno));
		close(dir);
		free(name);
		if (fd < 0)
			return EXIT_CORRAL;
	}
	code = write_all(fd, path, buf, len);
	if (close(fd) < 0 && !code) {
		cli_error("writing %s: %s", path, strerror(errno));
		code = EXIT_CORRAL;
	}
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
		local_out_close(o, false);
		return EXIT_CORRAL;
	}
	return 0;
}

int local_out_write(struct local_out *o, const char *buf, size_t len)
{
	return write_all(o->fd, o->file ? o->path : "standard output", buf, len);
}

int local_out_close(struct local_out *o, bool keep)
{
	struct corral_err err;
	sigset_t old;
	int code = 0;

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
