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

struct sensor;

/* Take over the notification fd of a sandbox's filter. */
struct sensor *sensor_start(struct event_base *base, int notify_fd,
			    struct events *ev);
size_t sensor_denied(const struct sensor *s);
/* No task is left on its filter, nor will be: its last caller exited. */
bool sensor_idle(const struct sensor *s);
void sensor_free(struct sensor *s);

#endif
