"""wait_for_change: one bounded remote command that blocks on the box's events.jsonl and returns
on the first new event after the cursor, or at its bound, with the run's status beside it.

Why one remote command and not a poll: an MCP client gives a tool call about 60 s, and a model
that polls status every few seconds spends its context on identical answers. The script below
stats the events file every 50 ms on the box (a local stat, no ssh round trip), so a stage's end
reaches the model within a second, and one ssh call covers the whole wait.

The cursor is an event id (wire/events.py: `<ms>-<daemon prefix>-<seq>`, written first on each
line). Events after it are the ones after its line in the file; a cursor no longer in the file
(rotated away) takes the events whose millisecond is later. The cursor is the caller's, so the
same call after a restart of this server or of the model returns each event once.
"""
from __future__ import annotations

import json
from typing import Any

from rgt_client.mcp import calls
from rgt_client.mcp.safety import Policy, line, lines

MAX_WAIT_S = 50.0
MAX_EVENTS = 20
WAIT_MAX_OUT = 6 << 20     # the events (bounded on the box) and one status answer (the agent's 4 MiB)
MARK = b"RGT-WAIT "

# Runs on the box: python3 (3.8+), stdlib only; args: cursor ("" = from now), run ("" = all),
# timeout_s, max events.
BOX_SCRIPT = r'''
import json, os, subprocess, sys, time
HOME = os.path.abspath(os.path.expanduser(os.environ["RGT_HOME"]))
PATH = os.path.join(HOME, "events.jsonl")
AFTER, RUN, TIMEOUT, MAXN = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
QUIET = ("heartbeat", "ping")
FOLLOW = ("run_queued", "run_started", "stage_started")   # told with the next change; not one alone
BURST_S = 0.1     # a stage's end and the next start or the run's end are written in the same tick
LINE_MAX, TAIL, READ_MAX, CHUNK = 65536, 8 << 20, 64 << 20, 1 << 20

def ms(eid):
    try:
        return int(str(eid).split("-", 1)[0])
    except ValueError:
        return -1

def parse(raw):
    raw = raw.strip()
    if not raw or len(raw) > LINE_MAX:
        return None
    try:
        obj = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("id"), str) else None

def wanted(e):
    if e.get("type") in QUIET:
        return False
    if not RUN:
        return True
    return e.get("run") == RUN or (e.get("run") is None and e.get("severity") in ("warning", "critical"))

def tail_events(path):
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            start = max(0, st.st_size - TAIL)
            fh.seek(start)
            data = fh.read(TAIL)
    except OSError:
        return [], None, 0
    end = data.rfind(b"\n") + 1
    first = data.find(b"\n") + 1 if start else 0      # a line cut by the read window is not an event
    events = [e for e in map(parse, data[first:end].split(b"\n")) if e] if end > first else []
    return events, st.st_ino, start + end

class Reader:
    def __init__(self):
        self.ino, self.offset, self.pending, self.skip, self.read = None, 0, b"", False, 0

    def start_at_end(self):
        """From now on; the last event already there is the cursor."""
        try:
            with open(PATH, "rb") as fh:
                st = os.fstat(fh.fileno())
                fh.seek(max(0, st.st_size - 65536))
                data = fh.read(65536)
        except OSError:
            return None
        self.ino, self.offset = st.st_ino, st.st_size
        for raw in reversed(data.split(b"\n")):
            e = parse(raw)
            if e:
                return e["id"]
        return None

    def new(self):
        try:
            st = os.stat(PATH)
        except OSError:
            return []
        if st.st_ino != self.ino:
            self.ino, self.offset, self.pending, self.skip = st.st_ino, 0, b"", False
        if st.st_size <= self.offset or self.read >= READ_MAX:
            return []
        with open(PATH, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(CHUNK)
        self.offset += len(data)
        self.read += len(data)
        out = []
        buf = self.pending + data
        parts = buf.split(b"\n")
        self.pending = parts.pop()
        for raw in parts:
            if self.skip:
                self.skip = False
                continue
            e = parse(raw)
            if e:
                out.append(e)
        if len(self.pending) > LINE_MAX:
            self.pending, self.skip = b"", True
        return out

def backlog(reader):
    """Events after the cursor already in the file(s), and the reader placed after them."""
    if not AFTER:
        return [], reader.start_at_end()
    events, ino, end = tail_events(PATH)
    ids = [e["id"] for e in events]
    if AFTER in ids:
        after = events[ids.index(AFTER) + 1:]
    else:
        old = tail_events(PATH + ".1")[0]
        after = [e for e in old + events if ms(e["id"]) > ms(AFTER)]
    reader.ino, reader.offset = ino, end
    return after, AFTER

def main():
    deadline = time.time() + TIMEOUT
    reader = Reader()
    seen, cursor = backlog(reader)
    out, more, woke = [], False, None
    while True:
        for e in seen:
            if len(out) >= MAXN:
                more = True
                break
            cursor = e["id"]
            if wanted(e):
                out.append(e)
                if woke is None and e.get("type") not in FOLLOW:
                    woke = time.time()
        now = time.time()
        if more or now >= deadline or (woke is not None and now >= woke + BURST_S):
            break
        time.sleep(0.05)
        seen = reader.new()
    cmd = [sys.executable, "-S", os.path.join(HOME, "rgt-agent.pyz"), "status", "--json", "--events", "0"]
    if RUN:
        cmd += ["--run", RUN]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        status, rc = p.stdout[:4 << 20], p.returncode
    except (OSError, subprocess.TimeoutExpired):
        status, rc = b"", None
    head = {"events": out, "cursor": cursor or None, "more": more, "timed_out": woke is None and not more,
            "status_rc": rc}
    sys.stdout.buffer.write(b"RGT-WAIT " + json.dumps(head).encode("utf-8") + b"\n" + status)
    sys.stdout.flush()

main()
'''


