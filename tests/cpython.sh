#!/bin/bash
# cpython.sh CORRAL [MODULE...] - CPython's own test suite, outside and inside
# `corral run --workspace`, compared test case by test case (issue 12).
#
# A sandbox that "behaves like a machine" must not change what a real
# program's test suite sees.  Debian's libpython3.11-testsuite is the test
# suite of /usr/bin/python3; its modules for files, ids, processes, signals,
# maps, fds and terminals run once as the calling user on the host and once
# inside a sandbox with a workspace (cwd) and the sandbox's own /tmp, at the
# same time (their wall time is that of the slowest module, test_subprocess
# or test_signal, not the sum).  Every test case whose outcome (pass, fail,
# skip) differs is reported with both reasons; a difference fails unless it
# is in EXPECTED below, where each entry says why a sandbox must differ.
#
# Ends with "N passed, N failed": N passed counts the test cases with the
# same outcome on both sides (and the expected differences), N failed the
# others, plus one for a side that produced no result at all.
#
# make check runs it as root (tests/check.sh, root lane).  As an unprivileged
# user it runs too, but differs where corral's documented fallbacks do: with
# no /etc/subuid entry only the user's own id is mapped, so chown and
# setreuid/setregid to another id fail with EINVAL, not EPERM
# (test_os.ChownFileTests.test_chown_without_permission, test_subprocess's
# test_user and test_group); with no cgroup delegated the memory limit is an
# address-space rlimit, so test_mmap's LargeMmapTests (2 and 4 GiB sparse
# file maps) fail with ENOMEM.  Those are not in EXPECTED: they are the
# fallbacks issue 12 asks to improve, and this test shows them.
set -u

CORRAL=$(realpath "${1:?usage: cpython.sh CORRAL [MODULE...]}")
shift
PY=/usr/bin/python3
# the two slow ones (sleeps and timeouts, ~1 min each) first, so that they
# start at once and the others fill the remaining workers
MODULES="${*:-test_subprocess test_signal test_os test_shutil test_tempfile test_pathlib test_mmap test_select test_fcntl test_json}"
# regrtest's -j0 is one worker a CPU plus two: the modules run in parallel
JOBS=${CPYTHON_JOBS:-0}
# a bound on each side, far above the ~1-2 min the modules take on 2 loaded cores
LIMIT=${CPYTHON_TIMEOUT:-600}

if [ ! -f /usr/lib/python3.11/test/test_os.py ]; then
	echo "not ok - libpython3.11-testsuite is not installed (scripts/install-deps.sh)"
	echo "0 passed, 1 failed"
	exit 1
fi

