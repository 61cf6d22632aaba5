"""`rgt-client ray up/down` on two loopback "boxes" through the real sshd (aliases rgt-box and
rgt-box2, each its own RGT_HOME with the built agent): a port taken or a pair that cannot connect
refuses the cluster naming the pair, with nothing started; otherwise a real two-node Ray cluster
forms without any --ip (each agent offers its addresses; the probe proves which one the other
box reaches), and `down` stops it and nothing else (the session's other Ray cluster lives on)."""
from __future__ import annotations

import json
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.clirunner import Cli
from tests.ray.cluster import free_base

pytestmark = [pytest.mark.slow, pytest.mark.ssh, pytest.mark.xdist_group("ray")]


@pytest.fixture
def two_boxes(sshd, agent_pyz, client_config, tmp_path):
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("the `ray` package is not installed (pip install -e '.[dev]' brings it)")
    homes = {}
    for alias in ("rgt-box", "rgt-box2"):
        home = tmp_path / alias
        home.mkdir()
        shutil.copy(agent_pyz, home / "rgt-agent.pyz")
        homes[alias] = home
    client_config.mkdir(parents=True, exist_ok=True)
    (client_config / "hosts.json").write_text(json.dumps(
        {"hosts": {a: {"home": str(h), "python": sys.executable} for a, h in homes.items()}}))
    yield homes
    cli = Cli(sshd.config)
    cli("ray", "down", "rgt-box", "rgt-box2")


def up(sshd, base, *extra):
    return Cli(sshd.config)("ray", "up", "rgt-box", "rgt-box2", *extra,
                            "--port-base", str(base), "--port-step", "200")


def test_a_taken_port_refuses_the_cluster_naming_the_box_and_starts_nothing(sshd, two_boxes):
    base = free_base(600)
    squatter = socket.socket()
    squatter.bind(("0.0.0.0", base + 200 + 10))      # rgt-box2's node-manager port
    squatter.listen(1)
    try:
        res = up(sshd, base, "--ip", "rgt-box=127.0.0.1", "--ip", "rgt-box2=127.0.0.1")
    finally:
        squatter.close()
    assert res.exit_code == 1, res.output
    assert "Error: cannot form a Ray cluster: port %d on rgt-box2 is taken" % (base + 210) in res.stderr
    assert "Hint: " in res.stderr and "private" in res.stderr
    assert not any((h / "ray-node.json").exists() for h in two_boxes.values())


def test_an_unreachable_pair_refuses_the_cluster_naming_the_pair(sshd, two_boxes):
    base = free_base(600)
    # rgt-box2 "is" at a TEST-NET address nothing answers on: rgt-box cannot reach it (the NAT case).
    res = up(sshd, base, "--ip", "rgt-box=127.0.0.1", "--ip", "rgt-box2=198.51.100.7")
    assert res.exit_code == 1, res.output
    assert "rgt-box cannot reach rgt-box2 (198.51.100.7) on port" in res.stderr, res.stderr
    assert "NAT" in res.stderr
    assert not any((h / "ray-node.json").exists() for h in two_boxes.values())


