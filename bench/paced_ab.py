#!/usr/bin/python3
"""paced_ab.py - two builds' paced exec, side by side on the same load.

Issue 17's paced figures move by 0.2-0.3 ms from run to run on a shared
host, more than most cuts on the path; runs of each build one after the
other measure the host's drift as much as the cut.  This starts a daemon
of each build (as bench/serve.py does), makes one sandbox in each and
sends execs of `true` to them in turn, A B B A A B ..., BENCH_GAP_MS
(default 50) apart, so that each daemon's calls come 2 * BENCH_GAP_MS
apart and both see the same minutes of the host; BENCH_EXECS (default
200) calls each.  It prints each build's p10, p50 and p90 (ms, on the
client's side, as serve.py's rows) and B's p50 minus A's: run it a few
times and look at the spread of that difference.

BENCH_NOLIBC=1 runs a program without libc (bench/floor_exit.c) instead
of `true`: what is left is corral's own.  BENCH_FROZEN=1 lets each
sandbox idle-freeze (idle_freeze_ms BENCH_FREEZE_MS, default 50) and
every call wait for "frozen" first: the exec into an idle-frozen sandbox.

  paced_ab.py CORRAL_A CORRAL_B
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve  # noqa: E402  (its Daemon and Api)

EXECS = int(os.environ.get("BENCH_EXECS", "200"))
GAP = int(os.environ.get("BENCH_GAP_MS", "50")) / 1000
NOLIBC = os.environ.get("BENCH_NOLIBC", "") not in ("", "0")
FROZEN = os.environ.get("BENCH_FROZEN", "") not in ("", "0")
FREEZE_MS = int(os.environ.get("BENCH_FREEZE_MS", "50"))
FREEZE_TIMEOUT = 5      # seconds, a sandbox to show "frozen"
WARM = 10               # calls each before the measured ones


def row(name, v):
    q = statistics.quantiles(v, n=10)
    return f"{name} p10 {q[0]:.3f} p50 {statistics.median(v):.3f} p90 {q[-1]:.3f}"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: paced_ab.py CORRAL_A CORRAL_B")
    tmp = tempfile.mkdtemp(prefix="corral-bench-ab-")
    os.chmod(tmp, 0o755)
    daemons, apis, sids = [], [], []
    try:
        body, fields = None, {}
        if NOLIBC:
            body, fields = serve.nolibc_workspace_in(tmp, "paced_ab.py")
        for name, exe in (("a", sys.argv[1]), ("b", sys.argv[2])):
            serve.CORRAL = exe
            daemons.append(serve.Daemon(tmp, name, pool=0))
            apis.append(daemons[-1].api())
            sid, _ = apis[-1].create(idle_freeze_ms=FREEZE_MS if FROZEN else 0, **fields)
            sids.append(sid)
            for _ in range(WARM):
                apis[-1].exec_true(sid, body)
        ms = ([], [])
        for i in range(EXECS):
            for k in (0, 1) if i % 2 == 0 else (1, 0):
                time.sleep(GAP)
                if FROZEN:
                    serve.wait_until(f"GET /v1/sandboxes/{sids[k]} to show \"frozen\"",
                                     lambda: apis[k].state(sids[k]) == "frozen", FREEZE_TIMEOUT)
                ms[k].append(apis[k].exec_true(sids[k], body))
        for api, sid in zip(apis, sids):
            api.req("DELETE", f"/v1/sandboxes/{sid}")
    finally:
        for api in apis:
            api.close()
        for d in daemons:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{row('A', ms[0])} | {row('B', ms[1])} | B-A p50 "
          f"{statistics.median(ms[1]) - statistics.median(ms[0]):+.3f} ms"
          f" (load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
