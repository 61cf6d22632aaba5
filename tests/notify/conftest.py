"""Fixtures for the notification tests: loopback receivers and a hub with fast retries."""
from __future__ import annotations

import pytest

from tests.notify.receiver import NtfyReceiver, Receiver


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.down()


@pytest.fixture
def receiver2():
    r = Receiver()
    yield r
    r.down()


@pytest.fixture
def ntfy_receiver():
    r = NtfyReceiver()
    yield r
    r.down()


@pytest.fixture
def make_hub(rgt_home, monkeypatch):
    """make_hub(entries, backend="requests"|"urllib", start=True, **retry) -> a started NotifyHub."""
    from boxagent.base.home import Home
    from boxagent.notify.delivery import RetryPolicy
    from boxagent.notify.hub import NotifyHub
    from boxagent.notify.http import HttpClient
    from tests.notify.receiver import write_secrets

    hubs = []

    def make(entries=None, backend=None, start=True, base_s=0.05, cap_s=0.2, give_up_s=3600.0,
             config=None, clock=None):
        if entries is not None:
            write_secrets(rgt_home, entries)
        http = (lambda: HttpClient(backend=backend)) if backend else None
        hub = NotifyHub(Home(str(rgt_home)), dict({"host": "box1"}, **(config or {})), {}, http=http,
                        clock=clock, retry=RetryPolicy(base_s, cap_s, give_up_s, jitter=0))
        if start:
            hub.start()
        hubs.append(hub)
        return hub

    yield make
    for h in hubs:
        h.stop(0)

