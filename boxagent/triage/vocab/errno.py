"""errno: the kernel's error numbers, as glibc's strerror words them and as Python prints them
(`OSError: [Errno 28] No space left on device`), and the names Node/libuv and Go print
(`Error: ENOSPC: no space left on device`): one row per errno holds all of its spellings
(spelling.py: glibc's, Go's lower-case one, CPython's number, Rust's and Node's forms).

The network errnos say the same thing whoever prints them; which layer printed the line
(NCCL's socket transport, a Slurm daemon, a downloader) is the emitter's to decide, and
NCCL's own lines outrank these (CLASS_RANK)."""
from __future__ import annotations

from boxagent.triage.vocab.spelling import errno_row
from boxagent.triage.vocab.table import lit

UAPI = "Linux 6.6 include/uapi/asm-generic/errno-base.h and errno.h; glibc 2.36 strerror"
GAI = "glibc 2.36 gai_strerror (sysdeps/posix/gai_strerror-strs.h)"
LIBUV = "libuv 1.48 include/uv.h UV_E* (Node.js `Error: ECODE: message`)"

_S = False
WIN = "Windows SDK 10.0.22621 winerror.h FormatMessage texts"

# (class, number, name, strerror, definitive, Rust ErrorKind, other spellings): one row each,
# in every spelling its layers print (spelling.py); the test feeds each row its glibc, Go,
# CPython, Rust, Node and JVM forms.
ERRNOS = (
    ("disk_full", 28, "ENOSPC", "No space left on device", True, "StorageFull",
     ("There is not enough space on the disk",)),                  # ERROR_DISK_FULL (112)
    ("disk_full", 122, "EDQUOT", "Disk quota exceeded", True, "FilesystemQuotaExceeded", ()),
    # an I/O error on a full or failing volume, or a read-only remount: the box's facts decide
    # (a full volume makes it disk_full), else the code's, with disk_full the runner-up
    ("code_error", 5, "EIO", "Input/output error", _S, None, ()),
    ("code_error", 30, "EROFS", "Read-only file system", _S, "ReadOnlyFilesystem", ()),
    # host memory: a fork() or mmap() the kernel refused
    ("cgroup_oom", 12, "ENOMEM", "Cannot allocate memory", _S, "OutOfMemory", ()),
    ("code_error", 24, "EMFILE", "Too many open files", True, None, ()),
    ("code_error", 23, "ENFILE", "Too many open files in system", True, None, ()),
    ("network_transient", 111, "ECONNREFUSED", "Connection refused", True, "ConnectionRefused",
     ("No connection could be made because the target machine actively refused it",)),
    ("network_transient", 104, "ECONNRESET", "Connection reset by peer", True, "ConnectionReset",
     ("An existing connection was forcibly closed by the remote host",)),
    ("network_transient", 110, "ETIMEDOUT", "Connection timed out", True, "TimedOut",
     ("A connection attempt failed because the connected party did not properly respond",)),
    ("network_transient", 113, "EHOSTUNREACH", "No route to host", True, "HostUnreachable", ()),
    ("network_transient", 101, "ENETUNREACH", "Network is unreachable", True,
     "NetworkUnreachable", ()),
    ("network_transient", 103, "ECONNABORTED", "Software caused connection abort", True,
     "ConnectionAborted", ()),
)

ROWS = tuple(errno_row(cls, num, name, msg, UAPI + "; " + WIN if more else UAPI, definitive,
                       kind, more)
             for cls, num, name, msg, definitive, kind, more in ERRNOS) + (
       lit("network_transient", "Temporary failure in name resolution",
           "socket.gaierror: [Errno -3] Temporary failure in name resolution", GAI + " (EAI_AGAIN)",
           "os"),
       lit("network_transient", "Name or service not known",
           "socket.gaierror: [Errno -2] Name or service not known", GAI + " (EAI_NONAME)", "os"),
       lit("network_transient", "EAI_AGAIN", "Error: getaddrinfo EAI_AGAIN huggingface.co",
           LIBUV, "os"))
