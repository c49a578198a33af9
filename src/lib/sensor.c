/*
 * sensor.c - denied syscalls become events.
 *
 * The filter (seccomp.c) sends each call on its deny list here instead of
 * failing it in the kernel.  The answer is EPERM (ENOSYS for a number
 * above what the filter knows, as from an older kernel: libc falls back),
 * given at once: the value is the record, naming the syscall, the pid
 * (host view) and the arguments that say what was tried (the path of a
 * mount, the target of a ptrace, the flags of an unshare).  Calls on the
 * hot path never come here; only denied ones do.
 *
 * Memory of the caller is read through /proc/PID/mem and trusted only if
 * the notification is still valid afterwards (the caller may have died
 * and its pid been reused), and only as a description: nothing is decided
 * on it, so a thread racing to change the string changes nothing.
 *
 * A caller that a signal interrupts before we read its notification gets
 * EINTR, its call not run, and the kernel drops the notification without
 * a word (seccomp_do_user_notification's interrupted path).  Such drops
 * are counted, not seen: the kernel numbers a filter's notifications from
 * a random start, one more for each posted (seccomp_next_notify_id, under
 * notify_lock, the same hold that queues it), and RECV hands them out in
 * that order (a FIFO list since 5.19).  So a received id more than one
 * above the last is that many notifications posted and dropped unread.
 * The random start is learnt from init's probe (sensor_probe), the
 * filter's first notification: init makes it right after loading the
 * filter, before anything of the sandbox runs; and once more at the end,
 * so that drops after the last denial read show too.  A drop names no
 * syscall, pid or call: only its count is known, when the next
 * notification comes.
 */
#include "sensor.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define PATH_READ_MAX 256

/* sensor_probe's call: acct(NULL), run or not harmless, and a mark */
#define PROBE_NR SYS_acct
#define PROBE_MARK 0x636f7272616cULL	/* "corral" */
/* a gap wider than this is no count of drops: the ids are not ours */
#define GAP_SANE (1ULL << 32)

struct sensor {
	int fd;
	struct event *ev;
	struct events *events;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	size_t req_size, resp_size;
	size_t denied;
	pid_t probe_pid;	/* who probes; 0: nobody */
	bool ordered;		/* the kernel hands ids out in order */
	bool based;		/* next_id is known */
	uint64_t next_id;	/* the id the next notification should carry */
	uint64_t unseen;	/* dropped before we read them */
};

/*
 * The listener's ioctls, without libseccomp: its seccomp_notify_alloc
 * first probes the kernel's API level, nine seccomp() calls in every
 * sandbox's supervisor, to learn what the listener we hold already proves
 * (USER_NOTIF).  The buffers are the kernel's sizes, which may be larger
 * than our headers' structures.
 */
static int notif_alloc(struct sensor *s)
{
	struct seccomp_notif_sizes sz = { 0 };

	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		return -errno;
	s->req_size = sz.seccomp_notif > sizeof(*s->req) ? sz.seccomp_notif :
		sizeof(*s->req);
	s->resp_size = sz.seccomp_notif_resp > sizeof(*s->resp) ?
		sz.seccomp_notif_resp : sizeof(*s->resp);
	s->req = calloc(1, s->req_size);
	s->resp = calloc(1, s->resp_size);
	return s->req && s->resp ? 0 : -ENOMEM;
}

