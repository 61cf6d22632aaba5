"""Events are never lost or repeated when events.jsonl rotates mid-read (wire/events.py renames it
to events.jsonl.1 at ~10 MB). In the field, the line written just before a rotation was skipped
by a waiter: in 2 of 3 trials a stage_failed never reached `wait_for_change`. Here the rotation
is made to happen at every point of a read, by a hook on each OS call of the reader: for the
notifier's feed (notify/feed.py) and for the box-side script behind `watch` and
`wait_for_change` (rgt_client/status/eventwait.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Callable, List

import pytest

from boxagent.notify import feed as feed_mod
from boxagent.wire.events import EventLog
from rgt_client.status.eventwait import BOX_SCRIPT, MARK


class _Counted:
    """A stand-in for a module whose every call counts; the `at`-th call rotates first."""

    def __init__(self, real: Any, hook: "_Hook") -> None:
        self._real, self._hook = real, hook

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if not callable(attr) or isinstance(attr, (type, types.ModuleType)):
            return attr

        def call(*a: Any, **kw: Any) -> Any:
            self._hook.tick()
            return attr(*a, **kw)
        return call


class _Hook:
    def __init__(self, at: int, rotate: Callable[[], None]) -> None:
        self.at, self.rotate, self.n, self.fired = at, rotate, 0, False

    def tick(self) -> None:
        self.n += 1
        if self.n == self.at and not self.fired:
            self.fired = True
            self.rotate()


FEED_POINTS = range(1, 13)        # every OS call of three reads
WAIT_POINTS = range(1, 25)        # the backlog and the first polls


@pytest.mark.parametrize("at", FEED_POINTS)
def test_the_notifiers_feed_loses_and_repeats_nothing_when_the_log_rotates_mid_read(tmp_path, monkeypatch, at):
    path = str(tmp_path / "events.jsonl")
    log = EventLog(path, "h", rotate_bytes=1 << 30)
    emitted: List[str] = []

    def emit(kind: str) -> None:
        emitted.append(log.emit({"type": kind, "severity": "warning"}, 1.7e9 + len(emitted))["id"])

    def rotate() -> None:          # the daemon: one more line in the old file, the rotation, a line in the new
        emit("stage_failed")
        os.replace(path, path + ".1")
        emit("run_failed")
    feed = feed_mod.EventFeed(path, str(tmp_path / ".feed.json"))
    emit("daemon_started")
    assert feed.open() == []                   # the first start: from the end
    emit("stage_started")
    hook = _Hook(at, rotate)
    monkeypatch.setattr(feed_mod, "os", _Counted(os, hook))
    monkeypatch.setattr(feed_mod, "safefile", _Counted(feed_mod.safefile, hook))
    monkeypatch.setattr(feed_mod, "open", _Counted(types.SimpleNamespace(open=open), hook).open, raising=False)
    got: List[str] = []
    for _ in range(3):
        events, cur = feed.read_new()
        feed.advance(cur)
        got += [e["id"] for e in events]
    monkeypatch.undo()
    events, cur = feed.read_new()
    got += [e["id"] for e in events]
    assert hook.fired, "the rotation point was never reached"
    assert got == emitted[1:], "lost: %s repeated: %s" % (sorted(set(emitted[1:]) - set(got)),
                                                           sorted({i for i in got if got.count(i) > 1}))


def _ev(i: int, kind: str) -> str:
    return json.dumps({"id": "%013d-abcdef-%d" % (1000 + i, i), "type": kind, "run": "r1", "severity": "info"})


# Put in front of the script's last line (`main()`): every OS call of the script counts, and the
# `at`-th one first writes the line before a rotation, rotates, and writes a line in the new file.
_HOOK = r'''
import os as _real_os, types as _types
_AT, _N = int(_real_os.environ["ROTATE_AT"]), [0]
_real_builtin_open = open
def _tick():
    _N[0] += 1
    if _N[0] == _AT:
        def put(line):
            with _real_builtin_open(PATH, "a") as fh:
                fh.write(line + "\n")
        put(%(late)r)
        _real_os.replace(PATH, PATH + ".1")
        put(%(new)r)
class _Counted:
    def __init__(self, real):
        self._real = real
    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if not callable(attr) or isinstance(attr, (type, _types.ModuleType)):
            return attr
        def call(*a, **kw):
            _tick()
            return attr(*a, **kw)
        return call
os = _Counted(_real_os)
if "_os" in globals():
    _os = _Counted(_real_os)
def open(*a, **kw):
    _tick()
    return _real_builtin_open(*a, **kw)
'''


def _wait_with_rotation(home: Path, at: int) -> dict:
    hook = _HOOK % {"late": _ev(2, "stage_failed"), "new": _ev(3, "run_failed")}
    at_main = BOX_SCRIPT.rindex("\nmain()")
    script = BOX_SCRIPT[:at_main] + hook + BOX_SCRIPT[at_main:]
    out = subprocess.run([sys.executable, "-c", script, "%013d-abcdef-1" % 1001, "r1", "1.5", "20"],
                         env=dict(os.environ, RGT_HOME=str(home), ROTATE_AT=str(at)), capture_output=True,
                         timeout=60)
    assert MARK in out.stdout, out.stderr.decode()[-2000:]
    return json.loads(out.stdout[out.stdout.index(MARK) + len(MARK):].split(b"\n", 1)[0])


@pytest.mark.parametrize("at", WAIT_POINTS)
def test_the_box_side_wait_loses_and_repeats_nothing_when_the_log_rotates_mid_read(tmp_path, at):
    """`watch` and `wait_for_change` run this script: the cursor's line is in events.jsonl, and
    the rotation comes at the `at`-th OS call of the wait (its backlog, each poll's open, stat,
    seek and read)."""
    (tmp_path / "events.jsonl").write_text(_ev(1, "stage_started") + "\n")
    head = _wait_with_rotation(tmp_path, at)
    got = [e["id"].rsplit("-", 1)[1] for e in head["events"]]
    assert got == ["2", "3"], head
    assert head["cursor"].endswith("-3")
