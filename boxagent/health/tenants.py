"""Who a GPU process is: one of rgt's stages, or a tenant rgt did not start.

Field failure (gotcha U11): a process rgt did not start held 20.6 GiB of the GPU; NVML listed its
pid and nothing else said so, and the next run's CUDA OOM got the generic "check for other jobs".
Every stage process inherits RGT_RUN / RGT_STAGE / RGT_ATTEMPT_TOKEN (engine/launch.py,
engine/contain.py), so /proc/PID/environ names the stage of any process rgt started. A process
whose environ we may not read runs as another user: rgt's stages run as the daemon's user, so it
is not ours. A pid /proc does not list lives in another PID namespace (another container or the
host): named as such, never guessed at.

Owners are remembered by (pid, start time) for a while after the process ends, because the kernel
log's Xid line is often read after the faulting process has exited: "the stage that held that pid
when it ended".
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

# Another tenant holding more than this share of a GPU's memory is news: the slot scheduler
# hands such a GPU out last and says so; a job's [preflight] refuses it unless told otherwise.
SHARED_PCT = 10.0
_ENV_LIMIT = 256 << 10     # a huge environment is cut; RGT_* sits where the daemon put it
_CMD_LIMIT = 300
_SECRET_WORD = re.compile(r"(token|secret|passw|pwd|api[_-]?key|auth|credential|private)", re.I)
_URL_CREDS = re.compile(r"(\w+://)[^/@\s]+@")


def redact_argv(argv: List[str]) -> str:
    """A command line safe to show: the value of any secret-looking flag or NAME=value is
    replaced by *** (a foreign process's `--hf-token xyz` must not reach status.json)."""
    out: List[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        name, eq, _value = arg.partition("=")
        if eq and _SECRET_WORD.search(name):
            out.append(name + "=***")
            continue
        if arg.startswith("-") and _SECRET_WORD.search(arg):
            hide_next = True
        out.append(_URL_CREDS.sub(r"\1***@", arg))
    text = " ".join(out)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text[:_CMD_LIMIT]


def _read(path: str, limit: int) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _start_ticks(proc_root: str, pid: int) -> Optional[str]:
    raw = _read(os.path.join(proc_root, str(pid), "stat"), 4096)
    if raw is None:
        return None
    text = raw.decode("ascii", "replace")
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def read_owner(proc_root: str, pid: int, self_pid: Optional[int] = None) -> Dict[str, Any]:
    """{pid, visible, rgt, run, stage, command}; rgt None when it cannot be told."""
    base = os.path.join(proc_root, str(pid))
    owner: Dict[str, Any] = {"pid": pid, "visible": os.path.isdir(base), "rgt": None,
                             "run": None, "stage": None, "command": None}
    if not owner["visible"]:
        owner["rgt"] = False        # not in our PID namespace: another container or the host
        return owner
    cmd = _read(os.path.join(base, "cmdline"), 8192)
    if cmd:
        owner["command"] = redact_argv([a.decode("utf-8", "replace") for a in cmd.rstrip(b"\0").split(b"\0")])
    if pid == (self_pid if self_pid is not None else os.getpid()):
        owner.update(rgt=True, role="agent")
        return owner
    env = _read(os.path.join(base, "environ"), _ENV_LIMIT)
    if env is None:
        owner["rgt"] = False   # another user's process: not one of ours
        return owner
    found = {}
    for item in env.split(b"\0"):
        if item.startswith(b"RGT_"):
            k, _, v = item.partition(b"=")
            found[k.decode("ascii", "replace")] = v.decode("utf-8", "replace")[:200]
    owner["rgt"] = "RGT_ATTEMPT_TOKEN" in found
    if owner["rgt"]:
        owner.update(run=found.get("RGT_RUN"), stage=found.get("RGT_STAGE"))
    return owner


class PidBook:
    """Owners by pid, kept `keep_s` after the pid was last seen (the Xid line comes late)."""

    def __init__(self, proc_root: str, keep_s: float = 900.0, limit: int = 512):
        self.proc_root = proc_root
        self.keep_s = keep_s
        self.limit = limit
        self._book: Dict[int, Tuple[Optional[str], Dict[str, Any], float]] = {}

    def owner(self, pid: int, now: float) -> Dict[str, Any]:
        """The owner of a live pid (re-read when the pid was reused), else the remembered one."""
        ticks = _start_ticks(self.proc_root, pid)
        known = self._book.get(pid)
        if ticks is None and known is not None:
            return dict(known[1], ended=True)
        if ticks is None:
            # gone before anyone looked (or never in our PID namespace): whose it was is unknown
            return {"pid": pid, "visible": False, "rgt": None, "run": None, "stage": None,
                    "command": None, "ended": True}
        if known is not None and known[0] == ticks and ticks is not None:
            self._book[pid] = (ticks, known[1], now)
            return dict(known[1])
        owner = read_owner(self.proc_root, pid)
        if ticks is not None:
            self._book[pid] = (ticks, owner, now)
            self._trim(now)
        return dict(owner)

    def _trim(self, now: float) -> None:
        stale = [p for p, (_t, _o, seen) in self._book.items() if now - seen > self.keep_s]
        for p in stale:
            del self._book[p]
        if len(self._book) > self.limit:
            for p, _ in sorted(self._book.items(), key=lambda kv: kv[1][2])[:len(self._book) - self.limit]:
                del self._book[p]

    def annotate(self, gpus: List[Dict[str, Any]], now: float) -> None:
        """gpus[].processes[] gain rgt, run, stage and command (and keep pid, memory, visible)."""
        for g in gpus:
            for p in g.get("processes") or []:
                # NVML lists live processes: one /proc does not show is in another namespace
                o = self.owner(p["pid"], now) if p.get("visible") else read_owner(self.proc_root, p["pid"])
                p.update(rgt=bool(o.get("rgt")), run=o.get("run"), stage=o.get("stage"),
                         command=o.get("command"))
                if not p.get("visible"):
                    p["note"] = "not visible from this container (another container or the host)"


def foreign(gpu: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The processes on one GPU (a status.json gpus[] entry) that rgt did not start."""
    return [p for p in gpu.get("processes") or [] if p.get("rgt") is False]


def describe(p: Dict[str, Any]) -> str:
    """'pid 609 (python3 serve.py) holds 20.6 GiB' / 'pid 609, not visible from this container'."""
    from boxagent.base.units import format_bytes
    mem = p.get("used_memory_bytes")
    what = " (%s)" % p["command"] if p.get("command") else (
        ", not visible from this container" if not p.get("visible") else "")
    held = " holds %s" % format_bytes(mem) if isinstance(mem, int) else " holds GPU memory (amount unknown)"
    return "pid %s%s%s" % (p.get("pid"), what, held)
