/*
 * api_health.c - GET /v1/health (ok, or degraded while the audit log
 * cannot be written) and GET /v1/metrics (Prometheus text: sandboxes by
 * state, requests, calls, each sandbox's meters).
 */
#include "api.h"

#include <event2/buffer.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void metrics_get(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	static const char *const states[] = { "starting", "running", "idle",
		"frozen", "paused", "halted", "dead" };
	struct evbuffer *buf = evbuffer_new();
	size_t count[7] = { 0 };
	bool tcp = api_over_tcp(d, req);

	if (!buf) {
		evhttp_send_error(req, 500, "out of memory for the health reply");
		return;
	}
	/* a TCP client's counts as if local sandboxes were not (sandboxes_seen) */
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sandbox_seen(d, req, sb))
			count[corral_box_state(sb->box)]++;
	evbuffer_add_printf(buf, "# HELP corral_sandboxes Sandboxes by state.\n"
			    "# TYPE corral_sandboxes gauge\n");
	for (size_t i = 0; i < 7; i++)
		evbuffer_add_printf(buf, "corral_sandboxes{state=\"%s\"} %zu\n",
				    states[i], count[i]);
	evbuffer_add_printf(buf, "# TYPE corral_requests_total counter\n"
			    "corral_requests_total %" PRIu64 "\n"
			    "# TYPE corral_execs_total counter\n"
			    "corral_execs_total %" PRIu64 "\n",
			    tcp ? d->requests_tcp : d->requests,
			    tcp ? d->execs - d->execs_local : d->execs);
	static const char *const names[] = { "cpu_seconds_total",
		"memory_peak_bytes", "memory_byte_seconds_total",
		"active_seconds_total", "frozen_seconds_total" };

	for (size_t k = 0; k < 5; k++) {
		evbuffer_add_printf(buf, "# TYPE corral_sandbox_%s %s\n", names[k],
				    k == 1 ? "gauge" : "counter");
		for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
			struct corral_meters m;
			double v[5];

			/* a local one's id, meters too, not for a TCP client */
			if (sb->pooled || !sb->ready || !sandbox_seen(d, req, sb))
				continue;
			corral_box_meters(sb->box, &m);
			v[0] = m.cpu_seconds;
			v[1] = m.memory_peak_bytes;
			v[2] = m.memory_byte_seconds;
			v[3] = m.active_seconds;
			v[4] = m.frozen_seconds;
			evbuffer_add_printf(buf, "corral_sandbox_%s{id=\"%s\"} %.6g\n",
					    names[k], sb->id, v[k]);
		}
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	api_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
}

/* Degraded, not down: the sandboxes it has are still supervised. */
void health_get(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	int e = corral_log_error(d->log);
	char detail[512] = "";

	if (e)
		snprintf(detail, sizeof(detail), "the audit log %s/audit.jsonl cannot be "
			 "written: %s; new sandboxes are refused", d->state_dir,
			 strerror(e));
	json_t *o = json_pack("{s:s, s:s, s:I}", "status", e ? "degraded" : "ok",
			      "version", CORRAL_VERSION, "sandboxes",
			      (json_int_t)sandboxes_seen(d, req));

	/* as bytes: the state directory is a host path, not always UTF-8 */
	if (o && e)
		json_object_set_new(o, "detail", corral_json_bytes(detail, strlen(detail)));
	reply_json(req, 200, o);
}
