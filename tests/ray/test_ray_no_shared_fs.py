"""No filesystem shared between the box the user talks to and the node that runs the stage. A
cluster of its own: the head declares no GPU, so every cell runs on the worker, and the worker
runs in a mount namespace where the daemon's whole folder (its RGT_HOME and the job's workdir)
is an empty tmpfs of its own: another disk, as far as that node can see, with the workdir made
empty there as the user's code would be cloned. The stage runs, its log streams back into the
daemon's RGT_HOME, a failure is diagnosed from it, cancel stops it and frees its GPU, and the
files it writes stay on the node's disk.

Needs root (a mount namespace and a tmpfs) and `unshare`; skips saying so otherwise.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.realbox import job, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

ISLAND = 'mount -t tmpfs -o size=64m rgt-node-disk "$1" && mkdir -p "$2" && shift 2 && exec "$@"'


def _cluster_apart(box, tmp_path_factory, which: str):
    """A cluster of its own whose `which` node ("worker" or "head") cannot see the box's files."""
    try:
        import ray  # noqa: F401 - only to know the package is there
    except ImportError:
        pytest.skip("the `ray` package is not installed (pip install -e '.[dev]' brings it)")
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a node that cannot see the daemon's files needs root and unshare (a mount namespace)")
    from tests.ray.cluster import RayCluster, RayUnavailable
    wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", ISLAND, "sh", str(box.tmp), str(box.workdir)]
    if which == "worker":
        cluster = RayCluster(tmp_path_factory.mktemp("island"), head_gpus=0, worker_wrap=wrap)
    else:
        cluster = RayCluster(tmp_path_factory.mktemp("island"), head_wrap=wrap)
    try:
        cluster.start()
    except RayUnavailable as exc:
        cluster.stop()
        pytest.skip("the Ray test cluster cannot start: %s" % exc)
    box.env.update(RGT_RAY_POLL="0.2", RGT_RAY_EXIT_GRACE="1", RGT_STOP_GRACE="5")
    box.cluster = cluster
    return cluster


@pytest.fixture
def apart(box, tmp_path_factory):
    """apart("worker" | "head") -> the box, beside a cluster whose that node cannot see its files."""
    made = []

    def make(which: str):
        made.append(_cluster_apart(box, tmp_path_factory, which))
        return box
    try:
        yield make
    finally:
        box.cleanup()
        for cluster in made:
            cluster.stop()


def test_a_stage_on_a_node_that_cannot_see_the_daemons_files_streams_its_log_back(apart):
    box = apart("worker")
    box.daemon()
    home = str(box.home)
    probe = ('echo "home seen: $(test -e %s && echo yes || echo no)"; mkdir -p out && echo node-only > out/f.txt; '
             'for i in 1 2 3; do echo "step $i"; sleep 0.3; done; echo done' % home)
    spec = job("isle", box.workdir, {"name": "s", "run": probe}, backend="ray", gpus=1,
               ray={"address": box.cluster.dashboard, "files": "node"})
    assert box.submit(spec).returncode == 0
    assert box.wait_run("isle", timeout=120)["state"] == "succeeded", box.diagnostics()
    log = (box.home / "runs" / "isle" / "logs" / "s.1.log").read_text()
    # The node never saw the daemon's RGT_HOME; its log came back whole, in order.
    assert "home seen: no" in log and log.index("step 1") < log.index("step 3") < log.index("done"), log
    assert not (box.workdir / "out").exists(), "the file the stage wrote is on the node's own disk"
    (node_log,) = box.cluster.node_homes[box.cluster.worker_name].glob("*/runs/isle/logs/s.1.log")
    assert node_log.read_text() == log
    placed = wait_for(lambda: (lambda p: p if p.get("state") == "SUCCEEDED" else None)(
        box.stage("isle", "s").get("placement") or {}), 15, "Ray's end state in status")
    assert placed["node_id"] == box.cluster.worker_id, placed

    # A failure is diagnosed from the streamed log, as on one box.
    crash = ('echo "epoch 1"; echo "Traceback (most recent call last):"; '
             'echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"; exit 1')
    assert box.submit(job("oom", box.workdir, {"name": "train", "run": crash}, backend="ray", gpus=1,
                          ray={"address": box.cluster.dashboard})).returncode == 0
    assert box.wait_run("oom", timeout=60)["state"] == "failed"
    cause = box.stage("oom", "train")["cause"]
    assert cause["class"] == "cuda_oom" and any("CUDA out of memory" in e for e in cause["evidence"]), cause

    # Cancel reaches the node: the stage is stopped there and its GPUs are Ray's again.
    assert box.submit(job("long", box.workdir, {"name": "s", "run": "echo started; sleep 60"}, backend="ray",
                          gpus=4, ray={"address": box.cluster.dashboard})).returncode == 0
    wait_for(lambda: "started" in _text(box.home / "runs" / "long" / "logs" / "s.1.log"), 60, "the stage's first line")
    wait_for(lambda: box.cluster.gpus_in_use() == 4, 20, "Ray's report of the 4 GPUs held")
    assert box.agent("cancel", "long").returncode == 0
    assert box.wait_run("long", timeout=30)["state"] == "cancelled"
    wait_for(lambda: box.cluster.gpus_in_use() == 0, 20, "Ray's GPUs free again")


def _text(path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_an_agent_whose_files_the_head_cannot_see_says_so_and_fails_the_attempt(apart):
    """rgt's driver runs on the head and works in the daemon's RGT_HOME. An agent that is not on
    the head, with nothing shared, would leave every attempt waiting without a word: the daemon
    waits `ray_driver_wait` for the driver's first word, then says why, with the hint."""
    box = apart("head")
    box.env.update(RGT_RAY_DRIVER_WAIT="3")
    box.daemon()
    assert box.submit(job("blind", box.workdir, {"name": "s", "run": "echo never"}, backend="ray", gpus=1,
                          ray={"address": box.cluster.dashboard})).returncode == 0
    assert box.wait_run("blind", timeout=90)["state"] == "failed", box.diagnostics()
    said = box.diagnostics()
    assert "has not written in this RGT_HOME" in said and "the head does not see it" in said, said
    cause = box.stage("blind", "s")["cause"]
    text = json.dumps(cause)
    assert "the head does not see it" in text and "run rgt's agent on the Ray cluster's head" in text, cause
    # The next attempt is refused at once, for the same reason.
    assert box.submit(job("blind2", box.workdir, {"name": "s", "run": "echo never"}, backend="ray", gpus=1,
                          ray={"address": box.cluster.dashboard})).returncode == 0
    assert box.wait_run("blind2", timeout=30)["state"] == "failed"
    assert "the head does not see it" in json.dumps(box.stage("blind2", "s")["cause"])
