"""pull's rsync path: rsync exactly the manifest's files over the same bounded ssh options as
every other rgt call, `--files-from` the manifest, partial files kept in `.rgt-partial/` so
an interrupted pull resumes; files rsync reports finished are hashed meanwhile, so verify has
less to read.

rsync writes into DEST itself. What keeps it inside: pull checks first that no folder on a
manifest path is a symlink or a file in DEST (pull_stream.check_parents), the manifest holds
no entry below a symlink entry, and rsync's own receiver (3.2.5 and later) refuses names the
request did not list. rsync is asked for the manifest's files only and never makes a symlink
(`--no-links`): the box's sender chooses each name's type, and a `keys` listed as a file once
arrived as `keys -> ~/.ssh`. The manifest's symlinks are made by rgt, by descriptor, where the
caller allows them; anything rsync left at a file's name that is not a regular file is removed
(misplaced()). What rgt moves itself (an rsync temp left by a hard kill) goes through DEST's
descriptors.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import stat as stat_mod
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.api import hash_file
from rgt_client import exitcodes
from rgt_client.box import transport
from rgt_client.box.bounded import drain_tail
from rgt_client.pull.destdir import Blocked, Dest
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line
from rgt_client.pull.verify import RSYNC_PARTIAL, Known

Progress = Callable[[int, int], None]
_PROGRESS2 = re.compile(rb"^\s*([\d,]+)\s+\d+%")
_RECEIVED = re.compile(rb"Total bytes received:\s*([\d,]+)")
_SENT = re.compile(rb"Total bytes sent:\s*([\d,]+)")
_MAX_RSYNC_LINE = 64 << 10


def rsync_version(path: Optional[str]) -> Optional[Tuple[int, ...]]:
    """(3, 2, 7) from `rsync --version`; None when it cannot be run. macOS's stock rsync says
    2.6.9 (openrsync: "2.6.9 compatible"), which lacks the options pull uses."""
    if not path:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(rb"version\s+(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g or 0) for g in m.groups()) if m else None


def _parse_version(text: Any) -> Optional[Tuple[int, ...]]:
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(g or 0) for g in m.groups()) if m else None


# The box is rsync's sending side, and a malicious sender could write outside the receiver's
# folder or learn its files' checksums with rsync before 3.4.0 (CVE-2024-12086/12087/12088). A
# pull nobody watches (MCP) takes the stream path with an older rsync here.
SAFE_AGAINST_SENDER = (3, 4, 0)


def local_rsync(minimum: Tuple[int, ...] = (3, 1, 0)) -> Optional[str]:
    """This machine's rsync when it is new enough (3.1: --info=progress2), else None."""
    path = shutil.which("rsync")
    v = rsync_version(path)
    return path if v and v >= minimum else None


def remote_rsync(head: Dict[str, Any]) -> Optional[str]:
    """The box's rsync when it is usable (3.0: --protect-args); an agent that does not say its
    version is trusted with what it found."""
    path = head.get("rsync")
    if not path:
        return None
    v = _parse_version(head.get("rsync_version"))
    if "rsync_version" in head and (v is None or v < (3, 0, 0)):
        return None
    return path


def _ssh_command(target: transport.Target) -> str:
    """rsync's -e: the same bounded OpenSSH call as every other rgt ssh call, on the same shared
    connection (a pull by rsync opened its own: 3.12 s against 1.16 s by stream for 300 KB at a
    150 ms round trip)."""
    from rgt_client.box import sshmux
    argv = ["ssh"] + (["-F", target.ssh_config] if target.ssh_config else [])
    argv += list(transport.SSH_OPTIONS) + sshmux.options(target.host, target.ssh_config) + list(target.extra_ssh)
    return " ".join(shlex.quote(a) for a in argv)


# A box chooses its files' modes: an executable bit kept from it made a pulled `post-commit`
# runnable. Files land without x/s/t bits and writable by their owner only unless the user asks
# (`pull --keep-mode`). Folders are always the owner's alone to write: a box's 2777 `ck/` let
# any local user swap a verified checkpoint after verify.
NO_EXEC = "--chmod=Fa-xst,Fgo-w"
DIR_MODES = "--chmod=Du+rwx,Dgo-w,Da-st"


