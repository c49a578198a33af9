#!/usr/bin/python3
"""ptyrun.py - run a command on a terminal of its own and drive it.

    ptyrun.py STEP... -- COMMAND [ARG...]

The command (corral) gets a fresh pty as its controlling terminal, 24x80,
cooked.  Steps, in order, each bounded in time:
    expect:TEXT      wait (10 s at most) until the output holds TEXT
    again:TEXT       expect:TEXT, and if it does not come, the last send
                     once more and 10 s again; counted in "resent"
    send:TEXT        type TEXT (Python escapes: \\r, \\x03 ...)
    resize:R,C       set the terminal's size (the kernel sends SIGWINCH)
    signal:NAME      send signal NAME to the command
    signal-fg:NAME   send signal NAME to the terminal's foreground job's
                     leader (a job shell's job: corral, not its shell)
    snap             record the terminal's settings now ("during")
    sleep:SECONDS
Then the command's end is awaited (20 s, then SIGKILL).  Prints one JSON
object: output, exit (its exit code, or 128+signal), and whether the
terminal's settings, size and device mode are what they were before.
"""
import codecs, json, os, select, signal, stat, struct, sys, termios, time, fcntl

def main():
    sep = sys.argv.index("--")
    steps, cmd = sys.argv[1:sep], sys.argv[sep + 1:]
    master, slave = os.openpty()
    name = os.ttyname(slave)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    before = dict(attr=termios.tcgetattr(master), size=winsize(master),
                  mode=stat.S_IMODE(os.stat(name).st_mode))
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for i in range(3):
            os.dup2(slave, i)
        os.execv(cmd[0], cmd)
    os.close(slave)
    out = bytearray()
    during = None
    last_sent, resent = b"", 0
    for st in steps:
        kind, _, arg = st.partition(":")
        if kind == "expect":
            want = codecs.decode(arg, "unicode_escape").encode()
            pump(master, out, 10, lambda: want in out)
        elif kind == "again":
            want = codecs.decode(arg, "unicode_escape").encode()
            pump(master, out, 10, lambda: want in out)
            if want not in out:
                resent += 1
                os.write(master, last_sent)
                pump(master, out, 10, lambda: want in out)
        elif kind == "send":
            last_sent = codecs.decode(arg, "unicode_escape").encode()
            os.write(master, last_sent)
        elif kind == "resize":
            r, c = (int(x) for x in arg.split(","))
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", r, c, 0, 0))
        elif kind == "signal":
            os.kill(pid, getattr(signal, "SIG" + arg))
        elif kind == "signal-fg":
            os.kill(os.tcgetpgrp(master), getattr(signal, "SIG" + arg))
        elif kind == "snap":
            during = termios.tcgetattr(master)
        elif kind == "sleep":
            pump(master, out, float(arg), lambda: False)
    status = None
    end = time.monotonic() + 20
    while status is None and time.monotonic() < end:
        pump(master, out, 0.2, lambda: False)
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            status = st
    if status is None:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    pump(master, out, 0.2, lambda: False)
    after = dict(attr=termios.tcgetattr(master), size=winsize(master),
                 mode=stat.S_IMODE(os.stat(name).st_mode))
    print(json.dumps({
        "output": out.decode(errors="replace"),
        "exit": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status)
                else 128 + os.WTERMSIG(status),
        "termios_same": before["attr"] == after["attr"],
        "raw_during": during is not None and not (during[3] & termios.ECHO)
                      and not (during[3] & termios.ICANON),
        "size_before": before["size"], "size_after": after["size"],
        "mode_before": oct(before["mode"]), "mode_after": oct(after["mode"]),
        "resent": resent,
    }))

def winsize(fd):
    return list(struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))[:2])

def pump(fd, out, seconds, done):
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                d = os.read(fd, 65536)
            except OSError:	# EIO: no one has the terminal open any more
                time.sleep(0.05)
                continue
            out.extend(d)

main()
