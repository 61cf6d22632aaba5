"""pull: copy exactly a run's manifest to this machine, then verify it.

One ssh round trip asks the agent for everything at once (`pull-info`: refresh the manifest,
its exact bytes, whether the box has rsync, the profile's teardown facts). Then the copy:
rsync when both ends have it (`--files-from` the manifest, partial files kept in
`.rgt-partial/` so an interrupted pull resumes, the same bounded ssh options as every other
call), otherwise the agent's own byte stream (pull_stream.py). Then verify.py decides.
Files that finish while rsync is still busy are hashed meanwhile, so verify has less to read.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from boxagent.artifacts import hashing
from boxagent.base.fsutil import atomic_write_bytes, atomic_write_json
from rgt_client import exitcodes, transport
from rgt_client.errors import ClientError
from rgt_client.pull_stream import stream_pull
from rgt_client.verify import META_DIR, RSYNC_PARTIAL, Known, VerifyResult, check_manifest, manifest_path, verify

Progress = Callable[[int, int], None]
METHODS = ("auto", "rsync", "stream")
_PROGRESS2 = re.compile(rb"^\s*([\d,]+)\s+\d+%")
_RECEIVED = re.compile(rb"Total bytes received:\s*([\d,]+)")
_SENT = re.compile(rb"Total bytes sent:\s*([\d,]+)")


@dataclass
class PullInfo:
    head: Dict[str, Any]
    raw: bytes
    manifest: Dict[str, Any]


@dataclass
class PullResult:
    dest: str
    method: str
    bytes_moved: int
    info: PullInfo
    verify: VerifyResult
    elapsed_s: float


def default_dest(host: str, run: str) -> str:
    def safe(word: str) -> str:
        word = re.sub(r"[^A-Za-z0-9._@+-]", "_", word).lstrip(".")
        return word or "_"
    return os.path.join("rgt-pulls", safe(host), safe(run))


def _agent_error(res: transport.Result, what: str) -> ClientError:
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    msg = next((ln[7:] for ln in lines if ln.startswith("Error: ")), None)
    hint = next((ln[6:] for ln in lines if ln.startswith("Hint: ")), None)
    code = exitcodes.USAGE if res.rc == 2 else exitcodes.ERROR
    return ClientError(msg or "%s failed (exit %d): %s" % (what, res.rc, " ".join(lines[-2:])), hint, code)


def fetch_info(target: transport.Target, run: str, force: bool = False) -> PullInfo:
    """The manifest (refreshed on the box) and the box's capabilities, in one round trip."""
    # Generous: a first manifest of a few hundred GB hashes for minutes (ssh keepalives still
    # bound a dead link).
    res = transport.run_agent(target, ["pull-info", run] + (["--force"] if force else []), timeout=3600)
    if res.rc == 2 and "invalid choice: 'pull-info'" in res.err:
        raise ClientError("the agent on %s is too old for pull" % target.host,
                          "update it: rgt-client install %s" % target.host)
    if res.rc != 0:
        raise _agent_error(res, "pull-info")
    nl = res.stdout.find(b"\n")
    try:
        head = json.loads(res.stdout[:nl].decode("utf-8"))
        raw = res.stdout[nl + 1:nl + 1 + int(head["manifest_bytes"])]
        manifest = json.loads(raw.decode("utf-8"))
    except (ValueError, KeyError, TypeError):
        raise ClientError("%s answered pull-info with something that is not a manifest" % target.host,
                          "is the agent on the box current? rgt-client install %s" % target.host)
    check_manifest(manifest, "the manifest from %s" % target.host)
    return PullInfo(head, raw, manifest)


def rsync_version(path: Optional[str]) -> Optional[tuple[int, ...]]:
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


def _parse_version(text: Any) -> Optional[tuple[int, ...]]:
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(g or 0) for g in m.groups()) if m else None


def local_rsync() -> Optional[str]:
    """This machine's rsync when it is new enough (3.1: --info=progress2), else None."""
    path = shutil.which("rsync")
    v = rsync_version(path)
    return path if v and v >= (3, 1, 0) else None


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


