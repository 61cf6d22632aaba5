"""Notifications through the real daemon: SIGKILL with a full outbox, secrets never leaking into
any file under $RGT_HOME (but secrets.json) nor into `ps`, and the ntfy dead-man firing once the
agent stops. The daemon runs as a real process from the source tree with fast intervals."""
from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]
FAST = {"RGT_TICK": "0.05", "RGT_SAMPLE_EVERY": "0.5", "RGT_STOP_GRACE": "1", "RGT_HEARTBEAT_EVERY": "3600",
        "RGT_LAUNCH_GRACE": "1"}
TOPIC = "topic-S3cretXq"
TOKEN = "tk_T0kenAbc123"
HOOK = "hook-P4thSecret"
HMAC_KEY = "hmac-K3ySecret"
RELAY = "relay-P4thT0ken"
SECRETS = (TOPIC, TOKEN, HOOK, HMAC_KEY, RELAY)


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class Box:
    def __init__(self, tmp: Path):
        self.home = tmp / "rgt-home"
        self.tmp = tmp
        self.env = dict(os.environ, RGT_HOME=str(self.home), PYTHONPATH=str(REPO),
                        RGT_BOOT_ID_PATH=str(tmp / "boot_id"), **FAST)
        (tmp / "boot_id").write_text("b1\n")
        self.procs = []

    def agent(self, *args, stdin=None):
        return subprocess.run([sys.executable, "-m", "boxagent", *args], input=stdin, capture_output=True,
                              env=self.env, timeout=60, cwd=str(self.tmp))

    def configure(self, notify_entries, **config):
        cfg = dict({"host": "box1", "notify": {"retry_base_s": 0.05, "retry_cap_s": 0.3}}, **config)
        assert self.agent("configure", stdin=json.dumps(cfg).encode()).returncode == 0
        res = self.agent("notify-set", stdin=json.dumps({"notify": notify_entries}).encode())
        assert res.returncode == 0, res.stderr

    def daemon(self):
        log = open(self.tmp / ("daemon-%d.log" % len(self.procs)), "ab")
        p = subprocess.Popen([sys.executable, "-m", "boxagent", "daemon"], env=self.env, stdout=log, stderr=log,
                             cwd=str(self.tmp), start_new_session=True)
        self.procs.append(p)
        wait_for(lambda: self.status().get("agent", {}).get("pid") == p.pid, 15, "daemon status")
        return p

    def status(self):
        try:
            return json.loads((self.home / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def submit_failing(self, name):
        job = {"name": name, "stage": [{"name": "train", "run": "echo step 1; echo Killed; exit 3"}]}
        assert self.agent("submit", "-", stdin=json.dumps(job).encode()).returncode == 0

    def run_state(self, name):
        try:
            return json.loads((self.home / "runs" / name / "state.json").read_text()).get("state")
        except (OSError, ValueError):
            return None

    def outbox_files(self):
        d = self.home / "outbox"
        return sorted(n for n in os.listdir(d) if n.endswith(".json") and not n.startswith("."))

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)


@pytest.fixture
def box(tmp_path):
    b = Box(tmp_path)
    yield b
    b.kill_all()


@pytest.mark.slow
def test_sigkilled_daemon_with_full_outbox_delivers_after_restart(box, receiver):
    receiver.down()
    box.configure([{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    p = box.daemon()
    for name in ("ra", "rb", "rc"):
        box.submit_failing(name)
    wait_for(lambda: all(box.run_state(n) == "failed" for n in ("ra", "rb", "rc")), 20, "runs failed")
    wait_for(lambda: len(box.outbox_files()) >= 6, 10, "outbox filled")
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(5)
    pending = box.outbox_files()
    receiver.up()
    box.daemon()
    wait_for(lambda: not box.outbox_files(), 20, "outbox drained")
    ids = [r.headers["X-Sequence-ID"] for r in receiver.requests]
    assert len(ids) == len(set(ids)), "each message exactly once"
    assert len(ids) >= len(pending)
    types = [r.headers["Tags"] for r in receiver.requests]
    assert types.count("x") >= 3                  # the three stage failures (run_failed dedupes into them)
    starts = [i for i, t in enumerate(types) if t == "rocket"]
    fails = [i for i, t in enumerate(types) if t == "x"]
    assert starts and fails and starts[0] < fails[0]          # publish order kept


@pytest.mark.slow
def test_no_secret_under_rgt_home_nor_in_ps(box, receiver):
    # The receiver answers 500 echoing the path (the topic, the relay token) back; the JSON hook
    # is a dead port (requests' error text quotes the URL). All texts reach last_error: scrubbed.
    receiver.handler_hook = lambda req: (500, {}, ("no topic %s here" % req.path).encode())
    dead_port = receiver.port + 1 if receiver.port < 65000 else receiver.port - 1
    box.configure([{"url": "ntfy://%s@127.0.0.1:%d/%s" % (TOKEN, receiver.port, TOPIC)},
                   {"url": "json://127.0.0.1:%d/%s" % (dead_port, HOOK), "secret": HMAC_KEY},
                   {"url": "slack://T1/B1/XXXX", "base_url": "%s/%s" % (receiver.url, RELAY)}])
    box.daemon()
    box.submit_failing("leaky")
    wait_for(lambda: box.run_state("leaky") == "failed", 20, "run failed")
    wait_for(lambda: len(receiver.requests) >= 3, 10, "retries")
    wait_for(lambda: all(t.get("last_error") for t in box.status().get("notifications", {}).get("targets", [])),
             10, "errors recorded in status.json")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    test_out = box.agent("notify-test", "--json")
    assert test_out.returncode == 1
    assert box.agent("stop").returncode == 0
    leaks = []
    for root, _dirs, files in os.walk(box.home):
        for f in files:
            path = Path(root) / f
            if path == box.home / "secrets.json":
                continue
            data = path.read_bytes()
            leaks += ["%s in %s" % (s, path.relative_to(box.home)) for s in SECRETS if s.encode() in data]
    for s in SECRETS:
        if s in ps or s.encode() in test_out.stdout + test_out.stderr:
            leaks.append("%s in ps/notify-test output" % s)
    for log in box.tmp.glob("daemon-*.log"):
        leaks += ["%s in %s" % (s, log.name) for s in SECRETS if s.encode() in log.read_bytes()]
    assert leaks == []
    status = box.status()["notifications"]
    assert "ntfy://127.0.0.1:%d/***" % receiver.port in json.dumps(status)
    assert "no topic /*** here" in json.dumps(status)


@pytest.mark.slow
def test_deadman_rearmed_by_the_daemon_fires_after_agent_stop(box, ntfy_receiver):
    r = ntfy_receiver
    box.configure([{"url": "ntfy://127.0.0.1:%d/dm" % r.port, "deadman": "4s"}])
    box.daemon()
    wait_for(lambda: len(r.matching(lambda q: q.headers.get("In"))) >= 3, 10, "three re-arms")
    r.poll()
    assert len(r.scheduled) == 1 and r.fired == []
    assert box.agent("stop").returncode == 0
    t_stop = time.monotonic()
    wait_for(lambda: (r.poll() or True) and len(r.fired) == 1, 10, "the dead-man firing")
    assert time.monotonic() - t_stop <= 5.5
    title = r.fired[0]["headers"]["Title"]
    assert base64.b64decode(title[10:-2]).decode().startswith("box1 silent for 4s")
    assert r.scheduled == {}


@pytest.mark.slow
def test_preempted_daemon_last_status_counts_every_message_that_arrived(box, receiver):
    box.configure([{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    p = box.daemon()
    box.submit_failing("pre")
    wait_for(lambda: box.run_state("pre") == "failed", 20, "run failed")
    wait_for(lambda: box.status().get("notifications", {}).get("sent", 0) >= 2, 10, "sent")
    p.send_signal(signal.SIGTERM)                     # spot preemption
    p.wait(30)
    notes = box.status()["notifications"]
    tags = [r.headers["Tags"] for r in receiver.requests]
    assert "warning" in tags                          # daemon_stopped (preempted) did arrive
    assert (notes["sent"], notes["pending"]) == (len(receiver.requests), 0)
