/*
 * hostname.h - what a host name read off the wire may look like.
 */
#ifndef CORRAL_HOSTNAME_H
#define CORRAL_HOSTNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOSTNAME_LABEL_MAX	63

/*
 * s[0..n): labels of 1..63 letters, digits, '-' or '_' joined by single
 * dots, at most max bytes, one trailing dot only if trailing_dot.  Keeps
 * NUL, '%', '@', ':', '/', spaces and every byte that means something to
 * another parser, a log line or a pattern matcher out of a name.
 */
bool hostname_valid(const uint8_t *s, size_t n, size_t max, bool trailing_dot);

#endif