def box_wait(policy: Policy, host: str, run: str | None, cursor: str | None, timeout_s: float) -> dict[str, Any]:
    """Block on the box (one ssh call) until an event after `cursor` or timeout_s."""
    t = calls.target(host, policy.ssh_config)
    out = calls.box_script(t, BOX_SCRIPT, [cursor or "", run or "", "%.3f" % timeout_s, str(MAX_EVENTS)],
                           timeout=timeout_s + 60.0, max_out=WAIT_MAX_OUT)
    at = out.find(MARK)
    if at < 0:
        raise calls.ClientError("%s answered the wait with something else" % host,
                                "reinstall the agent: rgt-client install %s" % host)
    head_end = out.find(b"\n", at)
    try:
        head = json.loads(out[at + len(MARK):head_end].decode("utf-8", "replace"))
    except ValueError:
        head = None
    if not isinstance(head, dict):
        raise calls.ClientError("%s answered the wait with something that is not JSON" % host,
                                "reinstall the agent: rgt-client install %s" % host)
    head["status_doc"] = _status_doc(out[head_end + 1:], host)
    return head


def _status_doc(raw: bytes, host: str) -> dict[str, Any] | None:
    try:
        return calls.validate_status(json.loads(raw.decode("utf-8", "replace")), host)
    except (ValueError, RecursionError, calls.ClientError):
        return None


EVENT_KEYS = ("exit_code", "attempt", "duration_s", "failed_stage")


def event(e: Any, policy: Policy) -> dict[str, Any]:
    """One event for a model: what happened, to what, and its cause if it has one."""
    e = e if isinstance(e, dict) else {}
    out: dict[str, Any] = {"id": line(e.get("id"), policy, 64), "at": line(e.get("at"), policy, 40),
                           "type": line(e.get("type"), policy, 60), "severity": line(e.get("severity"), policy, 20),
                           "run": line(e.get("run"), policy, 80), "stage": line(e.get("stage"), policy, 80),
                           "summary": line(e.get("summary"), policy, 300),
                           "evidence": lines(e.get("evidence"), policy, 3, 300)}
    for k in EVENT_KEYS:
        if isinstance(e.get(k), (int, float, str)) and not isinstance(e.get(k), bool):
            out[k] = e[k] if not isinstance(e[k], str) else line(e[k], policy, 80)
    if isinstance(e.get("cause"), dict):
        out["cause_class"] = line(e["cause"].get("class"), policy, 80)
    return {k: v for k, v in out.items() if v not in (None, [])}
