"""Delivery through outbox/: order, retries, permanent failures, Retry-After, coalescing, dedupe,
restart. Real HTTP receivers on loopback; backoff shrunk to tens of milliseconds."""
from __future__ import annotations

import json
import os

import pytest

from tests.notify.receiver import event


def _ntfy(receiver, **extra):
    return dict({"url": "ntfy://127.0.0.1:%d/t" % receiver.port}, **extra)


def _ids(reqs):
    return [r.headers["X-Sequence-ID"] for r in reqs]


def _wait_summary(hub, pred, timeout=10.0):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = hub.summary()
        if pred(s):
            return s
        time.sleep(0.01)
    raise AssertionError("summary never matched: %r" % hub.summary())


@pytest.mark.parametrize("backend", ["requests", "urllib"])
def test_receiver_down_then_up_every_message_once_in_order(make_hub, receiver, backend):
    receiver.down()
    hub = make_hub([_ntfy(receiver)], backend=backend)
    for i in range(5):
        hub.publish(event("ev-%d" % i))
    _wait_summary(hub, lambda s: s["last_error"] and s["pending"] == 5)
    receiver.up()
    reqs = receiver.wait_for(5)
    _wait_summary(hub, lambda s: s["pending"] == 0 and s["sent"] == 5)
    assert _ids(receiver.requests) == ["ev-%d" % i for i in range(5)]
    assert len(reqs) == 5
    assert [n for n in os.listdir(hub.outbox.dir) if not n.startswith(".") and n != "failed"] == []


def test_500_is_retried_then_delivered(make_hub, receiver):
    receiver.responses = [(500, {}, b"oops"), (502, {}, b"bad gateway")]
    hub = make_hub([_ntfy(receiver)])
    hub.publish(event("ev-a"))
    reqs = receiver.wait_for(3)
    assert _ids(reqs) == ["ev-a"] * 3
    s = _wait_summary(hub, lambda s: s["sent"] == 1)
    assert s["failed"] == 0 and s["targets"][0]["last_error"].startswith("HTTP 502")


def test_400_is_permanent_and_recorded(make_hub, receiver):
    receiver.responses = [(400, {}, b'{"error":"invalid topic"}')]
    hub = make_hub([_ntfy(receiver)])
    hub.publish(event("ev-bad"))
    hub.publish(event("ev-next"))
    receiver.wait_for(2)
    s = _wait_summary(hub, lambda s: s["failed"] == 1 and s["sent"] == 1)
    assert "HTTP 400" in s["last_error"] and "invalid topic" in s["last_error"]
    assert _ids(receiver.requests) == ["ev-bad", "ev-next"]          # not retried
    failed = [n for n in os.listdir(hub.outbox.failed_dir) if not n.startswith(".")]
    assert len(failed) == 1
    rec = json.loads(open(os.path.join(hub.outbox.failed_dir, failed[0])).read())
    assert rec["event"]["id"] == "ev-bad" and rec["failed_reason"].startswith("HTTP 400")
    specs = hub.drain_events()
    assert [e["type"] for e in specs] == ["notify_failed"] and specs[0]["severity"] == "warning"


def test_429_waits_for_retry_after(make_hub, receiver):
    receiver.responses = [(429, {"Retry-After": "1"}, b"slow down")]
    hub = make_hub([_ntfy(receiver)], base_s=0.01)
    hub.publish(event("ev-429"))
    first, second = receiver.wait_for(2, timeout=5)
    # The backoff alone would retry after 10 ms; Retry-After says 1 s.
    assert second.at - first.at >= 0.9


def test_gives_up_after_give_up_s_and_records_it(make_hub, receiver):
    receiver.default = (503, {}, b"down")
    hub = make_hub([_ntfy(receiver)], base_s=0.05, cap_s=0.05, give_up_s=0.3)
    hub.publish(event("ev-old"))
    s = _wait_summary(hub, lambda s: s["failed"] == 1)
    assert "gave up after" in s["targets"][0]["last_error"]
    assert s["pending"] == 0


