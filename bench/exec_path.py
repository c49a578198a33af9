#!/usr/bin/python3
"""exec_path.py - where a warm `corral serve` exec of `true` spends its time.

Issue 17: the exec round trip is the host's spawn floor plus what the
daemon, init and the call's process add.  This starts a daemon (as
bench/serve.py does), makes one sandbox, and runs BENCH_EXECS (default
100) execs of `true` into it, BENCH_PACE_MS (default 50) apart, while
`perf record` (root) traces a few syscalls system-wide.  Each call is
then cut at the points that the daemon, the call's process and init mark
with a syscall, and each stretch printed (p10, p50 in us):

  the daemon reads the request         readv (the daemon)
  ... sends the call                   sendmsg of the exec message
  the call's process has it            recvmsg's return (init's child)
  ... execs                            execve (its entry)
  the command exits                    exit_group
  init tells the daemon                sendto of MSG_CALL_EXITED
  the daemon writes the answer         writev
  ... and this caller runs to read it  sched_switch to this script's thread

The last stretch is the caller's wait for a CPU once the answer is
written: woken by the daemon's write on the daemon's CPU as a rule, it
waits there for whatever the daemon does next (issue 17), and every
client pays that wait though no syscall of the daemon's shows it.

Alongside: the CPU time (schedstat, all threads) and page faults the
daemon and the sandbox's processes (init and its reaped children) spent a
call, and the CPU of the daemon's cgroup mover (its helper process).
On a host loaded by other work compare p10s and counts, not p50s.

BENCH_NOLIBC=1 runs a program without libc instead of `true`
(bench/floor_exit.c, in a workspace of its own, as serve.py's no-libc
rows do): its start traps no CPUID, so what is left is corral's own.
BENCH_WAKEUPS=1 also traces every wakeup and switch, and the CPUs' idle
states, and says for each process of the path (the caller, the daemon,
init, the call's process) how many times a call it was woken, how many
of those onto an idle CPU (which a guest may have to wake: an exit to
the hypervisor and back), and the p50 from the wakeup to its run, each
way: where a paced call's time goes that a back-to-back one does not
spend (BENCH_PACE_MS=100, as serve.py paces, on a host with nothing else
running; with other work no CPU is idle and the two split alike).
BENCH_FROZEN=1 makes each call an exec into an idle-frozen sandbox
(idle_freeze_ms BENCH_FREEZE_MS, default 50; each call waits, after its
BENCH_PACE_MS, until the sandbox says "frozen", as serve.py's resume
rows do) and cuts the daemon's first stretch at its writes: the thaw
(open of freezer.state, the write of THAWED, the look that it took) and
the audit line of the thaw, then the rest to the call sent.
BENCH_FAULTS=1 also traces user page faults (every process's: it costs
each fault a record) and counts the call's process's between the call's
arrival and its execve, where each is 10-40 us of the caller's wait.

  exec_path.py [CORRAL]     (default build/corral)
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve  # noqa: E402  (its Daemon and Api)

CORRAL = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
EXECS = int(os.environ.get("BENCH_EXECS", "100"))
PACE = int(os.environ.get("BENCH_PACE_MS", "50")) / 1000
NOLIBC = os.environ.get("BENCH_NOLIBC", "") not in ("", "0")
FAULTS = os.environ.get("BENCH_FAULTS", "") not in ("", "0")
WAKEUPS = os.environ.get("BENCH_WAKEUPS", "") not in ("", "0")
FROZEN = os.environ.get("BENCH_FROZEN", "") not in ("", "0")
FREEZE_MS = int(os.environ.get("BENCH_FREEZE_MS", "50"))
FREEZE_TIMEOUT = 5      # seconds, the sandbox to show "frozen"
# the daemon's writes: in a frozen call the thaw's, then the audit line's
THAW_EVENTS = ["syscalls:sys_enter_write", "syscalls:sys_exit_write"]
THAW_STRETCHES = [("the daemon: request read -> thaw written", "req", "thaw"),
                  ("the thaw's write (THAWED)", "thaw", "thawed"),
                  ("thawed -> the thaw's audit line", "thawed", "audit"),
                  ("the audit line -> call sent", "audit", "sent")]
WAKE_EVENTS = ["sched:sched_wakeup", "power:cpu_idle"]
IDLE_OUT = 4294967295   # power:cpu_idle's state when a CPU leaves idle
FAULT = "exceptions:page_fault_user"
EVENTS = ["syscalls:sys_exit_readv", "syscalls:sys_exit_sendmsg",
          "syscalls:sys_exit_recvmsg", "syscalls:sys_enter_execve",
          "syscalls:sys_enter_exit_group", "syscalls:sys_exit_sendto",
          "syscalls:sys_enter_writev"]
SWITCH = "sched:sched_switch"      # filtered to switches to this process
# the daemon's own file work a call: cgroup files opened, groups made and removed
COUNTED = ["syscalls:sys_enter_openat", "syscalls:sys_enter_mkdir",
           "syscalls:sys_enter_rmdir"]
EXEC_MSG_MIN = 100      # bytes: the exec message and a request are longer
PERF_START_S = 1        # perf record's own start, before the first exec
MARKS = ("req", "sent", "got", "exec", "exit", "told", "ans")
STRETCHES = [("the daemon: request read -> call sent", "req", "sent"),
             ("wakeup: call sent -> its process has it", "sent", "got"),
             ("the call's process: call -> execve", "got", "exec"),
             ("the command: execve -> exit_group", "exec", "exit"),
             ("exit -> init told the daemon", "exit", "told"),
             ("the daemon: init's word -> answer written", "told", "ans"),
             ("request read -> answer written", "req", "ans")]
CALLER_STRETCH = ("the caller: answer written -> it runs", "ans", "read")


def init_of(daemon_pid):
    """The sandbox's init: the daemon's child in another pid namespace."""
    mine = os.readlink(f"/proc/{daemon_pid}/ns/pid")
    for t in os.listdir(f"/proc/{daemon_pid}/task"):
        for k in open(f"/proc/{daemon_pid}/task/{t}/children").read().split():
            if os.readlink(f"/proc/{k}/ns/pid") != mine:
                return int(k)
    raise RuntimeError("no sandbox init among the daemon's children")


def mover_of(daemon_pid):
    """The daemon's cgroup mover (cgroup_move.c), or None (no cgroups):
    its moves' writes are a call's CPU too, off the daemon's loop."""
    for t in os.listdir(f"/proc/{daemon_pid}/task"):
        for k in open(f"/proc/{daemon_pid}/task/{t}/children").read().split():
            if open(f"/proc/{k}/comm").read().strip() == "corral-move":
                return int(k)
    return None


