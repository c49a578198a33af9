#!/usr/bin/python3
"""image_fixtures.py - OCI images for tests/image.sh, written offline.

    image_fixtures.py KIND OUT

KIND is one of the names in KINDS below.  Layers are tars made with
tarfile (hostile ones crafted entry by entry), digests with hashlib; the
image layout follows the OCI image spec (oci-layout, index.json, blobs/).
"busybox*" kinds need /bin/busybox (busybox-static).
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

BUSYBOX = "/bin/busybox"
TIME = 1700000000


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Layer:
    """A tar built entry by entry."""

    def __init__(self, fmt=tarfile.PAX_FORMAT):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=fmt)

    def add(self, name, type=tarfile.REGTYPE, data=b"", mode=0o644, **kw):
        ti = tarfile.TarInfo(name)
        ti.type = type
        ti.mode = mode
        ti.mtime = TIME
        ti.size = len(data) if type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
        for k, v in kw.items():
            setattr(ti, k, v)
        self.tar.addfile(ti, io.BytesIO(data) if ti.size else None)
        return self

    def dir(self, name, mode=0o755):
        return self.add(name, tarfile.DIRTYPE, mode=mode)

    def symlink(self, name, target):
        return self.add(name, tarfile.SYMTYPE, mode=0o777, linkname=target)

    def hardlink(self, name, target):
        return self.add(name, tarfile.LNKTYPE, linkname=target)

    def raw(self, header_and_data):
        """Bytes written as they are (a header tarfile will not make)."""
        self.tar.fileobj.write(header_and_data)
        self.tar.offset += len(header_and_data)
        return self

    def pax_record(self, keyword, value):
        """A pax extended header of one record, KEYWORD=VALUE (bytes), as
        tarfile writes {keyword: value} before its entry's header (the
        entry then added without pax_headers).  tarfile's own copies and
        encodes a 60 MB value a dozen times: 3 s of CPU, where the import
        it is for takes a tenth of that."""
        n = len(keyword) + len(value) + 3       # "N keyword=value\n"
        size = 0
        while size != n + len(str(size)):
            size = n + len(str(size))
        info = {"name": "././@PaxHeader", "type": tarfile.XHDTYPE, "size": size,
                "magic": tarfile.POSIX_MAGIC}
        self.raw(tarfile.TarInfo._create_header(info, tarfile.USTAR_FORMAT, "ascii", "replace")
                 + b"%d %s=" % (size, keyword))
        self.raw(value)
        return self.raw(b"\n" + tarfile.NUL * (-size % tarfile.BLOCKSIZE))

    def bytes(self):
        self.tar.close()
        return self.buf.getvalue()


def busybox_layer():
    lay = Layer()
    for d in ("bin", "etc", "home", "home/user", "tmp", "srv", "srv/app"):
        lay.dir(d)
    with open(BUSYBOX, "rb") as f:
        lay.add("bin/busybox", data=f.read(), mode=0o755)
    for tool in ("sh", "ls", "cat", "id", "pwd", "env", "echo", "true", "stat"):
        lay.symlink("bin/" + tool, "busybox")
    lay.add("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"
            b"user:x:1000:1000:user:/home/user:/bin/sh\n")
    lay.add("etc/group", data=b"root:x:0:\nuser:x:1000:\n")
    lay.add("etc/os-release", data=b"ID=corral-test\n")
    lay.add("srv/app/hello.txt", data=b"hello from the image\n", uid=1000, gid=1000)
    lay.add("srv/old.txt", data=b"to be whited out\n")
    lay.dir("srv/cache")
    lay.add("srv/cache/stale", data=b"hidden by an opaque dir\n")
    return lay.bytes()


def second_layer():
    lay = Layer()
    lay.dir("srv")
    lay.add("srv/.wh.old.txt")
    lay.dir("srv/cache")
    lay.add("srv/cache/.wh..wh..opq")
    lay.add("srv/cache/fresh", data=b"new\n")
    lay.add("etc/motd", data=b"layer two\n")
    return lay.bytes()


def user_layer():
    """An image's own accounts, hosts and resolver, to merge below corral's."""
    lay = Layer()
    lay.dir("etc").dir("opt").dir("opt/work", mode=0o755)
    lay.add("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"
            b"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
            b"user:x:1000:1000:user:/home/user:/bin/sh\n"
            b"app:x:1001:1001:The App:/home/app:/bin/sh\n"
            b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    lay.add("etc/group", data=b"root:x:0:\ndaemon:x:1:\napp:x:1001:\nstaff:x:50:app\n")
    lay.add("etc/hosts", data=b"127.0.0.1 localhost evil-loopback\n10.1.2.3 db.internal db\n")
    lay.add("etc/resolv.conf", data=b"nameserver 8.8.8.8\nsearch corp.example\n")
    lay.add("opt/work/job.txt", data=b"the job\n")
    return lay.bytes()


def config_for(diff_ids, **cfg):
    c = {
        "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine,
                                                                    os.uname().machine),
        "os": "linux",
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    return json.dumps(c, sort_keys=True).encode()


BUSYBOX_CONFIG = dict(Env=["PATH=/bin", "GREETING=hello"], WorkingDir="/srv/app",
                      User="1000:1000", Entrypoint=["/bin/sh", "-c"],
                      Cmd=["cat hello.txt"])


def write_layout(out, layers, names=("corral-test/busybox:1",), compress="gzip",
                 config=None, tamper=None, bad_diff=False, short_diff=False):
    """An OCI image layout at out.  tamper: index of a layer blob changed
    after its digest was taken.  bad_diff: the config names wrong diff-ids.
    short_diff: the config names one diff-id fewer than there are layers."""
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)

    def blob(data):
        d = sha(data)
        with open(os.path.join(out, "blobs", "sha256", d[7:]), "wb") as f:
            f.write(data)
        return d, len(data)

    descs, diff_ids = [], []
    for i, tar in enumerate(layers):
        diff_ids.append(sha(tar) if not bad_diff else sha(tar + b"x"))
        if compress == "gzip":
            data, mt = gzip.compress(tar, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"
        elif compress == "zstd":
            data = subprocess.run(["zstd", "-q", "-c"], input=tar, check=True,
                                  stdout=subprocess.PIPE).stdout
            mt = "application/vnd.oci.image.layer.v1.tar+zstd"
        else:
            data, mt = tar, "application/vnd.oci.image.layer.v1.tar"
        d, n = blob(data)
        if tamper == i:
            path = os.path.join(out, "blobs", "sha256", d[7:])
            with open(path, "r+b") as f:
                f.seek(n // 2)
                b = f.read(1)
                f.seek(n // 2)
                f.write(bytes([b[0] ^ 1]))
        descs.append({"mediaType": mt, "digest": d, "size": n})
    cd, cn = blob(config_for(diff_ids[:-1] if short_diff else diff_ids, **(config or {})))
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": cd, "size": cn},
                "layers": descs}
    md, mn = blob(json.dumps(manifest).encode())
    index = {"schemaVersion": 2, "manifests": []}
    for name in names or [None]:
        d = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": mn}
        if name:
            d["annotations"] = {"org.opencontainers.image.ref.name": name}
        index["manifests"].append(d)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    return md


def tar_dir(src, out):
    """src's tree as a tar, its entries at TIME (the archive the same bytes
    whenever it is made: image.sh makes it once a run)."""
    def at_time(ti):
        ti.mtime = TIME
        return ti
    with tarfile.open(out, "w") as t:
        for name in sorted(os.listdir(src)):
            t.add(os.path.join(src, name), arcname=name, filter=at_time)


def docker_save(out, layers, tags, config):
    """docker save's format: manifest.json, <id>/layer.tar, <hex>.json."""
    diff_ids = [sha(t) for t in layers]
    cfg = config_for(diff_ids, **config)
    with tarfile.open(out, "w") as t:
        def put(name, data):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime = len(data), TIME
            t.addfile(ti, io.BytesIO(data))
        paths = []
        for i, tar in enumerate(layers):
            p = "%064x/layer.tar" % (i + 1)
            put(p, tar)
            paths.append(p)
        # podman and old docker link a layer that two images share
        ti = tarfile.TarInfo("%064x/layer.tar" % 99)
        ti.type, ti.linkname = tarfile.SYMTYPE, "../%064x/layer.tar" % 1
        t.addfile(ti)
        put(sha(cfg)[7:] + ".json", cfg)
        put("manifest.json", json.dumps([{"Config": sha(cfg)[7:] + ".json",
                                          "RepoTags": tags,
                                          "Layers": ["%064x/layer.tar" % 99] + paths[1:]}]).encode())
        put("repositories", b"{}")


