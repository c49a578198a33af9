/*
 * tls_plugin.h - TLS termination as a plugin: what corral-tls.so provides
 * and how corral finds it.
 *
 * OpenSSL is needed only when a policy terminates TLS (network.tls, a rule
 * with "tls": "terminate", secrets), yet linked into corral it cost every
 * start: ~18k relocations of its tables for the loader to write, and its
 * constructor's cpuid probes (issue 17).  So it lives in a shared object
 * built next to the binary (src/tls/, linked against libssl.so,
 * libcrypto.so and libevent_openssl.so, which share corral's one
 * libevent), loaded by tls_plugin_load() the first time a sandbox needs
 * termination, and only from the directory of the running binary: never
 * from an environment variable, a policy or the working directory.  It
 * must be owned by root or by the binary's owner and writable by no one
 * else, since whoever can write it runs code in the supervisor.  A plugin
 * that is missing or refused fails that sandbox's setup, before anything
 * runs: traffic is never let through unterminated.
 *
 * This header is the whole interface, the plugin's and the loader's; it
 * names no OpenSSL type.  Errors come back as one line of text in why.
 */
#ifndef CORRAL_TLS_PLUGIN_H
#define CORRAL_TLS_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#define TLS_PLUGIN_NAME		"corral-tls.so"
/* the one symbol the plugin exports: a const struct tls_ops */
#define TLS_PLUGIN_SYMBOL	"corral_tls_ops"
/* bumped when struct tls_ops changes: a plugin of another build is refused */
#define TLS_PLUGIN_ABI		7

struct bufferevent;
struct event_base;
struct tls_ca;		/* one sandbox's CA, its minted certificates, contexts */
struct tls_session;	/* the TLS state of one terminated connection's sandbox side */
struct tls_listener;	/* the daemon's TCP listener: its certificate and key */

/*
 * The listener's PEM files, opened and checked by the caller (regular
 * files; the key readable by no one else), read from these fds: what was
 * checked is what is read, however the names change meanwhile.  The names
 * are for messages.
 */
struct tls_listener_files {
	const char *cert_file, *key_file;
	const char *client_ca_file;	/* NULL: no client certificate asked for */
	int cert_fd, key_fd, client_ca_fd;
	const struct tls_hello_check *hello;	/* NULL: every client goes on */
};

/*
 * Asked at each client's ClientHello, with the connection's socket, before
 * the server does any of the handshake's cryptography: false ends the
 * handshake with an alert.  It outlives every listener that points at it
 * (a connection begun before a reload says hello after it).
 */
struct tls_hello_check {
	bool (*fn)(int fd, void *arg);
	void *arg;
};

struct tls_ops {
	unsigned int abi;		/* TLS_PLUGIN_ABI */
	/*
	 * A CA for one sandbox (its key never leaves this process), and the
	 * client context for upstreams: the host's roots plus upstream_ca
	 * (a PEM file, or NULL).
	 */
	struct tls_ca *(*ca_new)(const char *upstream_ca, char *why, size_t whylen);
	/* its certificate, PEM: what the sandbox trusts */
	const char *(*ca_pem)(const struct tls_ca *ca);
	void (*ca_free)(struct tls_ca *ca);
	/*
	 * Answer the sandbox's handshake on raw (its bytes already read stay
	 * its input) with a certificate for host: a filter over raw, which
	 * does not own raw, and *sess, freed with server_close().
	 */
	struct bufferevent *(*server)(struct tls_ca *ca, struct event_base *base,
				      struct bufferevent *raw, const char *host,
				      struct tls_session **sess, char *why, size_t whylen);
	/*
	 * Free a filter from server() (NULL: already freed) and its session;
	 * notify: send close_notify first, so that a client reading to the
	 * end sees an end.
	 */
	void (*server_close)(struct bufferevent *filter, struct tls_session *sess,
			     bool notify);
	/*
	 * A verifying client to host (its certificate chain and name), never
	 * below the version sess (the sandbox's side, or NULL) negotiated: a
	 * socket bufferevent without a socket yet, for
	 * bufferevent_socket_connect(); it owns what it gets.
	 */
	struct bufferevent *(*client)(struct tls_ca *ca, struct event_base *base,
				      const char *host, const struct tls_session *sess,
				      char *why, size_t whylen);
	/*
	 * After an error event on a bufferevent from client(): true with why
	 * set when TLS failed (a handshake error, a certificate that did not
	 * verify), false for a plain socket error.
	 */
	bool (*client_error)(struct bufferevent *bev, char *why, size_t whylen);
	/*
	 * `corral serve --listen`'s TLS: the operator's certificate chain and
	 * private key (the key's secret in OpenSSL's secure heap, which no
	 * fork gets), checked to match; with a client CA, a handshake without
	 * a client certificate it verifies fails.  A listener is never
	 * changed: a reload makes a new one, and connections keep the one
	 * they began with.
	 */
	struct tls_listener *(*listener_new)(const struct tls_listener_files *f,
					     char *why, size_t whylen);
	/*
	 * A connection's bufferevent, for evhttp_set_bevcb(): no socket yet,
	 * it answers the handshake once evhttp gives it one, and its input
	 * is what the client sent, decrypted.
	 */
	struct bufferevent *(*listener_bev)(struct tls_listener *l, struct event_base *base);
	/*
	 * The end of what the daemon says on bev, one of listener_bev's with
	 * its output written: a close_notify, sent now (the TLS its plain
	 * socket's shutdown(SHUT_WR) is).  false: bev is none of them.
	 */
	bool (*listener_end)(struct bufferevent *bev);
	void (*listener_free)(struct tls_listener *l);
	/*
	 * In a fork that will never use TLS (corral_forget): zero all that
	 * OpenSSL holds, the live connections' secrets and buffers of every
	 * sandbox of this process and of the daemon's TLS clients.
	 */
	void (*forget)(void);
	/*
	 * In a process none of whose forks will use TLS (`corral serve`):
	 * from now on no fork inherits a block of OpenSSL's, not even until
	 * it forgets (MADV_WIPEONFORK).  0, or -errno.
	 */
	int (*unshared)(void);
};

struct corral_err;
/*
 * The plugin next to the running binary, loaded on the first call (later
 * calls return the same, or the same error).  NULL with err set, naming
 * the path and why.
 */
const struct tls_ops *tls_plugin_load(struct corral_err *err);
/* In a fork, for corral_forget(): the plugin's forget(), if it is loaded. */
void tls_plugin_forget(void);
/*
 * For corral_memory_unshared(): the plugin's unshared(), now if it is
 * loaded, else when it is.  0, or -errno.
 */
int tls_plugin_unshared(void);

#endif