def mover_ms(pid):
    """Its CPU in ms, or None: none, or gone (a mover that died is forked anew)."""
    try:
        return usage(pid)[0] if pid else None
    except OSError:
        return None


def usage(pid):
    """(ms on CPU of all threads, minor faults, minor faults of reaped children)"""
    ns = sum(int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
             for t in os.listdir(f"/proc/{pid}/task"))
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return ns / 1e6, int(f[7]), int(f[8])


def cut(text, dpid, ipid):
    """Each call's marks, from perf script's lines, in order."""
    calls, cur, sent = [], None, None
    for line in text.splitlines():
        m = re.match(r"\s*\S+\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(?:syscalls|sched|exceptions):(\w+):(.*)", line)
        if not m:
            continue
        pid, t, ev = int(m.group(1)), float(m.group(2)) * 1e6, m.group(3)
        if ev == "page_fault_user":
            # the call's process, between its call and its execve
            if cur and pid == cur.get("pid") and "exec" not in cur:
                cur["faults"] = cur.get("faults", 0) + 1
            continue
        if ev == "sched_switch":
            # the first switch to the caller after an answer: it reads it
            # (all switches are traced with BENCH_WAKEUPS)
            if f"next_pid={os.getpid()} " not in m.group(4) + " ":
                continue
            if calls and "read" not in calls[-1] and t >= calls[-1]["ans"]:
                calls[-1]["read"] = t
            continue
        r = re.search(r"0x([0-9a-f]+)\s*$", m.group(4))
        ret = int(r.group(1), 16) if r else None
        if ev in ("sys_enter_write", "sys_exit_write"):
            # the daemon's (filtered): the thaw's, then the audit line's
            if cur and "sent" not in cur:
                if ev == "sys_enter_write":
                    cur.setdefault("audit" if "thawed" in cur else "thaw", t)
                elif "thaw" in cur:
                    cur.setdefault("thawed", t)
            continue
        if pid == os.getpid() and ev == "sys_exit_sendto":
            sent = t        # the caller's request (its last write)
        elif pid == dpid and ev == "sys_exit_readv" and ret and ret > EXEC_MSG_MIN:
            cur = {"req": t, "send": sent}
        elif cur is None:
            continue
        elif pid == dpid and ev == "sys_exit_sendmsg" and ret and ret > EXEC_MSG_MIN:
            cur.setdefault("sent", t)
        elif (pid not in (dpid, ipid) and ev == "sys_exit_recvmsg" and ret and
              ret > EXEC_MSG_MIN and "sent" in cur and "got" not in cur):
            cur["got"], cur["pid"] = t, pid
        elif pid == cur.get("pid") and ev == "sys_enter_execve":
            cur.setdefault("exec", t)
        elif pid == cur.get("pid") and ev == "sys_enter_exit_group":
            cur.setdefault("exit", t)
        elif pid == ipid and ev == "sys_exit_sendto" and "exit" in cur:
            cur.setdefault("told", t)
        elif pid == dpid and ev == "sys_enter_writev" and "told" in cur:
            cur["ans"] = t
            # perf may drop events under load: a call missing a mark is left out
            if all(k in cur for k in MARKS):
                calls.append(cur)
            cur = None
    return calls


