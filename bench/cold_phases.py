#!/usr/bin/python3
"""cold_phases.py CORRAL - one cold start of `corral run -- /bin/true` and of
bwrap's, phase by phase, from the kernel's own record (issue 17).

By hand, as root (tracefs).  The runs take turns; each is traced in a
tracing instance of this script's own (the top-level buffer and other
instances are left alone): the scheduler's switches, wakeups, forks,
execs and exits and every system call's entry and exit, of the run's
processes only (set_event_pid, event-fork).  From that record each run's
marks: the launcher's exec, its clone of the sandbox's first process,
init's fork of the seccomp filling's thread and that thread's run, init's
wait for it (the futex of sc_fill_join), the command's exec and exit, the
exits of init and of the launcher.  Only runs during which other tasks
held the CPUs for at most BENCH_PHASE_FOREIGN_US (300) are kept: on a
shared 2-core host the others' load would be what is measured.  Tracing
adds some 0.1 us an event (about 1500 a run), to both peers alike.

BENCH_PHASE_RUNS (60) runs each; medians and quartiles of the kept ones.
Not part of `make bench`: root, tracefs, and a minute of tracing.
"""
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys

RUNS = int(os.environ.get("BENCH_PHASE_RUNS", "60"))
FOREIGN_US = float(os.environ.get("BENCH_PHASE_FOREIGN_US", "300"))
EVENTS = ("sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new",
          "sched:sched_process_fork", "sched:sched_process_exec",
          "sched:sched_process_exit", "raw_syscalls:sys_enter", "raw_syscalls:sys_exit")
NR_CLONE, NR_FUTEX, NR_SECCOMP, NR_EPOLL_WAIT, NR_WAIT4 = 56, 202, 317, 232, 61
BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
         "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/workspace",
         "--chdir", "/workspace", "/bin/true"]
LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")
SWITCH = re.compile(r"prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=.*? next_pid=(\d+)")


def tracefs():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(os.path.join(d, "instances")):
            return d
    return None


class Instance:
    """A tracing instance of our own, removed at the end whatever happened."""

    def __init__(self, root):
        self.dir = os.path.join(root, "instances", f"corral-phases-{os.getpid()}")
        os.mkdir(self.dir)
        self.put("tracing_on", "0")
        self.put("buffer_size_kb", "8192")
        self.put("trace_clock", "mono")
        self.put("options/event-fork", "1")
        self.put("set_event", "\n".join(EVENTS))

    def put(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(value + "\n")

    def run(self, argv):
        """argv traced from its exec to the exit of every process it made."""
        self.put("trace", "")

        def only_this():
            # in the child, before its exec: its pid, then tracing on
            self.put("set_event_pid", str(os.getpid()))
            self.put("tracing_on", "1")

        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30, preexec_fn=only_this)
        finally:
            self.put("tracing_on", "0")
        if r.returncode != 0:
            raise RuntimeError(f"{argv[0]} exited {r.returncode}")
        with open(os.path.join(self.dir, "trace")) as f:
            return f.read()

    def close(self):
        try:
            self.put("tracing_on", "0")
            self.put("set_event", "")
        finally:
            os.rmdir(self.dir)


def marks(text):
    """The run's marks in us from the launcher's exec, or None if unreadable."""
    evs, t0, main = [], None, None
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        _, pid, cpu, ts, ev, rest = m.groups()
        ts = float(ts) * 1e6
        if t0 is None and ev == "sched_process_exec":
            t0, main = ts, int(pid)
        if t0 is not None:
            evs.append((ts - t0, int(pid), int(cpu), ev, rest))
    if main is None:
        return None
    ours, kids, thread, execd, exited = {main}, collections.defaultdict(list), set(), {}, {}
    for t, pid, _, ev, rest in evs:
        if ev == "sched_process_fork" and pid in ours:
            c = int(re.search(r"child_pid=(\d+)", rest).group(1))
            ours.add(c)
            kids[pid].append((t, c))
        elif ev == "sched_process_exec":
            execd.setdefault(pid, t)
        elif ev == "sched_process_exit":
            exited[pid] = t
            if "group_dead=false" in rest:
                thread.add(pid)
    calls, open_call, first_run = collections.defaultdict(list), {}, {}
    oncpu, running_since = collections.Counter(), {}
    cpu_task, foreign = {}, 0.0
    for t, pid, cpu, ev, rest in evs:
        if ev == "sched_switch":
            m = SWITCH.search(rest)
            prev, nxt = int(m.group(1)), int(m.group(3))
            if prev in running_since:
                oncpu[prev] += t - running_since.pop(prev)
            if nxt in ours:
                running_since[nxt] = t
                first_run.setdefault(nxt, t)
            # time other tasks (not the idle task) held this CPU
            held = cpu_task.get(cpu)
            if held and held[0] not in ours and held[0] != 0:
                foreign += t - held[1]
            cpu_task[cpu] = (nxt, t)
        elif ev == "sys_enter" and pid in ours:
            open_call[pid] = (int(rest.split()[1]), t)
        elif ev == "sys_exit" and pid in open_call:
            nr, start = open_call.pop(pid)
            calls[pid].append((nr, start, t))
    cmd = next((p for p in execd if p != main), None)
    if cmd is None or main not in exited:
        return None
    r = {"foreign": foreign, "end": exited[main], "cmd_exec": execd[cmd],
         "cmd_exit": exited.get(cmd)}
    r["clone"] = next(((s, e) for nr, s, e in calls[main] if nr == NR_CLONE), None)
    init = kids[main][0][1] if kids[main] else None
    fill = next((c for _, c in kids.get(init, []) if c in thread), None)
    r["init_exit"] = exited.get(init)
    if fill is None:        # bwrap's: its pid 1 forks the command
        return r
    cmd_fork = next((t for t, c in kids[init] if c == cmd), None)
    own = next(((s, e) for nr, s, e in reversed(calls[init])
                if nr == NR_SECCOMP and cmd_fork and s < cmd_fork), None)
    # sc_fill_join's futex, if the thread was still filling (else no call)
    waits = [(s, e) for nr, s, e in calls[init]
             if nr == NR_FUTEX and own and s < own[0] and e - s > 5]
    r["join"] = waits[-1] if waits else None
    r["ready"] = r["join"][0] if r["join"] else own[0] if own else None
    r["filter_on"] = r["join"][1] if r["join"] else r["ready"]
    r["fill"] = (first_run.get(fill), exited.get(fill), oncpu[fill])
    # init gone: the supervisor's last wakeup before it reaps init (wait4)
    reap = next((s for nr, s, e in calls[main]
                 if nr == NR_WAIT4 and r["init_exit"] and s > r["init_exit"]), None)
    r["woken"] = max((e for nr, s, e in calls[main]
                      if nr == NR_EPOLL_WAIT and reap and e <= reap), default=None)
    return r