def pax_sparse(name, realsize, chunk):
    """A PAX 1.0 sparse file: realsize bytes declared, one chunk stored
    at its end (tarfile reads these but cannot write them)."""
    sparse_map = b"1\n%d\n%d\n" % (realsize - len(chunk), len(chunk))
    sparse_map += b"\0" * (-len(sparse_map) % 512)
    data = sparse_map + chunk
    ti = tarfile.TarInfo("GNUSparseFile.0/" + name)
    ti.size, ti.mtime, ti.mode = len(data), TIME, 0o644
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": name, "GNU.sparse.realsize": str(realsize)}
    return ti, data


def hostile(kind):
    lay = Layer()
    if kind == "absolute":
        lay.add("/etc/corral-evil", data=b"x")
    elif kind == "dotdot":
        lay.dir("a").add("a/../../corral-evil", data=b"x")
    elif kind == "symlink-escape":
        target = os.environ["CORRAL_TARGET"]
        lay.symlink("esc", target).add("esc/pwned", data=b"x")
    elif kind == "symlink-kept":
        lay.symlink("up", "../../../../../etc").symlink("abs", "/etc/passwd")
    elif kind == "hardlink-escape":
        lay.hardlink("hl", "../../../../etc/passwd")
    elif kind == "hardlink-through-symlink":
        lay.symlink("s", "/etc").hardlink("h", "s/passwd")
    elif kind == "devices":
        lay.dir("dev")
        lay.add("dev/null", tarfile.CHRTYPE, mode=0o666, devmajor=1, devminor=3)
        lay.add("dev/sda", tarfile.BLKTYPE, mode=0o660, devmajor=8, devminor=0)
        lay.add("dev/whiteout-lookalike", tarfile.CHRTYPE, devmajor=0, devminor=0)
        lay.add("ok", data=b"kept\n")
    elif kind == "setuid":
        lay.add("suid", data=b"#!/bin/sh\n", mode=0o4755)
        lay.add("sgid", data=b"#!/bin/sh\n", mode=0o2755)
        lay.dir("shared", mode=0o2775)
        ti = tarfile.TarInfo("capped")
        ti.size, ti.mode, ti.mtime = 3, 0o755, TIME
        ti.pax_headers = {"SCHILY.xattr.security.capability":
                          "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}
        lay.tar.addfile(ti, io.BytesIO(b"abc"))
    elif kind == "sparse":
        ti, data = pax_sparse("huge", 1 << 40, b"end" + b"\0" * 509)
        lay.tar.addfile(ti, io.BytesIO(data))
    elif kind == "control":
        lay.add("bad\nname", data=b"x")
    elif kind == "c1-byte":
        # a lone 0x9b (CSI to a terminal that takes 8-bit controls) and
        # bytes that are no UTF-8, in a name refused and quoted; GNU
        # format: its name is the bytes, as libarchive reads them
        lay = Layer(tarfile.GNU_FORMAT)
        lay.dir("a").add("a/\udc9b2J\udce2\udc80/caf\u00e9/../../../corral-evil", data=b"x")
    elif kind == "pax-header":
        # one pax record of 60 MB before an empty file: 60 KB gzip'd
        lay.pax_record(b"comment", b"a" * (60 << 20))
        ti = tarfile.TarInfo("x")
        ti.mtime = TIME
        lay.tar.addfile(ti, io.BytesIO(b""))
    elif kind == "many":
        for i in range(100):
            lay.add("f%03d" % i)
    elif kind == "modes":
        lay.dir("ro", mode=0o555).add("ro/inside", data=b"in a 0555 dir\n", mode=0o444)
        lay.add("data", data=b"linked\n").hardlink("data-link", "data")
        lay.add("fifo", tarfile.FIFOTYPE, mode=0o600)
    elif kind == "replace":
        # later entries win: a file over a dir, a dir over a file
        lay.dir("x").add("x/in", data=b"1").add("x", data=b"now a file\n")
        lay.add("y", data=b"1").dir("y").add("y/in", data=b"2\n")
    else:
        raise SystemExit("unknown hostile kind " + kind)
    return lay.bytes()


def bomb():
    """64 MiB of zeros: about 64 KiB gzip'd, 1000:1."""
    lay = Layer()
    ti = tarfile.TarInfo("zeros")
    ti.size, ti.mtime = 64 << 20, TIME

    class Zeros(io.RawIOBase):
        left = ti.size

        def readinto(self, b):
            n = min(len(b), self.left)
            b[:n] = b"\0" * n
            self.left -= n
            return n
    lay.tar.addfile(ti, Zeros())
    return lay.bytes()


def put_manifest(out, manifest):
    """manifest as a blob of the layout at out, its index's first image."""
    data = json.dumps(manifest).encode()
    with open(os.path.join(out, "blobs", "sha256", sha(data)[7:]), "wb") as f:
        f.write(data)
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    index["manifests"][0].update(digest=sha(data), size=len(data))
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "busybox-oci":
        write_layout(out, [busybox_layer(), second_layer()], config=BUSYBOX_CONFIG)
    elif kind == "short-diff-ids":
        write_layout(out, [busybox_layer(), second_layer()], config=BUSYBOX_CONFIG,
                     short_diff=True)
    elif kind == "busybox-zstd":
        write_layout(out, [busybox_layer()], names=["corral-test/zstd:1"], compress="zstd",
                     config=BUSYBOX_CONFIG)
    elif kind == "busybox-archive":
        tmp = out + ".d"
        write_layout(tmp, [busybox_layer(), second_layer()], names=["latest"],
                     config=BUSYBOX_CONFIG)
        tar_dir(tmp, out)
        shutil.rmtree(tmp)
    elif kind == "busybox-docker":
        docker_save(out, [busybox_layer(), second_layer()],
                    ["busybox-saved:1", "docker.io/library/busybox-saved:2"], BUSYBOX_CONFIG)
    elif kind == "busybox-user":
        write_layout(out, [busybox_layer(), user_layer()], names=["corral-test/user:1"],
                     config=dict(BUSYBOX_CONFIG, User="app", WorkingDir="/opt/work"))
    elif kind == "busybox-rootuser":
        write_layout(out, [busybox_layer(), user_layer()], names=["corral-test/rootuser:1"],
                     config=dict(BUSYBOX_CONFIG, User="0:0"))
    elif kind == "rootfs":
        # a whole tree (a debootstrap'd Debian: tests/image_debian.sh) as one layer
        lay = Layer()
        lay.tar.add(os.environ["CORRAL_ROOTFS"], arcname=".")
        # CORRAL_LAYER_COMPRESS=none: tests/apt.sh's tree, not worth gzip's time
        write_layout(out, [lay.bytes()], names=[os.environ.get("CORRAL_IMAGE_NAME",
                                                               "corral-test/debian:12")],
                     compress=os.environ.get("CORRAL_LAYER_COMPRESS", "gzip"),
                     config=dict(Env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                      "/usr/bin:/sbin:/bin"], Cmd=["/bin/bash"]))
    elif kind == "links-out":
        # links planted where corral writes or reads in the image's root,
        # at a host directory as init sees it (the host's root at /oldroot)
        host = "/oldroot" + os.environ["CORRAL_TARGET"]
        lay = Layer().dir("etc").dir("etc/ssl").dir("etc/ssl/certs")
        lay.symlink("etc/ssl/certs/ca-certificates.crt", host + "/secret")
        lay.symlink("etc/corral", host)
        write_layout(out, [busybox_layer(), lay.bytes()], names=["corral-test/links-out:1"],
                     config=BUSYBOX_CONFIG)
    elif kind == "dirs-out":
        # the user's home and a bind's parent below a link to the host
        host = "/oldroot" + os.environ["CORRAL_TARGET"]
        lay = Layer().dir("etc")
        lay.add("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"
                b"app:x:1001:1001:app:/opt/app/home:/bin/sh\n")
        lay.symlink("opt", host)
        write_layout(out, [busybox_layer(), lay.bytes()], names=["corral-test/dirs-out:1"],
                     config=dict(BUSYBOX_CONFIG, User="app"))
    elif kind == "sparse-archive":
        # docker save whose layer file is a sparse 64 MiB in a 10 KiB tar
        lay = busybox_layer()
        cfg = config_for([sha(lay)], **BUSYBOX_CONFIG)
        with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
            ti, data = pax_sparse("big/layer.tar", 64 << 20, b"end" + b"\0" * 509)
            t.addfile(ti, io.BytesIO(data))
            for name, data in ((sha(cfg)[7:] + ".json", cfg),
                               ("manifest.json", json.dumps([{
                                   "Config": sha(cfg)[7:] + ".json", "RepoTags": ["sparse:1"],
                                   "Layers": ["big/layer.tar"]}]).encode())):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = len(data), TIME
                t.addfile(ti, io.BytesIO(data))
    elif kind == "link-body-archive":
        # docker save's tar, gzip'd, with a hard link whose body (pax lets
        # one carry data) declares 1 GiB: inflated to be skipped, never stored
        lay = second_layer()
        cfg = config_for([sha(lay)], **BUSYBOX_CONFIG)
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
            for name, data in (("layer.tar", lay), (sha(cfg)[7:] + ".json", cfg),
                               ("manifest.json", json.dumps([{
                                   "Config": sha(cfg)[7:] + ".json", "RepoTags": ["linkbody:1"],
                                   "Layers": ["layer.tar"]}]).encode())):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = len(data), TIME
                t.addfile(ti, io.BytesIO(data))
            ti = tarfile.TarInfo("link")
            ti.type, ti.linkname, ti.mtime = tarfile.LNKTYPE, "layer.tar", TIME
            ti.pax_headers = {"comment": "a pax header: the link's body is there"}
            hdr = bytearray(ti.tobuf(format=tarfile.PAX_FORMAT))
            h = len(hdr) - 512
            hdr[h + 124:h + 136] = b"%011o\0" % (1 << 30)
            hdr[h + 148:h + 156] = b" " * 8
            hdr[h + 148:h + 156] = b"%06o\0 " % sum(hdr[h:h + 512])
            t.fileobj.write(bytes(hdr))
        with gzip.open(out, "wb") as f:
            f.write(raw.getvalue()[:raw.tell()] + bytes(1024))
    elif kind == "sparse-blob":
        # a layout whose layer blob is a sparse 64 MiB file that its
        # manifest gives no size for
        md = write_layout(out, [busybox_layer()], names=["corral-test/sparse-blob:1"])
        blobs = os.path.join(out, "blobs", "sha256")
        with open(os.path.join(blobs, md[7:])) as f:
            manifest = json.load(f)
        os.unlink(os.path.join(blobs, md[7:]))
        layer = manifest["layers"][0]
        del layer["size"]
        os.truncate(os.path.join(blobs, layer["digest"][7:]), 64 << 20)
        put_manifest(out, manifest)
    elif kind == "held":
        # one plain tar: a file whose content the unpacker must hold (the
        # scan's positive control), then "hold-here", where a test stops it
        lay = Layer().add("positive.txt", data=os.environ["CORRAL_POSITIVE"].encode())
        lay.add("hold-here", data=b"held\n")
        write_layout(out, [lay.bytes()], names=["corral-test/held:1"], compress="none")
    elif kind == "held-docker":
        # docker save's tar: its first file a layer that holds what the
        # archive's reader must hold (the scan's positive control); its
        # last, "repositories" (e6 in the reader's tmp/), is where a test
        # stops the reader
        first = Layer().add("positive.txt", data=os.environ["CORRAL_POSITIVE"].encode())
        second = Layer().add("second", data=b"2\n")
        docker_save(out, [first.bytes(), second.bytes()], ["corral-test/held-docker:1"], {})
    elif kind == "fifo-etc":
        # FIFOs where corral reads the image's files: its passwd (for the
        # User, in the supervisor; for /etc, in init) and its CA bundle
        lay = Layer().dir("etc").dir("etc/ssl").dir("etc/ssl/certs")
        lay.add("etc/passwd", tarfile.FIFOTYPE, mode=0o644)
        lay.add("etc/ssl/certs/ca-certificates.crt", tarfile.FIFOTYPE, mode=0o644)
        write_layout(out, [busybox_layer(), lay.bytes()], names=["corral-test/fifo-etc:1"],
                     config=dict(BUSYBOX_CONFIG, User="app"))
    elif kind == "escape-env":
        # an Env entry that is a terminal's escape sequences, and refused
        write_layout(out, [busybox_layer()], names=["corral-test/escape:1"],
                     config=dict(Env=["\x1b]0;owned\x07\x1b[2Jhidden"]))
    elif kind == "escape-entrypoint":
        # an Entrypoint that is not there, named by a terminal's escape sequences
        write_layout(out, [busybox_layer()], names=["corral-test/escape-entry:1"],
                     config=dict(BUSYBOX_CONFIG, Entrypoint=["/no\x1b]0;owned\x07\x1b[2Jhidden"],
                                 Cmd=[]))
    elif kind in ("repeated-layer", "too-many-layers"):
        # one layer blob listed 150 times (each a copy of it, fsync'd, under
        # the store's lock), or 201 layers, more than a sandbox can stack
        n = 150 if kind == "repeated-layer" else 201
        md = write_layout(out, [second_layer()], names=["corral-test/%s:1" % kind])
        blobs = os.path.join(out, "blobs", "sha256")
        with open(os.path.join(blobs, md[7:])) as f:
            manifest = json.load(f)
        os.unlink(os.path.join(blobs, md[7:]))
        with open(os.path.join(blobs, manifest["config"]["digest"][7:]), "rb") as f:
            config = json.load(f)
        os.unlink(os.path.join(blobs, manifest["config"]["digest"][7:]))
        config["rootfs"]["diff_ids"] *= n
        data = json.dumps(config).encode()
        with open(os.path.join(blobs, sha(data)[7:]), "wb") as f:
            f.write(data)
        manifest["config"].update(digest=sha(data), size=len(data))
        manifest["layers"] *= n
        put_manifest(out, manifest)
    elif kind == "escape-c1-env":
        # the same with a C1 control, CSI as U+009B (UTF-8: c2 9b)
        write_layout(out, [busybox_layer()], names=["corral-test/escape-c1:1"],
                     config=dict(Env=["\u009b2Jhidden"]))
    elif kind == "newline-env":
        # an Env entry whose newline would begin a line of the image's own
        # on the operator's terminal, after "corral: " as ours do
        write_layout(out, [busybox_layer()], names=["corral-test/newline:1"],
                     config=dict(Env=["x\ncorral: imported sha256:feed\nnamed ok"]))
    elif kind == "separator-env":
        # characters a terminal draws as nothing, and the separators a
        # log's reader (an editor, a browser) breaks the line at: U+2028,
        # U+2029, U+200B, U+2060, U+FEFF and a tag (U+E0041, "A" hidden:
        # the invisible text an agent's model reads and a person does not)
        write_layout(out, [busybox_layer()], names=["corral-test/separator:1"],
                     config=dict(Env=["x\u2028corral: ok\u2029y\u200bz\u2060\ufeff\U000E0041"]))
    elif kind == "c1-config":
        # accepted: C1 controls (CSI as U+009B) and a right-to-left
        # override in what `image inspect` shows of the config
        write_layout(out, [busybox_layer()], names=["corral-test/c1-config:1"],
                     config=dict(BUSYBOX_CONFIG, Env=["A=\u009b2Jhidden"],
                                 WorkingDir="/tmp/\u202egnp.sh"))
    elif kind == "escape-name":
        # a name (index.json's ref.name) that is a terminal's escape
        # sequences: not used, and quoted in a note
        write_layout(out, [busybox_layer()], names=["\x1b]0;owned\x07\x1b[2Jhidden"],
                     config=BUSYBOX_CONFIG)
    elif kind == "tampered":
        write_layout(out, [busybox_layer()], names=["corral-test/tampered:1"], tamper=0)
    elif kind == "bad-diff-id":
        write_layout(out, [second_layer()], names=["corral-test/baddiff:1"], bad_diff=True)
    elif kind == "bomb":
        write_layout(out, [bomb()], names=["corral-test/bomb:1"])
    elif kind.startswith("hostile-"):
        write_layout(out, [hostile(kind[8:])], names=["corral-test/" + kind + ":1"])
    else:
        raise SystemExit("unknown kind " + kind)


if __name__ == "__main__":
    main()