def test_burst_of_1000_identical_alerts_is_coalesced(make_hub, receiver):
    hub = make_hub([_ntfy(receiver)])
    for i in range(1000):
        hub.publish(event("mem-%d" % i, "memory_high", "warning", key="memory_high", summary="memory 95%"))
    receiver.wait_for(1)
    s = _wait_summary(hub, lambda s: s["sent"] == 1)
    assert s["coalesced"] == 999 and s["pending"] == 0
    assert len(os.listdir(hub.outbox.failed_dir)) == 0
    assert len(receiver.requests) == 1


def test_rising_severity_breaks_through_and_repeat_after_counts(make_hub, receiver):
    clock = [1000.0]
    hub = make_hub([_ntfy(receiver, repeat_after="1h")], clock=lambda: clock[0])
    hub.publish(event("d1", "disk_low", "warning", key="disk:/data", summary="disk 91% full"))
    hub.publish(event("d2", "disk_low", "warning", key="disk:/data", summary="disk 92% full"))
    hub.publish(event("d3", "disk_low", "critical", key="disk:/data", summary="disk 99% full"))
    hub.publish(event("d4", "disk_low", "critical", key="disk:/data", summary="disk 99% full"))
    clock[0] += 3601
    hub.publish(event("d5", "disk_low", "critical", key="disk:/data", summary="disk 99% full"))
    reqs = receiver.wait_for(3)
    assert _ids(reqs) == ["d1", "d3", "d5"]
    assert "(repeated 1\u00d7 since" in reqs[2].text()


def test_same_event_id_is_delivered_once(make_hub, receiver):
    hub = make_hub([_ntfy(receiver)])
    hub.publish(event("dup"))
    hub.publish(event("dup"))
    receiver.wait_for(1)
    _wait_summary(hub, lambda s: s["sent"] == 1)
    hub.stop(1)
    hub2 = make_hub()                      # a restarted daemon publishing the same event again
    hub2.publish(event("dup"))
    hub2.stop(1)
    assert len(receiver.requests) == 1


def test_outbox_survives_a_restart(make_hub, receiver):
    receiver.down()
    hub = make_hub([_ntfy(receiver)], start=False)       # publish without a thread: files only
    for i in range(3):
        hub.publish(event("r-%d" % i))
    assert hub.summary()["pending"] == 3
    names = sorted(n for n in os.listdir(hub.outbox.dir) if n.endswith(".json") and n[0] != ".")
    assert len(names) == 3
    receiver.up()
    hub2 = make_hub()
    reqs = receiver.wait_for(3)
    assert _ids(reqs) == ["r-0", "r-1", "r-2"]
    _wait_summary(hub2, lambda s: s["pending"] == 0)


def test_routing_min_severity_events_and_quiet(make_hub, receiver, receiver2):
    hub = make_hub([_ntfy(receiver, min_severity="warning"),
                    {"url": "ntfy://127.0.0.1:%d/t2" % receiver2.port, "events": ["run_succeeded", "heartbeat"]}])
    hub.publish(event("i1", "run_started", "info"))
    hub.publish(event("w1", "disk_low", "warning"))
    hub.publish(event("h1", "heartbeat", "info"))
    hub.publish(event("s1", "run_succeeded", "info", stages=1))
    hub.stop(5)
    assert _ids(receiver.requests) == ["w1"]
    assert _ids(receiver2.requests) == ["h1", "s1"]


def test_heartbeat_message_on_schedule(make_hub, receiver):
    hub = make_hub([_ntfy(receiver, heartbeat="10s")])
    status = {"runs": [{"name": "resnet-a3", "state": "running", "current_stage": "train",
                        "stages": [{"name": "train", "progress": {"fraction": 0.43, "eta_s": 7800}}]}],
              "health": {"gpus": [{"util_pct": 98}], "memory": {"used_pct": 61}}}
    hub.tick(100.0, status)
    hub.tick(105.0, status)
    assert receiver.requests == []
    hub.tick(110.0, status)
    req = receiver.wait_for(1)[0]
    assert req.headers["Tags"] == "green_heart"
    assert req.text() == "\U0001F49A box1 \u00b7 alive \u2014 resnet-a3/train 43% (eta 2h10m) \u00b7 GPU 98% \u00b7 mem 61%"


