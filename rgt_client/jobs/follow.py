"""`logs --follow`: ONE ssh connection; a box-side script (remote_scripts.FOLLOW) streams each
stage's new log bytes as the chain moves on and ends with the run (or the --max-wait bound).
What reaches the terminal goes through logview.FollowView (line rule, textsafe)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import IO, Callable

from rgt_client import exitcodes
from rgt_client.status import statusdata
from rgt_client.jobs.logview import FollowView, LogSink
from rgt_client.status.fetch import fetch_status
from rgt_client.box.remote_scripts import FOLLOW, parse_result
from rgt_client.textsafe import safe_line
from rgt_client.box.transport import CONNECTED, STDERR_KEEP, Result, Target, check_reach, python_command, spawn

POLL_S = 0.5


def follow(target: Target, run: str, stage: str, lines: int, max_wait_s: float,
           say: Callable[[str], None], sink: LogSink | None = None) -> int:
    """Stream to stdout; 0 when the run succeeded, 4 when it did not, 6 when --max-wait passed."""
    sink = sink or LogSink(raw=True)
    view = FollowView(sink, live=sys.stdout.isatty())
    cmd = python_command(target, FOLLOW, [run, stage, str(lines), str(max_wait_s), str(POLL_S)], need_agent=True)
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
            view.feed(chunk)
    finally:
        view.end()
        if proc.poll() is None and sys.exc_info()[0] is not None:
            proc.kill()
        rc = proc.wait()
        stderr = drain.result()
    connected = stderr.startswith(CONNECTED)
    check_reach(target, Result(rc, b"", stderr[len(CONNECTED):] if connected else stderr, connected=connected))
    result = parse_result(stderr.decode("utf-8", "replace"), "logs --follow on %s" % target.host)
    if result.get("error"):
        raise statusdata.unknown_run(target.host, run, fetch_status(target, events=0).status)
    state = safe_line(str(result.get("state")))
    if result.get("gave_up"):
        say("gave up following after --max-wait; run %s is %s (it keeps going on the box)" % (run, state))
        return exitcodes.GAVE_UP
    say("run %s %s" % (run, state))
    return exitcodes.OK if result.get("state") == "succeeded" else exitcodes.RUN_FAILED


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
