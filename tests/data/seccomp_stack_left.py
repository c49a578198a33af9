# What a process may still stack of seccomp filter of its own, as the
# kernel itself counts it: "left N", the eBPF length of the largest filter
# of "ja"s and a return it adds (n + 4; -1 past one filter's 4100), and
# "stacked K", how many 4096-instruction filters it loads one on another
# (at most 8).  Run inside a sandbox by seccomp.sh and serve.sh.
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)	# PR_SET_NO_NEW_PRIVS
def prog(n):	# n - 1 "ja 0", ret ALLOW
    return b"".join([struct.pack("HBBI", 0x05, 0, 0, 0)] * (n - 1)) + \
        struct.pack("HBBI", 0x06, 0, 0, 0x7fff0000)
def load(n):	# seccomp(SECCOMP_SET_MODE_FILTER, 0, prog)
    buf = ctypes.create_string_buffer(prog(n))
    fprog = ctypes.create_string_buffer(struct.pack("@HP", n, ctypes.addressof(buf)))
    return libc.syscall(317, 1, 0, fprog) == 0
def loads_in_child(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if load(n) else 1)
    return os.waitpid(pid, 0)[1] == 0
lo, hi = 0, 4097
while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if loads_in_child(mid) else (lo, mid)
print("left", lo + 4 if lo and hi <= 4096 else -1)
stacked = 0
while stacked < 8 and load(4096):
    stacked += 1
print("stacked", stacked, os.strerror(ctypes.get_errno()) if stacked < 8 else "")
