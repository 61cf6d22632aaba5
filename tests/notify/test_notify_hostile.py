"""Hostile or broken endpoints, one test per attack, against real loopback servers, through both
HTTP paths (requests, and the stdlib urllib that a bare box uses): a 1 GB answer, a server that
drips one byte at a time, and a `base_url` whose path is a relay's secret token."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.notify.receiver import HostileServer, event, write_secrets

BACKENDS = ["requests", "urllib"]
RELAY_TOKEN = "relay-T0kenQ9zz"


@pytest.fixture
def hostile():
    servers = []

    def make(mode, **kw):
        s = HostileServer(mode, **kw)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.down()


def _notify_test(rgt_home, backend, *args):
    """`rgt-agent notify-test --json ARGS` as a real process: (returncode, stdout, stderr, elapsed s)."""
    env = dict(os.environ, RGT_HOME=str(rgt_home), PYTHONPATH=str(REPO))
    env["RGT_NOTIFY_HTTP"] = backend
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "boxagent", "notify-test", "--json", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
    try:
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    elapsed = time.monotonic() - t0
    return p.returncode, out, err, elapsed


def _peak_rss_of(cmd, env):
    """Run `cmd` and return (returncode, stdout, peak RSS in bytes), measured by a small launcher:
    wait4 from this test process would report this (big) process's own high-water mark."""
    from tests.clientproc import run_argv
    res = run_argv(list(cmd), env=env, timeout=120, cwd=REPO)
    return res.rc, res.out, res.maxrss_bytes


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_gigabyte_answer_keeps_the_sender_under_100_mb(rgt_home, hostile, backend):
    server = hostile("huge_body")
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % server.port, "id": "big"}])
    env = dict(os.environ, RGT_HOME=str(rgt_home), PYTHONPATH=str(REPO))
    env["RGT_NOTIFY_HTTP"] = backend
    rc, out, peak = _peak_rss_of([sys.executable, "-m", "boxagent", "notify-test", "--json", "--timeout", "60"],
                                 env)
    print("\npeak RSS of `rgt-agent notify-test` (%s) against a 1 GB answer: %.1f MB" % (backend, peak / 1e6))
    assert rc == 0, out
    assert json.loads(out)["results"][0]["status"] == 200
    assert peak < 100 * 1000 * 1000
    assert server.sent_bytes < 200 * (1 << 20)          # it hung up early, it did not read on


@pytest.mark.slow     # seconds of a dripping server each; the module keeps its quick hostile cases fast
@pytest.mark.parametrize("backend", BACKENDS)
def test_server_dripping_headers_cannot_hold_notify_test(rgt_home, hostile, backend):
    server = hostile("drip_headers", interval=2.0)
    write_secrets(rgt_home, [{"url": "ntfy://127.0.0.1:%d/t" % server.port, "id": "drip"}])
    rc, out, err, elapsed = _notify_test(rgt_home, backend, "--timeout", "5")
    result = json.loads(out)["results"][0]
    assert rc == 1 and result["ok"] is False
    assert "no complete answer within 5s" in result["error"]
    assert 4.5 <= result["elapsed_s"] <= 7.0              # the deadline, not a read timeout
    assert elapsed < 12.0                                 # startup under load, plus the 5 s


@pytest.mark.parametrize("backend", BACKENDS)
def test_server_dripping_the_body_cannot_hold_a_send(make_hub, hostile, backend):
    server = hostile("drip_body", interval=0.3)
    hub = make_hub([{"url": "ntfy://127.0.0.1:%d/t" % server.port, "timeout": "1.5s"}], backend=backend,
                   start=False)
    t0 = time.monotonic()
    result = hub.send_test()[0]
    # The status line said 200: the message was taken; the rest of the body is not waited for.
    assert result["ok"] is True and result["status"] == 200
    assert time.monotonic() - t0 < 1.5 + 2.0


