/*
 * tls_server.c - TLS for a server of the caller's (`corral serve
 * --listen`), through the TLS plugin: corral itself links no OpenSSL
 * (tls_plugin.h says why).
 *
 * The files are opened here and the plugin reads the fds: the checks
 * (a regular file; a key no one else may read) hold for what is read,
 * and a name swapped for a FIFO cannot stop the caller's loop.  A reload
 * opens the same names again, symlinks followed as at the start (a
 * renewal tool's "live" link moves), and swaps in a new listener only
 * when every check passed.
 */
#include "internal.h"
#include "tls_plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct corral_tls_server {
	const struct tls_ops *ops;
	struct tls_listener *l;
	char *cert_file, *key_file, *client_ca_file;
	struct tls_hello_check hello;	/* every listener's, old ones' too */
};

/* path, opened for reading: a regular file, and for a key, no one else's to read */
static int open_checked(const char *what, const char *path, bool secret,
			struct corral_err *err)
{
	struct stat st;
	int fd;

	/* O_NONBLOCK: a FIFO's open would wait for a writer */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return corral_set_errno(err, errno, "%s %s", what, path);
	if (fstat(fd, &st) < 0) {
		corral_set_errno(err, errno, "%s %s: fstat", what, path);
		close(fd);
		return err->code;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return corral_set_err(err, -EINVAL, "%s %s: not a regular file", what, path);
	}
	/* as sshd with a host key: one that anyone may read is no one's secret */
	if (secret && (st.st_mode & S_IROTH)) {
		close(fd);
		return corral_set_err(err, -EPERM, "%s %s: anyone may read it (mode %03o); "
				      "chmod o-r it", what, path, (unsigned)(st.st_mode & 0777));
	}
	return fd;
}

static void close_files(struct tls_listener_files *f)
{
	if (f->cert_fd >= 0)
		close(f->cert_fd);
	if (f->key_fd >= 0)
		close(f->key_fd);
	if (f->client_ca_fd >= 0)
		close(f->client_ca_fd);
}

/* A listener from s's files, as they are now. */
static struct tls_listener *listener_load(const struct corral_tls_server *s,
					  struct corral_err *err)
{
	struct tls_listener_files f = {
		.cert_file = s->cert_file, .key_file = s->key_file,
		.client_ca_file = s->client_ca_file,
		.cert_fd = -1, .key_fd = -1, .client_ca_fd = -1,
		.hello = &s->hello,
	};
	struct tls_listener *l = NULL;
	char why[512] = "";

	f.cert_fd = open_checked("TLS certificate", s->cert_file, false, err);
	if (f.cert_fd >= 0)
		f.key_fd = open_checked("TLS key", s->key_file, true, err);
	if (f.key_fd >= 0 && s->client_ca_file)
		f.client_ca_fd = open_checked("TLS client CA", s->client_ca_file, false, err);
	if (f.key_fd >= 0 && (!s->client_ca_file || f.client_ca_fd >= 0)) {
		l = s->ops->listener_new(&f, why, sizeof(why));
		if (!l)
			corral_set_err(err, -EINVAL, "TLS: %s", why);
	}
	close_files(&f);
	return l;
}

static void server_free(struct corral_tls_server *s)
{
	free(s->cert_file);
	free(s->key_file);
	free(s->client_ca_file);
	free(s);
}

struct corral_tls_server *corral_tls_server_new(const char *cert_file, const char *key_file,
						const char *client_ca_file,
						struct corral_err *err)
{
	struct corral_tls_server *s = calloc(1, sizeof(*s));

	if (s) {
		s->cert_file = strdup(cert_file);
		s->key_file = strdup(key_file);
		s->client_ca_file = client_ca_file ? strdup(client_ca_file) : NULL;
	}
	if (!s || !s->cert_file || !s->key_file || (client_ca_file && !s->client_ca_file)) {
		corral_set_err(err, -ENOMEM, "out of memory for TLS on %s", cert_file);
		if (s)
			server_free(s);
		return NULL;
	}
	s->ops = tls_plugin_load(err);
	s->l = s->ops ? listener_load(s, err) : NULL;
	if (!s->l) {
		server_free(s);
		return NULL;
	}
	return s;
}

int corral_tls_server_reload(struct corral_tls_server *s, struct corral_err *err)
{
	struct tls_listener *l = listener_load(s, err);

	if (!l)
		return err->code;
	/* the open connections hold the old context, and with it the old key */
	s->ops->listener_free(s->l);
	s->l = l;
	return 0;
}

void corral_tls_server_check_hello(struct corral_tls_server *s,
				   bool (*fn)(int fd, void *arg), void *arg)
{
	s->hello.fn = fn;
	s->hello.arg = arg;
}

struct bufferevent *corral_tls_server_bev(struct corral_tls_server *s, struct event_base *base)
{
	return s->ops->listener_bev(s->l, base);
}

bool corral_tls_server_end(struct corral_tls_server *s, struct bufferevent *bev)
{
	return s && s->ops->listener_end(bev);
}

void corral_tls_server_free(struct corral_tls_server *s)
{
	if (!s)
		return;
	s->ops->listener_free(s->l);
	server_free(s);
}