def choose_method(method: str, remote_rsync: Optional[str], here: Optional[str]) -> str:
    if method not in METHODS:
        raise ClientError("unknown --method %r" % method, "use auto, rsync or stream", exitcodes.USAGE)
    both = bool(remote_rsync) and bool(here)
    if method == "rsync" and not both:
        raise ClientError("no usable rsync (3.1 or newer here, 3.0 or newer on the box) on %s"
                          % ("this machine" if not here else "the box"),
                          "install rsync there, or use --method stream", exitcodes.USAGE)
    if method == "auto":
        return "rsync" if both else "stream"
    return method


def _ssh_command(target: transport.Target) -> str:
    """rsync's -e: the same bounded OpenSSH call as every other rgt ssh call."""
    argv = ["ssh"] + (["-F", target.ssh_config] if target.ssh_config else [])
    return " ".join(shlex.quote(a) for a in argv + list(transport.SSH_OPTIONS) + list(target.extra_ssh))


def rsync_argv(target: transport.Target, info: PullInfo, dest: str, listfile: str,
               bwlimit_kbps: Optional[int] = None, rsync: str = "rsync") -> List[str]:
    root = info.head["root"].rstrip("/") + "/"
    argv = [rsync, "-lpt", "-8", "--from0", "--files-from=" + listfile, "--partial-dir=" + RSYNC_PARTIAL,
            "--out-format=%b\t%n", "--info=progress2", "--stats"]
    if bwlimit_kbps:
        argv.append("--bwlimit=%d" % bwlimit_kbps)
    if target.is_local:
        return argv + [root, dest.rstrip("/") + "/"]
    argv += ["-s", "-e", _ssh_command(target)]
    if str(info.head.get("rsync") or "").startswith("/"):
        argv.append("--rsync-path=" + shlex.quote(info.head["rsync"]))
    return argv + ["%s:%s" % (target.host, root), dest.rstrip("/") + "/"]


class _Overlap:
    """Hash each file rsync reports finished while rsync moves the next (one thread: the
    other cores are busy with ssh and rsync)."""

    def __init__(self, dest: str, wanted: Dict[str, int]):
        self.dest, self.wanted = dest, wanted
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.known: Known = {}
        self.lock = threading.Lock()

    def finished(self, rel: str) -> None:
        if rel in self.wanted:
            self.pool.submit(self._hash, rel)

    def _hash(self, rel: str) -> None:
        h = hashing.hash_file(os.path.join(self.dest, rel))
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
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
        if not chunk:
            break
        buf += chunk
        parts = re.split(rb"[\r\n]", buf)
        buf = parts.pop()
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
        self.proc, self.got, self.old = proc, 0, {}

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


def adopt_rsync_temps(dest: str, files: List[Dict[str, Any]]) -> int:
    """An rsync killed outright (SIGKILL, power loss, a laptop lid) leaves its temp file
    `.NAME.XXXXXX` beside the target instead of a partial; move the largest into rsync's
    partial dir so the next run resumes from it (and verify does not call it extra)."""
    by_dir: Dict[str, Dict[str, int]] = {}
    for f in files:
        d, _, name = f["path"].rpartition("/")
        by_dir.setdefault(d, {})[name] = f["bytes"]
    adopted = 0
    for d, names in by_dir.items():
        full = os.path.join(dest, d)
        try:
            entries = [e.name for e in os.scandir(full) if e.name.startswith(".") and e.is_file(follow_symlinks=False)]
        except OSError:
            continue
        for e in entries:
            name, six = e[1:-7], e[-7:]
            if len(e) > 8 and six[0] == "." and name in names and not os.path.exists(
                    os.path.join(full, RSYNC_PARTIAL, name)):
                src = os.path.join(full, e)
                if os.path.getsize(src) <= names[name]:
                    os.makedirs(os.path.join(full, RSYNC_PARTIAL), exist_ok=True)
                    os.replace(src, os.path.join(full, RSYNC_PARTIAL, name))
                    adopted += 1
    return adopted


