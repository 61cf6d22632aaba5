"""Pieces of evidence diagnose() weighs: the deciding log hit (decide.py), the disks (the
box's own, or a `df` the log printed), the signal."""
from __future__ import annotations

import os
import re
import signal as _signal
from typing import Any, Dict, List, Optional, Tuple

from boxagent.triage.builtin_rules import CLASS_RANK
from boxagent.triage.decide import Decision, decide, hits_of  # noqa: F401 (hits_of: re-export)
from boxagent.triage.rules import SEVERITY_RANK, SOURCE_RANK

FULL_PCT = 98.0                      # a filesystem this full counts as full (reserved blocks)
_PATH = re.compile(r"(/[A-Za-z0-9._@+~=,%-]+(?:/[A-Za-z0-9._@+~=,%-]*)*)")
CRASH_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGSYS", "SIGTRAP")
# `df -h` / `df -i` output a job (or the person pasting its log) printed near the failure
_DF_HEAD = re.compile(r"^Filesystem +(Size|[0-9]*[KMG]?-blocks|Inodes) ")
_DF_ROW = re.compile(r"^(\S+) +\S+ +\S+ +\S+ +([0-9]+)% +(/\S*)\s*$")
_STATUS = re.compile(r"exit status (-?[0-9]+)|exitcode *: *(-?[0-9]+)|exit code (-?[0-9]+)")
# Windows NTSTATUS codes a dead child reports as its exit status
_NTSTATUS = {3221225477: "0xC0000005: an access violation, a native crash",
             3221226505: "0xC0000409: a stack buffer overrun, a native crash",
             3221225725: "0xC00000FD: a stack overflow, a native crash"}


# -- log hits
def class_rank(cls: str) -> int:
    return CLASS_RANK.index(cls) if cls in CLASS_RANK else -1


def hit_key(h: Dict[str, Any]) -> Tuple[int, int, int, int]:
    """Most severe, then job > profile > built-in, then most specific class, then latest."""
    return (_rank(SEVERITY_RANK, h.get("severity"), 1), _rank(SOURCE_RANK, h.get("source"), 2),
            class_rank(h.get("class", "")), -int(h.get("line_no") or 0))


def _rank(table: Dict[str, int], name: Any, default: int) -> int:
    """A hit read back from JSON may lack the field (or hold a non-string): the default."""
    return table.get(name, default) if isinstance(name, str) else default