W=$(mktemp -d /tmp/corral-cpython.XXXXXX)
chmod 755 "$W"
OUT_PID=""
IN_PID=""
cleanup() {
	[ -n "$OUT_PID" ] && kill -- -"$OUT_PID" 2>/dev/null
	[ -n "$IN_PID" ] && kill "$IN_PID" 2>/dev/null
	wait 2>/dev/null
	chmod -R u+rwX "$W" 2>/dev/null
	# CPYTHON_KEEP=1 keeps both sides' XML and logs to look into
	if [ -n "${CPYTHON_KEEP:-}" ]; then echo "# kept in $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "$W/out" "$W/out/tmp" "$W/ws"

# Outside: the environment corral gives a sandbox (PATH HOME LANG TERM TMPDIR
# USER, nothing else), with a scratch cwd and TMPDIR of its own.  In its own
# process group, so that cleanup stops regrtest's workers too.
set -m
(cd "$W/out" && exec timeout "$LIMIT" env -i PATH=/usr/bin:/bin HOME="$W/out" \
	LANG=C.UTF-8 TERM=dumb TMPDIR="$W/out/tmp" USER="$(id -un)" \
	"$PY" -m test -j"$JOBS" --junit-xml "$W/out.xml" $MODULES) > "$W/out.log" 2>&1 &
OUT_PID=$!
set +m

# Inside: the workspace is copy-on-write, so the XML comes back on stdout
# and regrtest's own report on stderr.  The default policy's limits apply.
(cd "$W/ws" && exec "$CORRAL" run --workspace "$W/ws" --timeout "${LIMIT}s" -- /bin/sh -c \
	"$PY -m test -j$JOBS --junit-xml /tmp/cpython.xml $MODULES >&2; \
	 echo \"regrtest exit \$?\" >&2; cat /tmp/cpython.xml") > "$W/in.xml" 2> "$W/in.log" &
IN_PID=$!

t0=$(date +%s)
wait "$OUT_PID"; out_rc=$?; OUT_PID=""
wait "$IN_PID"; in_rc=$?; IN_PID=""
echo "# outside (regrtest exit $out_rc) and inside (corral exit $in_rc): $(( $(date +%s) - t0 )) s"

"$PY" - "$W/out.xml" "$W/in.xml" "$W/out.log" "$W/in.log" "$in_rc" <<'EOF'
import re, sys
import xml.etree.ElementTree as ET

# Differences a sandbox must have, each with why.  Outside runs as the
# calling user, root in make check's root lane; inside, the agent is uid 1000
# with no capabilities in a user namespace (DESIGN.md), as on a host where an
# ordinary user runs the tests.  Tests that branch on root or on a
# capability skip on one side and run on the other; each entry gives the
# test case and a pattern the skip reason on the skipping side must match,
# so that the same test skipping for another reason is still reported.
ROOT = "outside runs as root, the agent inside is uid 1000 without capabilities"
EXPECTED = {
    # chown to another user: needs CAP_CHOWN; with a full id range inside,
    # the unprivileged variant runs inside (EPERM as on a host) instead
    "test.test_os.ChownFileTests.test_chown_with_root":
        (r"needs root privilege", ROOT),
    "test.test_os.ChownFileTests.test_chown_without_permission":
        (r"needs non-root account", ROOT),
    # root's CAP_DAC_OVERRIDE ignores the permission bits these tests set
    "test.test_shutil.TestRmTree.test_on_error":
        (r"CAP_DAC_OVERRIDE", ROOT),
    "test.test_shutil.TestWhich.test_non_matching_mode":
        (r"CAP_DAC_OVERRIDE", ROOT),
    "test.test_shutil.TestWhichBytes.test_non_matching_mode":
        (r"CAP_DAC_OVERRIDE", ROOT),
    "test.test_tempfile.TestMkdtemp.test_read_only_directory":
        (r"can't set the directory read-only", ROOT),
    "test.test_tempfile.TestMkstempInner.test_read_only_directory":
        (r"can't set the directory read-only", ROOT),
    # RLIMIT_NPROC does not bind a process with CAP_SYS_RESOURCE/CAP_SYS_ADMIN
    "test.test_subprocess.POSIXProcessTestCase.test_preexec_fork_failure":
        (r"probably superuser", ROOT),
    # os_helper.can_xattr() also sets a trusted.* attribute, which needs
    # CAP_SYS_ADMIN in the initial user namespace: no sandbox (and no
    # ordinary user) has it; user.* attributes work inside (tests/cpython.sh
    # does not list user xattr tests, they must pass)
    "test.test_shutil.TestCopy.test_copy2_xattr":
        (r"extended attribute", "trusted.* xattrs need CAP_SYS_ADMIN in the initial user namespace"),
    "test.test_shutil.TestCopy.test_copyxattr":
        (r"extended attribute", "trusted.* xattrs need CAP_SYS_ADMIN in the initial user namespace"),
    "test.test_shutil.TestCopy.test_copyxattr_symlinks":
        (r"extended attribute", "trusted.* xattrs need CAP_SYS_ADMIN in the initial user namespace"),
    # it opens fds up to the limit, and skips past 1026 tries: a command's
    # hard RLIMIT_NOFILE is its share of the host's file table (child.c,
    # 1024 here), so it runs inside; outside, the caller's is higher
    "test.test_subprocess.ProcessTestCase.test_no_leaking":
        (r"failed to reach the file descriptor limit", "a command's open files are its share of the host's file table"),
    "test.test_subprocess.ProcessTestCaseNoPoll.test_no_leaking":
        (r"failed to reach the file descriptor limit", "a command's open files are its share of the host's file table"),
}

def load(path):
    cases = {}
    root = ET.parse(path).getroot()
    for suite in root.iter("testsuite"):
        named = [tc.get("name") for tc in suite.iter("testcase") if tc.get("name")]
        module = named[0].rsplit(".", 2)[0] if named else "a module"
        for n, tc in enumerate(suite.iter("testcase")):
            st, why = "pass", ""
            for k in tc:
                if k.tag in ("failure", "error"):
                    st, why = "fail", (k.get("message") or k.text or "").strip()
                elif k.tag == "skipped" and st != "fail":
                    st, why = "skip", (k.get("message") or k.text or "").strip()
            name = tc.get("name")
            if not name:
                # 3.11's --junit-xml writes a test whose subtests failed as
                # an empty <testcase />: its name is lost, regrtest's log
                # (printed below) has the module's errors
                name = f"{module} (test #{n}, name lost: a subtest failed)"
                st, why = "fail", "subtest failed"
            cases[name] = (st, why)
    return cases

def tail(path, n=25):
    with open(path, errors="replace") as f:
        return "".join("    " + l for l in f.readlines()[-n:])

sides = {}
bad = 0
for label, xml, log in (("outside", sys.argv[1], sys.argv[3]), ("inside", sys.argv[2], sys.argv[4])):
    try:
        sides[label] = load(xml)
    except (OSError, ET.ParseError) as e:
        print(f"not ok - {label}: no test results ({e}); its log ends:\n{tail(log)}")
        bad += 1
# the shell inside ends with cat's status: anything else is corral's own
# (a sanitizer report, a limit, a supervisor error)
if sys.argv[5] != "0":
    print(f"not ok - corral run exited {sys.argv[5]}; its stderr ends:\n{tail(sys.argv[4])}")
    bad += 1
if bad:
    print(f"0 passed, {bad} failed")
    sys.exit(1)

out, ins = sides["outside"], sides["inside"]
same = differ = expected = 0
for name in sorted(set(out) | set(ins)):
    o = out.get(name, ("absent", "not run on this side"))
    i = ins.get(name, ("absent", "not run on this side"))
    if o[0] == i[0]:
        same += 1
        if o[0] == "fail":
            print(f"# {name} fails on both sides: {o[1][:160]!r}")
        continue
    exp = EXPECTED.get(name)
    skipped = o if o[0] == "skip" else i if i[0] == "skip" else None
    if exp and skipped and re.search(exp[0], skipped[1]) and "fail" not in (o[0], i[0]):
        expected += 1
        print(f"ok - {name}: outside {o[0]}, inside {i[0]} # expected: {exp[1]}")
        continue
    differ += 1
    print(f"not ok - {name}: outside {o[0]} {o[1][:300]!r}, inside {i[0]} {i[1][:300]!r}")

if differ:
    for label, log in (("outside", sys.argv[3]), ("inside", sys.argv[4])):
        print(f"# regrtest {label}:\n{tail(log)}")
print(f"# {len(out)} test cases outside, {len(ins)} inside: {same} the same, "
      f"{expected} expected differences, {differ} unexplained")
print(f"{same + expected} passed, {differ} failed")
sys.exit(1 if differ else 0)
EOF