def span(a, b):
    return None if a is None or b is None else b - a


CORRAL_ROWS = [
    ("launcher's start, to its clone of init", lambda r: r["clone"][0]),
    ("the clone", lambda r: span(*r["clone"])),
    ("init: setup, until its own filter is next", lambda r: span(r["clone"][1], r["ready"])),
    ("init: waits for the filling thread (0: done)", lambda r: span(*r["join"]) if r["join"] else 0.0),
    ("  filling thread: clone to its exit", lambda r: span(r["clone"][1], r["fill"][1])),
    ("  filling thread: its CPU", lambda r: r["fill"][2]),
    ("init: own filter, fork and exec of the command", lambda r: span(r["filter_on"], r["cmd_exec"])),
    ("SETUP (launcher's exec -> command's exec)", lambda r: r["cmd_exec"]),
    ("the command (/bin/true)", lambda r: span(r["cmd_exec"], r["cmd_exit"])),
    ("init reaps it, reports, exits", lambda r: span(r["cmd_exit"], r["init_exit"])),
    ("kernel ends init (mm, mounts, namespaces)", lambda r: span(r["init_exit"], r["woken"])),
    ("supervisor: result, groups removed, exit", lambda r: span(r["woken"], r["end"])),
    ("TEARDOWN (command's exit -> launcher's)", lambda r: span(r["cmd_exit"], r["end"])),
    ("TOTAL", lambda r: r["end"]),
]
BWRAP_ROWS = [
    ("launcher's start, to its clone of pid 1", lambda r: r["clone"][0]),
    ("the clone (every namespace)", lambda r: span(*r["clone"])),
    ("pid 1: setup, fork and exec of the command", lambda r: span(r["clone"][1], r["cmd_exec"])),
    ("SETUP (launcher's exec -> command's exec)", lambda r: r["cmd_exec"]),
    ("the command (/bin/true)", lambda r: span(r["cmd_exec"], r["cmd_exit"])),
    ("pid 1 exits (its namespaces end after bwrap)", lambda r: span(r["cmd_exit"], r["init_exit"])),
    ("TEARDOWN (command's exit -> launcher's)", lambda r: span(r["cmd_exit"], r["end"])),
    ("TOTAL", lambda r: r["end"]),
]


def table(name, rows, runs, seen):
    print(f"\n{name}: {len(runs)} of {seen} runs kept; ms, median [p25..p75]")
    if len(runs) < 5:
        print("  (too few for medians: a busier host than the bound; run it again "
              "when quieter, or raise BENCH_PHASE_FOREIGN_US)")
    for label, f in rows:
        xs = []
        for r in runs:
            try:
                x = f(r)
            except (TypeError, KeyError):
                x = None
            if x is not None:
                xs.append(x / 1000)
        if not xs:
            print(f"  {label:48} -")
            continue
        xs.sort()
        print(f"  {label:48} {statistics.median(xs):6.2f} "
              f"[{xs[len(xs) // 4]:.2f}..{xs[(3 * len(xs)) // 4]:.2f}]")


def main():
    corral = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
    root = tracefs()
    if os.geteuid() != 0 or root is None:
        print("cold_phases: needs root and tracefs with instances: not measured")
        return
    peers = [("corral", [corral, "run", "--", "/bin/true"])]
    if shutil.which("bwrap"):
        peers.append(("bwrap", BWRAP))
    inst = Instance(root)
    got = {n: [] for n, _ in peers}
    seen = {n: 0 for n, _ in peers}
    try:
        for i in range(RUNS + 2):
            for name, argv in (peers if i % 2 == 0 else peers[::-1]):
                r = marks(inst.run(argv))
                if i < 2 or r is None:
                    continue
                seen[name] += 1
                if r["foreign"] <= FOREIGN_US:
                    got[name].append(r)
    finally:
        inst.close()
    print(f"cold start phase by phase: {RUNS} traced runs each, taking turns; kept: "
          f"those during which other tasks held the CPUs <= {FOREIGN_US:g} us")
    table("corral run -- /bin/true", CORRAL_ROWS, got["corral"], seen["corral"])
    if "bwrap" in got:
        table("bwrap --unshare-all --die-with-parent ... /bin/true", BWRAP_ROWS,
              got["bwrap"], seen["bwrap"])
    print("(init loads the seccomp filling, 8 filters of ~4096 instructions, on a "
          "thread of its own while it builds the mounts: seccomp_stack.c)")


if __name__ == "__main__":
    main()
