"""captured/index.toml: read it, merge a capture session into it, write it back.

TOML is written by hand (the stdlib reads TOML, it does not write it): every value here is a
string or an int, and a JSON string literal is a valid TOML basic string.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence

try:
    import tomllib
except ImportError:  # Python 3.10: the dev extra installs tomli
    import tomli as tomllib  # type: ignore[no-redef]

KEY_ORDER = ("file", "class", "exit_code", "source", "url", "why", "library", "python",
             "captured_at", "command", "setup", "observed", "oom_kill_delta", "disk_path",
             "disk_bytes_used_pct", "disk_inodes_used_pct", "outcome", "sha256")
HEADER = """\
# Captured cases: REAL library output recorded on a real machine by capture/capture_torch.py
# (torch, tqdm, the kernel's OOM killer, tmpfs limits), one [[case]] per log, in the field
# corpus format (see ../index.toml), plus where each came from:
#   library, python, captured_at, command   what ran, under what, when
#   setup      what the capture arranged (a tmpfs size, a memory cgroup limit)
#   observed   what the machine said that the log cannot (statvfs after the run, the
#              cgroup's oom_kill counter): the evidence the daemon reads at a stage's end;
#              the same as numbers: oom_kill_delta, disk_path + disk_bytes_used_pct +
#              disk_inodes_used_pct (a scorer may hand them to diagnose() as the daemon would)
#   outcome    "warning": the run exited 0 and its class is what triage should warn about
#              (no cause: exit 0 is never called failed); absent: the usual judgement
#   sha256     of the log's bytes, so a changed byte (an editor, a line-ending filter) shows
# The logs are byte for byte what the commands wrote (\\r redraws, ANSI codes included);
# regenerate with capture/capture_torch.py, never edit by hand.
"""


def read(index: Path) -> List[Dict[str, Any]]:
    if not index.is_file():
        return []
    with open(index, "rb") as fh:
        return list(tomllib.load(fh).get("case", []))


def scenario_of(entry: Dict[str, Any]) -> str:
    return str(entry.get("url", "")).rpartition("#")[2]


def merge(old: List[Dict[str, Any]], fresh: Dict[str, Dict[str, Any]],
          order: Sequence[str]) -> List[Dict[str, Any]]:
    """The fresh entries, plus the old ones of scenarios not captured this time (skipped
    here, captured on another machine), in scenario order; unknown old entries last."""
    by_name = {scenario_of(e): e for e in old}
    by_name.update(fresh)
    rank = {n: i for i, n in enumerate(order)}
    return sorted(by_name.values(), key=lambda e: rank.get(scenario_of(e), len(rank)))


def render(entries: List[Dict[str, Any]]) -> str:
    out = [HEADER]
    for e in entries:
        out.append("[[case]]")
        keys = [k for k in KEY_ORDER if k in e] + sorted(k for k in e if k not in KEY_ORDER)
        for k in keys:
            v = e[k]
            out.append("%s = %s" % (k, v if isinstance(v, int) and not isinstance(v, bool)
                                    else json.dumps(str(v), ensure_ascii=False)))
        out.append("")
    return "\n".join(out)


def write(index: Path, entries: List[Dict[str, Any]]) -> None:
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_name(index.name + ".tmp")
    tmp.write_text(render(entries))
    os.replace(tmp, index)
