"""The box's own facts where the log is silent or ambiguous.

The agent reads the stage's filesystems (statvfs) when the stage ends. A stage that exits
non-zero with nothing in its log while its workdir's filesystem is full ran out of space
(seen: `dd` filling a tmpfs, then `exit 1`: no "No space left" ever printed); an I/O error or
"cannot be opened" while writing a checkpoint on a full volume is the same failure in another
library's words (HDF5, zip, a C extension). The fact decides, and the cause says which:
`decided_by_fact` ("statvfs /work: 100% of bytes used at the stage's end").

full_disk(facts) -> (class, the fact) for a full workdir filesystem, or None.
io_words(line) -> whether a line reports a failed write/open (the words a full volume causes).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from boxagent.triage.evidence import FULL_PCT

_IO = re.compile(r"I/O error|Input/output error|\[Errno 5\]|cannot be opened|[Uu]nable to (open|"
                 r"create|write|flush|extend)|write failed|[Ff]ailed to (write|save|flush|create)|"
                 r"[Ee]rror (writing|while writing|saving)|short write|[Nn]o space")


def io_words(line: str) -> bool:
    return bool(_IO.search(str(line or "")))


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _workdir_disks(facts: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The filesystem the stage wrote to: the one read for its workdir (role "workdir"), else
    the listed mount that holds the workdir (the longest prefix: "/" being full says nothing
    of a workdir on /mnt/data)."""
    disks = [d for d in facts.get("disks") or [] if isinstance(d, dict)]
    wd = str(facts.get("workdir") or "")
    mine = [d for d in disks if wd and (wd.rstrip("/") + "/").startswith(
        str(d.get("path") or "\0").rstrip("/") + "/")]
    if mine:
        return sorted(mine, key=lambda d: -len(str(d.get("path") or "")))[:1]
    own = [d for d in disks if d.get("role") == "workdir"]   # other runs' workdirs are listed too
    return own if len(own) == 1 else []


def full_disk(facts: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """("disk_full" | "inodes_full", the fact) when the workdir's filesystem was full at the
    stage's end."""
    for d in _workdir_disks(facts):
        b, i = _num(d.get("bytes_used_pct")), _num(d.get("inodes_used_pct"))
        if b is not None and b >= FULL_PCT:
            return "disk_full", ("statvfs %s: %.0f%% of bytes used at the stage's end"
                                 % (d.get("path"), b))
        if i is not None and i >= FULL_PCT:
            return "inodes_full", ("statvfs %s: %.0f%% of inodes used at the stage's end"
                                   % (d.get("path"), i))
    return None
