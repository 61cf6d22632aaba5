"""Disk bytes AND inodes of the watched directories (os.statvfs: one syscall each, no `df`).

Why inodes: `df -h` looks fine while the disk is out of inodes (millions of small dataset files,
AutoDL's autodl-fs capped near 200K) and every write fails with "No space left on device". A
profile's inode cap counts even when statvfs reports more inodes (the cap is enforced elsewhere).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple


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


def stat_disk(path: str, role: str, cap: Optional[int] = None) -> Dict[str, Any]:
    """One disks[] entry. Percentages follow df: used / (used + available to non-root)."""
    entry: Dict[str, Any] = {"path": path, "role": role, "bytes_total": None, "bytes_free": None,
                             "bytes_used_pct": None, "inodes_total": None, "inodes_free": None,
                             "inodes_used_pct": None, "inodes_cap": cap}
    try:
        st = os.statvfs(path)
        entry["dev"] = os.stat(path).st_dev
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
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