@pytest.mark.slow     # seconds of a dripping server each; the module keeps its quick hostile cases fast
@pytest.mark.parametrize("backend", BACKENDS)
def test_dripping_server_does_not_hold_the_delivery_thread(make_hub, hostile, receiver, backend):
    server = hostile("drip_headers", interval=0.2)
    hub = make_hub([{"url": "ntfy://127.0.0.1:%d/t" % server.port, "timeout": "1s", "id": "drip"},
                    {"url": "ntfy://127.0.0.1:%d/t" % receiver.port, "id": "fine"}], backend=backend)
    hub.publish(event("e1"))
    receiver.wait_for(1)
    deadline = time.monotonic() + 8
    while server.connections < 3 and time.monotonic() < deadline:     # retried, so not held
        time.sleep(0.05)
    assert server.connections >= 3
    drip = hub.summary()["targets"][0]
    assert drip["pending"] == 1 and "no complete answer within 1s" in drip["last_error"]
    t0 = time.monotonic()
    hub.stop(0.5)
    assert time.monotonic() - t0 < 0.5 + 1.0 + 1.0          # at most one request's deadline more


def _leaks(root, needle):
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            if f != "secrets.json" and needle.encode() in open(path, "rb").read():
                out.append(os.path.relpath(path, root))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_base_url_relay_token_is_shown_only_as_scheme_and_host(make_hub, receiver, rgt_home, agent, backend):
    # One relay answers 500 and echoes the path (the token) back; the other is a dead port,
    # whose connection error quotes the URL it tried (requests does).
    receiver.handler_hook = lambda req: (500, {}, ("no route %s" % req.path).encode())
    dead = receiver.port + 1 if receiver.port < 65000 else receiver.port - 1
    entries = [{"url": "slack://T000/B000/XXXXSECRET", "base_url": "%s/%s/" % (receiver.url, RELAY_TOKEN),
                "id": "relay"},
               {"url": "discord://1234/TOKENXYZ", "base_url": "http://127.0.0.1:%d/%s" % (dead, RELAY_TOKEN),
                "id": "deadrelay"}]
    hub = make_hub(entries, backend=backend)
    hub.publish(event("e1"))
    receiver.wait_for(2)
    deadline = time.monotonic() + 10
    while not all(t["last_error"] for t in hub.summary()["targets"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    hub.stop(0)
    summary = json.dumps(hub.summary())
    assert receiver.requests[0].path.startswith("/%s/services/" % RELAY_TOKEN)     # it did go there
    assert '"base": "%s"' % receiver.url in summary and '"base": "http://127.0.0.1:%d"' % dead in summary
    assert "no route /***/services/***" in summary
    assert RELAY_TOKEN not in summary
    assert _leaks(rgt_home, RELAY_TOKEN) == []                 # outbox files, .state.json, failed/
    env = {"RGT_NOTIFY_HTTP": backend}
    for args in (("notify-test", "--json"), ("notify-test",)):
        res = agent(*args, env=env)
        assert res.returncode == 1
        assert RELAY_TOKEN not in (res.stdout + res.stderr).decode()


@pytest.mark.parametrize("backend", BACKENDS)
def test_basic_auth_echoed_back_by_the_receiver_is_masked_like_the_password(make_hub, receiver, rgt_home, agent, backend):
    """user:pass in a notify URL travels as HTTP Basic auth's base64; a receiver that answers 500
    quoting the request's Authorization header put that base64 into last_error and the outbox."""
    import base64
    user, password = "alice", "hunter2-Pw9q"
    basic = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    receiver.handler_hook = lambda req: (500, {}, ("denied %s" % req.headers.get("Authorization")).encode())
    hub = make_hub([{"url": "ntfy://%s:%s@127.0.0.1:%d/topic1" % (user, password, receiver.port), "id": "basic"}],
                   backend=backend)
    hub.publish(event("e1"))
    receiver.wait_for(1)
    deadline = time.monotonic() + 10
    while not hub.summary()["targets"][0]["last_error"] and time.monotonic() < deadline:
        time.sleep(0.02)
    hub.stop(0)
    assert receiver.requests[0].headers.get("Authorization") == "Basic " + basic     # it did travel so
    summary = json.dumps(hub.summary())
    assert "denied Basic ***" in summary, summary
    assert basic not in summary and password not in summary
    assert _leaks(rgt_home, basic) == []
    res = agent("notify-test", "--json", env={"RGT_NOTIFY_HTTP": backend})
    assert res.returncode == 1 and basic not in (res.stdout + res.stderr).decode()
