"""Network and FUSE filesystems going away under a job: NFS's stale file handle and the
"Transport endpoint is not connected" of a FUSE mount whose daemon died or lost its backend
(s3fs, gcsfuse, blobfuse2, JuiceFS, rclone mount, sshfs: the buckets rented boxes mount), and
a host that is down.

Each errno is one row in every spelling its layers print (spelling.py), as errno.py's are. They
are the storage's connection failing, not the job's code: network_transient (remount, then
resume), suggestive: ENOTCONN is also a socket used before it connected.
"""
from __future__ import annotations

from boxagent.triage.vocab.spelling import errno_row

UAPI = ("Linux 6.6 include/uapi/asm-generic/errno.h (ESTALE 116, ENOTCONN 107, EHOSTDOWN 112); "
        "glibc 2.36 strerror; libfuse 3.16 (a dead FUSE daemon's mount answers ENOTCONN)")

_S = False

# (class, number, name, strerror, Rust ErrorKind)
MOUNT_ERRNOS = (
    ("network_transient", 116, "ESTALE", "Stale file handle", "StaleNetworkFileHandle"),
    ("network_transient", 107, "ENOTCONN", "Transport endpoint is not connected", "NotConnected"),
    ("network_transient", 112, "EHOSTDOWN", "Host is down", None),
)

ROWS = tuple(errno_row(cls, num, name, msg, UAPI, _S, kind)
             for cls, num, name, msg, kind in MOUNT_ERRNOS)
