/*
 * unit_err.c - the error type every layer carries up: corral_set_err,
 * corral_set_errno (the errno's text once, at the end) and corral_wrap_err
 * (a prefix), all in the fixed buffer, cut rather than overflowed.
 */
#include "internal.h"
#include "unit.h"

#include <errno.h>
#include <string.h>

TEST(set_errno_appends_the_text_once)
{
	struct corral_err err = { 0 };

	CHECK(corral_set_errno(&err, ENOENT, "cannot open %s", "/x") == -ENOENT);
	CHECK(err.code == -ENOENT);
	CHECK(!strcmp(err.msg, "cannot open /x: No such file or directory"));
	/* an errno the C library has no name for still says something */
	CHECK(corral_set_errno(&err, 4000, "x") == -4000);
	CHECK_STR_CONTAINS(err.msg, "x: Unknown error 4000");
}

TEST(set_errno_cuts_a_long_message)
{
	struct corral_err err = { 0 };
	char big[CORRAL_ERR_MAX * 2];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(corral_set_errno(&err, EIO, "%s", big) == -EIO);
	CHECK(strlen(err.msg) == CORRAL_ERR_MAX - 1);
	/* room for part of the text only: cut, still terminated */
	big[CORRAL_ERR_MAX - 5] = '\0';
	corral_set_errno(&err, EIO, "%s", big);
	CHECK(strlen(err.msg) == CORRAL_ERR_MAX - 1);
	CHECK(!strncmp(err.msg + CORRAL_ERR_MAX - 5, ": In", 4));
}

TEST(wrap_prefixes)
{
	struct corral_err err = { 0 };

	corral_set_errno(&err, EACCES, "cannot open %s", "/y");
	CHECK(corral_wrap_err(&err, "--ro %s", "/y") == -EACCES);
	CHECK(!strcmp(err.msg, "--ro /y: cannot open /y: Permission denied"));
	CHECK(corral_set_err(&err, -EINVAL, "bad %d", 7) == -EINVAL);
	CHECK(!strcmp(err.msg, "bad 7") && err.code == -EINVAL);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
