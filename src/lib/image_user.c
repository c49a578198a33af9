/*
 * image_user.c - an image's User as the sandbox's one identity.
 *
 * A sandbox has exactly one uid, 1000, mapped to one unprivileged host
 * user (ns.c); an image's User cannot change that uid without a second
 * mapping, and root (0) never runs inside.  What can follow the image is
 * the user's name and home: User "app" or "1001" that the image's
 * /etc/passwd lists as "app:x:1001:...:/home/app:..." makes uid 1000 be
 * "app" with HOME=/home/app (the scratch $HOME mounted there too), so that
 * programs which look their user up, or keep files under ~, find what the
 * image expects.  Read on the supervisor's side from the store's layers:
 * the topmost layer that has etc/passwd (or hides it) decides.
 */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PASSWD_MAX (1u << 20)

/* Homes corral mounts something else on, or that are not a home. */
static const char *const not_homes[] = {
	"/", "/tmp", "/proc", "/dev", "/etc", "/workspace", "/oldroot",
	"/.scratch", "/nonexistent", "/usr", "/bin", "/sbin", "/lib",
};

static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > 32 || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789._-", s[i]))
			return false;
	return !(n == 4 && !strncmp(s, "root", 4)) && !(n == 6 && !strncmp(s, "nobody", 6));
}

static bool home_ok(const char *s, size_t n)
{
	if (n < 2 || n > 255 || s[0] != '/' || s[n - 1] == '/')
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] == 0x7f || s[i] == ':' ||
		    (s[i] == '.' && s[i - 1] == '/'))
			return false;
	for (size_t i = 0; i < sizeof(not_homes) / sizeof(not_homes[0]); i++) {
		size_t k = strlen(not_homes[i]);

		if (k > 1 && !strncmp(s, not_homes[i], k) && (n == k || s[k] == '/'))
			return false;
	}
	return true;
}

/*
 * The image's /etc/passwd as corral's own merge reads it in the sandbox's
 * root (mount.c's read_image_etc): the topmost layer with the file, the
 * overlay's whiteouts and opaque directories heeded and no link followed
 * (layer_open).  Resolved in each layer alone (RESOLVE_IN_ROOT), a layer's
 * "etc" -> "usr/etc" had its usr/etc/passwd decide, or, missing there,
 * a lower layer's etc/passwd that the link hides: a file the sandbox's
 * /etc never showed chose the user's home.  NULL if none.
 */
static char *read_passwd(const struct corral_image *img)
{
	/* O_NONBLOCK: an image's FIFO there would hold the caller (a daemon) */
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	for (size_t i = img->nlayers; i-- > 0;) {
		struct stat want, st;
		char *buf;
		ssize_t n;
		int dfd, fd, has = layer_open("/proc", img->layers[i], "/etc/passwd", &fd);

		if (has < 0)
			return NULL;
		if (!has)
			continue;
		if (fstat(fd, &want) < 0 || !S_ISREG(want.st_mode)) {
			close(fd);
			return NULL;
		}
		close(fd);
		/* opened again to read it: the same file, or none */
		dfd = open(img->layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		fd = dfd < 0 ? -1 : openat2_retry(dfd, "etc/passwd", &how);
		if (dfd >= 0)
			close(dfd);
		if (fd < 0)
			return NULL;
		if (fstat(fd, &st) < 0 || st.st_dev != want.st_dev || st.st_ino != want.st_ino ||
		    !S_ISREG(st.st_mode) || st.st_size > PASSWD_MAX) {
			close(fd);
			return NULL;
		}
		buf = malloc(st.st_size + 1);
		n = buf ? read(fd, buf, st.st_size) : -1;
		close(fd);
		if (n < 0) {
			free(buf);
			return NULL;
		}
		buf[n] = '\0';
		return buf;
	}
	return NULL;
}

/* In passwd text, the line of user (a name or a uid): name and home. */
static bool find_user(char *text, const char *user, size_t ulen, bool numeric,
		      char **name, size_t *nlen, char **home, size_t *hlen)
{
	for (char *line = text, *next; line && *line; line = next) {
		char *f[7];
		size_t k = 0;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (char *s = line; k < 7; k++) {
			f[k] = s;
			s = strchr(s, ':');
			if (!s)
				break;
			*s++ = '\0';
		}
		if (k < 6)
			continue;
		if (numeric ? strlen(f[2]) == ulen && !strncmp(f[2], user, ulen) :
			      strlen(f[0]) == ulen && !strncmp(f[0], user, ulen)) {
			if (!strcmp(f[2], "0"))
				return false;	/* root stays outside */
			*name = f[0];
			*nlen = strlen(f[0]);
			*home = f[5];
			*hlen = strlen(f[5]);
			return true;
		}
	}
	return false;
}

int image_user_apply(struct corral_policy *p, const struct corral_image *img,
		     struct corral_err *err)
{
	const char *user = img->config.user;
	size_t ulen = user ? strcspn(user, ":") : 0, nlen = 0, hlen = 0;
	char *text, *name = NULL, *home = NULL;
	bool numeric, found;
	int r = 0;

	if (!ulen || (ulen == 4 && !strncmp(user, "root", 4)) ||
	    (ulen == 1 && user[0] == '0'))
		return 0;	/* root, or no User: the agent */
	numeric = strspn(user, "0123456789") == ulen;
	text = read_passwd(img);
	found = text && find_user(text, user, ulen, numeric, &name, &nlen, &home, &hlen);
	if (!found && !numeric) {	/* a name the image does not list */
		name = (char *)user;
		nlen = ulen;
	}
	free(p->user_name);
	free(p->user_home);
	p->user_name = p->user_home = NULL;
	if (name && name_ok(name, nlen) && !(p->user_name = strndup(name, nlen)))
		r = corral_set_err(err, -ENOMEM, "out of memory");
	if (r == 0 && p->user_name && home && home_ok(home, hlen) &&
	    !(p->user_home = strndup(home, hlen)))
		r = corral_set_err(err, -ENOMEM, "out of memory");
	free(text);
	return r;
}
