/*
 * srt_made.h - what an srt settings file's translation holds and makes on
 * the host to keep a path read-only (srt_made.c); srt.c uses it.
 */
#ifndef CORRAL_SRT_MADE_H
#define CORRAL_SRT_MADE_H

#include "corral.h"

#include <stdbool.h>
#include <stddef.h>

/* directories pinned on the way to one kept path, at most */
#define SRT_PINS_MAX 16

struct corral_srt_made *srt_made_new(void);

/*
 * Keep root/rel read-only: its first component that is not there made
 * (an empty directory, or a file holding content (NULL: empty) when it
 * is rel itself and not directory), then held.  *bind: the path to bind read-only (rel's, or
 * the made component's); pins: the directories between root and it,
 * to bind onto themselves so none is renamed away.  0, or -errno with
 * why said (a symlink or a file on the way: nothing bound).
 */
int srt_made_keep(struct corral_srt_made *m, const char *root, const char *rel,
		  bool directory, const char *content, char **bind, char **pins,
		  size_t *npins, char *why, size_t whylen);

/* Whether path is one corral made (for the report). */
bool srt_made_was_made(const struct corral_srt_made *m, const char *path);

#endif
