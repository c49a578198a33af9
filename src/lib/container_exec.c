/*
 * container_exec.c - an OCI exec: one more process in a running container.
 *
 * It must be the engine shim's to wait for (as the container's init is),
 * so it is not started by init, as a box's calls are, but joins init's
 * namespaces itself, the way runc's nsexec does: a helper child enters
 * them (the user namespace last: before it, host root may enter any), then
 * clones the process with CLONE_PARENT, so that it is the caller's child
 * and in the container's pid namespace.  The caller has the monitor put
 * it in the container's cgroup, and only then opens its gate: the
 * process takes on the sandbox's layers (sandbox_join_layers) and execs.
 */
#include "internal.h"
#include "sandbox.h"
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * In the order they are entered: the user namespace last, as host root
 * may enter any namespace before it, and inside it no longer one the
 * host owns (a pod's network namespace).
 */
static const struct {
	const char *name;
	int type;
} join_order[] = {
	{ "net", CLONE_NEWNET }, { "ipc", CLONE_NEWIPC },
	{ "uts", CLONE_NEWUTS }, { "cgroup", CLONE_NEWCGROUP },
	{ "pid", CLONE_NEWPID }, { "mnt", CLONE_NEWNS },
	{ "user", CLONE_NEWUSER },
};
#define NJOIN (sizeof(join_order) / sizeof(join_order[0]))

/* What failed in the process, for the caller's error. */
struct exec_report {
	int err;			/* negative errno */
	char msg[CORRAL_ERR_MAX];
};

static __attribute__((noreturn)) void report(int fd, const struct corral_err *e)
{
	struct exec_report r = { e->code ? e->code : -EIO, { 0 } };

	snprintf(r.msg, sizeof(r.msg), "%s", e->msg);
	if (write(fd, &r, sizeof(r)) < 0)
		_exit(126);
	_exit(126);
}

static int open_namespaces(pid_t init, int fds[NJOIN], struct corral_err *err)
{
	char path[64];

	for (size_t i = 0; i < NJOIN; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)init,
			 join_order[i].name);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0)
			return corral_set_errno(err, errno, "cannot open %s", path);
	}
	return 0;
}

/*
 * A pty of the container's devpts, sized as process.json asked (0 0: the
 * kernel's): the master to the console socket.
 */
static int make_terminal(int console_fd, const struct winsize *ws,
			 struct corral_err *err)
{
	static const char name[] = "/dev/ptmx";
	int master, slave, unlock = 0;
	ssize_t n;

	master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return corral_set_errno(err, errno, "cannot open /dev/ptmx");
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0 ||
	    (slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
		close(master);
		return corral_set_errno(err, errno, "cannot open the pty's slave");
	}
	if ((ws->ws_row || ws->ws_col) && ioctl(master, TIOCSWINSZ, ws) < 0) {
		close(master);
		close(slave);
		return corral_set_errno(err, errno, "cannot size the pty %ux%u",
					ws->ws_col, ws->ws_row);
	}
	n = fd_send(console_fd, name, sizeof(name) - 1, &master, 1, MSG_NOSIGNAL);
	if (n < 0) {
		close(master);
		close(slave);
		return corral_set_errno(err, (int)-n, "cannot send the pty to the "
					"console socket");
	}
	close(master);
	if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		return corral_set_errno(err, errno, "cannot make the pty the "
					"process's terminal");
	for (int i = 0; i < 3; i++)
		if (dup2(slave, i) < 0)
			return corral_set_errno(err, errno, "dup2 the pty to %d", i);
	if (slave > 2)
		close(slave);
	return 0;
}

/*
 * The seccomp listener, to the caller: a report of no error with the fd.
 * Unsent, it closes with us, and the denied calls fail (ENOSYS) unseen.
 */
static void send_listener(int rep, int fd)
{
	struct exec_report r = { 0, "notify" };

	/* failing, the caller is gone: the exec goes on, its denials unreported */
	(void)fd_send(rep, &r, sizeof(r), &fd, 1, MSG_NOSIGNAL);
}

/*
 * Of what the caller holds, only the engine's 0-2 (or the pty) go in, and
 * rep and gate until exec (close-on-exec).  The rest are host files: those the
 * engine left open without O_CLOEXEC, held from exec on; and, until exec,
 * our own (the pinned rootfs and binds' sources), which a cwd of
 * /proc/self/fd/N would make the process's cwd, outside its root
 * (CVE-2024-21626).  So they go before the chdir, not at exec.
 */
