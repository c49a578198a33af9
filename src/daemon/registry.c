/*
 * registry.c - the sandboxes corral serve holds: made, handed to the
 * request that asked, destroyed (by request, TTL or the daemon's end),
 * and a pool of default ones built ahead while requests are quiet.
 */
#include "api.h"

#include <event2/bufferevent.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct sandbox *sandbox_find(struct daemon *d, const char *id)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (!sb->pooled && !strcmp(sb->id, id))
			return sb;
	return NULL;
}

bool sandbox_id_local(const char *id)
{
	return !strncmp(id, SANDBOX_LOCAL_PREFIX, strlen(SANDBOX_LOCAL_PREFIX));
}

bool sandbox_seen(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb)
{
	return !sb->local || !api_over_tcp(d, req);
}

bool sandbox_id_seen(struct daemon *d, struct evhttp_request *req, const char *id)
{
	return !sandbox_id_local(id) || !api_over_tcp(d, req);
}

/*
 * The counts a TCP client gets (/v1/health, /v1/metrics) leave local
 * sandboxes out as the listings do: how many the socket's clients hold,
 * and when they make one, is a timing of the host user's work.
 */
size_t sandboxes_seen(struct daemon *d, struct evhttp_request *req)
{
	size_t n = 0;

	if (!api_over_tcp(d, req))
		return d->nsandboxes;
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		n += !sb->local;
	return n;
}

void sandbox_count_exec(struct sandbox *sb)
{
	sb->d->execs++;
	if (sb->local)
		sb->d->execs_local++;
}

static void creator_unwatch(struct sandbox *sb)
{
	if (sb->ev_creator)
		event_free(sb->ev_creator);
	sb->ev_creator = NULL;
}

void sandbox_destroy(struct sandbox *sb, const char *why)
{
	struct daemon *d = sb->d;

	creator_unwatch(sb);
	lease_unbind(sb);
	/*
	 * Its create still waits: it was destroyed meanwhile (a DELETE, its
	 * lease closed, the daemon's stop), the daemon's fault no more than
	 * a process's or a wait's destroyed under them, which are 410 too.
	 */
	if (sb->creating)
		reply_error(sb->creating, 410, "gone", "the sandbox was destroyed "
			    "before it was ready: %s", why);
	while (sb->procs) {
		struct proc *pr = sb->procs;

		sb->procs = pr->next;
		proc_free(pr);
	}
	if (sb->ev_ttl)
		event_free(sb->ev_ttl);
	if (sb->prev)
		sb->prev->next = sb->next;
	else
		d->sandboxes = sb->next;
	if (sb->next)
		sb->next->prev = sb->prev;
	d->nsandboxes--;
	/* a call it cuts short says why (a TTL is a limit that bit) */
	corral_box_destroy_for(sb->box, why);
	state_remove(d, sb);
	json_decref(sb->labels);
	free(sb);
}

static void on_ttl(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;

	(void)fd;
	(void)what;
	corral_box_note(sb->box, "ttl.expired",
			"the sandbox outlived its ttl_seconds and was destroyed");
	sandbox_destroy(sb, "the sandbox's TTL expired");
}

/* The TTL counts from now: at hand-out, and again at each keepalive. */
void sandbox_arm_ttl(struct sandbox *sb)
{
	struct timeval tv = { sb->ttl_ms / 1000, (sb->ttl_ms % 1000) * 1000 };
	time_t now = time(NULL);

	if (sb->ev_ttl)
		evtimer_del(sb->ev_ttl);
	sb->expires[0] = '\0';
	if (!sb->ttl_ms)
		return;
	if (!sb->ev_ttl)
		sb->ev_ttl = evtimer_new(sb->d->base, on_ttl, sb);
	if (sb->ev_ttl && evtimer_add(sb->ev_ttl, &tv) == 0) {
		now += (sb->ttl_ms + 999) / 1000;
		strftime(sb->expires, sizeof(sb->expires), "%Y-%m-%dT%H:%M:%SZ",
			 gmtime(&now));
	}
}

/*
 * Hand a ready sandbox to the request that asked for it.  A sandbox the
 * daemon cannot record (its state directory full) is not handed out: after
 * a crash nobody would know it had existed.
 */
