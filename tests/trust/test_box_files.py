"""The box's own files are untrusted: whatever sits at the path of a request, a config, a run's
state, its history or the event log (a FIFO, a symlink to /dev/zero, a 1 GB sparse file, a
directory), the agent neither blocks nor eats memory. The readers see nothing there; the daemon
sets an inbox entry aside with a line in daemon.log and goes on."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Dict

import pytest

from boxagent.base import safefile
from boxagent.base.fsutil import read_json, read_tail
from boxagent.base.home import Home
from boxagent.runlog import store
from boxagent.wire import inbox
from tests.realbox import job

GB = 1 << 30


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink_to_dev_zero(path: Path) -> None:
    os.symlink("/dev/zero", path)


def _sparse_1gb(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(GB)


def _directory(path: Path) -> None:
    path.mkdir()


KINDS: Dict[str, Callable[[Path], None]] = {"fifo": _fifo, "symlink_to_dev_zero": _symlink_to_dev_zero,
                                            "sparse_1gb": _sparse_1gb, "directory": _directory}


def _in_thread(fn: Callable[[], object], timeout: float = 5.0) -> object:
    """fn() in a thread: a test that would block in open() fails instead of hanging the suite."""
    box: Dict[str, object] = {}
    th = threading.Thread(target=lambda: box.update(value=fn()), daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "the reader blocked on the file"
    return box.get("value")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_fifo_or_device_or_huge_file_in_inbox_is_skipped_by_a_reader(tmp_path, kind):
    home = Home(str(tmp_path / "home"))
    home.ensure()
    KINDS[kind](Path(home.inbox) / ("%019d-submit-bad.json" % 1))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert _in_thread(lambda: inbox.pending(home)) == []
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 100 * 1024   # KiB: not read


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_fifo_or_device_or_huge_file_in_inbox_is_set_aside_with_a_log_line(tmp_path, kind):
    home = Home(str(tmp_path / "home"))
    home.ensure()
    bad = Path(home.inbox) / ("%019d-submit-bad.json" % 1)
    KINDS[kind](bad)
    lines = []
    assert _in_thread(lambda: inbox.pending(home, aside=lines.append)) == []
    assert not os.path.lexists(bad) and os.path.lexists(Path(home.inbox) / ".aside" / bad.name)
    assert len(lines) == 1 and bad.name in lines[0] and "set aside" in lines[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_config_state_or_status_that_is_not_a_regular_file_reads_as_missing(tmp_path, kind):
    for name in ("config.json", "state.json", "status.json"):
        path = tmp_path / (kind + name)
        KINDS[kind](path)
        assert _in_thread(lambda: read_json(str(path), "missing")) == "missing"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_history_that_is_not_a_regular_file_is_no_history(tmp_path, kind):
    path = tmp_path / "history.jsonl"
    KINDS[kind](path)
    hist = _in_thread(lambda: store.read(str(path)))
    # A sparse 1 GB file is a regular file: it is read to the cap (zero bytes, no points), never whole.
    assert hist is None or hist["points"] == []


@pytest.mark.parametrize("kind", ["fifo", "symlink_to_dev_zero", "directory"])
def test_an_event_log_that_is_not_a_regular_file_raises_instead_of_blocking(tmp_path, kind):
    path = tmp_path / "events.jsonl"
    KINDS[kind](path)

    def read() -> object:
        try:
            return read_tail(str(path), 10)
        except OSError as exc:
            return exc
    assert isinstance(_in_thread(read), safefile.Unsafe)


def test_a_request_over_the_cap_is_set_aside_not_read(tmp_path):
    home = Home(str(tmp_path / "home"))
    home.ensure()
    big = Path(home.inbox) / ("%019d-submit-big.json" % 1)
    with open(big, "wb") as fh:
        fh.truncate(inbox.MAX_REQUEST_BYTES + 1)
    lines = []
    assert inbox.pending(home, aside=lines.append) == []
    assert "over the" in lines[0]


def test_a_fifo_in_inbox_does_not_wedge_the_daemon_or_status(box):
    """The field repro: `mkfifo inbox/x.json`, then a submit and `status` must still work."""
    box.start()
    fifo = box.home / "inbox" / ("%019d-submit-fifo.json" % 1)
    os.mkfifo(fifo)
    out = box.agent("status", "--json", timeout=10)
    assert out.returncode == 0, out.stderr
    assert box.submit(job("after", box.workdir, {"name": "s", "run": "true"})).returncode == 0
    assert box.wait_run("after")["state"] == "succeeded"
    assert not fifo.exists()
    log = (box.home / "daemon.log").read_text()
    assert "set aside" in log and fifo.name in log and "FIFO" in log
    out = subprocess.run([sys.executable, "-m", "boxagent", "status", "--json"], capture_output=True, text=True,
                         env=box.env, timeout=10)
    assert json.loads(out.stdout)["agent"]["pid"] == box.daemon_pid()
