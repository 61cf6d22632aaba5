"""The box's event feed, waited on: one bounded remote command that blocks on the box's
events.jsonl and returns on the first new event after a cursor, or at its bound, with the run's
status beside it. `watch` streams with it and the MCP server's wait_for_change is it.

Why one remote command and not a poll: a poll each minute on a new connection never showed a
15 s stage and saw a run end 27 s late. The script below stats the events file every 50 ms on
the box (a local stat, no ssh round trip), so a stage's end reaches the caller within a second
and one round trip, and one ssh call covers the whole wait.

The cursor is an event id (wire/events.py: `<ms>-<daemon prefix>-<seq>`, written first on each
line). Events after it are the ones after its line in the file; a cursor no longer in the file
(rotated away) takes the events whose millisecond is later. The cursor is the caller's, so the
same call after a broken link, a restart of the caller or of the agent returns each event once.
`feed` in the answer says whether the box has an events file at all (an agent too old for it
is polled instead).
"""
from __future__ import annotations

from typing import Any

from boxagent.api import box_json
from rgt_client.status import statusdata
from rgt_client.errors import ClientError
from rgt_client.box.boxside import SAFE_READ
from rgt_client.box.transport import Target, run_python

MAX_WAIT_S = 50.0
MAX_EVENTS = 20
WAIT_MAX_OUT = 6 << 20     # the events (bounded on the box) and one status answer (the agent's 4 MiB)
MARK = b"RGT-WAIT "

# Runs on the box: python3 (3.8+), stdlib only; args: cursor ("" = from now), run ("" = all),
# timeout_s, max events.
BOX_BODY = r'''
import json, os, subprocess, sys, time
HOME = os.path.abspath(os.path.expanduser(os.environ["RGT_HOME"]))
PATH = os.path.join(HOME, "events.jsonl")
OLD = PATH + ".1"
AFTER, RUN, TIMEOUT, MAXN = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
QUIET = ("heartbeat", "ping")
# told with the next change, never one alone: after a resume, a wait that woke on stage_skipped
# cost a model an extra call that said nothing new
FOLLOW = ("run_queued", "run_started", "stage_started", "stage_skipped")
BURST_S = 0.1     # a stage's end and the next start or the run's end are written in the same tick
STATUS_S = 30     # the status beside the events; the whole script ends by TIMEOUT + DEADLINE_SLACK_S
DEADLINE_SLACK_S = STATUS_S + 10
LINE_MAX, TAIL, READ_MAX, CHUNK = 65536, 8 << 20, 64 << 20, 1 << 20
ANSWER = {"events": [], "cursor": None, "more": False, "woke": None}

def ms(eid):
    try:
        return int(str(eid).split("-", 1)[0])
    except ValueError:
        return -1

def parse(raw):
    raw = raw.strip()
    if not raw or len(raw) > LINE_MAX:
        return None
    obj = loads(raw)
    return obj if isinstance(obj, dict) and isinstance(obj.get("id"), str) else None

def wanted(e):
    if e.get("type") in QUIET:
        return False
    if not RUN:
        return True
    return e.get("run") == RUN or (e.get("run") is None and e.get("severity") in ("warning", "critical"))

def tail_events(path):
    try:
        with open_regular(path) as fh:
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
    # Follows events.jsonl by inode and offset. A rotation renames it to events.jsonl.1: what was
    # appended to it after the last read is read there first (a stage_failed written just before
    # a rotation was never delivered), then the new file from its start.
    def __init__(self):
        self.ino, self.offset, self.pending, self.skip, self.read = None, 0, b"", False, 0

    def start_at_end(self):
        # From now on; the last event already there is the cursor.
        try:
            with open_regular(PATH) as fh:
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
        out = []
        while self.read < READ_MAX:
            try:
                fh = open_regular(PATH)
            except OSError:
                return out
            with fh:
                st = os.fstat(fh.fileno())
                if self.ino is not None and st.st_ino != self.ino:
                    out += self._rest_of_rotated()
                    self.ino, self.offset, self.pending, self.skip = st.st_ino, 0, b"", False
                elif self.ino is None:
                    self.ino = st.st_ino
                if st.st_size < self.offset:          # truncated: start it over
                    self.offset, self.pending, self.skip = 0, b"", False
                fh.seek(self.offset)
                data = fh.read(CHUNK)
            if not data:
                return out
            out += self._lines(data)
            if len(data) < CHUNK:
                return out
        return out

    def _rest_of_rotated(self):
        try:
            fh = open_regular(OLD)
        except OSError:
            return []
        out = []
        with fh:
            if os.fstat(fh.fileno()).st_ino != self.ino:   # rotated twice meanwhile: backlog's rule
                return []
            fh.seek(self.offset)
            while self.read < READ_MAX:
                data = fh.read(CHUNK)
                if not data:
                    break
                out += self._lines(data)
        if self.pending and not self.skip:
            e = parse(self.pending)
            if e:
                out.append(e)
        return out

    def _lines(self, data):
        self.offset += len(data)
        self.read += len(data)
        out = []
        parts = (self.pending + data).split(b"\n")
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
    # Events after the cursor already in the files, and the reader placed after them: the
    # current file first, then the rotated one (a rotation between the two reads leaves every
    # event in one of them; the ids weed out what both held).
    if not AFTER:
        return [], reader.start_at_end()
    events, ino, end = tail_events(PATH)
    old = tail_events(OLD)[0]
    ids, both = set(), []
    for e in old + events:
        if e["id"] not in ids:
            ids.add(e["id"])
            both.append(e)
    order = [e["id"] for e in both]
    if AFTER in ids:
        after = both[order.index(AFTER) + 1:]
    else:
        after = [e for e in both if ms(e["id"]) > ms(AFTER)]
    reader.ino, reader.offset = ino, end
    return after, AFTER

def answer(status, rc):
    head = {"events": ANSWER["events"], "cursor": ANSWER["cursor"] or None, "more": ANSWER["more"],
            "timed_out": ANSWER["woke"] is None and not ANSWER["more"], "status_rc": rc,
            "feed": os.path.exists(PATH)}
    sys.stdout.buffer.write(b"RGT-WAIT " + json.dumps(head).encode("utf-8") + b"\n" + status)
    sys.stdout.flush()

def main():
    hard_deadline(TIMEOUT + DEADLINE_SLACK_S, lambda: answer(b"", None))
    deadline = time.time() + TIMEOUT
    reader = Reader()
    seen, ANSWER["cursor"] = backlog(reader)
    out, given = ANSWER["events"], set()
    while True:
        for e in seen:
            if e["id"] in given:
                continue                  # in both files across a rotation: once
            if len(out) >= MAXN:
                ANSWER["more"] = True
                break
            given.add(e["id"])
            ANSWER["cursor"] = e["id"]
            if wanted(e):
                out.append(e)
                if ANSWER["woke"] is None and e.get("type") not in FOLLOW:
                    ANSWER["woke"] = time.time()
        now = time.time()
        if ANSWER["more"] or now >= deadline or (ANSWER["woke"] is not None and now >= ANSWER["woke"] + BURST_S):
            break
        time.sleep(0.05)
        seen = reader.new()
    cmd = [sys.executable, "-S", os.path.join(HOME, "rgt-agent.pyz"), "status", "--json", "--events", "0"]
    if RUN:
        cmd += ["--run", RUN]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=STATUS_S)
        status, rc = p.stdout[:4 << 20], p.returncode
    except (OSError, subprocess.TimeoutExpired):
        status, rc = b"", None
    answer(status, rc)

main()
'''
# Runs on the box: python3 (3.8+), stdlib only; args: cursor ("" = from now), run ("" = all),
# timeout_s, max events.
BOX_SCRIPT = SAFE_READ + BOX_BODY


