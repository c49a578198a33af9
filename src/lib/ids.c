/*
 * ids.c - the syntax of the ids a caller gives: a sandbox's and a tool
 * call's.  Defined once here; the library checks them where it takes them
 * (corral_box_create, corral_box_exec, corral_run), the daemon before it
 * acts on a request, the CLI before it sends one.
 */
#include "internal.h"

#include <string.h>

int corral_check_sandbox_id(const char *id, struct corral_err *err)
{
	size_t n = id ? strlen(id) : 0;

	/* it names files and cgroups: no '/', no "..", no hidden name */
	if (n == 0 || n > CORRAL_SANDBOX_ID_MAX || id[0] == '.' ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		   "0123456789._-") != n)
		return corral_set_err(err, -EINVAL, "bad sandbox id \"%.64s\": 1 to "
				      "%d of [A-Za-z0-9._-], not starting with "
				      "'.'", id ? id : "", CORRAL_SANDBOX_ID_MAX);
	return 0;
}

/* The length of the UTF-8 character at s (at most n bytes), 0 if invalid. */
size_t corral_utf8_char(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len, i;
	uint32_t c;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and beyond U+10FFFF */
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	return len;
}

/*
 * Any text a JSON string carries, 1 to 127 bytes: the daemon has taken
 * every such id from its clients, and the CLI's older [A-Za-z0-9._:-]
 * is inside it.  UTF-8 because the id goes into every event (JSON).
 */
int corral_check_tool_call_id(const char *id, struct corral_err *err)
{
	size_t n = id ? strlen(id) : 0, i, len;

	if (n == 0 || n > CORRAL_TOOL_CALL_ID_MAX)
		return corral_set_err(err, -EINVAL, "tool_call_id must be 1 to "
				      "%d bytes (got %zu)",
				      CORRAL_TOOL_CALL_ID_MAX, n);
	for (i = 0; i < n; i += len) {
		len = corral_utf8_char(id + i, n - i);
		if (!len)
			return corral_set_err(err, -EINVAL, "tool_call_id is not "
					      "UTF-8 (byte %zu)", i);
	}
	return 0;
}