static int close_host_fds(int rep, int gate, struct corral_err *err)
{
	int keep[2] = { rep < gate ? rep : gate, rep < gate ? gate : rep };
	unsigned int from = 3;

	for (int i = 0; i < 2; i++) {
		if (keep[i] < (int)from)
			continue;
		if (keep[i] > (int)from &&
		    syscall(SYS_close_range, from, keep[i] - 1, 0) < 0)
			return corral_set_errno(err, errno, "close_range %u-%d",
						from, keep[i] - 1);
		from = keep[i] + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0) < 0)
		return corral_set_errno(err, errno, "close_range %u-", from);
	return 0;
}

/* The process, in the container's namespaces: wait for the gate, then exec. */
static __attribute__((noreturn)) void exec_process(const struct corral_container_exec_opts *o,
						   int gate, int rep)
{
	extern char **environ;
	struct corral_err err = { 0 };
	sigset_t none;
	int notify_fd;
	char go;

	/*
	 * We are in the container's pid namespace from now on, and our
	 * command line is the CLI's (--root, --log, --pid-file: the host's
	 * paths), which /proc/PID/cmdline shows to anyone there, as init's
	 * would.  What we run (argv, envp, cwd) the CLI copied already.
	 */
	corral_forget("corral-exec");
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* EOF: the caller failed to put us in the cgroup, or died */
	if (read(gate, &go, 1) != 1)
		_exit(126);
	if (o->tty) {
		struct winsize ws = { .ws_row = o->console_rows, .ws_col = o->console_cols };

		if (make_terminal(o->console_fd, &ws, &err) < 0)
			report(rep, &err);
		close(o->console_fd);
	} else {
		setsid();
	}
	if (close_host_fds(rep, gate, &err) < 0)
		report(rep, &err);
	if (sandbox_join_layers(o->p, &notify_fd, &err) < 0)
		report(rep, &err);
	/*
	 * Nothing in the sandbox may keep the listener: the caller passes it
	 * on to the monitor, which answers and records the denied calls.
	 */
	if (notify_fd >= 0) {
		send_listener(rep, notify_fd);
		close(notify_fd);
		/*
		 * EOF: the monitor would not take the listener (as many exec'd
		 * processes as it watches run already), or the caller died.
		 * Not an exec whose denied calls no one records.
		 */
		if (read(gate, &go, 1) != 1)
			_exit(126);
	}
	close(gate);
	if (sandbox_set_rlimits(o->rlimits, o->nrlimits, &err) < 0)
		report(rep, &err);
	if (chdir(o->cwd ? o->cwd : "/") < 0) {
		corral_set_errno(&err, errno, "chdir %s", o->cwd ? o->cwd : "/");
		report(rep, &err);
	}
	environ = (char **)o->envp;
	execvp(o->argv[0], o->argv);
	corral_set_errno(&err, errno, "exec %s", o->argv[0]);
	report(rep, &err);
}

/* The helper: enter the namespaces, clone the process as our parent's. */
static __attribute__((noreturn)) void join_helper(const struct corral_container_exec_opts *o,
						  int fds[NJOIN], int gate, int rep)
{
	struct corral_err err = { 0 };
	pid_t pid;

	/* while we are still the caller's, as init's is set (oom.c) */
	if (oom_prefer_sandbox(getpid(), &err) < 0)
		report(rep, &err);
	for (size_t i = 0; i < NJOIN; i++) {
		if (setns(fds[i], join_order[i].type) < 0) {
			corral_set_errno(&err, errno, "cannot join the container's "
					 "%s namespace", join_order[i].name);
			report(rep, &err);
		}
		close(fds[i]);
	}
	pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		corral_set_errno(&err, errno, "cannot start the process");
		report(rep, &err);
	}
	if (pid == 0)
		exec_process(o, gate, rep);
	/* our pid namespace is the caller's: the pid is the host's */
	if (write(rep, &pid, sizeof(pid)) != sizeof(pid))
		_exit(126);
	_exit(0);
}

/*
 * The gate is a socket, not a pipe: a process that died at it (the
 * container stopped, the OOM killer) makes the write fail, where a pipe
 * would raise SIGPIPE in the caller, an engine's CLI that then died
 * without a word.
 */