def wakeups(text, calls, who):
    """Per process of the path: (wakeups a call, of them onto an idle CPU,
    p50 us wakeup -> run onto an idle CPU, the same onto a busy one), over
    the calls' spans (the caller's request sent to its run).  who: pid ->
    name, the call's processes as "call"."""
    idle, woken, seen = {}, {}, {}
    spans = [(c["send"] or c["req"], c.get("read", c["ans"])) for c in calls]
    i = 0
    for line in text.splitlines():
        m = re.match(r"\s*\S+\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(?:sched|power):(\w+):(.*)", line)
        if not m:
            continue
        t, ev, rest = float(m.group(3)) * 1e6, m.group(4), m.group(5)
        if ev == "cpu_idle":
            f = dict(re.findall(r"(\w+)=(\d+)", rest))
            idle[int(f["cpu_id"])] = int(f["state"]) != IDLE_OUT
            continue
        while i < len(spans) and t > spans[i][1]:
            i += 1
        inside = i < len(spans) and t >= spans[i][0]
        if ev == "sched_wakeup":
            f = dict(re.findall(r"(\w+)=(\S+)", rest))
            pid, cpu = int(f["pid"]), int(f["target_cpu"])
            if inside and pid in who:
                woken[pid] = (t, idle.get(cpu, False))
        elif ev == "sched_switch":
            f = dict(re.findall(r"(\w+)=(\S+)", rest))
            pid = int(f.get("next_pid", 0))
            if pid in woken:
                t0, was_idle = woken.pop(pid)
                seen.setdefault(who[pid], []).append((was_idle, t - t0))
    out = {}
    for name, v in seen.items():
        on_idle = [d for w, d in v if w]
        on_busy = [d for w, d in v if not w]
        out[name] = (len(v) / len(calls), len(on_idle) / len(calls),
                     statistics.median(on_idle) if on_idle else None,
                     statistics.median(on_busy) if on_busy else None)
    return out


