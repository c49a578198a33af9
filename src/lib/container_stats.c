/*
 * container_stats.c - what `corral oci events` reports of a container:
 * runc's types.Stats (runc/types/events.go), read from the container's
 * cgroup, v1 or v2.
 *
 * cgroup.c's cg_stats() keeps the few counters a result needs; runc's
 * document has more (limits, failcnt, user and system time, memory.stat),
 * so this file reads the group's files itself, through the handle's
 * directories (cgroup_internal.h, read only: nothing here writes).
 * Fields follow runc's JSON names; a counter this kernel lacks is left
 * out, as runc's omitempty leaves out a zero.
 */
#include "cgroup_internal.h"
#include "container_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATS_FILE_MAX	8192	/* memory.stat is ~1.5 KB on v1, ~3 KB on v2 */

/* One number, the file's whole text ("max" is 0: no limit, as runc says). */
static bool read_u64(const char *dir, const char *file, uint64_t *v)
{
	char buf[64];

	if (!dir || cg_read_file(dir, file, buf, sizeof(buf)) < 0)
		return false;
	*v = strtoull(buf, NULL, 10);
	return true;
}

static bool read_key(const char *dir, const char *file, const char *key,
		     uint64_t *v)
{
	char buf[STATS_FILE_MAX];

	return dir && cg_read_file(dir, file, buf, sizeof(buf)) >= 0 &&
	       cg_kv_get(buf, key, v) == 0;
}

static void set_u64(json_t *o, const char *key, uint64_t v)
{
	json_object_set_new(o, key, json_integer((json_int_t)(v > INT64_MAX ?
							       INT64_MAX : v)));
}

/* omitempty: a zero is not printed */
static void set_nz(json_t *o, const char *key, uint64_t v)
{
	if (v)
		set_u64(o, key, v);
}

/* "key value" lines into an object of numbers (memory.stat: "raw"). */
static json_t *kv_object(const char *dir, const char *file)
{
	char buf[STATS_FILE_MAX], *line, *save = NULL, key[128];
	unsigned long long v;
	json_t *o = json_object();

	if (!o || !dir || cg_read_file(dir, file, buf, sizeof(buf)) < 0)
		return o;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, "%127s %llu", key, &v) == 2)
			set_u64(o, key, v);
	return o;
}

/* "1 2 3": cpuacct.usage_percpu */
static json_t *u64_list(const char *dir, const char *file)
{
	char buf[STATS_FILE_MAX], *tok, *save = NULL;
	json_t *a;

	if (!dir || cg_read_file(dir, file, buf, sizeof(buf)) < 0)
		return NULL;
	a = json_array();
	for (tok = strtok_r(buf, " \n", &save); a && tok;
	     tok = strtok_r(NULL, " \n", &save))
		json_array_append_new(a, json_integer(strtoll(tok, NULL, 10)));
	return a;
}

/* types.MemoryEntry: limit and failcnt always, usage and max if not 0 */
static json_t *mem_entry(uint64_t limit, uint64_t usage, uint64_t max,
			 uint64_t failcnt)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	set_u64(o, "limit", limit);
	set_nz(o, "usage", usage);
	set_nz(o, "max", max);
	set_u64(o, "failcnt", failcnt);
	return o;
}

/* v1: memory.PREFIXusage_in_bytes and its siblings ("", "memsw.", "kmem.") */
static json_t *v1_mem_entry(const char *dir, const char *prefix)
{
	char f[64];
	uint64_t lim = 0, use = 0, max = 0, fail = 0;

	snprintf(f, sizeof(f), "memory.%susage_in_bytes", prefix);
	if (!read_u64(dir, f, &use))
		return NULL;	/* no swap accounting, no kmem: left out */
	snprintf(f, sizeof(f), "memory.%slimit_in_bytes", prefix);
	read_u64(dir, f, &lim);
	snprintf(f, sizeof(f), "memory.%smax_usage_in_bytes", prefix);
	read_u64(dir, f, &max);
	snprintf(f, sizeof(f), "memory.%sfailcnt", prefix);
	read_u64(dir, f, &fail);
	return mem_entry(lim, use, max, fail);
}

static void set_obj(json_t *o, const char *key, json_t *v)
{
	if (v)
		json_object_set_new(o, key, v);
}

/* memory.stat's keys as runc's "raw", left out when there were none */
static void set_raw(json_t *mem, json_t *raw)
{
	if (raw && json_object_size(raw))
		set_obj(mem, "raw", raw);
	else
		json_decref(raw);
}

/* The same two files in v1's pids hierarchy and in v2's group. */
static void pids_stats(const char *dir, json_t *pids)
{
	uint64_t v;

	if (read_u64(dir, "pids.current", &v))
		set_nz(pids, "current", v);
	if (read_u64(dir, "pids.max", &v))
		set_nz(pids, "limit", v);
}

