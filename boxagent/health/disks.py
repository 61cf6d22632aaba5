"""Disk bytes AND inodes of the watched directories (os.statvfs: one syscall each, no `df`).

Why inodes: `df -h` looks fine while the disk is out of inodes (millions of small dataset files,
AutoDL's autodl-fs capped near 200K) and every write fails with "No space left on device". A
profile's inode cap counts even when statvfs reports more inodes (the cap is enforced elsewhere).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


def cap_for(path: str, caps: Dict[str, int]) -> Optional[int]:
    """The inode cap of the deepest capped directory containing `path`."""
    best, best_len = None, -1
    for root, cap in caps.items():
        try:
            real = os.path.realpath(os.path.expanduser(root))
        except (OSError, ValueError):
            continue
        if _under(path, real) and len(real) > best_len and isinstance(cap, int) and cap > 0:
            best, best_len = cap, len(real)
    return best


def _pct(used: float, total: float) -> Optional[float]:
    return round(100.0 * used / total, 1) if total > 0 else None


def stat_disk(path: str, role: str, cap: Optional[int] = None,
              statfn: Optional[Callable[[str], Any]] = None) -> Dict[str, Any]:
    """One disks[] entry. Percentages follow df: used / (used + available to non-root).
    `statfn(path) -> (statvfs, st_dev)`, or an OSError instance returned or raised."""
    entry: Dict[str, Any] = {"path": path, "role": role, "bytes_total": None, "bytes_free": None,
                             "bytes_used_pct": None, "inodes_total": None, "inodes_free": None,
                             "inodes_used_pct": None, "inodes_cap": cap}
    try:
        res = (statfn or _statvfs_and_dev)(path)
        if isinstance(res, BaseException):
            raise res
        st, entry["dev"] = res
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
        entry["timed_out"] = isinstance(exc, TimeoutError)
        return entry
    used_b = (st.f_blocks - st.f_bfree) * st.f_frsize
    free_b = st.f_bavail * st.f_frsize
    entry.update(bytes_total=st.f_blocks * st.f_frsize, bytes_free=free_b,
                 bytes_used_pct=_pct(used_b, used_b + free_b))
    # Some filesystems (btrfs, many FUSE/NFS mounts) report 0 inodes: unknown, not full.
    used_i = st.f_files - st.f_ffree
    total_i, free_i = (st.f_files, st.f_favail) if st.f_files > 0 else (None, None)
    if cap is not None and (total_i is None or cap < total_i):
        used_i = max(used_i, 0)
        total_i, free_i = cap, max(cap - used_i, 0)
    if total_i is not None:
        entry.update(inodes_total=total_i, inodes_free=free_i,
                     inodes_used_pct=_pct(total_i - free_i, total_i))
    return entry


def sample_disks(watched: List[Tuple[str, str]], caps: Optional[Dict[str, int]] = None) -> List[Dict[str, Any]]:
    """disks[] for [(path, role)], each path once (the first role named wins)."""
    caps = caps or {}
    seen, out = set(), []
    for path, role in watched:
        if not path:
            continue
        real = os.path.realpath(os.path.expanduser(path))
        if real in seen:
            continue
        seen.add(real)
        out.append(stat_disk(real, role, cap_for(real, caps)))
    return out


# -- network mounts: a hung NFS/FUSE server must never freeze the daemon ----------------------
# statvfs on a dead NFS or FUSE mount blocks (in D state, unkillable) until the server answers.
# AutoDL's autodl-fs, Lambda's /lambda/nfs and RunPod network volumes are exactly such mounts,
# so paths on network filesystems are stat'ed by a per-path worker thread with a deadline; a
# worker that never comes back is left alone and the path is reported as not answering.
NETWORK_FS = frozenset(("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "9p",
                        "afs", "gpfs", "beegfs", "davfs", "ncpfs", "virtiofs", "autofs"))


def is_network_fs(fstype: str) -> bool:
    return fstype in NETWORK_FS or fstype.startswith("fuse")


def parse_mounts(text: str) -> List[Tuple[str, str]]:
    """[(mountpoint, fstype)] from mountinfo, longest mountpoint first."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if sep and len(lf) >= 5 and rf:
            out.append((lf[4].replace("\\040", " "), rf[0]))
    return sorted(out, key=lambda m: len(m[0]), reverse=True)


