"""The Ray backend's attempts as tasks of rgt's long-lived driver (the default): the
driver itself ending mid-sweep (stopped, as a crash or a head restart ends it) is noticed and
replaced by the next generation, and no attempt starts twice; the agent never imports the
driver module or `ray`.
"""
from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

import pytest

from tests.ray.test_ray_backend import PROBE, ray_job
from tests.realbox import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture
def task_box(box, ray_cluster):
    box.env.update(RGT_RAY_POLL="0.2", RGT_RAY_EXIT_GRACE="1", RGT_STOP_GRACE="5")
    box.cluster = ray_cluster
    return box


def drivers(box):
    return {j["submission_id"]: j for j in box.cluster.jobs() if (j.get("metadata") or {}).get("rgt_driver")
            and str(box.home) in j["entrypoint"]}


def test_a_driver_stopped_mid_sweep_is_replaced_and_no_attempt_starts_twice(task_box):
    box = task_box
    box.daemon()
    assert box.submit(ray_job(box, "dr", {"name": "s", "run": PROBE % 2, "retries": 1}, gpus=1,
                              matrix={"A": [str(i) for i in range(12)]})).returncode == 0
    wait_for(lambda: len(list((box.home / "runs").glob("dr-*/stages/*.claim"))) >= 3, 60, "some cells running")
    (first,) = drivers(box)
    req = urllib.request.Request(box.cluster.dashboard + "/api/jobs/%s/stop" % first, data=b"", method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    names = ["dr-%d" % i for i in range(1, 13)]
    for name in names:
        assert box.wait_run(name, timeout=180)["state"] == "succeeded", box.diagnostics()
    seen = drivers(box)
    assert seen[first]["status"] in ("STOPPED", "FAILED") and len(seen) == 2, seen
    assert any(j["status"] == "RUNNING" for sid, j in seen.items() if sid != first), seen
    assert "rgt's driver %s ended" % first in box.diagnostics()
    # The cells the stopped driver was running ran on (their shims outlive the driver's tasks),
    # watched by the next driver: none failed, none was retried or started again.
    assert not [e for e in box.events("stage_retry") if e.get("run") in names]
    for name in names:
        logs = [p.read_text() for p in sorted((box.home / "runs" / name / "logs").glob("s.*.log"))]
        # Each attempt started once; the cell ran to its end once (the stopped one's shim ended
        # with its task, never finishing beside its retry).
        assert all(text.count("gpus=") == 1 for text in logs), (name, logs)
        assert sum(text.count("done") for text in logs) == 1, (name, logs)


def test_the_agent_never_imports_ray_or_the_driver(tmp_path):
    """The daemon side of the backend imports with the bare standard library; the driver module
    is only ever run by the cluster's Python."""
    code = ("import sys; import boxagent.engine.raytasks, boxagent.engine.rayrun, boxagent.daemon.loop; "
            "bad = [m for m in sys.modules if m == 'ray' or m.startswith('ray.') or m.endswith(('raydriver', 'raycell'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(__import__("pathlib").Path(__file__).resolve().parents[2])))
    assert out.returncode == 0, out.stdout + out.stderr