def box_wait(target: Target, run: str | None, cursor: str | None, timeout_s: float,
             max_events: int = MAX_EVENTS, slack_s: float = 60.0) -> dict[str, Any]:
    """Block on the box (one ssh call) until an event after `cursor` or timeout_s: {events, cursor,
    more, timed_out, feed, status_rc, status_doc}. ClientError when ssh fails (its exit code
    tells a broken link from the rest) or the box answers something else. `slack_s` bounds the
    call past timeout_s: a link that stalls is found out then, not hours later."""
    res = run_python(target, BOX_SCRIPT, [cursor or "", run or "", "%.3f" % timeout_s, str(max_events)],
                     timeout=timeout_s + slack_s, max_out=WAIT_MAX_OUT, bare=True)
    if res.rc != 0:
        from rgt_client.textsafe import safe_line
        raise ClientError("a box-side read on %s failed: %s" % (target.host, safe_line(res.err.strip()[-300:])),
                          "check the agent: rgt-client status %s" % target.host)
    out = res.stdout
    at = out.find(MARK)
    if at < 0:
        raise ClientError("%s answered the wait with something else" % target.host,
                          "reinstall the agent: rgt-client install %s" % target.host)
    head_end = out.find(b"\n", at)
    try:
        head = box_json(out[at + len(MARK):head_end])
    except ValueError:      # BadJSON: too deep, too big, not JSON
        head = None
    if not isinstance(head, dict) or not isinstance(head.get("events", []), list):
        raise ClientError("%s answered the wait with something that is not JSON" % target.host,
                          "reinstall the agent: rgt-client install %s" % target.host)
    head["events"] = [e for e in head.get("events") or [] if isinstance(e, dict)]
    head["status_doc"] = _status_doc(out[head_end + 1:], target.host)
    return head


def _status_doc(raw: bytes, host: str) -> dict[str, Any] | None:
    try:
        return statusdata.validate(box_json(raw), host)
    except (ValueError, ClientError):
        return None
