"""freeport - TCP ports on 127.0.0.1 for a daemon the test starts later.

The old way, bind port 0 and close, hands out a port from the ephemeral
range; by the time the daemon binds it, a client's connect() in another
lane may hold it as its own source port, and the daemon fails with
EADDRINUSE (a CI run lost a whole suite so).  A port drawn below that
range is never handed to a connect(); bind() here checks that no socket
holds it now.  tests/lib.sh's free_port is the same in bash.

    python3 tests/freeport.py [N]     N distinct ports, one a line
"""
import random
import socket
import sys


def _range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    return lo, hi


def _unheld(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(avoid=()):
    lo, _ = _range()
    if lo < 12000:      # no room below the range: the kernel's pick
        for _ in range(50):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in avoid:
                return port
        raise RuntimeError("no free port")
    rng = random.SystemRandom()
    for _ in range(50):
        port = rng.randrange(10000, lo)
        if port not in avoid and _unheld(port):
            return port
    raise RuntimeError(f"no free port below {lo}")


def free_ports(n):
    ports = []
    for _ in range(n):
        ports.append(free_port(ports))
    return ports


if __name__ == "__main__":
    print("\n".join(str(p) for p in free_ports(int(sys.argv[1]) if len(sys.argv) > 1 else 1)))