def fstype_of(path: str, mounts: List[Tuple[str, str]]) -> Optional[str]:
    for mnt, fstype in mounts:
        if _under(path, mnt):
            return fstype
    return None


class _StatWorker:
    """One daemon thread per network path; asked once per tick, answers within the deadline
    or is skipped until it does."""

    def __init__(self, path: str, statfn: Callable[[str], Any]):
        import threading
        self.path, self.statfn = path, statfn
        self.ask, self.done = threading.Event(), threading.Event()
        self.result: Any = None
        self.busy = False
        self.thread = threading.Thread(target=self._run, name="rgt-statvfs", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            self.ask.wait()
            self.ask.clear()
            try:
                self.result = self.statfn(self.path)
            except OSError as exc:
                self.result = exc
            self.busy = False
            self.done.set()

    def request(self) -> None:
        if not self.busy:
            self.busy = True
            self.done.clear()
            self.ask.set()


def _statvfs_and_dev(path: str) -> Tuple[Any, int]:
    return os.statvfs(path), os.stat(path).st_dev


class DiskSampler:
    """sample_disks() with network mounts guarded by a deadline (`timeout_s`)."""

    def __init__(self, proc_root: str = "/proc", timeout_s: float = 2.0,
                 statfn: Callable[[str], Tuple[Any, int]] = _statvfs_and_dev, refresh_s: float = 60.0):
        self.proc_root, self.timeout_s, self.statfn, self.refresh_s = proc_root, timeout_s, statfn, refresh_s
        self._mounts: List[Tuple[str, str]] = []
        self._mounts_at = -1e18
        self._workers: Dict[str, _StatWorker] = {}

    def _mount_table(self) -> List[Tuple[str, str]]:
        import time
        now = time.monotonic()
        if now - self._mounts_at > self.refresh_s:
            try:
                with open(os.path.join(self.proc_root, "self", "mountinfo"), "rb") as fh:
                    self._mounts = parse_mounts(fh.read().decode("utf-8", "replace"))
            except OSError:
                self._mounts = []
            self._mounts_at = now
        return self._mounts

    def sample(self, watched: List[Tuple[str, str]], caps: Optional[Dict[str, int]] = None) -> List[Dict[str, Any]]:
        caps = caps or {}
        mounts = self._mount_table()
        items, seen = [], set()
        for path, role in watched:
            real = os.path.realpath(os.path.expanduser(path)) if path else None
            if real and real not in seen:
                seen.add(real)
                items.append((real, role, fstype_of(real, mounts)))
        slow = [p for p, _, fs in items if fs and is_network_fs(fs)]
        results = self._guarded(slow)
        out = []
        for real, role, fstype in items:
            entry = stat_disk(real, role, cap_for(real, caps),
                              statfn=_answer(results[real]) if real in results else self.statfn)
            entry["fstype"] = fstype
            out.append(entry)
        return out

    def _guarded(self, paths: List[str]) -> Dict[str, Any]:
        """statvfs of network paths through their workers; a TimeoutError for the silent ones."""
        import time
        for p in paths:
            w = self._workers.get(p)
            if w is None:
                w = self._workers[p] = _StatWorker(p, self.statfn)
            w.request()
        deadline = time.monotonic() + self.timeout_s
        out: Dict[str, Any] = {}
        for p in paths:
            w = self._workers[p]
            if w.done.wait(max(0.0, deadline - time.monotonic())):
                out[p] = w.result
            else:
                out[p] = TimeoutError(110, "statvfs did not answer within %gs (network mount hung?)" % self.timeout_s)
        return out


def _answer(result: Any) -> Callable[[str], Any]:
    """A statfn that gives the result a guarded statvfs already got (a network mount is asked once)."""
    return lambda path: result