def rsync_argv(target: transport.Target, head: Dict[str, Any], dest: str, listfile: str,
               bwlimit_kbps: Optional[int] = None, rsync: str = "rsync", keep_mode: bool = False) -> List[str]:
    root = head["root"].rstrip("/") + "/"
    argv = [rsync, "-pt", "--no-links", "-8", "--from0", "--files-from=" + listfile,
            "--partial-dir=" + RSYNC_PARTIAL, "--out-format=%b\t%n", "--info=progress2", "--stats",
            DIR_MODES] + ([] if keep_mode else [NO_EXEC])
    if bwlimit_kbps:
        argv.append("--bwlimit=%d" % bwlimit_kbps)
    if target.is_local:
        return argv + [root, dest.rstrip("/") + "/"]
    argv += ["-s", "-e", _ssh_command(target)]
    if str(head.get("rsync") or "").startswith("/"):
        argv.append("--rsync-path=" + shlex.quote(head["rsync"]))
    return argv + ["%s:%s" % (target.host, root), dest.rstrip("/") + "/"]


class _Overlap:
    """Hash each file rsync reports finished while rsync moves the next (one thread: the
    other cores are busy with ssh and rsync)."""

    def __init__(self, dest: str, wanted: Dict[str, int]):   # (reads only: hashing writes nothing)
        self.dest, self.wanted = dest, wanted
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.known: Known = {}
        self.lock = threading.Lock()

    def finished(self, rel: str) -> None:
        if rel in self.wanted:
            self.pool.submit(self._hash, rel)

    def _hash(self, rel: str) -> None:
        path = os.path.join(self.dest, rel)
        try:
            if not stat_mod.S_ISREG(os.lstat(path).st_mode):
                return          # never read through a link: misplaced() removes it
        except OSError:
            return
        h = hash_file(path)
        if h.sha256 and h.stable:
            with self.lock:
                self.known[rel] = (h.size, h.mtime_ns, h.sha256)

    def close(self) -> Known:
        self.pool.shutdown(wait=True)
        return self.known


def _read_rsync(proc: subprocess.Popen, total: int, progress: Optional[Progress],
                overlap: _Overlap, stat: re.Pattern) -> int:
    """Parse rsync's stdout: `%b<TAB>%n` per finished file, progress2 ticks, --stats."""
    buf, received = b"", -1
    assert proc.stdout is not None          # a pipe: rsync's stdout is what this reads
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
        if not chunk:
            break
        buf += chunk
        parts = re.split(rb"[\r\n]", buf)
        buf = parts.pop()[-_MAX_RSYNC_LINE:]     # (rsync's own lines are short: bounded anyway)
        for line in parts:
            received = _rsync_line(line, total, progress, overlap, received, stat)
    return _rsync_line(buf, total, progress, overlap, received, stat)


def _rsync_line(line: bytes, total: int, progress: Optional[Progress], overlap: _Overlap, received: int,
                stat: re.Pattern) -> int:
    tab = line.find(b"\t")
    if tab > 0 and line[:tab].isdigit():
        overlap.finished(line[tab + 1:].decode("utf-8", "replace"))
        return received
    m = _PROGRESS2.match(line)
    if m and progress:
        progress(min(total, int(m.group(1).replace(b",", b""))), total)
        return received
    m = stat.search(line)
    return int(m.group(1).replace(b",", b"")) if m else received


