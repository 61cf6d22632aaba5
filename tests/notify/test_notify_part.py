"""The hub as a Part (boxagent/base/part.py): start(ctx), on_event, tick(now) -> specs,
status_block, reload(config, profile), stop; and the counters it reports after a stop."""
from __future__ import annotations

import json
import time

from boxagent.base.home import Home
from boxagent.base.part import PartContext
from boxagent.base.roots import Roots
from boxagent.notify.delivery import RetryPolicy
from boxagent.notify.hub import NotifyHub
from boxagent.wire.events import EventLog
from tests.notify.receiver import write_secrets

FAST = RetryPolicy(0.05, 0.2, 3600.0, jitter=0)
STATUS = {"runs": [{"name": "r1", "state": "running", "current_stage": "train",
                    "stages": [{"name": "train", "progress": {"fraction": 0.43}}]}]}


def _ctx(rgt_home, status, woken):
    return PartContext(Home(str(rgt_home)), Roots(), {}, {}, "box9", lambda: woken.append(1), lambda: status)


def _part(rgt_home, entries, status=None, woken=None):
    write_secrets(rgt_home, entries)
    hub = NotifyHub(Home(str(rgt_home)), {"host": "ignored"}, {}, retry=FAST)
    hub.start(_ctx(rgt_home, status if status is not None else {}, woken if woken is not None else []))
    return hub


def _emit(rgt_home, hub, spec):
    event = EventLog(str(rgt_home / "events.jsonl"), "box9").emit(spec, time.time())
    hub.on_event(event)
    return event


def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


def test_part_takes_host_and_last_status_from_its_context(rgt_home, receiver):
    hub = _part(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "heartbeat": "10s"}], STATUS)
    hub.tick(100.0)
    hub.tick(110.0)
    text = receiver.wait_for(1)[0].text()
    hub.stop(1)
    assert text.startswith("\U0001F49A box9 \u00b7 alive \u2014 r1/train 43%")


def test_tick_returns_notify_failed_specs_and_status_block_counts(rgt_home, receiver):
    receiver.responses = [(400, {}, b"bad topic")]
    hub = _part(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "id": "n1"}])
    _emit(rgt_home, hub, {"type": "stage_failed", "severity": "critical", "summary": "boom"})
    _emit(rgt_home, hub, {"type": "run_succeeded", "severity": "info", "run": "r1"})
    _until(lambda: hub.status_block()["notifications"]["sent"] == 1)
    specs = hub.tick(time.time())
    assert [s["type"] for s in specs] == ["notify_failed"] and "HTTP 400" in specs[0]["summary"]
    assert hub.tick(time.time()) == []                    # each given-up message reported once
    block = hub.status_block()["notifications"]
    assert (block["sent"], block["failed"], block["pending"]) == (1, 1, 0)
    hub.stop(1)


def test_reload_with_new_config_and_profile(rgt_home, receiver, receiver2):
    hub = _part(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "id": "a"}])
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver2.port, "id": "b"}])
    hub.reload({"host": "box9"}, {"name": "generic-ssh"})
    _emit(rgt_home, hub, {"type": "stage_failed", "severity": "critical", "summary": "after reload"})
    receiver2.wait_for(1)
    hub.stop(1)
    assert receiver.requests == []
    assert [t["id"] for t in hub.status_block()["notifications"]["targets"]] == ["b"]


# -- the counters after a stop ----------------------------------------------------------------------
def _fresh_summary(rgt_home):
    """What the next hub (or a status taken from the files) says, with no thread running."""
    return NotifyHub(Home(str(rgt_home)), {}, {}).summary()


def test_summary_after_stop_matches_what_arrived(rgt_home, receiver):
    # The preemption case: the last messages are in flight when stop() begins.
    receiver.delay_s = 0.02
    hub = _part(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    for i in range(30):
        _emit(rgt_home, hub, {"type": "stage_failed", "severity": "critical", "summary": "s%d" % i})
    hub.stop(10)
    assert receiver.answered == 30
    after = hub.status_block()["notifications"]
    assert (after["sent"], after["pending"]) == (30, 0)
    disk = _fresh_summary(rgt_home)
    assert (disk["sent"], disk["pending"]) == (30, 0)


def test_send_finishing_after_stop_still_reaches_the_books(rgt_home, receiver):
    # stop() gives up waiting on a slow send; the send then succeeds. Before, .state.json was
    # saved by stop() and never again: the next status said "sent 0" of a message that arrived.
    receiver.delay_s = 1.0
    hub = _part(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    _emit(rgt_home, hub, {"type": "stage_failed", "severity": "critical", "summary": "late"})
    receiver.wait_for(1)
    t0 = time.monotonic()
    hub.stop(0)
    assert time.monotonic() - t0 < 1.0                    # it did not wait for the send
    _until(lambda: receiver.answered == 1)
    # Another process reads the two files one after the other: wait for the thread's last step.
    _until(lambda: (lambda d: (d["sent"], d["pending"]))(_fresh_summary(rgt_home)) == (1, 0), timeout=5)
    assert json.loads((rgt_home / "outbox" / ".state.json").read_text())["sent"] == 1
