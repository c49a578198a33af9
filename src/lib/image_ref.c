/*
 * image_ref.c - image names, as archives tag them and users type them.
 *
 * One grammar, docker's (distribution/reference): NAME[:TAG][@DIGEST],
 * where NAME is [DOMAIN/]COMPONENT[/COMPONENT...].  Names are stored and
 * compared in their full form, so that "busybox", "docker.io/busybox" and
 * "docker.io/library/busybox:latest" are one image, as `docker run` and
 * `podman run` treat them.
 */
#include "image.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 255	/* docker's limit on the name without tag */
#define TAG_MAX_LEN 128

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* alnum+ ( ("." | "_" | "__" | "-"+) alnum+ )* */
static bool valid_component(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	while (i < n) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '.' || (s[i] == '_' && s[i + 1] != '_')) {
			i++;
		} else if (s[i] == '_') {
			i += 2;
		} else if (s[i] == '-') {
			while (i < n && s[i] == '-')
				i++;
		} else {
			return false;
		}
		if (i >= n || !is_lower_alnum(s[i]))
			return false;
	}
	return true;
}

/* host labels [A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])? by dots, [:port] */
static bool valid_domain(const char *s, size_t n)
{
	const char *colon = memchr(s, ':', n);
	size_t host = colon ? (size_t)(colon - s) : n, label = 0;

	if (host == 0)
		return false;
	for (size_t i = 0; i <= host; i++) {
		if (i == host || s[i] == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)s[i]) && !(s[i] == '-' && label > 0))
			return false;
		label++;
	}
	if (colon) {
		size_t plen = n - host - 1;

		if (plen == 0 || plen > 5)
			return false;
		for (size_t i = host + 1; i < n; i++)
			if (!isdigit((unsigned char)s[i]))
				return false;
	}
	return true;
}

static bool valid_tag(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > TAG_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!isalnum((unsigned char)c) && c != '_' && (i == 0 || (c != '.' && c != '-')))
			return false;
	}
	return true;
}

bool image_valid_digest(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
		return false;
	for (const char *p = s + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

bool image_looks_like_digest(const char *ref)
{
	const char *hex = !strncmp(ref, "sha256:", 7) ? ref + 7 : ref;
	size_t n = strlen(hex);

	if (n < 12 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return false;
	return true;
}

int corral_image_ref_normalize(const char *ref, char *out, size_t len,
			       struct corral_err *err)
{
	char buf[512], tag[TAG_MAX_LEN + 1] = "", *digest = NULL, *slash, *colon;
	const char *domain = "docker.io", *path;
	bool library;
	int n;

	if (strlen(ref) >= sizeof(buf))
		return corral_set_err(err, -EINVAL, "image name too long (%zu bytes)",
				      strlen(ref));
	for (const char *p = ref; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return corral_set_err(err, -EINVAL,
					      "image name \"%s\": a space or control byte",
					      ref);
	if (image_valid_digest(ref))
		return corral_set_err(err, -EINVAL,
				      "\"%s\" is a digest, not a name", ref);
	snprintf(buf, sizeof(buf), "%s", ref);

	digest = strchr(buf, '@');
	if (digest) {
		*digest++ = '\0';
		if (!image_valid_digest(digest))
			return corral_set_err(err, -EINVAL,
					      "image name \"%s\": bad digest \"%s\" (want sha256: and 64 hex digits)",
					      ref, digest);
	}
	/* a tag's colon comes after the last slash; a port's before it */
	slash = strrchr(buf, '/');
	colon = strrchr(slash ? slash : buf, ':');
	if (colon) {
		*colon++ = '\0';
		if (!valid_tag(colon))
			return corral_set_err(err, -EINVAL,
					      "image name \"%s\": bad tag \"%s\"", ref, colon);
		snprintf(tag, sizeof(tag), "%s", colon);
	}

	path = buf;
	slash = strchr(buf, '/');
	if (slash && (memchr(buf, '.', slash - buf) || memchr(buf, ':', slash - buf) ||
		      (slash - buf == 9 && !strncmp(buf, "localhost", 9)))) {
		*slash = '\0';
		if (!valid_domain(buf, strlen(buf)))
			return corral_set_err(err, -EINVAL,
					      "image name \"%s\": bad registry \"%s\"", ref, buf);
		domain = !strcmp(buf, "index.docker.io") ? "docker.io" : buf;
		path = slash + 1;
	}
	for (const char *c = path;;) {
		const char *end = strchr(c, '/');
		size_t clen = end ? (size_t)(end - c) : strlen(c);

		if (!valid_component(c, clen))
			return corral_set_err(err, -EINVAL,
					      "image name \"%s\": bad component \"%.*s\" (lowercase letters, digits and . _ - between them)",
					      ref, (int)clen, c);
		if (!end)
			break;
		c = end + 1;
	}
	library = !strcmp(domain, "docker.io") && !strchr(path, '/');
	if (!tag[0] && !digest)
		strcpy(tag, "latest");
	n = snprintf(out, len, "%s/%s%s%s%s%s%s", domain, library ? "library/" : "",
		     path, tag[0] ? ":" : "", tag, digest ? "@" : "", digest ? digest : "");
	if (strlen(domain) + 1 + (library ? 8 : 0) + strlen(path) > NAME_MAX_LEN)
		return corral_set_err(err, -ENAMETOOLONG,
				      "image name \"%s\" is longer than %d bytes", ref,
				      NAME_MAX_LEN);
	if (n < 0 || (size_t)n >= len)
		return corral_set_err(err, -ENAMETOOLONG,
				      "image name \"%s\" is too long", ref);
	return 0;
}
