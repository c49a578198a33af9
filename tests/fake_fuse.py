#!/usr/bin/python3
# fake_fuse.py DIR UID: a FUSE mount at DIR that no daemon serves: this
# process holds /dev/fuse and never reads it, so every request there
# (a stat, a statfs, a lookup) waits until the mount goes.  user_id=UID
# and allow_other, as a tenant's (fusermount writes the real uid there;
# root makes it here, no FUSE tooling being installed).  Prints
# "mounted", then waits for its stdin to close.  Root only.
import ctypes
import os
import sys

path, uid = sys.argv[1], int(sys.argv[2])
fd = os.open("/dev/fuse", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
opts = "fd=%d,rootmode=40000,user_id=%d,group_id=%d,allow_other" % (fd, uid, uid)
if libc.mount(b"corral-test", path.encode(), b"fuse.corraltest", 0, opts.encode()) != 0:
    print("mount: %s" % os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(1)
print("mounted", flush=True)
sys.stdin.read()
