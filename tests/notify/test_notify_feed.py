"""The durable feed: every event that reached events.jsonl is offered to every notifier that
routes it, even when the process died between appending it and handing it to the hub. Real
processes (tests/notify/feeder.py: the real EventLog, then the real hub, in the daemon's order),
real SIGKILLs, a real (and flaky) loopback receiver."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.notify.receiver import write_secrets


def _feeder(home, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "tests.notify.feeder", str(home), *args], capture_output=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=timeout, cwd=str(REPO))


def _log_ids(home):
    ids = []
    for name in ("events.jsonl.1", "events.jsonl"):
        try:
            data = (home / name).read_bytes()
        except OSError:
            continue
        for line in data.split(b"\n"):
            try:
                ids.append(json.loads(line)["id"])
            except (ValueError, KeyError):
                pass
    return ids


def _seq_ids(receiver):
    return [r.headers["X-Sequence-ID"] for r in receiver.requests]


def _outbox_left(home):
    box = home / "outbox"
    pending = [n for n in os.listdir(box) if n.endswith(".json") and not n.startswith(".")]
    failed = [n for n in os.listdir(box / "failed") if not n.startswith(".")]
    return pending, failed


def test_sigkill_between_append_and_publish_then_restart_delivers_each_once(rgt_home, receiver):
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "id": "n1"}])
    assert _feeder(rgt_home, "--until-drained").returncode == 0         # the hub's first start: cursor
    res = _feeder(rgt_home, "--events", "5", "--no-publish", "--kill-after-append", "5")
    assert res.returncode == -signal.SIGKILL
    appended = _log_ids(rgt_home)
    assert len(appended) == 5 and receiver.requests == []
    res = _feeder(rgt_home, "--until-drained")
    assert res.returncode == 0, res.stderr
    assert _seq_ids(receiver) == appended                  # each once, in order
    assert _outbox_left(rgt_home) == ([], [])
    res = _feeder(rgt_home, "--serve", "0.3")               # and a later start sends nothing again
    assert _seq_ids(receiver) == appended


def test_sigkill_mid_stream_loses_nothing(rgt_home, receiver):
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "id": "n1"}])
    assert _feeder(rgt_home, "--until-drained").returncode == 0
    res = _feeder(rgt_home, "--events", "8", "--kill-after-append", "6")   # 1-5 handed over, 6 not
    assert res.returncode == -signal.SIGKILL
    assert _feeder(rgt_home, "--until-drained").returncode == 0
    appended = _log_ids(rgt_home)
    assert len(appended) == 6
    assert sorted(set(_seq_ids(receiver))) == sorted(appended)


@pytest.mark.slow
def test_random_kills_with_a_flaky_receiver_zero_missing_zero_undelivered(rgt_home, receiver):
    rng = random.Random(20240611)
    flaked = []

    def flaky(req):
        if rng.random() < 0.3:
            flaked.append(req)
            return (500, {}, b"flaky")
        return None
    receiver.handler_hook = flaky
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "id": "n1"}])
    assert _feeder(rgt_home, "--until-drained").returncode == 0
    seen = set()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for _round in range(8):
        # ~19 KB of events a round against a 24 KB rotation: the log rotates under the kills, at
        # most once between two looks, so the union of the looks is every event ever appended.
        p = subprocess.Popen([sys.executable, "-m", "tests.notify.feeder", str(rgt_home), "--events", "40",
                              "--pause", "0.01", "--rotate-bytes", "24576", "--serve", "5"],
                             stdout=subprocess.PIPE, env=env, cwd=str(REPO))
        assert b"started" in p.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.8))
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        p.stdout.close()
        seen.update(_log_ids(rgt_home))
    res = _feeder(rgt_home, "--until-drained", timeout=120)
    assert res.returncode == 0, res.stderr
    seen.update(_log_ids(rgt_home))
    answered = [r.headers["X-Sequence-ID"] for r in receiver.requests if r not in flaked]
    delivered = set(answered)
    assert len(seen) > 40
    assert seen - delivered == set(), "missing"
    assert delivered - seen == set()
    assert _outbox_left(rgt_home) == ([], []), "undelivered"
    print("\n%d events, %d taken by the receiver (%d twice: a kill between the send and the file's "
          "removal), %d answered 500 and retried" % (len(seen), len(answered), len(answered) - len(delivered),
                                                    len(flaked)))


def _hub_cycle(make_hub, entries=None):
    hub = make_hub(entries)
    hub.stop(0)


def test_first_start_does_not_replay_the_log_it_finds(make_hub, receiver, rgt_home):
    from boxagent.wire.events import EventLog
    log = EventLog(str(rgt_home / "events.jsonl"), "box1")
    log.emit({"type": "stage_failed", "severity": "critical", "summary": "old news"}, time.time())
    hub = make_hub([{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    hub.stop(1)
    assert receiver.requests == []


def test_torn_last_line_is_skipped_and_the_next_event_kept(make_hub, receiver, rgt_home):
    from boxagent.wire.events import EventLog
    entries = [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}]
    _hub_cycle(make_hub, entries)                                   # the cursor exists (at 0)
    log = EventLog(str(rgt_home / "events.jsonl"), "box1")
    e1 = log.emit({"type": "stage_failed", "severity": "critical", "summary": "one"}, time.time())
    with open(rgt_home / "events.jsonl", "ab") as fh:               # a crash mid-append: no newline
        fh.write(b'{"id":"0000000000001-dead-1","type":"stage_fa')
    hub = make_hub()
    receiver.wait_for(1)
    e2 = log.emit({"type": "stage_failed", "severity": "critical", "summary": "two"}, time.time())
    hub.on_event(e2)                      # appended after the torn bytes, on the same line
    receiver.wait_for(2)
    hub.stop(1)
    assert _seq_ids(receiver) == [e1["id"], e2["id"]]


def test_garbage_line_in_the_log_is_skipped(make_hub, receiver, rgt_home):
    from boxagent.wire.events import EventLog
    _hub_cycle(make_hub, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    with open(rgt_home / "events.jsonl", "ab") as fh:
        fh.write(b'\x00\xffnot json at all\n[1,2]\n')
    e1 = EventLog(str(rgt_home / "events.jsonl"), "box1").emit(
        {"type": "stage_failed", "severity": "critical", "summary": "after the garbage"}, time.time())
    make_hub()
    receiver.wait_for(1)
    assert _seq_ids(receiver) == [e1["id"]]


def _emit(log, summary):
    return log.emit({"type": "stage_failed", "severity": "critical", "summary": summary}, time.time())["id"]


def test_rotation_while_no_hub_ran_finishes_the_old_file_first(make_hub, receiver, rgt_home):
    from boxagent.wire.events import EventLog
    path = str(rgt_home / "events.jsonl")
    _emit(EventLog(path, "box1"), "before the hub's first start")
    _hub_cycle(make_hub, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])     # cursor: end of file A
    ids = [_emit(EventLog(path, "box1"), "still in A")]
    ids.append(_emit(EventLog(path, "box1", rotate_bytes=1), "in B"))           # A -> events.jsonl.1
    assert os.path.exists(path + ".1")
    hub = make_hub()
    receiver.wait_for(2)
    hub.stop(1)
    assert _seq_ids(receiver) == ids                     # the rest of A, then B from its start


def test_log_made_and_rotated_after_the_cursor_is_read_whole(make_hub, receiver, rgt_home):
    from boxagent.wire.events import EventLog
    _hub_cycle(make_hub, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])     # no log yet
    log = EventLog(str(rgt_home / "events.jsonl"), "box1", rotate_bytes=1)
    ids = [_emit(log, "a%d" % i) for i in range(2)]       # the second append rotates the first away
    hub = make_hub()
    receiver.wait_for(2)
    hub.stop(1)
    assert _seq_ids(receiver) == ids
