"""`logs --follow`: ONE ssh connection; a box-side script (remote_scripts.FOLLOW) streams each
stage's new log bytes as the chain moves on and ends with the run (or the --max-wait bound), in
frames that say where each byte came from (followframes.py), so a broken link resumes exactly.
What reaches the terminal goes through logview.FollowView (line rule, textsafe)."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from typing import IO, Callable

from rgt_client import exitcodes
from rgt_client.box.remote_scripts import FOLLOW, parse_result
from rgt_client.errors import ClientError
from rgt_client.jobs.followframes import Frames
from rgt_client.jobs.logview import FollowView, LogSink
from rgt_client.status import statusdata
from rgt_client.status.fetch import fetch_status
from rgt_client.textsafe import safe_line
from rgt_client.box.transport import CONNECTED, STDERR_KEEP, Result, Target, check_reach, python_command, spawn

POLL_S = 0.5
BACKOFF_MAX_S = 15.0


def follow(target: Target, run: str, stage: str, lines: int, max_wait_s: float,
           say: Callable[[str], None], sink: LogSink | None = None) -> int:
    """Stream to stdout; 0 when the run succeeded, 4 when it did not, 6 when --max-wait passed.
    A link that broke after it was up is reconnected with backoff (1, 2, 4 ... 15 s), resuming
    after the last byte shown; a 39 s blip once ended a follow for good."""
    sink = sink or LogSink(raw=True)
    view = FollowView(sink, live=sys.stdout.isatty())
    frames = Frames(view, target.host)
    deadline, backoff, lost_at = time.monotonic() + max_wait_s, 0.0, None
    try:
        while True:
            try:
                result = _follow_once(target, [run, stage, str(lines), "%.3f" % max(0.0, deadline - time.monotonic()),
                                               str(POLL_S)], frames)
                break
            except ClientError as e:
                if e.code != exitcodes.UNREACHABLE or not frames.connected:
                    raise
                if frames.on_back is None:     # a new loss (the last one, if any, came back)
                    lost_at, backoff = time.strftime("%H:%M:%S"), 0.0
                backoff = min(BACKOFF_MAX_S, backoff * 2 or 1.0)
                if time.monotonic() + backoff >= deadline:
                    say("gave up following after --max-wait: the link to %s has been lost since %s; the state of "
                        "run %s is unknown (it goes on on the box either way)" % (target.host, lost_at, run))
                    return exitcodes.GAVE_UP
                view.aside()
                say("link lost at %s, reconnecting in %ds: %s" % (lost_at, backoff, safe_line(e.message)))
                frames.on_back = _back_line(view, say, lost_at or "?")
                time.sleep(backoff)
    finally:
        view.end()
    if result.get("error"):
        raise statusdata.unknown_run(target.host, run, fetch_status(target, events=0).status)
    state = safe_line(str(result.get("state")))
    if result.get("gave_up"):
        say("gave up following after --max-wait; run %s is %s (it keeps going on the box)" % (run, state))
        return exitcodes.GAVE_UP
    say("run %s %s" % (run, state))
    return exitcodes.OK if result.get("state") == "succeeded" else exitcodes.RUN_FAILED


def _back_line(view: FollowView, say: Callable[[str], None], lost_at: str) -> Callable[[], None]:
    def back() -> None:
        view.aside()
        say("link back (lost since %s); going on after the last byte shown" % lost_at)
    return back


def _follow_once(target: Target, args: list[str], frames: Frames) -> dict:
    """One connection: the frames to the view until it ends; its RGT-RESULT, or ClientError."""
    if frames.resume is not None:
        args = args + [base64.b64encode(json.dumps(frames.resume).encode("utf-8")).decode("ascii")]
    cmd = python_command(target, FOLLOW, args, need_agent=True)
    proc = spawn(target, cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    # stderr drained on its own thread, keeping only its start and end: nothing the box says
    # there can block the log stream or fill this machine's memory or disk
    drain = _Drain(proc.stderr)
    try:
        while True:
            chunk = os.read(proc.stdout.fileno(), 65536)   # chunks, not lines: tqdm's \r passes
            if not chunk:
                break
            frames.feed(chunk)
    finally:
        if proc.poll() is None and sys.exc_info()[0] is not None:
            proc.kill()
        rc = proc.wait()
        stderr = drain.result()
    connected = stderr.startswith(CONNECTED)
    frames.connected = frames.connected or connected or target.is_local
    check_reach(target, Result(rc, b"", stderr[len(CONNECTED):] if connected else stderr, connected=connected))
    return parse_result(stderr.decode("utf-8", "replace"), "logs --follow on %s" % target.host)


class _Drain(threading.Thread):
    def __init__(self, pipe: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.pipe, self.head, self.tail = pipe, b"", b""
        self.start()

    def run(self) -> None:
        for chunk in iter(lambda: os.read(self.pipe.fileno(), 65536), b""):   # as the log stream: chunks
            if len(self.head) < len(CONNECTED):
                self.head += chunk[:len(CONNECTED) - len(self.head)]
            self.tail = (self.tail + chunk)[-STDERR_KEEP:]

    def result(self) -> bytes:
        self.join(10)
        if self.head == CONNECTED and not self.tail.startswith(CONNECTED):
            return CONNECTED + self.tail     # a long stderr: its start was dropped, not the mark
        return self.tail