def rsync_pull(target: transport.Target, info: PullInfo, dest: str, progress: Optional[Progress] = None,
               bwlimit_kbps: Optional[int] = None, rsync: str = "rsync") -> tuple[int, Known]:
    """rsync exactly the manifest's files and symlinks; returns (bytes received, known hashes)."""
    m = info.manifest
    names = [f["path"] for f in m["files"]] + [s["path"] for s in m.get("symlinks") or []]
    total = sum(f["bytes"] for f in m["files"])
    overlap = _Overlap(dest, {f["path"]: f["bytes"] for f in m["files"]})
    adopt_rsync_temps(dest, m["files"])
    fd, listfile = tempfile.mkstemp(prefix="rgt-files-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"".join(n.encode("utf-8") + b"\0" for n in names))
    try:
        argv = rsync_argv(target, info, dest, listfile, bwlimit_kbps, rsync)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err: List[bytes] = []
        drain = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
        drain.start()
        with _Interrupts(proc):
            # a local copy's client is the sending side: its "sent" is what moved
            received = _read_rsync(proc, total, progress, overlap, _SENT if target.is_local else _RECEIVED)
            rc = proc.wait()
            drain.join(5)
    finally:
        known = overlap.close()
        os.unlink(listfile)
    _rsync_rc(target, rc, b"".join(err).decode("utf-8", "replace"))
    return max(received, 0), known


def _rsync_rc(target: transport.Target, rc: int, stderr: str) -> None:
    # 23/24: some files could not be copied or vanished: verify names them precisely.
    if rc in (0, 23, 24):
        return
    tail = " ".join(ln.strip() for ln in stderr.strip().splitlines()[-3:]) or "no message"
    if rc == 255 or (rc in (12, 35) and "connection" in stderr.lower()):
        raise ClientError("rsync lost the connection to %s: %s" % (target.host, tail),
                          "run the same pull again: it resumes from the partial files", exitcodes.UNREACHABLE)
    raise ClientError("rsync failed (exit %d): %s" % (rc, tail),
                      "run the same pull again (it resumes), or use --method stream")


def save_meta(dest: str, target: transport.Target, info: PullInfo, method: str, now: float) -> None:
    meta = os.path.join(dest, META_DIR)
    os.makedirs(os.path.join(meta), exist_ok=True)
    atomic_write_bytes(manifest_path(dest), info.raw)
    head = info.head
    atomic_write_json(os.path.join(meta, "pull.json"), {
        "schema": "rgt.pull/1", "host": target.host, "run": head.get("run"), "root": head.get("root"),
        "box": head.get("host"), "run_state": head.get("run_state"), "method": method,
        "manifest_sha256": head.get("manifest_sha256"), "profile": head.get("profile") or {},
        "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})


def pull(target: transport.Target, run: str, dest: Optional[str] = None, force: bool = False,
         method: str = "auto", bwlimit_kbps: Optional[int] = None, progress: Optional[Progress] = None,
         check_load: bool = False, workers: Optional[int] = None,
         on_info: Optional[Callable[[PullInfo, str], None]] = None) -> PullResult:
    """Fetch the manifest, copy exactly its files into dest, verify; never deletes anything."""
    t0 = time.monotonic()
    if target.host.startswith("-"):  # would reach ssh and rsync as an option, not a host
        raise ClientError("%r is not a host" % target.host, "name an ssh destination or `local`",
                          exitcodes.USAGE)
    dest = os.path.abspath(dest or default_dest(target.host, run))
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise ClientError("%s exists and is not a directory" % dest, "name another DEST", exitcodes.USAGE)
    info = fetch_info(target, run, force)
    here = local_rsync()
    how = choose_method(method, remote_rsync(info.head) if not target.is_local else here, here)
    os.makedirs(os.path.join(dest, META_DIR), exist_ok=True)
    save_meta(dest, target, info, how, time.time())
    if on_info:
        on_info(info, how)
    if how == "rsync":
        moved, known = rsync_pull(target, info, dest, progress, bwlimit_kbps, here or "rsync")
    else:
        moved, known = stream_pull(target, run, info.manifest, dest, progress, bwlimit_kbps)
    res = verify(dest, manifest_path(dest), check_load=check_load, known=known, workers=workers)
    return PullResult(dest, how, moved, info, res, time.monotonic() - t0)
