/*
 * unseen.c - a secret's value never reaches the sandbox by its file or variable.
 *
 * A policy's secret read "from_file" is what TLS termination swaps in on
 * the way out: the sandbox holds a placeholder, never the value.  A
 * workspace, bind or --rootfs that holds the file would hand the value
 * over as a plain read (`--workspace .` with the key in ./secrets/), and
 * the agent could send it anywhere.  Such a sandbox is refused, before
 * anything is built.  So is one read "from_env" whose variable env.pass
 * would copy into the sandbox's environment as it is.
 *
 * Judged by identity, not by spelling: every directory from the file up to
 * the host's root ("..", which crosses mounts as the host sees them) is
 * compared with each source the view would take, so a symlink or a second
 * bind of the same directory names it too.  A file with another hard link
 * is refused beside any source on its filesystem, where that link may
 * lie.  A mount beneath a source comes with it (a bind is recursive):
 * each one in the mount table is compared as well, since the walk up
 * from the file never passes the source.
 */
#include "internal.h"
#include "sandbox.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* a path of PATH_MAX bytes has at most this many components */
#define UNSEEN_DEPTH_MAX (PATH_MAX / 2)

struct chain {
	nlink_t nlink;			/* the file's links */
	dev_t dev[UNSEEN_DEPTH_MAX];	/* [0] the file's, then each directory's */
	ino_t ino[UNSEEN_DEPTH_MAX];
	size_t n;
};

static bool in_chain(const struct chain *c, const struct stat *st)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->dev[i] == st->st_dev && c->ino[i] == st->st_ino)
			return true;
	return false;
}

static void chain_add(struct chain *c, const struct stat *st)
{
	if (c->n < UNSEEN_DEPTH_MAX) {
		c->dev[c->n] = st->st_dev;
		c->ino[c->n] = st->st_ino;
		c->n++;
	}
}

static bool chain_visit(const struct stat *st, void *arg)
{
	chain_add(arg, st);
	return false;
}

/* The file and each directory above it, as secrets.c opens it. */
static int chain_of(const char *file, struct chain *c, struct corral_err *err)
{
	struct stat st;
	char *real, *slash;
	int fd;

	c->n = 0;
	if (stat(file, &st) < 0)
		return corral_set_errno(err, errno, "cannot stat %s", file);
	c->nlink = st.st_nlink;
	chain_add(c, &st);
	real = realpath(file, NULL);
	if (!real)
		return corral_set_errno(err, errno, "cannot resolve %s", file);
	slash = strrchr(real, '/');
	if (slash == real)
		slash++;
	*slash = '\0';
	fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		corral_set_errno(err, e, "cannot open %s", real);
		free(real);
		return -e;
	}
	free(real);
	/* a level that cannot be read ends the chain: what lies above is not judged */
	walk_up(fd, chain_visit, c);
	close(fd);
	return 0;
}

/* The object st is, or holds, the file of chain arg. */
static bool chain_holds(const struct stat *st, void *arg)
{
	const struct chain *c = arg;

	/* another link of a file may be anywhere on its filesystem */
	if (c->nlink > 1 && st->st_dev == c->dev[0])
		return true;
	return in_chain(c, st);
}

/*
 * A source of the view: its pinned object, or what its path names now,
 * and each mount beneath it, which the bind brings along.
 */
static bool source_holds(const struct chain *c, const char *path, bool pinned, int fd)
{
	struct stat st;
	int dir, r;

	if (pinned ? fstat(fd, &st) < 0 : stat(path, &st) < 0)
		return false;	/* what cannot be opened is not shown either */
	if (chain_holds(&st, (void *)c))
		return true;
	if (!S_ISDIR(st.st_mode))
		return false;
	dir = pinned ? fd : open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return false;
	r = mounts_beneath(dir, chain_holds, (void *)c);
	if (!pinned)
		close(dir);
	return r == 1;
}

/* Which source of p's view holds the file whose chain is c, or NULL. */
static const char *shown_by(const struct corral_policy *p, const struct chain *c,
			    const char **kind)
{
	struct stat masked;
	const char *host;

	*kind = "workspace";
	if (p->workspace && source_holds(c, p->workspace, p->workspace_pinned,
					 p->workspace_fd))
		return p->workspace;
	*kind = "bind";
	for (size_t i = 0; i < p->nbinds; i++)
		if (source_holds(c, p->binds[i].src, p->binds[i].pinned, p->binds[i].fd))
			return p->binds[i].src;
	*kind = "root";
	for (size_t i = 0; i < p->nroot_layers; i++)
		if (source_holds(c, p->root_layers[i], p->root_pinned, p->root_fd))
			return p->root_layers[i];
	*kind = "host directory";
	/* a file beneath the host's masked directory is in none of them */
	if (c->nlink == 1 && stat(MOUNT_HOST_MASKED, &masked) == 0 && in_chain(c, &masked))
		return NULL;
	for (size_t i = 0; !p->nroot_layers && (host = mount_host_source(i)); i++)
		if (source_holds(c, host, false, -1))
			return host;
	return NULL;
}

/* A secret from the environment: env.pass must not copy its variable in. */
static int env_passed(const struct corral_policy *p, json_t *s, const char *name,
		      struct corral_err *err)
{
	const char *var = json_string_value(json_object_get(s, "from_env"));

	for (size_t i = 0; var && i < p->nenv_pass; i++)
		if (!strcmp(p->env_pass[i], var))
			return corral_set_err(err, -EACCES, "secret %s: its variable %s is "
					      "passed in (env.pass), where the sandbox would "
					      "read the value itself", name ? name : "?", var);
	return 0;
}

int unseen_check(const struct corral_policy *p, struct corral_err *err)
{
	json_t *secrets = p->net_tls ? p->net_tls->secrets : NULL, *s;
	const char *file, *name, *src, *kind;
	struct chain *c;
	size_t i;
	int r = 0;

	if (!json_array_size(secrets))
		return 0;
	c = malloc(sizeof(*c));
	if (!c)
		return corral_set_err(err, -ENOMEM, "out of memory judging the secrets' files");
	json_array_foreach(secrets, i, s) {
		file = json_string_value(json_object_get(s, "from_file"));
		name = json_string_value(json_object_get(s, "name"));
		if (!file) {
			r = env_passed(p, s, name, err);
			if (r < 0)
				break;
			continue;
		}
		r = chain_of(file, c, err);
		if (r < 0) {
			corral_wrap_err(err, "secret %s", name ? name : "?");
			break;
		}
		src = shown_by(p, c, &kind);
		if (src) {
			r = corral_set_err(err, -EACCES, "secret %s: its file %s %s the "
					   "%s %s, where the sandbox would read the value "
					   "itself; keep it outside what the sandbox is shown",
					   name ? name : "?", file, c->nlink > 1 ?
					   "has another hard link, which may lie in" :
					   "lies in", kind, src);
			break;
		}
	}
	free(c);
	return r;
}

int corral_policy_secrets_unseen(const struct corral_policy *p, struct corral_err *err)
{
	/* as the start judges it: secrets are read only for the proxy */
	return p->net == CORRAL_NET_PROXY ? unseen_check(p, err) : 0;
}
