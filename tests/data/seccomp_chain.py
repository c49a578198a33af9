# The seccomp chain of process PID, the first loaded first (the kernel's
# index 0), as the kernel hands it to a tracer with CAP_SYS_ADMIN
# (PTRACE_SECCOMP_GET_FILTER, the classic program as loaded): "fill N"
# for corral's filling (a jump over N-2 "ja 0" to a return that allows,
# seccomp_stack.c), "other N" for any other filter of N instructions.  The process is stopped by
# PTRACE_SEIZE and PTRACE_INTERRUPT (no signal: it may be a namespace's
# init) and let go.  Run by seccomp.sh and serve.sh.
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
SEIZE, INTERRUPT, DETACH, GET_FILTER = 0x4206, 0x4207, 17, 0x420c
pid = int(sys.argv[1])


def die(what):
    e = ctypes.get_errno()
    print(f"error {what}: {os.strerror(e)}")
    sys.exit(1)


def kind(prog, n):
    ins = [struct.unpack_from("HBBI", prog, 8 * i) for i in range(n)]
    fill = n >= 2 and ins[0] == (0x05, 0, 0, n - 2) and ins[-1] == (0x06, 0, 0, 0x7fff0000) \
        and all(i == (0x05, 0, 0, 0) for i in ins[1:-1])
    return "fill" if fill else "other"


if libc.ptrace(SEIZE, pid, None, None) < 0:
    die(f"seizing {pid}")
if libc.ptrace(INTERRUPT, pid, None, None) < 0:
    die(f"stopping {pid}")
os.waitpid(pid, 0x40000000)	# __WALL
out = []
for index in range(64):
    n = libc.ptrace(GET_FILTER, pid, index, None)
    if n < 0:
        if ctypes.get_errno() == 2:	# ENOENT: past the chain's end
            break
        die(f"reading filter {index}")
    prog = ctypes.create_string_buffer(8 * n)
    if libc.ptrace(GET_FILTER, pid, index, prog) != n:
        die(f"reading filter {index}")
    out.append(f"{kind(prog.raw, n)} {n}")
libc.ptrace(DETACH, pid, None, None)
print("\n".join(out))
