/*
 * container_stats.h - a container's cgroup counters as runc's `events`
 * prints them (container_stats.c), for the monitor's "stats" request.
 */
#ifndef CORRAL_CONTAINER_STATS_H
#define CORRAL_CONTAINER_STATS_H

#include "cgroup.h"

#include <jansson.h>
#include <stdint.h>

/*
 * runc's types.Stats of the group (cpu, memory, pids, blkio, hugetlb):
 * a new object, or NULL with err set.  *oom_kills: the group's OOM kills
 * so far, which `events` turns into "oom" events.  CG_NONE: -ENOTSUP.
 */
json_t *container_stats(struct cg *cg, uint64_t *oom_kills, struct corral_err *err);

#endif
