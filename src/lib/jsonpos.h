/*
 * jsonpos.h - find where a value sits in JSON text, for error messages.
 *
 * jansson gives a line and column only for syntax errors.  Once a document
 * has parsed, a value that is wrong for us (an unknown key, a size out of
 * range) has no position left, so these functions scan the raw text again.
 * They only locate: they validate nothing, and any input (truncated, not
 * JSON at all, nested without end) just makes them answer -ENOENT.
 */
#ifndef CORRAL_JSONPOS_H
#define CORRAL_JSONPOS_H

#include <stdbool.h>
#include <stddef.h>

/* Deeper than this, the scanner skips a value instead of descending into it. */
#define JSONPOS_MAX_DEPTH 64

struct jsonpos {
	unsigned line;		/* 1-based */
	unsigned col;		/* 1-based, in characters, as jansson counts them */
};

/* One step of a path: an object member by key, or (key NULL) an array index. */
struct jsonpos_step {
	const char *key;	/* decoded, as jansson hands it out */
	size_t index;
};

/*
 * Where the value at path[0..n) starts, or, with at_key, where the key of
 * its last step starts (its opening quote).  n == 0 is the top-level value.
 * Returns 0, or -ENOENT if the path is not in the text.
 */
int jsonpos_locate(const char *text, size_t len,
		   const struct jsonpos_step *path, size_t n, bool at_key,
		   struct jsonpos *pos);

/*
 * The object key whose closing quote ends right before byte offset end
 * (where jansson stops on a duplicate key): its position, and its path
 * written as "a.b[2].c" into dotted.  Returns 0 or -ENOENT.
 */
int jsonpos_key_ending_at(const char *text, size_t len, size_t end,
			  struct jsonpos *pos, char *dotted, size_t dotted_len);

#endif
