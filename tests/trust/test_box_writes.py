"""The files the agent WRITES on the box are untrusted too: whatever sits at the path of
events.jsonl, a run's history, a stage log, the outbox, a marker, cost.json or status.json (a
FIFO, a socket, a symlink to a device or to a file of the user's, a directory), every append and
replace neither blocks nor writes through a link. What is there is set aside next to the file
with one line said, and a fresh file is written."""
from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from boxagent.base import safefile
from boxagent.base.fsutil import append_bytes, atomic_write_bytes
from tests.realbox import job, wait_for


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    short = "/tmp/rgt-sock-%d" % time.time_ns()      # AF_UNIX paths are short: made there, moved in
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(short)
    sock.close()
    os.rename(short, path)


def _symlink_to_dev_zero(path: Path) -> None:
    os.symlink("/dev/zero", path)


def _symlink_to_users_file(path: Path) -> None:
    victim = path.parent / "users-precious-file"
    victim.write_bytes(b"mine\n")
    os.symlink(victim, path)


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("x")


KINDS: Dict[str, Callable[[Path], None]] = {
    "fifo": _fifo, "socket": _socket, "symlink_to_dev_zero": _symlink_to_dev_zero,
    "symlink_to_users_file": _symlink_to_users_file, "directory": _directory}