def failure_hits(facts: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The hits that can explain a failure: warning/critical ones, and of those only the ones
    after the last progress line when there are any (an error the job survived is not what
    killed it)."""
    hits = [h for h in hits_of(facts) if h.get("severity") in ("critical", "warning")]
    after = [h for h in hits if h.get("after_progress")]
    if after:
        return after
    pl = facts.get("progress_line_no")
    if pl is not None:
        later = [h for h in hits if (h.get("line_no") or 0) > pl]
        if later:
            return later
    return hits


def top_hit(facts: Dict[str, Any], classes: Optional[Tuple[str, ...]] = None) -> Optional[Dict[str, Any]]:
    """The deciding hit (decide.py); with `classes`, the latest failure hit of those."""
    if classes is None:
        d = decide(facts)
        return d.hit if d is not None and d.kind != "noise" else None
    hits = [h for h in failure_hits(facts) if h["class"] in classes]
    return max(hits, key=lambda h: int(h.get("line_no") or 0)) if hits else None


def tracebacks(facts: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [h for h in hits_of(facts) if h.get("tag") == "traceback"]


def hit_line(h: Dict[str, Any]) -> str:
    """A log line as evidence: "log line N" (the log's line, not the source's: a traceback's
    own "line 9" is the code's)."""
    return "log line %s: %s" % (h.get("line_no"), h.get("line", ""))


def class_evidence(facts: Dict[str, Any], best: Dict[str, Any], limit: int = 3) -> List[str]:
    """The deciding line first, then other lines of its class, then what else was seen."""
    same = [h for h in hits_of(facts) if h is not best and h.get("class") == best["class"] and h.get("line") != best.get("line")
            and h.get("severity") != "info"]
    ev = [hit_line(best)] + [hit_line(h) for h in same[-(limit - 1):]]
    others: Dict[str, Any] = {}       # class -> its first line number
    for h in failure_hits(facts):
        if h.get("class") != best["class"] and h.get("severity") == "critical":
            others.setdefault(h["class"], h.get("line_no"))
    if others:
        ev.append("also in the log: " + ", ".join("%s (log line %s)" % kv for kv in sorted(others.items())))
    return ev


# -- disks
def _pct(d: Dict[str, Any], key: str) -> Optional[float]:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def probe_disk(path: str) -> Optional[Dict[str, Any]]:
    """statvfs of the nearest existing ancestor (the CLI on the box; never the daemon: an NFS
    mount that hangs must not hang the loop)."""
    p = os.path.abspath(path)
    while p and not os.path.exists(p):
        p = os.path.dirname(p) if p != "/" else ""
    if not p:
        return None
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    out = {"path": p, "role": "probe", "bytes_total": st.f_blocks * st.f_frsize,
           "bytes_used_pct": None, "inodes_total": st.f_files, "inodes_used_pct": None}
    if st.f_blocks:
        out["bytes_used_pct"] = round(100.0 * (1 - float(st.f_bavail) / st.f_blocks), 1)
    if st.f_files:
        out["inodes_used_pct"] = round(100.0 * (1 - float(st.f_favail) / st.f_files), 1)
    return out


def paths_in(lines: List[str]) -> List[str]:
    return [m.group(1) for line in lines for m in _PATH.finditer(line or "")]


def _relevance(d: Dict[str, Any], paths: List[str]) -> int:
    root = str(d.get("path") or "").rstrip("/") + "/"
    return max([len(root) for p in paths if (p.rstrip("/") + "/").startswith(root)] or [0])


def log_df(lines: List[str]) -> List[Dict[str, Any]]:
    """Filesystems as a `df -h` / `df -i` printed in the log shows them (role "log df")."""
    out: Dict[str, Dict[str, Any]] = {}
    key = None
    for line in lines:
        line = str(line or "").strip()
        head = _DF_HEAD.match(line)
        if head:
            key = "inodes_used_pct" if head.group(1) == "Inodes" else "bytes_used_pct"
            continue
        row = _DF_ROW.match(line) if key else None
        if row is None or key is None:        # (a row counts only under a header)
            key = None if not line else key
            continue
        d = out.setdefault(row.group(3), {"path": row.group(3), "role": "log df",
                                          "bytes_used_pct": None, "inodes_used_pct": None})
        d[key] = float(row.group(2))
    return list(out.values())


def _log_df_verdict(disks: List[Dict[str, Any]]) -> Tuple[str, List[str]]:
    """ENOSPC while the log's own df shows bytes free on every filesystem it lists: the
    inodes ran out (a quota says "Disk quota exceeded" instead)."""
    d = disks[0]
    return "inodes_full", ["the log's own df shows bytes free (%s: %.0f%% used), yet the write "
                           "got ENOSPC: most likely the inodes ran out; `df -i` to confirm"
                           % (d.get("path"), _pct(d, "bytes_used_pct") or 0)]


def disk_verdict(facts: Dict[str, Any], lines: List[str]) -> Tuple[str, List[str]]:
    """disk_full or inodes_full, decided with the filesystems' byte and inode use: the box's
    own (facts.disks, a probe), else a df the log printed."""
    paths = paths_in(lines) + [p for p in (facts.get("workdir"),) if p]
    disks = [d for d in facts.get("disks") or [] if isinstance(d, dict)]
    from_log = not disks and not facts.get("probe_disks")
    if from_log:
        disks = log_df([str(x) for x in facts.get("last_lines") or []])
    if facts.get("probe_disks"):
        known = set(d.get("path") for d in disks)
        for p in paths:
            d = probe_disk(p)
            if d is not None and d["path"] not in known:
                known.add(d["path"])
                disks.append(d)
    disks.sort(key=lambda d: -_relevance(d, paths))
    for d in disks:
        b, i = _pct(d, "bytes_used_pct"), _pct(d, "inodes_used_pct")
        if b is not None and b >= FULL_PCT:
            return "disk_full", ["%s: %.0f%% of bytes used" % (d.get("path"), b)]
        if i is not None and i >= FULL_PCT:
            return "inodes_full", ["%s: %.0f%% of inodes used while bytes are %s used"
                                   % (d.get("path"), i, "%.0f%%" % b if b is not None else "?")]
    if disks and from_log and all(_pct(d, "bytes_used_pct") is not None for d in disks):
        return _log_df_verdict(disks)
    if disks:
        d = disks[0]
        return "disk_full", ["no filesystem is full now (space freed since?): %s bytes %s%%, "
                             "inodes %s%% used" % (d.get("path"), d.get("bytes_used_pct"),
                                                   d.get("inodes_used_pct"))]
    if facts.get("offline"):
        return "disk_full", ["filesystem not checked (offline triage): give --path DIR (or "
                             "--workdir) to tell a full disk from full inodes"]
    return "disk_full", ["filesystem state unknown"]


# -- memory: the box's cgroup vocabulary
def cgroup_files(version: Optional[str]) -> Tuple[str, str]:
    """(the memory limit file, the file with the oom_kill counter) as the box names them."""
    if version == "v2":
        return "memory.max", "memory.events"
    if version == "v1":
        return "memory.limit_in_bytes", "memory.oom_control"
    return ("memory.max on cgroup v2, memory.limit_in_bytes on v1",
            "memory.events on cgroup v2, memory.oom_control on v1")


def cgroup_oom_remediation(version: Optional[str]) -> str:
    limit, _ = cgroup_files(version)
    return ("the container's memory limit (%s) was hit: size DataLoader workers against that "
            "limit, not the CPU count; share big tensors (memmap); lower batch or prefetch" % limit)


def oom_checks(facts: Dict[str, Any]) -> str:
    """How a person tells whether the OOM killer sent a SIGKILL."""
    _, counter = cgroup_files(facts.get("cgroup_version"))
    return ("`dmesg -T | grep -i -e oom -e killed` and the cgroup's oom_kill counter (%s)"
            % counter)


def oom_unknown(facts: Dict[str, Any]) -> str:
    """Why the cgroup oom_kill counter says nothing: nobody looked (offline), or unreadable."""
    if facts.get("offline"):
        return "cgroup oom_kill counter not checked (offline triage)"
    return "cgroup oom_kill counter not readable"


# -- signals
def child_status(lines: List[str]) -> Optional[str]:
    """What a launcher's report says of its child's exit ("exit status -9", "exitcode: 1")."""
    for line in lines:
        m = _STATUS.search(str(line or ""))
        if m is None:
            continue
        code = int(next(g for g in m.groups() if g is not None))
        if code < 0:
            return "killed by %s" % signal_name(-code)
        if code in _NTSTATUS:
            return "exit status %d = %s" % (code, _NTSTATUS[code])
        return "exit status %d" % code
    return None


def signal_name(num: Optional[int]) -> str:
    try:
        return _signal.Signals(int(num)).name  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return "signal %s" % num


def signal_of(facts: Dict[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(SIGNAME, how we know) from facts.signal, or from a shell's exit code 128+N."""
    sig = facts.get("signal")
    if isinstance(sig, str) and sig:
        name = sig.upper() if sig.upper().startswith("SIG") else "SIG" + sig.upper()
        return name, "killed by %s" % name
    if isinstance(sig, int) and sig > 0:
        return signal_name(sig), "killed by %s (signal %d)" % (signal_name(sig), sig)
    ec = facts.get("exit_code")
    if isinstance(ec, int) and -64 <= ec < 0:          # Popen.returncode / torchrun's "exitcode: -9"
        name = signal_name(-ec)
        return name, "exit code %d = killed by %s" % (ec, name)
    if isinstance(ec, int) and 128 < ec <= 128 + 64:
        name = signal_name(ec - 128)
        return name, "exit code %d = 128 + %s" % (ec, name)
    if isinstance(ec, int) and ec in _WRAPPED_SIGNALS:
        name = signal_name(256 - ec)
        return name, ("exit code %d = 256 - %d: a launcher exited with its child's returncode "
                      "-%d (%s)" % (ec, 256 - ec, 256 - ec, name))
    return None, None


# A Python launcher that ends with `sys.exit(proc.returncode)` after its child died by signal N
# exits with status 256 - N (the -N wraps to a byte): DeepSpeed's launch.py sigkill_handler,
# hand-written wrappers around subprocess. Only the kills from outside: 247 (SIGKILL) and 241
# (SIGTERM); a low status like 255 (-1) is every program's "failed".
_WRAPPED_SIGNALS = (256 - 9, 256 - 15)
