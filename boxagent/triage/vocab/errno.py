"""errno: the kernel's error numbers, as glibc's strerror words them and as Python prints them
(`OSError: [Errno 28] No space left on device`), and the names Node/libuv and Go print
(`Error: ENOSPC: no space left on device`).

The network errnos say the same thing whoever prints them; which layer printed the line
(NCCL's socket transport, a Slurm daemon, a downloader) is the emitter's to decide, and
NCCL's own lines outrank these (CLASS_RANK)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

UAPI = "Linux 6.6 include/uapi/asm-generic/errno-base.h and errno.h; glibc 2.36 strerror"
GAI = "glibc 2.36 gai_strerror (sysdeps/posix/gai_strerror-strs.h)"
LIBUV = "libuv 1.48 include/uv.h UV_E* (Node.js `Error: ECODE: message`)"

_S = False


def _errno(cls, num, name, msg, definitive=True):
    """The Python form `[Errno N] msg` and the bare name (uv/Go/`errno.errorcode`)."""
    # the number, not the words: strerror is localized (`[Errno 28] 设备上没有空间`)
    return (lit(cls, "[Errno %d]" % num, "OSError: [Errno %d] %s" % (num, msg),
                UAPI + " (%s = %d)" % (name, num), "os", definitive),
            lit(cls, name if len(name) > 4 else name + ": ", "Error: %s: %s, write" % (
                name, msg.lower()), LIBUV, "os", definitive))


ROWS = (
    _errno("disk_full", 28, "ENOSPC", "No space left on device")
    + _errno("disk_full", 122, "EDQUOT", "Disk quota exceeded")
    # an I/O error or a read-only remount on a full or failing volume: the box's facts decide
    + _errno("disk_full", 5, "EIO", "Input/output error", _S)
    + _errno("code_error", 30, "EROFS", "Read-only file system", _S)
    # host memory: a fork() or mmap() the kernel refused
    + _errno("cgroup_oom", 12, "ENOMEM", "Cannot allocate memory", _S)
    + _errno("code_error", 24, "EMFILE", "Too many open files")
    + _errno("code_error", 23, "ENFILE", "Too many open files in system")
    + _errno("network_transient", 111, "ECONNREFUSED", "Connection refused")
    + _errno("network_transient", 104, "ECONNRESET", "Connection reset by peer")
    + _errno("network_transient", 110, "ETIMEDOUT", "Connection timed out")
    + _errno("network_transient", 113, "EHOSTUNREACH", "No route to host")
    + _errno("network_transient", 101, "ENETUNREACH", "Network is unreachable")
    + _errno("network_transient", 103, "ECONNABORTED", "Software caused connection abort")
    + (lit("disk_full", "No space left on device",
           "cp: error writing '/data/x.bin': No space left on device", UAPI + " (ENOSPC = 28)", "os"),
       lit("disk_full", "Disk quota exceeded", "tar: ./shard_17.tar: Cannot write: Disk quota exceeded",
           UAPI + " (EDQUOT = 122)", "os"),
       lit("cgroup_oom", "Cannot allocate memory",
           "RuntimeError: DataLoader worker (pid 2261) exited unexpectedly: [Errno 12] Cannot "
           "allocate memory", UAPI + " (ENOMEM = 12)", "os", _S),
       lit("network_transient", "Connection refused",
           "curl: (7) Failed to connect to 10.0.0.4 port 443 after 0 ms: Connection refused",
           UAPI + " (ECONNREFUSED = 111)", "os"),
       lit("network_transient", "Connection reset by peer",
           "ConnectionResetError: [Errno 104] Connection reset by peer", UAPI + " (ECONNRESET = 104)",
           "os"),
       lit("network_transient", "Connection timed out", "ssh: connect to host 10.0.0.9 port 22: "
           "Connection timed out", UAPI + " (ETIMEDOUT = 110)", "os"),
       lit("network_transient", "No route to host", "ssh: connect to host 10.0.0.9 port 22: No "
           "route to host", UAPI + " (EHOSTUNREACH = 113)", "os"),
       lit("network_transient", "Network is unreachable",
           "OSError: [Errno 101] Network is unreachable", UAPI + " (ENETUNREACH = 101)", "os"),
       lit("network_transient", "Temporary failure in name resolution",
           "socket.gaierror: [Errno -3] Temporary failure in name resolution", GAI + " (EAI_AGAIN)",
           "os"),
       lit("network_transient", "Name or service not known",
           "socket.gaierror: [Errno -2] Name or service not known", GAI + " (EAI_NONAME)", "os"),
       lit("network_transient", "EAI_AGAIN", "Error: getaddrinfo EAI_AGAIN huggingface.co",
           LIBUV, "os")))
