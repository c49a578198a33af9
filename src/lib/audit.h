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
 * audit_verify() reports the hash of the last line (the "head") so that a
 * copy of it kept elsewhere covers those too.
 */
#ifndef CORRAL_AUDIT_H
#define CORRAL_AUDIT_H

#include "internal.h"

#include <stdbool.h>
#include <stdio.h>

#define AUDIT_HASH_HEX	64		/* SHA-256, lowercase hex */
#define AUDIT_LINE_MAX	(1 << 20)	/* bytes in a line, without its '\n' */
#define AUDIT_KEY_PREV	"prev"
#define AUDIT_KEY_CALL	"call"		/* the tool call id of an event */

struct audit_report {
	size_t lines;			/* complete lines that verified */
	size_t bad_line;		/* first bad line (from 1); 0: the chain holds */
	bool incomplete;		/* ends in a line without '\n', not checked */
	size_t torn;			/* lines cut short by a crash, chained past */
	size_t torn_line;		/* the first of them */
	char head[AUDIT_HASH_HEX + 1];	/* hash of the last verified line */
	char reason[CORRAL_ERR_MAX];	/* "line 7: ..." or what was verified */
};

/* NULL members match everything. */
struct audit_filter {
	const char *sandbox;
	const char *call;
	const char *type;		/* "egress.denied", or "egress" for egress.* */
};

/*
 * Check the chain of the events file at path.  Returns 0 when the file
 * could be read to the end or to its first bad line (r->bad_line says
 * which; r->reason says why, or what was verified), or a negative errno
 * when it could not be read (err names the path).
 */
int audit_verify(const char *path, struct audit_report *r, struct corral_err *err);

/*
 * Print the events of path that match f as a timeline, one line each:
 * "HH:MM:SS.mmm  SEQ  SANDBOX  CALL  TYPE  HOST:PORT KEY=VALUE... / REASON",
 * with a "-- DATE" line whenever the day changes.  Lines that are not
 * events are named, not skipped silently.  Text from the log is escaped:
 * what a sandbox chose (host names, commands) never reaches a terminal raw.
 */
int audit_show(const char *path, const struct audit_filter *f, FILE *out,
	       struct corral_err *err);

/* ---- for the writer (events.c) ---------------------------------------- */

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
