/* err.c - the error type every layer carries up. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

int corral_set_err(struct corral_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int corral_set_errno(struct corral_err *err, int errnum, const char *fmt, ...)
{
	char buf[128];
	const char *text;
	size_t used;
	va_list ap;
	int n;

	/* the GNU strerror_r: it may return a static string instead of buf */
	text = strerror_r(errnum, buf, sizeof(buf));
	err->code = -errnum;
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	used = n < 0 ? 0 : (size_t)n;
	if (used < sizeof(err->msg))
		if (snprintf(err->msg + used, sizeof(err->msg) - used, ": %s", text) < 0)
			err->msg[used] = '\0';
	return -errnum;
}

int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
{
	char old[CORRAL_ERR_MAX];
	size_t used;
	va_list ap;
	int n;

	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	used = n < 0 ? 0 : (size_t)n;
	if (used < sizeof(err->msg))
		if (snprintf(err->msg + used, sizeof(err->msg) - used, ": %s", old) < 0)
			err->msg[used] = '\0';
	return err->code;
}