def _in_thread(fn: Callable[[], object], timeout: float = 5.0) -> object:
    box: Dict[str, object] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc
    th = threading.Thread(target=call, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "the writer blocked on the file"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


@pytest.fixture
def said() -> List[str]:
    heard: List[str] = []
    safefile.REPORTERS.append(lambda path, what, moved: heard.append("%s|%s|%s" % (path, what, moved)))
    yield heard
    safefile.REPORTERS.pop()


def _aside(path: Path) -> List[Path]:
    return sorted(path.parent.glob(path.name + safefile.SET_ASIDE_TAG + "*"))


def _check_set_aside(path: Path, kind: str, said: List[str]) -> None:
    assert stat.S_ISREG(os.lstat(path).st_mode), "a fresh regular file was written"
    moved = _aside(path)
    assert len(moved) == 1 and len(said) == 1 and str(path) in said[0] and str(moved[0]) in said[0]
    if kind == "symlink_to_users_file":
        assert (path.parent / "users-precious-file").read_bytes() == b"mine\n"   # not written through
        assert "symlink" in said[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_append_to_a_fifo_socket_link_or_directory_sets_it_aside_and_never_blocks(tmp_path, kind, said):
    path = tmp_path / "events.jsonl"
    KINDS[kind](path)
    _in_thread(lambda: append_bytes(str(path), b'{"id":"1"}\n'))
    assert path.read_bytes() == b'{"id":"1"}\n'
    _check_set_aside(path, kind, said)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_replace_onto_a_fifo_socket_link_or_directory_sets_it_aside(tmp_path, kind, said):
    path = tmp_path / "status.json"
    KINDS[kind](path)
    _in_thread(lambda: atomic_write_bytes(str(path), b"{}\n"))
    assert path.read_bytes() == b"{}\n"
    _check_set_aside(path, kind, said)


def test_a_fifo_with_a_reader_is_set_aside_not_written_to(tmp_path, said):
    """O_NONBLOCK opens a FIFO that has a reader: the fstat on the open descriptor catches it."""
    path = tmp_path / "history.jsonl"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _in_thread(lambda: append_bytes(str(path), b"x\n"))
        assert os.read(reader, 100) == b""          # nothing went into the pipe
    finally:
        os.close(reader)
    assert path.read_bytes() == b"x\n" and "FIFO" in said[0]


def test_the_tmp_file_of_a_replace_is_never_a_planted_name(tmp_path, monkeypatch):
    """The tmp open is O_EXCL|O_NOFOLLOW: a symlink planted at the name it picks is not followed."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"mine")
    names = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(os, "urandom", lambda n: bytes.fromhex(next(names)))
    os.symlink(victim, tmp_path / (".tmp-%d-aaaaaaaaaaaa" % os.getpid()))
    atomic_write_bytes(str(tmp_path / "cost.json"), b"{}")
    assert victim.read_bytes() == b"mine" and (tmp_path / "cost.json").read_bytes() == b"{}"


def _swap_in_fifo(path: Path) -> None:
    """A FIFO at `path` in one step (a daemon appending between unlink and mkfifo would win)."""
    tmp = path.parent / (".fifo-" + path.name)
    os.mkfifo(tmp)
    os.replace(tmp, path)


def test_a_fifo_in_place_of_events_jsonl_does_not_freeze_the_daemon(box):
    """The field repro: a FIFO swapped in for events.jsonl while a stage runs. The stage's end is
    still seen, the next stage starts, the run ends; one line in daemon.log and one alert."""
    box.start()
    wf = box.workdir
    assert box.submit(job("fifo", wf, {"name": "a", "run": "sleep 1"}, {"name": "b", "run": "true"})).returncode == 0
    box.wait_stage("fifo", "a", "running")
    events = box.home / "events.jsonl"
    _swap_in_fifo(events)
    assert box.wait_run("fifo", timeout=20)["state"] == "succeeded"
    assert stat.S_ISREG(os.lstat(events).st_mode)
    moved = _aside(events)
    assert len(moved) == 1 and stat.S_ISFIFO(os.lstat(moved[0]).st_mode)
    lines = [ln for ln in (box.home / "daemon.log").read_text().splitlines() if "set aside" in ln]
    assert len(lines) == 1 and "events.jsonl" in lines[0] and "FIFO" in lines[0], lines
    alert = box.wait_event("box_file_set_aside", path=str(events))
    assert alert["severity"] == "warning" and alert["moved_to"] == str(moved[0])
    out = box.agent("status", "--json", timeout=10)
    assert out.returncode == 0 and json.loads(out.stdout)["agent"]["running"]


@pytest.mark.parametrize("name", ["history.jsonl", "log"])
def test_a_fifo_in_place_of_a_runs_history_or_stage_log_does_not_freeze_the_daemon(box, name):
    """A run's history.jsonl and the next stage's log, each a FIFO before it is written."""
    box.start()
    wf = box.workdir
    assert box.submit(job("h", wf, {"name": "a", "run": "sleep 1"}, {"name": "b", "run": "echo loss=1"})).returncode == 0
    box.wait_stage("h", "a", "running")
    if name == "history.jsonl":
        target = box.home / "runs" / "h" / "history.jsonl"
    else:
        target = box.home / "runs" / "h" / "logs" / "b.1.log"
    _swap_in_fifo(target)
    assert box.wait_run("h", timeout=20)["state"] == "succeeded", box.diagnostics()
    assert stat.S_ISREG(os.lstat(target).st_mode) and len(_aside(target)) == 1
    wait_for(lambda: any(e.get("path") == str(target) for e in box.events("box_file_set_aside")), 10, "alert")


def _box_script(script: str, args: List[str], home: Path, timeout: float = 20) -> "subprocess.CompletedProcess":
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", script] + args, env=dict(os.environ, RGT_HOME=str(home)),
                          capture_output=True, timeout=timeout)


def test_the_box_side_wait_of_watch_never_blocks_on_a_fifo(tmp_path):
    """Three `watch` calls once left three processes on the box blocked in open() on a FIFO."""
    from rgt_client.status.eventwait import BOX_SCRIPT, MARK
    os.mkfifo(tmp_path / "events.jsonl")
    os.mkfifo(tmp_path / "events.jsonl.1")
    for cursor in ("", "0000000001000-abcdef-1"):
        out = _box_script(BOX_SCRIPT, [cursor, "", "0.5", "20"], tmp_path)
        assert MARK in out.stdout, out.stderr.decode()[-1000:]


@pytest.mark.parametrize("fifo", ["status.json", "stage log"])
def test_logs_follow_on_the_box_never_blocks_on_a_fifo(tmp_path, fifo):
    from rgt_client.box.remote_scripts import FOLLOW
    log = tmp_path / "s.1.log"
    status = {"runs": [{"name": "r", "state": "succeeded",
                        "stages": [{"name": "s", "state": "succeeded", "attempt": 1, "log": str(log)}]}]}
    if fifo == "status.json":
        os.mkfifo(tmp_path / "status.json")
        log.write_text("hello\n")
    else:
        (tmp_path / "status.json").write_text(json.dumps(status))
        os.mkfifo(log)
    out = _box_script(FOLLOW, ["r", "", "10", "2", "0.1"], tmp_path)
    assert b"RGT-RESULT" in out.stderr, out.stderr.decode()[-1000:]


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink_to_users_file"])
def test_a_fifo_or_directory_at_a_stages_claim_is_set_aside_and_the_attempt_runs(tmp_path, kind, said):
    """The shim claims an attempt by creating its .claim file O_EXCL: something planted there
    made every attempt look claimed by another shim, and none ran."""
    from boxagent.engine.shim import _claim
    path = tmp_path / "s.1.claim"
    KINDS[kind](path)
    assert _in_thread(lambda: _claim(str(path))) is True
    assert path.read_text() == str(os.getpid()) and len(_aside(path)) == 1
    assert _claim(str(path)) is False          # a real claim still wins over a second shim
