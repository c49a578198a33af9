/*
 * audit.h - the events file as evidence: a SHA-256 chain over its lines,
 * continued by the writer (events.c), checked and shown by `corral audit`.
 *
 * Every line of an events file is one JSON object whose last key, "prev",
 * is the lowercase hex SHA-256 of the previous line's bytes exactly as they
 * are in the file, without the newline that ends it; the first line of a
 * file has 64 zeros.  Editing, deleting or reordering a line breaks the
 * chain at that line or the next.
 *
 * What a chain alone cannot show: lines cut off the end of the file, and
 * edits of the last line outside its "prev" (nothing after it covers it).
 * corral_audit_verify() reports the hash of the last line (the "head") so
 * that a copy of it kept elsewhere covers those too.  It and
 * corral_audit_show() are the library's API (corral.h); this header holds
 * what the writer shares with them.
 */
#ifndef CORRAL_AUDIT_H
#define CORRAL_AUDIT_H

#include "internal.h"

#include <stdbool.h>
#include <stdio.h>

#define AUDIT_HASH_HEX	CORRAL_AUDIT_HASH_HEX	/* SHA-256, lowercase hex */
#define AUDIT_LINE_MAX	(1 << 20)	/* bytes in a line, without its '\n' */
#define AUDIT_KEY_PREV	"prev"
#define AUDIT_KEY_CALL	"call"		/* the tool call id of an event */

/* 64 zeros: the "prev" of a file's first line. */
void audit_hash_zero(char hex[AUDIT_HASH_HEX + 1]);
/* SHA-256 of buf in lowercase hex.  0, or -EIO if the digest failed. */
int audit_hash(const void *buf, size_t len, char hex[AUDIT_HASH_HEX + 1]);
/*
 * Where the chain of the file open at fd stands: the hash of its last line
 * (zeros when it is empty or not a regular file), and whether that line
 * lacks its '\n' (a write cut short): the next line must then begin with
 * one.  The file is read with pread(2), so an O_APPEND fd works.
 */
int audit_tail(int fd, const char *path, char hex[AUDIT_HASH_HEX + 1],
	       bool *torn, struct corral_err *err);

#endif