void sandbox_hand_out(struct sandbox *sb, struct evhttp_request *req)
{
	int r = state_write(sb->d, sb);

	if (r < 0) {
		reply_error(req, 507, "no_space", "cannot record the sandbox in "
			    "%s/sandboxes: %s", sb->d->state_dir, strerror(-r));
		sandbox_destroy(sb, "unrecorded");
		return;
	}
	sb->pooled = false;
	corral_box_set_idle_freeze(sb->box, sb->idle_freeze_ms);
	sandbox_arm_ttl(sb);
	reply_json(req, 201, sandbox_json(sb));
}

/*
 * The client that asked closed its end before the sandbox was ready: no
 * one will ever be told its id, and nothing would end it (no TTL by
 * default).  It goes now, as a call goes whose caller went.
 */
static void on_creator_gone(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sandbox_destroy(arg, "the client went away before the sandbox was ready");
}

void sandbox_await(struct sandbox *sb, struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	sb->creating = req;
	if (fd < 0)
		return;
	sb->ev_creator = event_new(sb->d->base, fd, EV_CLOSED, on_creator_gone, sb);
	if (sb->ev_creator && event_add(sb->ev_creator, NULL) < 0)
		creator_unwatch(sb);
}

/* A path the request names that is not there is the request's fault. */
static void on_ready(void *arg, struct corral_box *b, const struct corral_err *err)
{
	struct sandbox *sb = arg;
	struct evhttp_request *req = sb->creating;

	(void)b;
	creator_unwatch(sb);
	sb->creating = NULL;
	if (err) {
		if (req)
			reply_build_err(req, err);
		sandbox_destroy(sb, err->msg);
		return;
	}
	sb->ready = true;
	if (req)
		sandbox_hand_out(sb, req);
}

static void on_dead(void *arg, struct corral_box *b)
{
	(void)b;
	(void)arg;
	/* kept, in state "dead", until deleted: its record says what happened */
}

static void new_id(char *buf, size_t len, bool local)
{
	unsigned char r[6] = { 0 };

	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;

		memcpy(r, &t, sizeof(r));
	}
	snprintf(buf, len, "%s%02x%02x%02x%02x%02x%02x", local ? SANDBOX_LOCAL_PREFIX :
		 "sb-", r[0], r[1], r[2], r[3], r[4], r[5]);
}

struct sandbox *sandbox_new(struct daemon *d, struct corral_policy *p, bool local,
			    struct corral_err *err)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	struct corral_box_opts o = { 0 };
	time_t now = time(NULL);

	if (!sb) {
		corral_policy_free(p);
		free(p);
		/* corral.h's struct, filled here: no library call made it */
		*err = (struct corral_err){ .code = -ENOMEM };
		snprintf(err->msg, sizeof(err->msg), "out of memory for a sandbox");
		return NULL;
	}
	sb->d = d;
	/* judged once, on what will be built (a pool's too: the operator's binds) */
	sb->local = local || api_access_local(d, p);
	new_id(sb->id, sizeof(sb->id), sb->local);
	strftime(sb->created, sizeof(sb->created), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	sb->labels = json_object();
	sb->idle_freeze_ms = IDLE_FREEZE_DEFAULT_MS;
	o.id = sb->id;
	o.log = d->log;
	o.on_ready = on_ready;
	o.on_dead = on_dead;
	o.arg = sb;
	if (corral_box_create(d->base, p, &o, &sb->box, err) < 0) {
		json_decref(sb->labels);
		free(sb);
		return NULL;
	}
	sb->next = d->sandboxes;
	if (d->sandboxes)
		d->sandboxes->prev = sb;
	d->sandboxes = sb;
	d->nsandboxes++;
	return sb;
}

/*
 * A sandbox holds a few fds in the daemon (pidfd, control socket, root,
 * seccomp listener; more in proxy mode) and each call a few more while it
 * runs.  Refuse a create that would leave less than a margin under the
 * limit, rather than fail later in the middle of a call.
 */
#define FD_MARGIN	64

static int open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	if (!dir)
		return -1;
	while (readdir(dir))
		n++;
	closedir(dir);
	return n - 2;
}

bool fd_room(struct daemon *d)
{
	struct rlimit rl;
	int n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return true;
	/* far from the limit by any count: no need to list /proc/self/fd */
	if ((rlim_t)(d->nsandboxes * 16 + 4 * FD_MARGIN) < rl.rlim_cur)
		return true;
	n = open_fds();
	return n < 0 || (rlim_t)n + FD_MARGIN < rl.rlim_cur;
}

