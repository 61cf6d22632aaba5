"""The ntfy dead-man: exactly one scheduled message pending, re-armed while the agent ticks, and
delivered by the (loopback) server once the agent stops — against a receiver that honours `In:`."""
from __future__ import annotations

import time


def _tick_for(hub, seconds: float, step: float = 0.05) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hub.tick(time.monotonic(), {"runs": [{"name": "r1", "state": "running", "current_stage": "train",
                                              "stages": [{"name": "train"}]}]})
        time.sleep(step)


def test_deadman_rearmed_while_alive_and_fires_after_stop(make_hub, ntfy_receiver):
    r = ntfy_receiver
    hub = make_hub([{"url": "ntfy://127.0.0.1:%d/box-topic" % r.port, "deadman": "1.2s"}])
    _tick_for(hub, 2.0)
    r.poll()
    arms = r.matching(lambda q: q.headers.get("In"))
    assert len(arms) >= 4, "re-armed about every deadman/4"
    assert len(r.scheduled) == 1 and r.fired == []       # exactly one pending, never fired while alive
    assert {q.headers["X-Sequence-ID"] for q in arms} == {"rgt-deadman-ntfy0"}
    assert arms[-1].headers["In"] == "1s"
    dm = hub.summary()["targets"][0]["deadman"]
    assert dm["confirmed"] is True and dm["delay_s"] == 1.2

    hub.stop(1)                                          # the agent stops re-arming
    deadline = time.monotonic() + 5
    while not r.fired and time.monotonic() < deadline:
        time.sleep(0.05)
        r.poll()
    assert len(r.fired) == 1 and r.scheduled == {}
    fired = r.fired[0]
    assert fired["headers"]["Priority"] == "5" and fired["headers"]["Tags"] == "skull"
    assert "Last heard at" in fired["body"] and "r1/train" in fired["body"]
    assert r.published == []                            # the dead-man is never an immediate message


def test_deadman_unconfirmed_on_old_server(make_hub, receiver):
    # An ntfy older than 2.16 answers without sequence_id: each re-arm would add one more.
    receiver.default = (200, {}, b'{"id":"abc","event":"message"}')
    hub = make_hub([{"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "deadman": "20m"}])
    hub.tick(0.0, {})
    receiver.wait_for(1)
    deadline = time.monotonic() + 5
    while "deadman" not in hub.summary()["targets"][0] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hub.summary()["targets"][0]["deadman"]["confirmed"] is False
    assert receiver.requests[0].headers["In"] == "1200s"


def test_deadman_refused_for_services_that_cannot_hold_a_message():
    import pytest
    from boxagent.notify.config import NotifyConfigError, parse_notifiers
    with pytest.raises(NotifyConfigError) as exc:
        parse_notifiers([{"url": "slack://T/B/X", "deadman": "20m"}])
    assert "ntfy" in exc.value.hint and "healthchecks" in exc.value.hint


def test_deadman_cancelled_when_the_user_removes_it(make_hub, ntfy_receiver, rgt_home):
    import os
    from tests.notify.receiver import write_secrets
    r = ntfy_receiver
    url = "ntfy://127.0.0.1:%d/box-topic" % r.port
    hub = make_hub([{"url": url, "deadman": "30s", "id": "dm1"}])
    hub.tick(0.0, {})
    deadline = time.monotonic() + 5
    while not r.scheduled and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(r.scheduled) == ["rgt-deadman-dm1"]
    write_secrets(rgt_home, [{"url": url, "id": "dm1"}])          # notify-set without deadman
    os.utime(rgt_home / "secrets.json", (1, 1))
    hub.tick(10.0, {})
    r.wait_for(1, pred=lambda q: q.method == "DELETE")
    assert r.scheduled == {}
    deadline = time.monotonic() + 5
    while "deadman" in hub.summary()["targets"][0] and time.monotonic() < deadline:   # the answer lands
        time.sleep(0.01)
    assert "deadman" not in hub.summary()["targets"][0]
    assert [q.method for q in r.requests][-1] == "DELETE"     # no re-arm after the cancel
