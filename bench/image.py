#!/usr/bin/python3
"""image.py - cold start on an OCI image, side by side, with hyperfine.

    image.py CORRAL

One busybox image (tests/image_fixtures.py, offline) is imported into a
scratch store; the same layers, unpacked into one tree, are bwrap's root;
podman (Debian's, with crun) loads the same oci-archive.  Each peer runs
`/bin/sh -c true` BENCH_IMAGE_RUNS times (default 50) under hyperfine;
corral on the host's /usr is the baseline.  A peer that is not installed
or fails is listed as such, never dropped.  Root only for podman's row.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

RUNS = int(os.environ.get("BENCH_IMAGE_RUNS", "50"))
corral = os.path.abspath(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "..", "tests", "image_fixtures.py")
REF = "corral-test/busybox:1"


def unpack_layout(layout, dest):
    """The layout's layers, lowest first, into one tree (whiteouts applied)."""
    index = json.load(open(os.path.join(layout, "index.json")))
    blob = lambda d: os.path.join(layout, "blobs", *d.split(":"))
    manifest = json.load(open(blob(index["manifests"][0]["digest"])))
    for layer in manifest["layers"]:
        with tarfile.open(blob(layer["digest"])) as t:
            for m in t.getmembers():
                base = os.path.basename(m.name)
                if base.startswith(".wh."):
                    gone = os.path.join(dest, os.path.dirname(m.name), base[4:])
                    if base == ".wh..wh..opq":
                        d = os.path.join(dest, os.path.dirname(m.name))
                        for x in os.listdir(d):
                            p = os.path.join(d, x)
                            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
                    elif os.path.lexists(gone):
                        shutil.rmtree(gone) if os.path.isdir(gone) else os.unlink(gone)
                    continue
                # our own layout (filter= is Python >= 3.11.4; Debian 12 has 3.11.2)
                if hasattr(tarfile, "fully_trusted_filter"):
                    t.extract(m, dest, filter="fully_trusted")
                else:
                    t.extract(m, dest)


def hyperfine(rows, name, argv, setup_ok=True):
    if not setup_ok or not shutil.which(argv[0]):
        rows.append((name, "not installed"))
        return
    try:
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.CalledProcessError as e:
        rows.append((name, "failed: " + e.stderr.decode(errors="replace").strip()[-120:]))
        return
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(["hyperfine", "-N", "--warmup", "3", "--runs", str(RUNS),
                        "--export-json", out.name, "--style", "none",
                        subprocess.list2cmdline(argv)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(out.name))["results"][0]
    t = sorted(r["times"])
    rows.append((name, (r["median"] * 1000, t[int(len(t) * 0.95) - 1] * 1000,
                        r["mean"] * 1000, r["stddev"] * 1000)))


def main():
    if not shutil.which("hyperfine"):
        print("image cold start: hyperfine is not installed (scripts/install-deps.sh)")
        return
    tmp = tempfile.mkdtemp(prefix="corral-bench-image.")
    os.chmod(tmp, 0o755)
    try:
        layout, archive = os.path.join(tmp, "bb"), os.path.join(tmp, "bb.tar")
        subprocess.run([sys.executable, fixtures, "busybox-oci", layout], check=True)
        subprocess.run([sys.executable, fixtures, "busybox-archive", archive], check=True)
        state = os.path.join(tmp, "state")
        subprocess.run([corral, "image", "import", "--state-dir", state, layout],
                       check=True, stdout=subprocess.DEVNULL)
        root = os.path.join(tmp, "root")
        os.mkdir(root)
        unpack_layout(layout, root)
        for d in ("proc", "dev", "tmp"):	# bwrap's mount points, read-only root
            os.makedirs(os.path.join(root, d), exist_ok=True)
        subprocess.run(["chmod", "-R", "a+rX", root], check=True)
        rows = []
        hyperfine(rows, "corral run, host /usr",
                  [corral, "run", "--", "/bin/sh", "-c", "true"])
        hyperfine(rows, "corral run --image",
                  [corral, "run", "--state-dir", state, "--image", REF, "--", "true"])
        hyperfine(rows, "corral run --image --root-writable",
                  [corral, "run", "--state-dir", state, "--image", REF,
                   "--root-writable", "--", "true"])
        hyperfine(rows, "bwrap, same unpacked root",
                  ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", root, "/",
                   "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                   "/bin/sh", "-c", "true"])
        podman_ok = bool(shutil.which("podman")) and os.geteuid() == 0
        podman = ["podman", "--root", os.path.join(tmp, "podman"), "--runroot",
                  os.path.join(tmp, "podman-run"), "--cgroup-manager", "cgroupfs",
                  "--events-backend", "file", "--runtime", "crun"]
        image_id = None
        if podman_ok:
            out = subprocess.run(podman + ["load", "-q", "-i", archive],
                                 capture_output=True, text=True)
            image_id = out.stdout.strip().split()[-1] if out.returncode == 0 and out.stdout.strip() else None
            if not image_id:
                rows.append(("podman run --rm (crun)", "failed: podman load: " +
                             out.stderr.strip()[-120:]))
        if image_id or not podman_ok:
            hyperfine(rows, "podman run --rm (crun)",
                      podman + ["run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
                               "--cgroups", "disabled",
                               image_id or REF, "true"],
                      setup_ok=podman_ok)
        print(f"cold start of `sh -c true` on a busybox OCI image: hyperfine, {RUNS} runs "
              f"each (uid {os.geteuid()}, {os.cpu_count()} cpus)")
        print(f"{'sandbox':40} {'median ms':>10} {'p95 ms':>8} {'mean ms':>8} {'sd ms':>7}")
        for name, r in rows:
            if isinstance(r, str):
                print(f"{name:40} {r}")
            else:
                print(f"{name:40} {r[0]:10.2f} {r[1]:8.2f} {r[2]:8.2f} {r[3]:7.2f}")
    finally:
        if shutil.which("podman") and os.geteuid() == 0:
            subprocess.run(["podman", "--root", os.path.join(tmp, "podman"), "--runroot",
                            os.path.join(tmp, "podman-run"), "system", "reset", "-f"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["chmod", "-R", "u+rwX", tmp], stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


main()