struct corral_policy *daemon_policy(struct daemon *d, const json_t *asked,
				    struct corral_err *err)
{
	struct corral_policy *p = malloc(sizeof(*p));
	json_t *eff = NULL;
	char *text = NULL;
	int r = 0;

	if (!p) {
		corral_set_err(err, -ENOMEM, "out of memory for a policy");
		return NULL;
	}
	corral_policy_init(p);
	if (d->bound_json) {
		/* objects key by key, anything else replaced: as corral mcp */
		eff = json_deep_copy(d->bound_json);
		if (!eff || (asked && corral_json_merge(eff, asked) < 0))
			r = corral_set_err(err, -ENOMEM, "out of memory for a policy");
	} else if (asked) {
		eff = json_incref((json_t *)asked);
	}
	if (!r && eff) {
		text = json_dumps(eff, JSON_COMPACT);
		r = text ? corral_policy_load_string(p, text, strlen(text), "policy", err) :
			   corral_set_err(err, -ENOMEM, "out of memory for a policy");
	}
	free(text);
	json_decref(eff);
	if (r < 0) {
		corral_policy_free(p);
		free(p);
		return NULL;
	}
	return p;
}

#define POOL_QUIET_MS	100	/* refill once requests have paused this long */
#define POOL_HOLD_MS	1000	/* and calls have ended, or have run this long */
#define POOL_RECHECK_MS	20

/* A create came: the pool waits for the burst to pass. */
void pool_hold(struct daemon *d)
{
	d->last_create = corral_now_ms();
}

static void pool_step(evutil_socket_t fd, short what, void *arg);

static void pool_arm(struct daemon *d, uint64_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (!d->pool_size)
		return;
	if (!d->ev_pool)
		d->ev_pool = evtimer_new(d->base, pool_step, d);
	if (d->ev_pool && !evtimer_pending(d->ev_pool, NULL))
		evtimer_add(d->ev_pool, &tv);
}

/*
 * Keep pool_size default sandboxes built ahead, one a turn of the loop,
 * and only while no request has come for POOL_QUIET_MS: building one holds
 * the loop for a cgroup attach, and during a burst the requests come first.
 */
void pool_fill(struct daemon *d)
{
	uint64_t quiet = corral_now_ms() - d->last_create;

	pool_arm(d, quiet >= POOL_QUIET_MS ? 0 : POOL_QUIET_MS - quiet);
}

static bool calls_running(struct daemon *d)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->box && corral_box_running(sb->box))
			return true;
	return false;
}

/*
 * Calls running hold the pool back for up to POOL_HOLD_MS: building a
 * sandbox forks the daemon, whose every write then faults its page back
 * (copy on write, a TLB shootdown each on these VMs), and the burst's own
 * first execs wait behind that.  Not longer: a background process that
 * runs for hours must not keep the pool empty.
 */
static bool pool_held(struct daemon *d, uint64_t now)
{
	if (!calls_running(d)) {
		d->pool_held = 0;
		return false;
	}
	if (!d->pool_held)
		d->pool_held = now;
	return now - d->pool_held < POOL_HOLD_MS;
}

static void pool_step(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct corral_err err;
	struct corral_policy *p;
	struct sandbox *sb;
	size_t n = 0;

	(void)fd;
	(void)what;
	for (sb = d->sandboxes; sb; sb = sb->next)
		n += sb->pooled;
	if (n >= d->pool_size || d->nsandboxes >= d->max_sandboxes || !fd_room(d))
		return;
	if (corral_now_ms() - d->last_create < POOL_QUIET_MS) {
		pool_fill(d);	/* still busy: later */
		return;
	}
	if (pool_held(d, corral_now_ms())) {
		pool_arm(d, POOL_RECHECK_MS);
		return;
	}
	p = daemon_policy(d, NULL, &err);
	sb = p ? sandbox_new(d, p, false, &err) : NULL;
	if (!sb)
		return;		/* tried again by the next create */
	sb->pooled = true;
	pool_fill(d);
}

struct sandbox *pool_take(struct daemon *d, bool tcp)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->pooled && sb->ready && !(tcp && sb->local))
			return sb;
	return NULL;
}

