#!/usr/bin/python3
"""launch.py - cold-start latency of sandboxes, side by side in one run.

For each peer: median and p95 of N sequential launches of `true`, the
peers taking turns run by run, and the mean CPU time of one (the whole
host's, from /proc/stat: what M at once on a few cores pay), then the
wall time of M launches started at once (twice, in turn, averaged); as
root on a cgroup v1 host, corral with no cgroup file system, to take the
gap apart; then
where a run's time goes (setup, teardown) and what it asks of the kernel
(syscalls by strace, page faults and context switches by perf stat, at
what each costs on this host: bench/floor_host.c).  Peers that are not installed are
listed as such, never silently dropped.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

N = int(os.environ.get("BENCH_RUNS", "200"))
M = int(os.environ.get("BENCH_BURST", "100"))
ROUNDS = max(1, int(os.environ.get("BENCH_BURST_ROUNDS", "4")))
corral = sys.argv[1]

bwrap_view = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
              "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev",
              "--tmpfs", "/tmp", "--dir", "/workspace", "--chdir", "/workspace"]
peers = [
    ("corral run (default policy)", [corral, "run", "--", "/bin/true"]),
    ("bwrap --unshare-all --die-with-parent",
     ["bwrap", "--unshare-all", "--die-with-parent"] + bwrap_view + ["/bin/true"]),
    ("unshare -Urmnpf", ["unshare", "-Urmnpf", "/bin/true"]),
]
# Where corral's time goes that no sandbox layer explains: starting its
# own binary (static libraries relocated at every start, issue 17) against
# bwrap starting its own; no namespace is made in either row.
starts = [
    ("  start only: corral --version", [corral, "--version"]),
    ("  start only: bwrap --version", ["bwrap", "--version"]),
    # an agent given the network: the proxy's listeners and transparent
    # mode's nftables rules (nft.c) in the sandbox's netns; no packet is sent
    ("  corral run --net proxy", [corral, "run", "--net", "proxy", "--allow",
                                  "x.test:80", "--", "/bin/true"]),
]


HZ = os.sysconf("SC_CLK_TCK")


def cpu_host():
    """CPU ms the whole host has been busy (every CPU, /proc/stat): a
    sandbox's work is not all in the processes its runner waits for.
    bwrap's pid 1 is never waited for by the bwrap that started it, so
    rusage (RUSAGE_CHILDREN) missed most of bwrap's CPU and counted all of
    corral's; the kernel's workers that tear a namespace down (cleanup_net)
    run in no process of either.  A tick is 10 ms: the mean of many runs
    is what is read."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) * 1000 / HZ


# ---- the gap taken apart: v1 groups, made by corral as root --------------
# As root on a cgroup v1 host, a corral run makes a group in each of three
# hierarchies (memory, pids, cpuacct), writes its limits, moves init in,
# reads the group's counters for the result and removes the groups; bwrap
# makes none.  One more row, taking turns with the others, says how much
# of the gap to bwrap that is: corral run in a mount namespace of this
# script's where no cgroup file system is mounted.  It finds no group to
# make and sets rlimits, as it does for a caller with no delegated groups:
# every layer but the groups.  (A row of bwrap in the same groups would
# need a wrapper to make them around it; a wrapper's own exec and fork
# cost 2 ms here, more than the groups, so there is none.)
V1_CTRLS = ("memory", "pids", "cpuacct")
NOCG = "  corral run, no cgroup fs (rlimits)"
CLONE_NEWNS, MS_REC, MS_PRIVATE, MNT_DETACH = 0x20000, 0x4000, 1 << 18, 2


def v1_split():
    """Whether to measure the split rows: root, on a host whose memory,
    pids and cpuacct controllers are v1 hierarchies under /sys/fs/cgroup."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/mountinfo") as f:
            v1 = {o for line in f if " - cgroup " in line
                  for o in line.split(" - ")[1].split()[2].split(",")}
    except OSError:
        return False
    return all(c in v1 and os.path.isdir(f"/sys/fs/cgroup/{c}") for c in V1_CTRLS)


class NoCgroupNs:
    """A mount namespace like this script's but for /sys/fs/cgroup, detached
    in it; the script enters it to start a run and comes back."""

    def __init__(self):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.cwd = os.getcwd()
        self.home = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        go_r, go_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            # never back into the script: a second copy of it would run
            try:
                os.close(done_w)    # EOF on done_r: the parent has its fd
                ok = (self.libc.unshare(CLONE_NEWNS) == 0 and
                      self.libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0 and
                      self.libc.umount2(b"/sys/fs/cgroup", MNT_DETACH) == 0)
                os.write(go_w, b"k" if ok else b"e")
                os.read(done_r, 1)
            finally:
                os._exit(0)
        os.close(go_w)          # EOF on go_r if the child dies first
        try:
            ok = os.read(go_r, 1) == b"k"
            self.fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC) if ok else -1
        finally:
            os.close(done_w)
            os.waitpid(pid, 0)
            for fd in (go_r, done_r):
                os.close(fd)
        if self.fd < 0:
            raise OSError("cannot make a mount namespace without /sys/fs/cgroup")

    def setns(self, fd):
        if self.libc.setns(fd, CLONE_NEWNS) != 0:
            import ctypes
            raise OSError(ctypes.get_errno(), "setns")
        os.chdir(self.cwd)      # a relative corral path resolves as before


def start(name, argv):
    """A row's run started: plainly, or in the namespace without groups."""
    if name == NOCG:
        NS.setns(NS.fd)
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        finally:
            NS.setns(NS.home)
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def once(name, argv):
    """Wall ms, and the host's CPU ms over the run."""
    c = cpu_host()
    t = time.perf_counter()
    rc = start(name, argv).wait()
    if rc != 0:
        raise subprocess.CalledProcessError(rc, argv)
    return (time.perf_counter() - t) * 1000, cpu_host() - c