/* Still waiting for our answer: its memory still the caller's. */
static bool notif_valid(int notify_fd, uint64_t id)
{
	return ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* No task is left on the filter: the fd reads as hung up for good. */
static bool hung_up(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* A NUL-terminated string at addr in pid's memory, or "" if unreadable. */
static void read_string(int notify_fd, const struct seccomp_notif *req,
			uint64_t addr, char *out, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	out[0] = '\0';
	if (!addr)
		return;
	snprintf(path, sizeof(path), "/proc/%u/mem", req->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = pread(fd, out, len - 1, (off_t)addr);
	close(fd);
	if (n <= 0 || !notif_valid(notify_fd, req->id)) {
		out[0] = '\0';
		return;
	}
	out[n] = '\0';
	out[strnlen(out, n)] = '\0';
	/* a description, in ASCII: anything else becomes '?' */
	for (char *p = out; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
}

static json_t *describe_args(struct sensor *s, const char *name)
{
	const struct seccomp_data *d = &s->req->data;
	char str[PATH_READ_MAX];

	if (!strcmp(name, "mount")) {
		char src[PATH_READ_MAX], type[64];

		read_string(s->fd, s->req, d->args[0], src, sizeof(src));
		read_string(s->fd, s->req, d->args[1], str, sizeof(str));
		read_string(s->fd, s->req, d->args[2], type, sizeof(type));
		return json_pack("{s:s, s:s, s:s, s:I}", "source", src, "target", str,
				 "fstype", type, "flags", (json_int_t)d->args[3]);
	}
	if (!strcmp(name, "umount2") || !strcmp(name, "chroot") ||
	    !strcmp(name, "acct") || !strcmp(name, "swapon") ||
	    !strcmp(name, "swapoff") || !strcmp(name, "pivot_root")) {
		read_string(s->fd, s->req, d->args[0], str, sizeof(str));
		return json_pack("{s:s}", "path", str);
	}
	if (!strcmp(name, "ptrace"))
		return json_pack("{s:I, s:I}", "request", (json_int_t)d->args[0],
				 "target_pid", (json_int_t)(int32_t)d->args[1]);
	if (!strcmp(name, "process_vm_readv") || !strcmp(name, "process_vm_writev") ||
	    !strcmp(name, "pidfd_getfd") || !strcmp(name, "kcmp"))
		return json_pack("{s:I}", "target_pid", (json_int_t)(int32_t)d->args[0]);
	if (!strcmp(name, "unshare") || !strcmp(name, "clone") || !strcmp(name, "setns"))
		return json_pack("{s:s}", "flags", (snprintf(str, sizeof(str), "0x%llx",
				 (unsigned long long)(!strcmp(name, "setns") ?
				 d->args[1] : d->args[0])), str));
	if (!strcmp(name, "ioctl"))
		return json_pack("{s:I, s:s}", "fd", (json_int_t)(int32_t)d->args[0],
				 "request", (snprintf(str, sizeof(str), "0x%llx",
				 (unsigned long long)(uint32_t)d->args[1]), str));
	if (!strcmp(name, "socket") || !strcmp(name, "socketpair"))
		return json_pack("{s:I, s:I, s:I}", "family", (json_int_t)(int32_t)d->args[0],
				 "type", (json_int_t)(int32_t)d->args[1],
				 "protocol", (json_int_t)(int32_t)d->args[2]);
	if (!strcmp(name, "personality"))
		return json_pack("{s:s}", "persona", (snprintf(str, sizeof(str), "0x%llx",
				 (unsigned long long)(uint32_t)d->args[0]), str));
	return json_object();
}

/*
 * The program that made the call: its comm and its executable (as the
 * kernel renders the path for us, outside its mount namespace), so that a
 * denial names a tool, not a pid that is gone a moment later.  Read while
 * the caller waits for our answer; like the arguments, a description.
 */
/* /proc/PID/WHAT's first len - 1 bytes, NUL-ended ("" if unreadable). */
static ssize_t proc_read(pid_t pid, const char *what, char *buf, size_t len)
{
	char path[64];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

static void name_program(json_t *o, pid_t pid)
{
	char path[64], comm[64], exe[PATH_MAX];
	ssize_t n;

	proc_read(pid, "comm", comm, sizeof(comm));
	comm[strcspn(comm, "\n")] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	json_object_set_new(o, "comm", corral_json_bytes(comm, strlen(comm)));
	json_object_set_new(o, "exe", corral_json_bytes(exe, strlen(exe)));
}

/* The thread group pid belongs to (pid being a thread's id), or -1. */
static pid_t tgid_of(pid_t pid)
{
	char buf[512];
	const char *v;

	if (proc_read(pid, "status", buf, sizeof(buf)) <= 0)
		return -1;
	v = proc_status_value(buf, "Tgid");
	return v ? (pid_t)strtol(v, NULL, 10) : -1;
}

/*
 * init's probe: the call and the mark, made by init or a thread of its
 * (sensor_probe_within), which nothing inside the sandbox can be; the
 * notification still valid after the look, so the id was not reused.
 */
static bool is_probe(const struct sensor *s)
{
	const struct seccomp_data *d = &s->req->data;
	pid_t pid = (pid_t)s->req->pid;

	if (s->probe_pid <= 0 || d->nr != PROBE_NR || d->args[0] != 0 ||
	    d->args[1] != PROBE_MARK)
		return false;
	return pid == s->probe_pid ||
	       (tgid_of(pid) == s->probe_pid && notif_valid(s->fd, s->req->id));
}

/*
 * The notifications posted and dropped before this one, from the ids:
 * recorded as one event, counted as that many denials (the abort limit,
 * the result's count).  Before the first probe nothing is known.
 */
static void count_gap(struct sensor *s)
{
	uint64_t gap = s->req->id - s->next_id;
	char reason[CORRAL_ERR_MAX];

	if (!s->based)
		return;
	if (gap >= GAP_SANE) {
		/* an id gone back: not the kernel we read, stop counting */
		s->based = false;
		return;
	}
	s->next_id = s->req->id + 1;
	if (!gap)
		return;
	s->unseen += gap;
	snprintf(reason, sizeof(reason), "%llu denied call%s interrupted before %s "
		 "could be read (a signal, or the caller's death): not run, and "
		 "named by nothing but the count", (unsigned long long)gap,
		 gap == 1 ? "" : "s", gap == 1 ? "it" : "they");
	events_emit(s->events, "syscall.unseen",
		    json_pack("{s:I, s:I, s:s}", "count", (json_int_t)gap,
			      "total", (json_int_t)s->unseen, "reason", reason));
}

/*
 * Before 5.19 RECV took the newest notification first (LIFO): a later id
 * may come before an earlier one, and a gap is no count of drops.
 */
static bool ids_in_order(void)
{
	unsigned int major, minor;
	struct utsname u;

	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor >= 19);
}

static void answer(struct sensor *s, int fd, int error)
{
	memset(s->resp, 0, s->resp_size);
	s->resp->id = s->req->id;
	s->resp->error = -error;
	/* fails only where the caller died meanwhile: nothing to answer */
	(void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, s->resp);
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
	struct sensor *s = arg;
	char reason[CORRAL_ERR_MAX], name[64];
	json_t *o;
	int r, deny;

	(void)what;
	/* the kernel wants it zeroed, all of its size */
	memset(s->req, 0, s->req_size);
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, s->req) < 0) {
		/*
		 * ENOENT: the caller died meanwhile, wait for the next; unless
		 * no task is left on the filter (the kernel says ENOENT then
		 * too).  Then, and on any other failure, the fd reads as hung
		 * up for good: stop watching it.
		 */
		r = errno;
		if (r == EINTR || (r == ENOENT && !hung_up(fd)))
			return;
		event_del(s->ev);
		return;
	}
	if (is_probe(s)) {
		/* the first: the kernel's count from here on is ours */
		if (!s->based && s->ordered) {
			s->next_id = s->req->id;
			s->based = true;
		}
		count_gap(s);
		answer(s, fd, 0);
		return;
	}
	count_gap(s);
	/* named even where libseccomp is older than the call: "syscall 470" */
	sc_name(s->req->data.arch, s->req->data.nr, name, sizeof(name));
	deny = sc_deny_errno(s->req->data.nr);
	o = json_pack("{s:s, s:i, s:I, s:o}", "syscall", name, "nr", s->req->data.nr,
		      "pid", (json_int_t)s->req->pid,
		      "args", describe_args(s, name));
	s->denied++;
	snprintf(reason, sizeof(reason), "%s denied (%s): %s", name,
		 deny == ENOSYS ? "ENOSYS" : "EPERM", sc_deny_why(s->req->data.nr,
		 s->req->data.args[1], s->req->data.args[2]));
	if (o) {
		name_program(o, s->req->pid);
		json_object_set_new(o, "reason", json_string(reason));
	}
	/*
	 * Record before answering: while the caller waits for us its pid
	 * still names a process, and so its tool call (see events.h).
	 */
	events_emit(s->events, "syscall.denied", o);
	answer(s, fd, deny);
}

struct sensor *sensor_start(struct event_base *base, int notify_fd,
			    struct events *ev, pid_t probe_pid)
{
	struct sensor *s = calloc(1, sizeof(*s));

	if (!s) {
		close(notify_fd);
		return NULL;
	}
	s->fd = notify_fd;
	s->events = ev;
	s->probe_pid = probe_pid;
	s->ordered = ids_in_order();
	if (notif_alloc(s) < 0)
		goto fail;
	s->ev = event_new(base, notify_fd, EV_READ | EV_PERSIST, on_notify, s);
	if (!s->ev || event_add(s->ev, NULL) < 0)
		goto fail;
	return s;
fail:
	sensor_free(s);
	return NULL;
}

void sensor_probe(int tries)
{
	/*
	 * Interrupted, the call is dropped unread; made again where the
	 * caller asks.  At the start the sensor's count begins at the one it
	 * reads, so nothing is miscounted.  Answered (0), refused in the
	 * kernel (no listener: EPERM), or run (acct(NULL) with no accounting
	 * on): nothing more to do.
	 */
	for (int i = 0; i < tries; i++)
		if (syscall(PROBE_NR, 0, PROBE_MARK) == 0 || errno != EINTR)
			return;
}

/* The thread's: nothing of glibc's but syscall(), no lock, no malloc. */
static int probe_thread(void *arg)
{
	(void)arg;
	sensor_probe(1);
	return 0;
}

#define PROBE_STACK (64 * 1024)

void sensor_probe_within(unsigned int ms)
{
	struct timespec left = { ms / 1000, (long)(ms % 1000) * 1000000 };
	struct timespec t0, now;
	volatile pid_t tid = 0;
	sigset_t all, old;
	long r, spent;
	void *stack;
	pid_t seen;

	/*
	 * A thread of ours by clone, not pthread_create: that one wrote a
	 * dozen of glibc's pages, each a copy-on-write fault in init (a fork
	 * of the supervisor), and took 230 us where the call takes 20.  Its
	 * exit clears tid and wakes us (CLONE_CHILD_CLEARTID); a fresh
	 * stack, left mapped if it is not done in time, as we exit then.
	 */
	stack = mmap(NULL, PROBE_STACK, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return;
	/* every signal blocked in the thread: none of the process's is its */
	sigfillset(&all);
	if (sigprocmask(SIG_SETMASK, &all, &old) < 0) {
		munmap(stack, PROBE_STACK);
		return;
	}
	r = clone(probe_thread, (char *)stack + PROBE_STACK,
		  CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
		  CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID,
		  NULL, (pid_t *)&tid, NULL, (pid_t *)&tid);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		munmap(stack, PROBE_STACK);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((seen = tid) != 0) {
		/* EAGAIN: it changed meanwhile; EINTR: looked at again */
		syscall(SYS_futex, &tid, FUTEX_WAIT, seen, &left, NULL, 0);
		clock_gettime(CLOCK_MONOTONIC, &now);
		spent = (now.tv_sec - t0.tv_sec) * 1000 +
			(now.tv_nsec - t0.tv_nsec) / 1000000;
		if (spent >= (long)ms)
			return;		/* left waiting: ended with the process */
		left.tv_sec = (ms - spent) / 1000;
		left.tv_nsec = (long)((ms - spent) % 1000) * 1000000;
	}
	munmap(stack, PROBE_STACK);
}

size_t sensor_denied(const struct sensor *s)
{
	return s ? s->denied : 0;
}

bool sensor_idle(const struct sensor *s)
{
	return hung_up(s->fd);
}

void sensor_free(struct sensor *s)
{
	if (!s)
		return;
	if (s->ev)
		event_free(s->ev);
	free(s->req);
	free(s->resp);
	close(s->fd);
	free(s);
}
