"""Finding every process of one stage attempt again, whatever it did to leave its process group.

A training script that starts a helper with `setsid` or `os.setpgid(0, 0)` takes it out of the
stage's process group, so `killpg` on cancel, timeout or preemption left it running (holding the
GPU). Each attempt is therefore contained twice over:
- a cgroup of its own where the box lets us make one (v2, or a v1 tracking hierarchy, as root or
  delegated): every descendant is in it, whatever it does;
- an environment token every descendant inherits (found through /proc/*/environ), for boxes where
  no cgroup can be made; a process that clears its environment AND leaves the group escapes
  this one, which is why the cgroup comes first.
The process group is always counted too.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from boxagent.base import procs
from boxagent.base.roots import Roots

TOKEN_VAR = "RGT_ATTEMPT_TOKEN"


def new_token() -> str:
    return os.urandom(8).hex()


def make_cgroup(roots: Roots) -> Optional[str]:
    """A new child cgroup for the attempt, or None when the box does not let us make one.
    Its name is random and NOT the attempt's token: a cgroup's name is readable by every user
    of the box (/proc/PID/cgroup, /sys/fs/cgroup), and a token read there let another user's
    process pass as the stage for GPU-fault attribution."""
    from boxagent.health.cgroup import tracking_dir
    parent = tracking_dir(roots.proc, roots.cgroup)
    if not parent:
        return None
    path = os.path.join(parent, "rgt-" + new_token())
    try:
        os.mkdir(path)
    except OSError:
        return None
    if not os.access(os.path.join(path, "cgroup.procs"), os.W_OK):
        remove_cgroup(path)
        return None
    return path


def enroll(cgroup: Optional[str]) -> None:
    """Put the calling process into the attempt's cgroup (the command's child, before exec)."""
    if not cgroup:
        return
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    except OSError:
        pass      # the token and the group still find it


def remove_cgroup(cgroup: Optional[str]) -> None:
    if cgroup:
        try:
            os.rmdir(cgroup)       # only succeeds when empty: a live leftover keeps its cgroup
        except OSError:
            pass


def members(roots: Roots, contain: Optional[Dict[str, Any]], pgid: Optional[int]) -> List[int]:
    """Live (non-zombie) pids of the attempt: its cgroup, its token, its process group."""
    contain = contain or {}
    found = set(_cgroup_pids(contain.get("cgroup")))
    token = contain.get("token")
    if token:
        found.update(_token_pids(roots, token))
    if pgid and pgid > 1:
        found.update(procs.group_members(roots, pgid))
    found.discard(os.getpid())
    return sorted(p for p in found if procs.proc_state(roots, p) not in (None, "Z", "X"))


def signal_all(roots: Roots, contain: Optional[Dict[str, Any]], pgid: Optional[int], sig: int) -> int:
    """Signal every process of the attempt; the count signalled."""
    if pgid and pgid > 1:
        procs.signal_group(pgid, sig)
    n = 0
    for pid in members(roots, contain, pgid):
        try:
            os.kill(pid, sig)
            n += 1
        except OSError:
            pass
    return n


def cpu_seconds(roots: Roots, pids: List[int]) -> float:
    """User + system CPU seconds these processes have used (a busy process whose stdout is
    block-buffered looks silent, not stalled)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for pid in pids:
        fields = roots.stat(pid)
        try:
            total += int(fields[11]) + int(fields[12]) if fields else 0
        except (IndexError, ValueError):
            pass
    return total / float(ticks or 100)


def describe(roots: Roots, pids: List[int], limit: int = 5) -> List[str]:
    """'pid (command line)' for a person."""
    out = []
    for pid in pids[:limit]:
        try:
            with open(os.path.join(roots.proc, str(pid), "cmdline"), "rb") as fh:
                cmd = fh.read(200).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            cmd = "?"
        out.append("%d (%s)" % (pid, cmd or "?"))
    return out


def _cgroup_pids(cgroup: Optional[str]) -> List[int]:
    if not cgroup:
        return []
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "rb") as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return []


def _token_pids(roots: Roots, token: str) -> List[int]:
    needle = ("%s=%s" % (TOKEN_VAR, token)).encode()
    out = []
    for pid in roots.pids():
        try:
            with open(os.path.join(roots.proc, str(pid), "environ"), "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(pid)
    return out



def sweep(roots: Roots) -> int:
    """Remove empty attempt cgroups a killed daemon or shim left behind (rmdir refuses a cgroup
    that still holds a process, so a live attempt keeps its own)."""
    from boxagent.health.cgroup import tracking_dir
    parent = tracking_dir(roots.proc, roots.cgroup)
    if not parent:
        return 0
    try:
        names = [n for n in os.listdir(parent) if n.startswith("rgt-")]
    except OSError:
        return 0
    removed = 0
    for name in names:
        path = os.path.join(parent, name)
        remove_cgroup(path)
        removed += not os.path.isdir(path)
    return removed
