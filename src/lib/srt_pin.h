/*
 * srt_pin.h - srt's binds beneath a write bind pinned to their objects
 * (srt_pin.c); srt.c uses it.
 */
#ifndef CORRAL_SRT_PIN_H
#define CORRAL_SRT_PIN_H

#include "corral.h"

#include <jansson.h>

/*
 * pins: [TOP, PATH] pairs, PATH beneath the write bind's directory TOP.
 * Each bind of PATH onto itself in p gets PATH's object found beneath
 * TOP with no link followed; 0, or -errno (one is no longer there so, or
 * a link is on its way: the run is refused).  A third element, TARGET:
 * PATH is a link kept as itself, which must still hold TARGET.  A
 * directory kept read-only whole holds no file with a second name
 * (refused); one with more entries than are looked at is appended to
 * unchecked, for the report.
 */
int srt_pin_binds(struct corral_policy *p, json_t *pins, json_t *unchecked,
		  struct corral_err *err);

#endif