def main():
    if os.geteuid() != 0 or not shutil.which("perf"):
        sys.exit("exec_path.py: needs root and perf (system-wide syscall tracepoints)")
    tmp = tempfile.mkdtemp(prefix="corral-bench-path-")
    os.chmod(tmp, 0o755)
    d = perf = None
    try:
        serve.CORRAL = CORRAL
        d = serve.Daemon(tmp, "path", pool=0)
        api = d.api()
        body, what, fields = None, "`true`", {}
        if NOLIBC:
            body, fields = serve.nolibc_workspace_in(tmp, "exec_path.py")
            what = "a program without libc"
        sid, _ = api.create(idle_freeze_ms=FREEZE_MS if FROZEN else 0, **fields)
        for _ in range(10):
            api.exec_true(sid, body)
        ipid = init_of(d.pid)
        data = os.path.join(tmp, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-a", "-o", data] +
                                sum((["-e", e] for e in EVENTS + ([FAULT] if FAULTS else []) +
                                     (WAKE_EVENTS if WAKEUPS else [])), []) +
                                (["-e", SWITCH] if WAKEUPS else
                                 ["-e", SWITCH, "--filter", f"next_pid == {os.getpid()}"]) +
                                sum((["-e", e, "--filter", f"common_pid == {d.pid}"]
                                     for e in COUNTED + (THAW_EVENTS if FROZEN else [])), []),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(PERF_START_S)
        mv = mover_of(d.pid)
        d0, i0, m0 = usage(d.pid), usage(ipid), mover_ms(mv)
        for _ in range(EXECS):
            time.sleep(PACE)
            if FROZEN:
                serve.wait_until(f"GET /v1/sandboxes/{sid} to show \"frozen\"",
                                 lambda: api.state(sid) == "frozen", FREEZE_TIMEOUT)
            api.exec_true(sid, body)
        d1, i1, m1 = usage(d.pid), usage(ipid), mover_ms(mv)
        perf.send_signal(signal.SIGINT)
        perf.wait(60)
        perf = None
        api.req("DELETE", f"/v1/sandboxes/{sid}")
        api.close()
        text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,cpu,time,event,trace"],
                              capture_output=True, text=True, timeout=300).stdout
    finally:
        if perf:
            perf.kill()
            perf.wait()
        if d:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    calls = cut(text, d.pid, ipid)
    if not calls:
        sys.exit("exec_path.py: no call found in perf's record")
    print(f"{'an idle-frozen' if FROZEN else 'a warm'} exec of {what}, {len(calls)} of {EXECS}"
          f" calls {PACE * 1000:.0f} ms apart"
          f" ({CORRAL}, {os.cpu_count()} cpus)")
    print(f"  {'':44s} {'p10 us':>8s} {'p50 us':>8s}")
    for name, a, b in STRETCHES:
        v = sorted(c[b] - c[a] for c in calls)
        print(f"  {name:44s} {v[len(v) // 10]:8.0f} {statistics.median(v):8.0f}")
    if FROZEN:
        thawed = [c for c in calls if all(k in c for k in ("thaw", "thawed", "audit"))]
        print(f"  the first stretch, cut at the thaw ({len(thawed)} calls):")
        for name, a, b in THAW_STRETCHES:
            v = sorted(c[b] - c[a] for c in thawed)
            if v:
                print(f"    {name:42s} {v[len(v) // 10]:8.0f} {statistics.median(v):8.0f}")
    name, a, b = CALLER_STRETCH
    v = sorted(c[b] - c[a] for c in calls if b in c)
    if v:
        print(f"  {name:44s} {v[len(v) // 10]:8.0f} {statistics.median(v):8.0f}"
              f"   ({len(v)} calls)")
    if FAULTS:
        f = sorted(c.get("faults", 0) for c in calls)
        print(f"  the call's process: page faults from its call to its execve: p50 {statistics.median(f):.0f},"
              f" max {f[-1]}")
    if WAKEUPS:
        who = {os.getpid(): "the caller", d.pid: "the daemon", ipid: "init"}
        who.update((c["pid"], "the call's process") for c in calls)
        print("  woken a call (to an idle CPU), p50 us from the wakeup to the run onto an idle / a busy CPU:")
        for name, (n, n_idle, lat_idle, lat_busy) in sorted(wakeups(text, calls, who).items()):
            print(f"    {name:20s} {n:4.1f} ({n_idle:.1f})   " +
                  " / ".join("-" if x is None else f"{x:.0f}" for x in (lat_idle, lat_busy)))
    counts = {e.split("_")[-1]: len(re.findall(rf"\s{d.pid}\s.*{e}:", text)) / EXECS
              for e in COUNTED}
    print("  a call: the daemon's " + ", ".join(f"{k} {v:.1f}" for k, v in counts.items()) +
          " (its cgroup files and groups, and anything else it opened)")
    print(f"  a call: the daemon {(d1[0] - d0[0]) / EXECS:.2f} ms of CPU, {(d1[1] - d0[1]) / EXECS:.1f} faults;"
          f" init {(i1[0] - i0[0]) / EXECS:.2f} ms, {(i1[1] - i0[1]) / EXECS:.1f} faults;"
          f" its children {(i1[2] - i0[2]) / EXECS:.1f} faults")
    if m0 is not None and m1 is not None:
        print(f"  a call: the daemon's cgroup mover {(m1 - m0) / EXECS:.2f} ms of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