def burst(name, argv):
    """Wall ms, failures, and the host's CPU ms a run: at once on two
    cores, a burst's wall time is mostly the CPU it costs."""
    c = cpu_host()
    t = time.perf_counter()
    procs = [start(name, argv) for _ in range(M)]
    bad = sum(1 for p in procs if p.wait() != 0)
    return (time.perf_counter() - t) * 1000, bad, (cpu_host() - c) / M


NS = None
split = []
if v1_split():
    try:
        NS = NoCgroupNs()
        split = [(NOCG, peers[0][1])]
    except OSError as e:
        print(f"(the gap taken apart: not measured: {e})")


present = [(name, argv) for name, argv in peers + starts + split if shutil.which(argv[0])]
times = {name: [] for name, _ in present}
cpus = {name: [] for name, _ in present}
failed = {}
for i in range(N + 5):
    for name, argv in present:
        if name in failed:
            continue
        try:
            ms, cpu = once(name, argv)
        except (subprocess.CalledProcessError, OSError) as e:
            failed[name] = f"failed: {e}"
            continue
        if i >= 5:
            times[name].append(ms)
            cpus[name].append(cpu)
walls = {name: [] for name, _ in present}
bursting = [(n, a) for n, a in present if (n, a) in peers + split and n not in failed]
for r in range(ROUNDS):
    for name, argv in (bursting if r % 2 == 0 else bursting[::-1]):
        walls[name].append(burst(name, argv))

rows = []
for name, argv in peers + starts + split:
    if not shutil.which(argv[0]):
        rows.append((name, None))
    elif name in failed:
        rows.append((name, failed[name]))
    else:
        t = sorted(times[name])
        w = walls[name]
        wall = statistics.median(x for x, _, _ in w) if w else 0
        bad = sum(b for _, b, _ in w)
        rows.append((name, (statistics.median(t), t[int(len(t) * 0.95) - 1], wall, bad,
                            statistics.mean(cpus[name]))))

def memory_cgroups():
    """The host's memory cgroups (/proc/cgroups), dying ones included, or None."""
    try:
        with open("/proc/cgroups") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "memory":
                    return int(fields[2])
    except (OSError, ValueError, IndexError):
        pass
    return None


print(f"cold start of `true`: {N} sequential runs each, then {M} at once, "
      f"{ROUNDS} rounds "
      f"(uid {os.geteuid()}, {os.cpu_count()} cpus)")
# Right after a test suite, groups it removed may still be dying (held by
# their page cache), and corral makes memory groups where bwrap makes none:
# a run made then (cold ratio 1.38, against 1.07 ten minutes later) may be
# measuring the host.  The count is printed to tell such runs apart.
mem = memory_cgroups()
if mem is not None:
    print(f"memory cgroups on the host, dying ones included: {mem}")
print(f"{'sandbox':40} {'median ms':>10} {'p95 ms':>8} {f'{M} at once ms':>16} {'failed':>7}"
      f" {'host CPU ms':>12}")
base = None
for name, r in rows:
    if r is None:
        print(f"{name:40} {'not installed':>10}")
    elif isinstance(r, str):
        print(f"{name:40} {r}")
    elif name == NOCG:
        continue        # below, with what they explain
    elif name.startswith("  "):
        print(f"{name:40} {r[0]:10.2f} {r[1]:8.2f} {'':>16} {r[3]:7d} {r[4]:12.2f}")
    else:
        print(f"{name:40} {r[0]:10.2f} {r[1]:8.2f} {r[2]:16.0f} {r[3]:7d} {r[4]:12.2f}")
        if base is None:
            base = r[0]
