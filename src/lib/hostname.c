/* hostname.c - one definition of a host name for every parser (see .h). */
#include "hostname.h"

static bool host_char(uint8_t ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

bool hostname_valid(const uint8_t *s, size_t n, size_t max, bool trailing_dot)
{
	size_t label = 0;

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!host_char(s[i]) || ++label > HOSTNAME_LABEL_MAX)
			return false;
	}
	return label != 0 || trailing_dot;
}
