"""diagnose's evidence bundle, read on the box in one call: the log windows around the lines the
cause names (and those it overruled, and the runner-up's), the stage's end event (the box's
facts when the stage ended: exit, signal, OOM kills, GPU faults, disks) and the run's recorded
verified pull.

Bounded everywhere: a 1 GB log (or a sparse one with no newline) is read at most READ_MAX bytes
and LINE_MAX per line, within a deadline; the script builds every path itself from the run and
stage names (checked), never from a path the status sent.
"""
from __future__ import annotations

import json
import re
from typing import Any

from boxagent.api import box_json
from rgt_client.box.boxside import SAFE_READ
from rgt_client.mcp import calls
from rgt_client.mcp.safety import Policy, line

WINDOW = 4                 # lines either side of a candidate line
MAX_WINDOWS = 5
MARK = b"RGT-DIAG "

BOX_SCRIPT = SAFE_READ + r'''
import json, os, re, sys, time
HOME = os.path.abspath(os.path.expanduser(os.environ["RGT_HOME"]))
RUN, STAGE, ATTEMPT, WANT, W = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
LINE_MAX, READ_MAX, DEADLINE = 400, 256 << 20, time.time() + 10
OUT = {"windows": [], "stage_end": None, "pull_verified": None, "log_read_bytes": 0}
hard_deadline(20, lambda: sys.stdout.write("RGT-DIAG " + json.dumps(dict(OUT, deadline_hit=True)) + "\n"))

def windows(path, wanted):
    if not wanted:
        return
    last = max(wanted)
    keep = {}
    n, got, buf = 0, 0, b""
    try:
        fh = open_regular(path)          # a FIFO or a link at the log's path: an error, never a block
    except OSError as exc:
        OUT["log_error"] = exc.strerror
        return
    with fh:
        while n <= last + W and got < READ_MAX and time.time() < DEADLINE:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            got += len(chunk)
            parts = (buf + chunk).split(b"\n")
            buf = parts.pop()[:LINE_MAX * 4]
            for raw in parts:
                n += 1
                if any(abs(n - w) <= W for w in wanted):
                    keep[n] = raw[:LINE_MAX].decode("utf-8", "replace")
        if buf and n < last + W:
            n += 1
            if any(abs(n - w) <= W for w in wanted):
                keep[n] = buf[:LINE_MAX].decode("utf-8", "replace")
    OUT["log_read_bytes"] = got
    for w in wanted:
        OUT["windows"].append({"line": w, "lines": [[i, keep[i]] for i in range(w - W, w + W + 1) if i in keep]})

def stage_end():
    path = os.path.join(HOME, "events.jsonl")
    try:
        with open_regular(path) as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - (8 << 20)))
            data = fh.read(8 << 20)
    except OSError:
        return
    for raw in reversed(data.split(b"\n")):
        if len(raw) > 65536 or not raw.strip():
            continue
        e = loads(raw)
        if isinstance(e, dict) and e.get("run") == RUN and e.get("stage") == STAGE and \
                str(e.get("type", "")).startswith("stage_") and e.get("type") != "stage_started":
            OUT["stage_end"] = e
            return

if NAME.match(RUN) and ".." not in RUN:
    run_dir = os.path.join(HOME, "runs", RUN)
    if STAGE and NAME.match(STAGE) and ".." not in STAGE and ATTEMPT.isdigit():
        wanted = sorted(set(int(x) for x in WANT.split(",") if x.isdigit()))[:5]
        windows(os.path.join(run_dir, "logs", "%s.%s.log" % (STAGE, ATTEMPT)), wanted)
        stage_end()
    try:
        with open_regular(os.path.join(run_dir, "pull_verified.json")) as fh:
            OUT["pull_verified"] = loads(fh.read(65536))
    except OSError:
        pass
sys.stdout.write("RGT-DIAG " + json.dumps(OUT) + "\n")
'''

_LINE_NO = re.compile(r"\bline (\d{1,9})\b")


def candidate_lines(cause: dict[str, Any]) -> list[int]:
    """The log line numbers the cause, what it overruled and its runner-up name ("line 12: ...")."""
    texts: list[Any] = [cause.get("decided_by"), cause.get("decided_by_fact")]
    for key in ("evidence", "overruled"):
        texts += cause.get(key) or [] if isinstance(cause.get(key), list) else []
    texts.append(json.dumps(cause.get("runner_up")) if cause.get("runner_up") is not None else None)
    found: list[int] = []
    for t in texts:
        for m in _LINE_NO.finditer(t if isinstance(t, str) else json.dumps(t) if t else ""):
            n = int(m.group(1))
            if n not in found:
                found.append(n)
    return found[:MAX_WINDOWS]


def read_bundle(policy: Policy, host: str, run: str, stage: str, attempt: int | None,
                wanted: list[int]) -> dict[str, Any]:
    t = calls.target(host, policy.ssh_config)
    out = calls.box_script(t, BOX_SCRIPT, [run, stage or "", str(attempt or ""),
                                           ",".join(str(n) for n in wanted), str(WINDOW)],
                           timeout=60.0, max_out=4 << 20)
    at = out.rfind(MARK)
    try:
        data = box_json(out[at + len(MARK):]) if at >= 0 else None
    except ValueError:      # BadJSON: too deep, too big, not JSON
        data = None
    if not isinstance(data, dict):
        raise calls.ClientError("%s answered the evidence read with something else" % host,
                                "reinstall the agent: rgt-client install %s" % host)
    return data


FACT_SKIP = ("id", "host", "summary", "evidence", "last_lines", "log", "cause", "run", "stage")


def facts_of(end_event: Any, policy: Policy) -> dict[str, Any]:
    """The stage's end event without what diagnose shows elsewhere: the box's facts."""
    if not isinstance(end_event, dict):
        return {}
    out: dict[str, Any] = {}
    for k, v in list(end_event.items())[:40]:
        key = line(k, policy, 60) or ""
        if k in FACT_SKIP:
            continue
        if isinstance(v, (int, float, bool)) or v is None:
            out[key] = v
        else:
            out[key] = line(v if isinstance(v, str) else json.dumps(v)[:2000], policy, 300)
    return out


def windows_of(data: dict[str, Any], policy: Policy) -> list[dict[str, Any]]:
    out = []
    for w in (data.get("windows") or [])[:MAX_WINDOWS]:
        if not isinstance(w, dict):
            continue
        rows = [r for r in (w.get("lines") or []) if isinstance(r, list) and len(r) == 2][:2 * WINDOW + 1]
        out.append({"line": w.get("line") if isinstance(w.get("line"), int) else None,
                    "lines": ["%s: %s" % (r[0] if isinstance(r[0], int) else "?", line(r[1], policy, 300))
                              for r in rows]})
    return out
