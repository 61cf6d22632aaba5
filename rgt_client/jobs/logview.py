"""`logs`: stage log bytes from the box to this terminal, streamed (never held whole in memory).

On a terminal the log is box text like any other: control characters and escape sequences are
shown as visible escapes (textsafe), so a compromised box cannot rewrite the screen or the
clipboard through a log line. `--raw` (and a pipe) pass the bytes on as they are, colours and all.
"""
from __future__ import annotations

import shutil
import sys
from typing import BinaryIO

from boxagent.api import log_lines
from rgt_client.status.fetch import run_command
from rgt_client.textsafe import StreamSafe, safe
from rgt_client.box.transport import Target

LOGS_TIMEOUT_S = 120.0
# The agent sends at most N lines of at most 16 KiB per stage (logtail): past this, the box is
# not an honest agent, and the stream is cut.
LOGS_MAX = 64 << 20


class LogSink:
    """Where log bytes go: stdout, as they are (raw) or through textsafe; remembers whether the
    output ended with a newline so the shell prompt never lands after a half line."""

    def __init__(self, raw: bool, out: BinaryIO | None = None) -> None:
        self.raw = raw
        self.out = out if out is not None else sys.stdout.buffer
        self._safe = None if raw else StreamSafe()
        self.last = b"\n"

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.out.write(data if self._safe is None else self._safe.feed(data).encode("utf-8"))
        self.out.flush()
        self.last = data[-1:]

    def close(self) -> None:
        if self._safe is not None:
            self.out.write(self._safe.end().encode("utf-8"))
        if self.last != b"\n":
            self.out.write(b"\n")
        self.out.flush()


def print_logs(target: Target, run: str, stage: str | None, n: int, sink: LogSink) -> int:
    """`logs RUN -n N [--stage S]` on the box (it picks the lines: logtail), streamed to the sink."""
    args = ["logs", run, "-n", str(n)] + (["--stage", stage] if stage else [])
    try:
        ans = run_command(target, args, run, "logs", timeout=LOGS_TIMEOUT_S, max_out=LOGS_MAX, on_out=sink.write)
    finally:
        sink.close()
    if ans.rc != 0:
        raise ans.error("logs")
    return ans.code


class FollowView:
    """`logs --follow` output: the same line rule as `logs -n` (the agent's log_lines(): a bar's redraws
    are one line). On a terminal the line still being drawn (a live tqdm bar) is shown in place
    with a CR of our own, padded with spaces; --raw passes the stream through untouched."""

    def __init__(self, sink: LogSink, live: bool) -> None:
        self.sink, self.live = sink, live and not sink.raw
        self.lines = None if sink.raw else log_lines()
        self.shown = 0          # width of the live line on screen, 0 when none
        self.width = shutil.get_terminal_size((80, 24)).columns - 1

    def feed(self, data: bytes) -> None:
        if self.lines is None:
            self.sink.write(data)
            return
        for line in self.lines.feed(data):
            self._line(line)
        if self.live:
            self._live(self.lines.pending())

    def end(self) -> None:
        if self.lines is not None:
            for line in self.lines.end():
                self._line(line)
        self.sink.close()

    def aside(self) -> None:
        """Clear the line being drawn (a live tqdm bar), so a message of ours gets its own line:
        "link lost" was once glued to the bar. The next bytes draw it again."""
        if self.shown:
            self._clear()
            self.sink.out.flush()

    def _line(self, line: bytes) -> None:
        if self.shown:
            self._clear()
        self.sink.write(line + b"\n")

    def _live(self, pending: bytes) -> None:
        text = safe(pending.decode("utf-8", "replace"))[:self.width].encode("utf-8")
        if not text and not self.shown:
            return
        self._clear()
        self.sink.out.write(text)
        self.sink.out.flush()
        self.shown = len(text)

    def _clear(self) -> None:
        self.sink.out.write(b"\r" + b" " * self.shown + b"\r")
        self.shown = 0