static int open_gate(int gate_wr, struct corral_err *err)
{
	if (send(gate_wr, "g", 1, MSG_NOSIGNAL) == 1)
		return 0;
	if (errno == EPIPE || errno == ECONNRESET)
		return corral_set_err(err, -EPIPE, "the process exited before it "
				      "could start (killed at its gate)");
	return corral_set_errno(err, errno, "cannot start the process");
}

/*
 * After the gate: EOF when it exec'd (the socket is close-on-exec), its
 * listener before that (on to the monitor, then the gate opened again),
 * or its failure.
 */
static int take_reports(int rep_rd, int gate_wr, const char *ctl_path,
			struct corral_err *err)
{
	for (int i = 0; i < 2; i++) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct exec_report rep;
		struct iovec iov = { &rep, sizeof(rep) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm;
		cleanup_close int fd = -1;
		struct corral_err e2;
		char reply[64];
		ssize_t n = recvmsg(rep_rd, &mh, MSG_CMSG_CLOEXEC);

		if (n <= 0)
			return 0;
		cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
		if (n != sizeof(rep))
			return corral_set_err(err, -EIO, "a short report from the exec");
		if (rep.err < 0)
			return corral_set_err(err, rep.err, "%s", rep.msg);
		if (fd < 0)
			return corral_set_err(err, -EIO, "the exec's seccomp listener "
					      "did not come with its report");
		/* refused (too many at once): no exec that no one watches */
		if (container_ctl_fd(ctl_path, "notify", fd, reply, sizeof(reply),
				     &e2) < 0)
			return corral_set_err(err, e2.code, "%s: its denied calls "
					      "would go unrecorded", e2.msg);
		if (open_gate(gate_wr, err) < 0)
			return err->code;
	}
	return 0;
}

int corral_container_exec(const struct corral_container_exec_opts *o, pid_t *pid,
			  struct corral_err *err)
{
	int fds[NJOIN] = { -1, -1, -1, -1, -1, -1, -1 };
	cleanup_close int gate_rd = -1, gate_wr = -1, rep_rd = -1, rep_wr = -1;
	struct exec_report rep;
	char reply[64];
	pid_t helper = -1, child = -1;
	int p[2], r, st = 0;
	ssize_t n;

	*pid = -1;
	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		return corral_set_err(err, -EINVAL, "process.args: no command to run");
	if (o->tty && o->console_fd < 0)
		return corral_set_err(err, -EINVAL, "a terminal needs --console-socket");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return corral_set_errno(err, errno, "socketpair");
	gate_rd = p[0];
	gate_wr = p[1];
	/* a packet each: the helper's pid, or the first failure's report */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0)
		return corral_set_errno(err, errno, "socketpair");
	rep_rd = p[0];
	rep_wr = p[1];
	r = open_namespaces(o->init, fds, err);
	if (r == 0) {
		helper = fork();
		if (helper < 0)
			r = corral_set_errno(err, errno, "fork");
		if (helper == 0) {
			close(gate_wr);
			close(rep_rd);
			join_helper(o, fds, gate_rd, rep_wr);
		}
	}
	for (size_t i = 0; i < NJOIN; i++)
		cleanup_closep(&fds[i]);
	if (r < 0)
		return r;
	cleanup_closep(&gate_rd);
	cleanup_closep(&rep_wr);
	n = recv(rep_rd, &rep, sizeof(rep), 0);
	waitpid(helper, &st, 0);
	if (n == sizeof(pid_t))
		memcpy(&child, &rep, sizeof(pid_t));
	else if (n == sizeof(rep))
		return corral_set_err(err, rep.err, "%s", rep.msg);
	if (child <= 0)
		return corral_set_err(err, -EIO, "the exec's helper failed (status %d)", st);
	r = corral_container_ctl(o->ctl_path, (snprintf(reply, sizeof(reply),
				 "join %d", (int)child), reply), reply, sizeof(reply), err);
	if (r < 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return r;
	}
	r = open_gate(gate_wr, err);
	if (r < 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return r;
	}
	r = take_reports(rep_rd, gate_wr, o->ctl_path, err);
	if (r < 0) {
		/* at its gate, or gone after its report */
		cleanup_closep(&gate_wr);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return r;
	}
	*pid = child;
	return 0;
}
