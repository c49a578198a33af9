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
#include <sys/xattr.h>
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
 * The image's /etc/passwd: the topmost layer with the file decides; a
 * whiteout or an opaque etc/ above it hides the lower ones.  Resolved
 * beneath each layer, never following a link out of it.  NULL if none.
 */
static char *read_passwd(const struct corral_image *img)
{
	/* O_NONBLOCK: an image's FIFO there would hold the caller (a daemon) */
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	struct open_how probe = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	for (size_t i = img->nlayers; i-- > 0;) {
		char opaque[2] = "", *buf;
		struct stat st;
		ssize_t n;
		int dfd, fd;

		dfd = open(img->layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return NULL;
		fd = openat2_retry(dfd, "etc/passwd", &how);
		if (fd < 0) {
			int e = errno;
			/*
			 * A whiteout, found as the overlay finds it: a path,
			 * its "etc" a link to "/DIR", had the caller stat the
			 * host's DIR/passwd (an automount, a FUSE mount
			 * answered) and a device there hide the image's file.
			 */
			int w = openat2_retry(dfd, "etc/passwd", &probe);
			bool hidden = w >= 0 && fstat(w, &st) == 0 && S_ISCHR(st.st_mode);
			char path[4200];

			if (w >= 0)
				close(w);

			snprintf(path, sizeof(path), "%s/etc", img->layers[i]);
			hidden = hidden || (lgetxattr(path, "user.overlay.opaque", opaque, 1) == 1 &&
					    opaque[0] == 'y');
			close(dfd);
			if (hidden || e != ENOENT)
				return NULL;
			continue;
		}
		close(dfd);
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > PASSWD_MAX) {
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
