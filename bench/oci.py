#!/usr/bin/python3
"""oci.py - `ctr run` of `true` with corral as containerd's runtime, beside
runc and crun, with hyperfine, in one run.

    oci.py CORRAL

A private containerd (own root, state and socket in a scratch directory,
the CRI plugin off) imports one busybox image built offline
(tests/image_fixtures.py); each runtime runs `ctr run --rm --runc-binary
RUNTIME IMAGE ID true` BENCH_OCI_RUNS times (default 30): the same shim,
snapshotter and image, only the runtime differs.  Root only; a runtime
that is not installed or fails is listed as such, never dropped.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("BENCH_OCI_RUNS", "30"))
corral = os.path.abspath(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "..", "tests", "image_fixtures.py")
IMAGE = "docker.io/corral-test/busybox:1"


def start_containerd(d):
    os.makedirs(os.path.join(d, "root"))
    os.makedirs(os.path.join(d, "state"))
    sock = os.path.join(d, "sock")
    with open(os.path.join(d, "config.toml"), "w") as f:
        f.write('version = 2\nroot = "%s/root"\nstate = "%s/state"\n'
                'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                '[grpc]\n  address = "%s"\n' % (d, d, sock))
    log = open(os.path.join(d, "log"), "w")
    p = subprocess.Popen(["containerd", "--config", os.path.join(d, "config.toml")],
                         stdout=log, stderr=log)
    for _ in range(200):          # bounded: 10 s
        if subprocess.run(["ctr", "--address", sock, "version"],
                          capture_output=True).returncode == 0:
            return p, sock
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    p.wait()
    raise RuntimeError("containerd did not start: see %s/log" % d)


def import_image(d, sock):
    layout = os.path.join(d, "img")
    subprocess.run(["/usr/bin/python3", fixtures, "busybox-oci", layout], check=True)
    path = os.path.join(layout, "index.json")
    index = json.load(open(path))
    for m in index["manifests"]:
        m["annotations"] = {"org.opencontainers.image.ref.name": IMAGE}
    json.dump(index, open(path, "w"))
    tar = os.path.join(d, "img.tar")
    subprocess.run(["tar", "-C", layout, "-cf", tar, "."], check=True)
    subprocess.run(["ctr", "--address", sock, "-n", "bench", "image", "import", tar],
                   check=True, capture_output=True)


def main():
    if os.geteuid() != 0:
        print("oci: skipped (containerd needs root)")
        return
    if not shutil.which("containerd") or not shutil.which("hyperfine"):
        print("oci: skipped (containerd or hyperfine not installed)")
        return
    d = tempfile.mkdtemp(prefix="corral-bench-oci.")
    os.chmod(d, 0o755)
    link = os.path.join(d, "corral-oci")
    os.symlink(corral, link)
    runtimes = [("corral", link), ("runc", shutil.which("runc")),
                ("crun", shutil.which("crun"))]
    p = None
    try:
        p, sock = start_containerd(d)
        import_image(d, sock)
        cmds, names = [], []
        for name, path in runtimes:
            if not path:
                print("oci: %s is not installed" % name)
                continue
            cmd = ("ctr --address %s -n bench run --rm --runc-binary %s "
                   "--runc-root %s/root-%s %s b-%s-$RANDOM$RANDOM true"
                   % (sock, path, d, name, IMAGE, name))
            r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
            if r.returncode:
                why = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
                print("oci: %s fails on this host: %s" % (name, why))
                continue
            cmds.append(cmd)
            names.append(name)
        if cmds:
            args = ["hyperfine", "--shell", "bash", "--style=basic",
                    "--runs", str(RUNS), "--export-json", os.path.join(d, "r.json")]
            for n, c in zip(names, cmds):
                args += ["-n", "ctr run true: " + n, c]
            subprocess.run(args, check=True)
    finally:
        if p:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # the snapshotter's mounts, if a run was cut short
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mnt = line.split()[4]
                if mnt.startswith(d + "/"):
                    subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
