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

/* msg = fmt's text, then ": tail"; tail must not point into err->msg. */
static void set_msg_tail(struct corral_err *err, const char *tail,
			 const char *fmt, va_list ap)
{
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	size_t used = n < 0 ? 0 : (size_t)n;

	if (used < sizeof(err->msg))
		if (snprintf(err->msg + used, sizeof(err->msg) - used, ": %s", tail) < 0)
			err->msg[used] = '\0';
}

int corral_set_errno(struct corral_err *err, int errnum, const char *fmt, ...)
{
	char buf[128];
	va_list ap;

	err->code = -errnum;
	va_start(ap, fmt);
	/* the GNU strerror_r: it may return a static string instead of buf */
	set_msg_tail(err, strerror_r(errnum, buf, sizeof(buf)), fmt, ap);
	va_end(ap);
	return -errnum;
}

int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
{
	char old[CORRAL_ERR_MAX];
	va_list ap;

	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	set_msg_tail(err, old, fmt, ap);
	va_end(ap);
	return err->code;
}
