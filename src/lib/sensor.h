/*
 * sensor.h - the seccomp deny list, reported: every denied syscall of a
 * sandbox reaches the supervisor (SECCOMP_RET_USER_NOTIF), which answers
 * EPERM and records it.
 */
#ifndef CORRAL_SENSOR_H
#define CORRAL_SENSOR_H

#include "events.h"

#include <event2/event.h>

#include <stdbool.h>
#include <sys/types.h>

struct sensor;

/*
 * Take over the notification fd of a sandbox's filter.  probe_pid: the
 * task (host view) that loaded the filter and makes sensor_probe()'s
 * calls on it, whose first one numbers what follows; 0 where nobody
 * probes (an exec'd process's own filter), which leaves drops uncounted.
 */
struct sensor *sensor_start(struct event_base *base, int notify_fd,
			    struct events *ev, pid_t probe_pid);
/*
 * In the task that loaded the filter: one notified call the sensor answers
 * and does not record, so that it knows the kernel's count of the filter's
 * notifications (see sensor.c).  Made once before anything of the
 * sandbox runs, and again at the end; made again if a signal interrupts
 * it, up to tries times.
 */
void sensor_probe(int tries);
/*
 * The same from a thread of the caller's that takes no signal, waited for
 * at most ms: a supervisor that does not answer holds the caller no
 * longer, and a signal from inside the sandbox cannot cut the call short.
 */
void sensor_probe_within(unsigned int ms);
size_t sensor_denied(const struct sensor *s);
/* No task is left on its filter, nor will be: its last caller exited. */
bool sensor_idle(const struct sensor *s);
void sensor_free(struct sensor *s);

#endif