class _Interrupts:
    """Ctrl-C or SIGTERM while rsync runs: pass it on and wait, so rsync saves its partial file
    before we go. Dying first would close rsync's stdout, and rsync, killed by the broken
    pipe, would lose the half-file the next pull should resume from."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.got = proc, 0
        self.old: Dict[int, Any] = {}

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self.old[s] = signal.signal(s, self._handler)
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        self.got = signum
        try:
            self.proc.send_signal(signum)  # in case only we were signalled, not the group
        except OSError:
            pass

    def __exit__(self, *exc: Any) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)
        if self.got:
            raise ClientError("interrupted by signal %d; rsync kept the partial files" % self.got,
                              "run the same pull again: it resumes where this one stopped",
                              128 + self.got)


_RSYNC_TEMP = re.compile(r"^\.(.+)\.[A-Za-z0-9]{6}$")


def adopt_rsync_temps(dest: Dest, files: List[Dict[str, Any]]) -> int:
    """An rsync killed outright (SIGKILL, power loss, a laptop lid) leaves its temp file
    `.NAME.XXXXXX` beside the target instead of a partial; move it into rsync's partial dir so
    the next run resumes from it (and verify does not call it extra). Only inside DEST, by
    descriptor: a folder that is a symlink (`d -> ~/victim`, left by an earlier pull) is never
    entered, or ~/victim/.bashrc.backup would be "adopted" into ~/victim/.rgt-partial/."""
    by_dir: Dict[str, Dict[str, int]] = {}
    for f in files:
        d, _, name = f["path"].rpartition("/")
        by_dir.setdefault(d, {})[name] = f["bytes"]
    adopted = 0
    for d, names in by_dir.items():
        try:
            entries = list(dest.entries(d))
        except (OSError, Blocked):
            continue
        for e, st in entries:
            m = _RSYNC_TEMP.match(e)
            name = m.group(1) if m else None
            if name not in names or not stat_mod.S_ISREG(st.st_mode) or st.st_size > names[name]:
                continue
            prefix = d + "/" if d else ""
            try:
                if dest.lstat(prefix + RSYNC_PARTIAL + "/" + name) is None:
                    dest.replace(prefix + e, prefix + RSYNC_PARTIAL + "/" + name)
                    adopted += 1
            except (OSError, Blocked):
                continue
    return adopted


def rsync_pull(target: transport.Target, head: Dict[str, Any], m: Dict[str, Any], dest: Dest,
               progress: Optional[Progress] = None, bwlimit_kbps: Optional[int] = None,
               rsync: str = "rsync", keep_mode: bool = False) -> Tuple[int, Known]:
    """rsync exactly the manifest's files (never a symlink); returns (bytes received, known
    hashes). rsync writes itself: pull checked beforehand that no folder on a manifest path is a
    symlink in DEST, and rsync's receiver refuses what the request did not list."""
    names = [f["path"] for f in m["files"]]
    total = sum(f["bytes"] for f in m["files"])
    overlap = _Overlap(dest.path, {f["path"]: f["bytes"] for f in m["files"]})
    adopt_rsync_temps(dest, m["files"])
    fd, listfile = tempfile.mkstemp(prefix="rgt-files-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"".join(os.fsencode(n) + b"\0" for n in names))
    try:
        # rsync is handed the folder pull opened (Linux: its descriptor's /proc path), not the
        # path again: a folder swapped in on the path meanwhile is never the one written
        pinned = os.path.isdir("/proc/self/fd")
        where = "/proc/self/fd/%d" % dest.fd if pinned else dest.path
        argv = rsync_argv(target, head, where, listfile, bwlimit_kbps, rsync, keep_mode)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(dest.fd,) if pinned else ())
        err = bytearray()       # its tail only: the box's rsync can relay endless messages
        drain = threading.Thread(target=drain_tail, args=(proc.stderr, err), daemon=True)
        drain.start()
        with _Interrupts(proc):
            # a local copy's client is the sending side: its "sent" is what moved
            received = _read_rsync(proc, total, progress, overlap, _SENT if target.is_local else _RECEIVED)
            rc = proc.wait()
            drain.join(5)
    finally:
        known = overlap.close()
        os.unlink(listfile)
    _rsync_rc(target, rc, bytes(err).decode("utf-8", "replace"))
    return max(received, 0), known


def misplaced(dest: Dest, files: List[Dict[str, Any]]) -> List[str]:
    """Remove whatever stands at a manifest file's name and is not a regular file (a symlink, a
    folder rsync made, a device) and return those names: the box's sender chose the type, and
    the folder is the pull's own (owned.check refused any name rgt did not write before)."""
    out = []
    for f in files:
        try:
            st = dest.lstat(f["path"])
            if st is None or stat_mod.S_ISREG(st.st_mode):
                continue
            out.append(f["path"])
            dest.remove_entry(f["path"])
        except (OSError, Blocked):
            continue            # a non-empty folder stays; verify names it
    return out


def _rsync_rc(target: transport.Target, rc: int, stderr: str) -> None:
    # 23/24: some files could not be copied or vanished: verify names them precisely.
    if rc in (0, 23, 24):
        return
    tail = " ".join(safe_line(ln.strip())[:300] for ln in stderr.strip().split("\n")[-3:]) or "no message"
    if rc == 255 or (rc in (12, 35) and "connection" in stderr.lower()):
        raise ClientError("rsync lost the connection to %s: %s" % (target.host, tail),
                          "run the same pull again: it resumes from the partial files", exitcodes.UNREACHABLE)
    raise ClientError("rsync failed (exit %d): %s" % (rc, tail),
                      "run the same pull again (it resumes), or use --method stream")