def test_up_forms_a_two_node_cluster_and_down_stops_it_and_nothing_else(sshd, two_boxes, ray_cluster, tmp_path):
    base = free_base(600, start=ray_cluster.base + 1000)
    res = up(sshd, base)            # no --ip: each box's agent offers its addresses, the probe picks
    assert res.exit_code == 0, res.output
    assert 'backend = "ray"' in res.stdout
    picked = {line.split(":")[0]: line.rsplit(" ", 1)[1] for line in res.stdout.splitlines()
              if "reached by every other box at" in line}
    assert sorted(picked) == ["rgt-box", "rgt-box2"], res.stdout
    head_ip = picked["rgt-box"]
    assert '[ray] address = "http://%s:%d"' % (head_ip, base + 1) in res.stdout

    token = (two_boxes["rgt-box"] / "ray-auth-token").read_text().strip()
    assert oct((two_boxes["rgt-box"] / "ray-auth-token").stat().st_mode & 0o777) == "0o600"
    url = "http://%s:%d/api/v0/nodes?detail=1" % (head_ip, base + 1)
    with pytest.raises(urllib.error.HTTPError) as refused:      # token auth: no token, no cluster
        urllib.request.urlopen(url, timeout=10)
    assert refused.value.code in (401, 403)

    def alive():
        req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, timeout=10) as r:
            rows = json.loads(r.read())["data"]["result"]["result"]
        return [n for n in rows if n["state"] == "ALIVE"]
    deadline = time.time() + 60
    while len(alive()) < 2 and time.time() < deadline:
        time.sleep(0.5)
    assert len(alive()) == 2
    # The one-command path on: a daemon beside the head runs a Ray stage there, its Jobs API calls
    # carrying the token `ray up` left (without it the dashboard refuses them, as just seen).
    from tests.realbox import job
    boxes = json.loads((two_boxes["rgt-box"] / "ray-hosts.json").read_text())
    assert sorted(boxes.values()) == ["rgt-box", "rgt-box2"], boxes     # each Ray node id -> its box
    daemon_box = _beside_head(two_boxes, tmp_path / "daemon", {})
    try:
        daemon_box.daemon()
        spec = job("on-up", daemon_box.workdir, {"name": "s", "run": "echo hello from ray"}, backend="ray",
                   ray={"address": "http://%s:%d" % (head_ip, base + 1)})
        assert daemon_box.submit(spec).returncode == 0
        assert daemon_box.wait_run("on-up", timeout=90)["state"] == "succeeded", daemon_box.diagnostics()
        from tests.realbox import wait_for
        placed = wait_for(lambda: (lambda p: p if p.get("state") == "SUCCEEDED" else None)(
            (daemon_box.stage("on-up", "s").get("placement") or {})), 15, "Ray's end state in status")
        assert placed["ssh_host"] == boxes[placed["node_id"]], placed        # status names the box
        # A task of rgt's driver (the default), its files kept by the node in ITS box's RGT_HOME
        # and the log streamed back into the daemon's.
        assert "hello from ray" in (daemon_box.home / "runs" / "on-up" / "logs" / "s.1.log").read_text()
        node_logs = [p for h in two_boxes.values() for p in (h / "ray-node").glob("*/runs/on-up/logs/s.1.log")]
        assert len(node_logs) == 1 and "hello from ray" in node_logs[0].read_text(), node_logs
    finally:
        daemon_box.cleanup()
    # Attempts as Ray Jobs of their own (`ray_attempts: "jobs"`) on the same token-auth cluster:
    # each submitted with the token, as rgt's driver was above.
    tasks_box = _beside_head(two_boxes, tmp_path / "daemon-jobs", {"ray_attempts": "jobs"})
    try:
        tasks_box.daemon()
        spec = job("on-up-jobs", tasks_box.workdir, {"name": "s", "run": "echo hello from a job"}, backend="ray",
                   ray={"address": "http://%s:%d" % (head_ip, base + 1)})
        assert tasks_box.submit(spec).returncode == 0
        assert tasks_box.wait_run("on-up-jobs", timeout=90)["state"] == "succeeded", tasks_box.diagnostics()
        assert not (tasks_box.home / "ray-driver").exists(), "run by rgt's driver, not as a Ray Job of its own"
        assert "hello from a job" in (tasks_box.home / "runs" / "on-up-jobs" / "logs" / "s.1.log").read_text()
    finally:
        tasks_box.cleanup()
    res = Cli(sshd.config)("ray", "down", "rgt-box", "rgt-box2")
    assert res.exit_code == 0, res.output
    import psutil
    time.sleep(1)
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if any(a.endswith(":%d" % base) and a.startswith("--gcs-address=") for a in (p.info["cmdline"] or []))]
    assert not left, "processes of the cluster `down` left running: %s" % left
    assert not any((h / "ray-node.json").exists() for h in two_boxes.values())
    with pytest.raises(OSError):
        urllib.request.urlopen("http://%s:%d/api/v0/nodes" % (head_ip, base + 1), timeout=5)
    assert len([n for n in ray_cluster.nodes() if n["state"] == "ALIVE"]) == 2   # not ours: untouched


def _beside_head(two_boxes, where, config):
    """A daemon's box beside the head `ray up` formed: the token and the node -> box map it left."""
    from tests.realbox import Box
    b = Box(where)
    b.home.mkdir(parents=True)
    for name in ("ray-auth-token", "ray-hosts.json"):
        shutil.copy(two_boxes["rgt-box"] / name, b.home / name)
    (b.home / "config.json").write_text(json.dumps(config))
    b.env.update(RGT_RAY_POLL="0.2", RGT_RAY_EXIT_GRACE="1")
    return b
