/*
 * meter.c - what a box costs: CPU, memory over time, active and frozen
 * time.  A box waiting on its model is frozen and costs nothing.
 */
#include "internal.h"
#include "box.h"
#include "events.h"

/* Bring the meters up to now; called at every change of state. */
void box_meter(struct corral_box *b)
{
	uint64_t now = corral_now_ms(), dt = now - b->t_mark, cpu;
	struct cg_stats st;

	if (b->state == CORRAL_BOX_STARTING || b->state == CORRAL_BOX_DEAD) {
		b->t_mark = now;
		return;
	}
	if (b->frozen)
		b->frozen_ms += dt;
	else
		b->active_ms += dt;
	b->mem_byte_ms += (double)b->mem_last * dt;
	b->t_mark = now;
	/*
	 * a frozen group neither uses CPU nor changes its memory; the three
	 * counters the meters use, not the hits (3 files instead of 6 on v1)
	 */
	if (!b->frozen && cg_stats_some(b->cg, CG_ST_CPU | CG_ST_MEM_NOW | CG_ST_MEM_PEAK,
					&st) == 0 && st.valid) {
		b->cpu_ns = st.cpu_ns;
		b->mem_last = st.mem_current;
		if (st.mem_peak > b->mem_peak)
			b->mem_peak = st.mem_peak;
	}
	/*
	 * No cgroup counts CPU (none, or v1 without cpuacct): the sum over
	 * the box's processes in /proc, a walk of its tree a reading, so that
	 * the meter and abort.max_cpu_seconds still see what it spent.  Never
	 * less than before: a process reaped automatically leaves the sum.
	 */
	if (!b->frozen && !cg_counts_cpu(b->cg) && b->sb &&
	    cg_cpu_ns(b->cg, b->sb->pid, &cpu) == 0 && cpu > b->cpu_ns)
		b->cpu_ns = cpu;
}

void corral_box_meters(struct corral_box *b, struct corral_meters *m)
{
	box_meter(b);
	m->cpu_seconds = b->cpu_ns / 1e9;
	m->memory_peak_bytes = b->mem_peak;
	m->memory_byte_seconds = b->mem_byte_ms / 1000.0;
	m->active_seconds = b->active_ms / 1000.0;
	m->frozen_seconds = b->frozen_ms / 1000.0;
	m->calls = b->calls_total;
}