def test_healthchecks_pings_every_heartbeat(make_hub, receiver):
    hub = make_hub([{"url": receiver.url + "/ping/k", "format": "healthchecks", "heartbeat": "5s"}])
    hub.tick(0.0, {})
    receiver.wait_for(1)
    hub.tick(3.0, {})
    hub.tick(5.0, {})
    reqs = receiver.wait_for(2)
    assert [r.path for r in reqs] == ["/ping/k", "/ping/k"]


def test_notify_set_picked_up_without_restart(make_hub, receiver, receiver2, rgt_home):
    from tests.notify.receiver import write_secrets
    hub = make_hub([_ntfy(receiver)])
    hub.publish(event("a1"))
    receiver.wait_for(1)
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver2.port}])
    os.utime(rgt_home / "secrets.json", (1, 1))     # mtime surely differs from the first write
    hub.tick(1000.0, {})
    hub.publish(event("a2"))
    assert _ids(receiver2.wait_for(1)) == ["a2"]
    assert _ids(receiver.requests) == ["a1"]


def test_run_failed_after_the_same_stage_failure_buzzes_once(make_hub, receiver):
    cause = {"class": "cgroup_oom", "summary": "cgroup OOM kill", "remediation": "r", "evidence": []}
    other = {"class": "preflight_failed", "summary": "disk too small", "remediation": "r", "evidence": []}
    hub = make_hub([_ntfy(receiver)])
    hub.publish(event("q1", "daemon_started", "info", run=None, stage=None))
    hub.publish(event("q2", "stage_succeeded", "info"))
    hub.publish(event("q3", "stage_succeeded", "warning", warnings=["ended 40x faster than expected"]))
    hub.publish(event("f1", "stage_failed", cause=cause))
    hub.publish(event("f2", "run_failed", cause=cause, failed_stage="train"))
    hub.publish(event("f3", "run_failed", run="other-run", cause=other))
    hub.stop(5)
    assert _ids(receiver.requests) == ["q3", "f1", "f3"]


def test_a_cancel_sends_one_push_not_a_stage_and_a_run_one(make_hub, receiver):
    """cancel of a running stage wrote stage_cancelled then run_cancelled, and both buzzed; a
    queued run cancelled (no stage ran) still gets its run_cancelled."""
    hub = make_hub([_ntfy(receiver)])
    hub.publish(event("c1", "stage_cancelled", "warning"))
    hub.publish(event("c2", "run_cancelled", "warning"))
    hub.publish(event("c3", "run_cancelled", "warning", run="queued-run", stage=None))
    hub.stop(5)
    assert _ids(receiver.requests) == ["c1", "c3"]


def test_removed_notifier_pending_messages_are_recorded_not_lost_silently(make_hub, receiver, receiver2, rgt_home):
    from tests.notify.receiver import write_secrets
    receiver.down()
    hub = make_hub([dict(_ntfy(receiver), id="old")])
    hub.publish(event("p1"))
    hub.publish(event("p2"))
    _wait_summary(hub, lambda s: s["pending"] == 2 and s["last_error"])
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % receiver2.port, "id": "new"}])
    os.utime(rgt_home / "secrets.json", (1, 1))
    hub.tick(1000.0, {})
    import time

    def failed_files():       # not the .tmp- of a write in progress
        return sorted(n for n in os.listdir(hub.outbox.failed_dir) if not n.startswith("."))
    deadline = time.monotonic() + 10
    while len(failed_files()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    failed = failed_files()
    assert len(failed) == 2
    rec = json.loads(open(os.path.join(hub.outbox.failed_dir, failed[0])).read())
    assert rec["event"]["id"] == "p1" and "removed by notify-set" in rec["failed_reason"]
    assert receiver2.requests == []