bw = next((r for n, r in rows if n.startswith("bwrap") and isinstance(r, tuple)), None)
if base and bw:
    me = rows[0][1]

    def aim(ok):
        return "met" if ok else "not met"

    print(f"corral / bwrap median ratio: {base / bw[0]:.3f} "
          f"(aim <= 1.0: {aim(base <= bw[0])})")
    bw_name = next(n for n, r in rows if r is bw)
    per = sorted(a / b for (a, _, _), (b, _, _) in zip(walls[rows[0][0]], walls[bw_name]))
    print(f"corral {M} at once: {me[2]:.0f} ms, bwrap {bw[2]:.0f} ms (medians); "
          f"ratio round by round {statistics.median(per):.3f} "
          f"(min {per[0]:.3f}, max {per[-1]:.3f}; aim <= 1.0: "
          f"{aim(statistics.median(per) <= 1.0)})")
    print(f"  host CPU a run in the bursts: corral "
          f"{statistics.median(c for _, _, c in walls[rows[0][0]]):.2f} ms, bwrap "
          f"{statistics.median(c for _, _, c in walls[bw_name]):.2f} ms (medians; "
          f"as root corral's cgroups are in it, bwrap makes none)")

got = dict(rows)
if split and base and bw and all(isinstance(got.get(n), tuple) for n, _ in split):
    def per_round(a, b):
        return statistics.median(x / y for (x, _, _), (y, _, _) in zip(walls[a], walls[b]))

    me_name, bw_name = rows[0][0], next(n for n, r in rows if r is bw)
    print(f"\nthe gap taken apart (uid 0, cgroup v1): corral makes {len(V1_CTRLS)} groups "
          f"a run ({', '.join(V1_CTRLS)}), bwrap none; the rows above took turns with this one")
    print(f"{'sandbox':40} {'median ms':>10} {'p95 ms':>8} {f'{M} at once ms':>16} {'failed':>7}"
          f" {'host CPU ms':>12}")
    for name, _ in split:
        r = got[name]
        print(f"{name:40} {r[0]:10.2f} {r[1]:8.2f} {r[2]:16.0f} {r[3]:7d} {r[4]:12.2f}")
    print(f"corral without groups / bwrap: {got[NOCG][0] / bw[0]:.3f} one at a time, "
          f"{per_round(NOCG, bw_name):.3f} {M} at once (every layer but the groups)")
    print(f"corral / corral without groups: {base / got[NOCG][0]:.3f} one at a time, "
          f"{per_round(me_name, NOCG):.3f} {M} at once (the groups)")


# ---- where a cold start's time goes: before the command, and after ---------
# The command is bench/floor_stamp.c, static, bound read-only into both
# sandboxes (corral, as root, idmaps the bind: idmap.c).  It prints when
# it began (CLOCK_MONOTONIC, the clock this process reads too), so each
# run splits into setup (launch -> command) and teardown (command -> the
# launcher exits), the peers taking turns.
PHASES = int(os.environ.get("BENCH_PHASES", "100"))


