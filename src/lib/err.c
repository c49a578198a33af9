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

int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
{
	char prefix[CORRAL_ERR_MAX], old[CORRAL_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
	return err->code;
}
