/*
 * tls_server.c - TLS for a server of the caller's (`corral serve
 * --listen`), through the TLS plugin: corral itself links no OpenSSL
 * (tls_plugin.h says why).
 */
#include "internal.h"
#include "tls_plugin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct corral_tls_server {
	const struct tls_ops *ops;
	struct tls_listener *l;
};

struct corral_tls_server *corral_tls_server_new(const char *cert_file, const char *key_file,
						struct corral_err *err)
{
	struct corral_tls_server *s;
	char why[512] = "";
	struct stat st;

	if (stat(key_file, &st) < 0) {
		corral_set_errno(err, errno, "TLS key %s", key_file);
		return NULL;
	}
	/* as sshd with a host key: one that anyone may read is no one's secret */
	if (st.st_mode & S_IROTH) {
		corral_set_err(err, -EPERM, "TLS key %s: anyone may read it (mode %03o); "
			       "chmod o-r it", key_file, (unsigned)(st.st_mode & 0777));
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		corral_set_err(err, -ENOMEM, "out of memory for TLS");
		return NULL;
	}
	s->ops = tls_plugin_load(err);
	if (!s->ops) {
		free(s);
		return NULL;
	}
	s->l = s->ops->listener_new(cert_file, key_file, why, sizeof(why));
	if (!s->l) {
		corral_set_err(err, -EINVAL, "TLS: %s", why);
		free(s);
		return NULL;
	}
	return s;
}

struct bufferevent *corral_tls_server_bev(struct corral_tls_server *s, struct event_base *base)
{
	return s->ops->listener_bev(s->l, base);
}

void corral_tls_server_free(struct corral_tls_server *s)
{
	if (!s)
		return;
	s->ops->listener_free(s->l);
	free(s);
}