def phases():
    if PHASES <= 0:
        return
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor_stamp.c")
    tmp = tempfile.mkdtemp(prefix="corral-bench-")
    try:
        os.chmod(tmp, 0o755)
        exe = os.path.join(tmp, "stamp")
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            print("phases: no C compiler to build floor_stamp.c: not measured")
            return
        b = subprocess.run([cc, "-O2", "-static", "-o", exe, src],
                           capture_output=True, text=True)
        if b.returncode != 0:
            print(f"phases: cannot build floor_stamp.c statically: {b.stderr.strip()[-200:]}")
            return
        argvs = [("corral run", [corral, "run", "--ro", f"{tmp}:/stamp", "--", "/stamp/stamp"]),
                 ("bwrap", ["bwrap", "--unshare-all", "--die-with-parent"] + bwrap_view +
                  ["--ro-bind", tmp, "/stamp", "/stamp/stamp"])]
        argvs = [(n, a) for n, a in argvs if shutil.which(a[0])]
        got = {n: [] for n, _ in argvs}
        for i in range(PHASES + 3):
            for name, argv in argvs:
                t0 = time.monotonic_ns()
                r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
                t1 = time.monotonic_ns()
                if r.returncode != 0 or not r.stderr.strip().isdigit():
                    print(f"phases: {name} failed ({r.returncode}): {r.stderr.strip()[-200:]}")
                    return
                if i >= 3:
                    ts = int(r.stderr.strip())
                    got[name].append(((ts - t0) / 1e6, (t1 - ts) / 1e6))
        print(f"\nwhere it goes: a static command in a read-only bind, {PHASES} runs each, medians")
        print(f"{'sandbox':40} {'setup ms':>10} {'teardown ms':>12} {'total ms':>10}")
        for name, xs in got.items():
            print(f"{name:40} {statistics.median(a for a, _ in xs):10.2f} "
                  f"{statistics.median(b for _, b in xs):12.2f} "
                  f"{statistics.median(a + b for a, b in xs):10.2f}")
        print("(setup: from the launcher's start to the command's first instruction; "
              "teardown: from there to its exit)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


phases()


# ---- what a cold start asks of the kernel: syscalls, faults, switches ---------
# On this kind of host (a PVM guest) a syscall, a page fault and a context
# switch each cost several times what they do on bare metal, and corral's
# layers that bwrap lacks (seccomp and its listener, Landlock, the masks
# over /proc, network-off DNS, cgroups as root) are paid in syscalls.  The
# counts say how much of the gap to bwrap is that work; bench/floor_host.c
# measures what each piece costs here, and the table's last column is the
# counts at those costs: what the kernel's smallest pieces of work alone
# take of a run (the rest is its larger work: mounts, namespaces, cgroups,
# exec).  strace -f -c and perf stat both follow every process of the run,
# bwrap's pid 1 too (rusage would miss it: it is not waited for).  A tool
# that is not installed leaves its column empty.
COUNTS = int(os.environ.get("BENCH_COUNTS", "5"))


def syscalls_of(argv):
    with tempfile.NamedTemporaryFile(prefix="corral-bench-strace-") as out:
        r = subprocess.run(["strace", "-f", "-qq", "-c", "-o", out.name] + argv,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return None
        # "% time seconds usecs/call calls [errors] syscall": the calls of "total"
        for line in open(out.name).read().splitlines():
            f = line.split()
            if len(f) >= 5 and f[-1] == "total":
                return int(f[3])
    return None


def perf_counts_of(argv):
    """(context switches, page faults) of one run, or None."""
    with tempfile.NamedTemporaryFile(prefix="corral-bench-perf-") as out:
        r = subprocess.run(["perf", "stat", "-x,", "-e", "context-switches,page-faults",
                            "-o", out.name, "--"] + argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return None
        got = {}
        for line in open(out.name).read().splitlines():
            f = line.split(",")
            if len(f) > 2 and f[0].isdigit():
                got[f[2]] = int(f[0])
        if "context-switches" in got and "page-faults" in got:
            return got["context-switches"], got["page-faults"]
    return None


def host_costs():
    """bench/floor_host.c's medians in microseconds, or None (said why)."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor_host.c")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("the host's costs: no C compiler to build floor_host.c: not measured")
        return None
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
        exe = os.path.join(tmp, "floor_host")
        b = subprocess.run([cc, "-O2", "-o", exe, src], capture_output=True, text=True)
        if b.returncode != 0:
            print(f"the host's costs: cannot build floor_host.c: {b.stderr.strip()[-200:]}")
            return None
        r = subprocess.run([exe, "5"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"the host's costs: floor_host failed: {r.stderr.strip()[-200:]}")
            return None
    return {k: float(v) for k, v in (line.split() for line in r.stdout.splitlines())}


def counts():
    rows = [(n, a) for n, a in peers if shutil.which(a[0]) and n not in failed]
    if not rows or not COUNTS:
        return
    print(f"\nwhat a run asks of the kernel: medians of {COUNTS} runs each")
    cost = host_costs()
    if cost:
        print(f"this host's costs (bench/floor_host.c, medians): a syscall {cost['syscall']:.2f} us, "
              f"a page fault {cost['fault']:.1f} us (a copy-on-write one {cost['cow']:.1f}), "
              f"a context switch {cost['switch']:.1f} us")
    print(f"{'sandbox':40} {'syscalls':>10} {'page faults':>12} {'context switches':>18}"
          f" {'at the costs ms':>16}")
    for name, argv in rows:
        sc = [syscalls_of(argv) for _ in range(COUNTS)] if shutil.which("strace") else []
        sc = [x for x in sc if x is not None]
        pc = [perf_counts_of(argv) for _ in range(COUNTS)] if shutil.which("perf") else []
        pc = [x for x in pc if x is not None]
        n_sc = statistics.median(sc) if sc else None
        n_sw = statistics.median(x[0] for x in pc) if pc else None
        n_pf = statistics.median(x[1] for x in pc) if pc else None
        ms = ""
        if cost and None not in (n_sc, n_sw, n_pf):
            ms = f"{(n_sc * cost['syscall'] + n_pf * cost['fault'] + n_sw * cost['switch']) / 1000:.2f}"
        print(f"{name:40} {f'{n_sc:g}' if sc else 'no strace':>10} "
              f"{f'{n_pf:g}' if pc else 'no perf':>12} {f'{n_sw:g}' if pc else 'no perf':>18}"
              f" {ms:>16}")
    if cost:
        print("(at the costs: syscalls, page faults (first-touch cost) and switches times "
              "what each costs here; the rest of a run's time is the kernel's larger work)")


counts()
