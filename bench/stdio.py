#!/usr/bin/python3
"""stdio.py - what the stdio relay costs: a pipe through `cat` in a sandbox.

BENCH_STDIO_BYTES (default 1 GiB) of zeros go through `corral run -- cat`,
whose stdin and stdout are pipes corral relays with splice(2), and through
`bwrap ... cat`, which hands the caller's pipes straight in; and, for the
floor, through a plain `cat`.  Median of BENCH_STDIO_REPEAT (default 3)
runs each, timed from outside (start-up included: ~0.1 s), the bytes
counted at the end by `wc -c`.

  stdio.py [CORRAL]     (default build/corral)
"""
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

CORRAL = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
NBYTES = int(os.environ.get("BENCH_STDIO_BYTES", str(1 << 30)))
REPEAT = int(os.environ.get("BENCH_STDIO_REPEAT", "3"))
TIMEOUT = 600
BWRAP_VIEW = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
              "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--proc", "/proc", "--dev", "/dev"]
SANDBOXES = [
    ("plain cat (no sandbox)", ["cat"]),
    ("corral run -- cat", [CORRAL, "run", "--", "cat"]),
    ("bwrap --unshare-all cat", ["bwrap", "--unshare-all", "--die-with-parent"]
     + BWRAP_VIEW + ["cat"]),
]


def one(argv):
    """Seconds to move NBYTES through argv, or None if it failed."""
    line = "head -c %d /dev/zero | %s | wc -c" % (
        NBYTES, " ".join(shlex.quote(a) for a in argv))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["sh", "-c", line], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=TIMEOUT)
        ok = p.stdout.strip() == str(NBYTES).encode()
    except subprocess.TimeoutExpired:
        ok = False
    dt = time.perf_counter() - t0
    return dt if ok else None


def main():
    mib = NBYTES / (1 << 20)
    print(f"\nstdio: {mib:.0f} MiB through cat (stdin and stdout pipes), "
          f"median of {REPEAT}")
    print(f"{'sandbox':40} {'seconds':>10} {'MiB/s':>10}")
    rows = {}
    for name, argv in SANDBOXES:
        if not shutil.which(argv[0]):
            print(f"{name:40} {'not installed':>10}")
            continue
        runs = [one(argv) for _ in range(REPEAT)]
        if None in runs:
            print(f"{name:40} {'failed':>10}")
            continue
        t = statistics.median(runs)
        rows[name] = t
        print(f"{name:40} {t:10.2f} {mib / t:10.0f}")
    c, b = rows.get("corral run -- cat"), rows.get("bwrap --unshare-all cat")
    if c and b:
        print(f"corral / bwrap time ratio: {c / b:.2f} (the relay's cost)")


main()