static void v1_stats_doc(struct cg *cg, json_t *cpu, json_t *mem, json_t *pids,
			 uint64_t *oom)
{
	struct cg_hier *h;
	const char *acct, *cpud, *md, *pd;
	json_t *usage = json_object(), *thr = json_object(), *raw;
	uint64_t v = 0, user = 0, sys = 0;
	long hz = sysconf(_SC_CLK_TCK);

	acct = (h = cg_hier_of(cg, C_CPUACCT)) ? h->dir : NULL;
	cpud = (h = cg_hier_of(cg, C_CPU)) ? h->dir : NULL;
	md = (h = cg_hier_of(cg, C_MEMORY)) ? h->dir : NULL;
	pd = (h = cg_hier_of(cg, C_PIDS)) ? h->dir : NULL;

	if (read_u64(acct, "cpuacct.usage", &v))
		set_nz(usage, "total", v);
	set_obj(usage, "percpu", u64_list(acct, "cpuacct.usage_percpu"));
	/* cpuacct.stat counts USER_HZ ticks; runc turns them into ns */
	read_key(acct, "cpuacct.stat", "user", &user);
	read_key(acct, "cpuacct.stat", "system", &sys);
	if (hz <= 0)
		hz = 100;
	set_u64(usage, "kernel", sys * (1000000000ULL / (uint64_t)hz));
	set_u64(usage, "user", user * (1000000000ULL / (uint64_t)hz));
	v = 0;
	if (read_key(cpud, "cpu.stat", "nr_periods", &v))
		set_nz(thr, "periods", v);
	if (read_key(cpud, "cpu.stat", "nr_throttled", &v))
		set_nz(thr, "throttledPeriods", v);
	if (read_key(cpud, "cpu.stat", "throttled_time", &v))
		set_nz(thr, "throttledTime", v);
	set_obj(cpu, "usage", usage);
	set_obj(cpu, "throttling", thr);

	raw = kv_object(md, "memory.stat");
	v = json_integer_value(json_object_get(raw, "cache"));
	set_nz(mem, "cache", v);
	set_obj(mem, "usage", v1_mem_entry(md, ""));
	set_obj(mem, "swap", v1_mem_entry(md, "memsw."));
	set_obj(mem, "kernel", v1_mem_entry(md, "kmem."));
	set_obj(mem, "kernelTCP", v1_mem_entry(md, "kmem.tcp."));
	set_raw(mem, raw);
	read_key(md, "memory.oom_control", "oom_kill", oom);
	pids_stats(pd, pids);
}

static void v2_stats_doc(struct cg *cg, json_t *cpu, json_t *mem, json_t *pids,
			 uint64_t *oom)
{
	const char *d = cg->hier[0].dir;
	json_t *usage = json_object(), *thr = json_object(), *raw;
	uint64_t v = 0, use = 0, max = 0, lim = 0, fail = 0;

	/* cpu.stat counts microseconds; runc's document nanoseconds */
	if (read_key(d, "cpu.stat", "usage_usec", &v))
		set_nz(usage, "total", v * 1000);
	v = 0;
	read_key(d, "cpu.stat", "system_usec", &v);
	set_u64(usage, "kernel", v * 1000);
	v = 0;
	read_key(d, "cpu.stat", "user_usec", &v);
	set_u64(usage, "user", v * 1000);
	v = 0;
	if (read_key(d, "cpu.stat", "nr_periods", &v))
		set_nz(thr, "periods", v);
	if (read_key(d, "cpu.stat", "nr_throttled", &v))
		set_nz(thr, "throttledPeriods", v);
	if (read_key(d, "cpu.stat", "throttled_usec", &v))
		set_nz(thr, "throttledTime", v * 1000);
	set_obj(cpu, "usage", usage);
	set_obj(cpu, "throttling", thr);

	raw = kv_object(d, "memory.stat");
	set_nz(mem, "cache", json_integer_value(json_object_get(raw, "file")));
	read_u64(d, "memory.current", &use);
	read_u64(d, "memory.max", &lim);
	read_u64(d, "memory.peak", &max);	/* Linux 5.19 */
	read_key(d, "memory.events", "max", &fail);
	set_obj(mem, "usage", mem_entry(lim, use, max, fail));
	use = lim = 0;
	if (read_u64(d, "memory.swap.current", &use)) {
		read_u64(d, "memory.swap.max", &lim);
		set_obj(mem, "swap", mem_entry(lim, use, 0, 0));
	}
	set_raw(mem, raw);
	read_key(d, "memory.events", "oom_kill", oom);
	pids_stats(d, pids);
}

json_t *container_stats(struct cg *cg, uint64_t *oom_kills, struct corral_err *err)
{
	json_t *doc, *cpu = json_object(), *mem = json_object(), *pids = json_object();

	*oom_kills = 0;
	if (cg_mode(cg) == CG_NONE) {
		corral_set_err(err, -ENOTSUP, "no cgroup here (%s): the container "
			       "has no counters to report", cg_mode_name(cg));
		goto fail;
	}
	if (!cpu || !mem || !pids)
		goto nomem;
	if (cg_mode(cg) == CG_V2)
		v2_stats_doc(cg, cpu, mem, pids, oom_kills);
	else
		v1_stats_doc(cg, cpu, mem, pids, oom_kills);
	doc = json_pack("{s:o, s:o, s:o, s:{}, s:{}}", "cpu", cpu, "memory", mem,
			"pids", pids, "blkio", "hugetlb");
	if (doc)
		return doc;
	/* json_pack's "o" took the references even though it failed */
	corral_set_err(err, -ENOMEM, "out of memory for the container's stats");
	return NULL;
nomem:
	corral_set_err(err, -ENOMEM, "out of memory for the container's stats");
fail:
	json_decref(cpu);
	json_decref(mem);
	json_decref(pids);
	return NULL;
}
