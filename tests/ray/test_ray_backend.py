"""backend = "ray" with the real daemon against a real two-node Ray cluster on loopback (2 x 4
declared GPUs): a sweep spread over both nodes with no GPU held twice, cancel freeing the GPUs,
a failure diagnosed from its log, a SIGKILLed daemon re-adopting its Ray jobs exactly once, a
node killed mid-run ending as node_failure with Ray's evidence and retried on the other node.
"""
from __future__ import annotations

import json
import signal
from typing import Any, Dict, List

import pytest

from tests.realbox import job, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

# Each stage says where it ran and which GPUs Ray gave it.
PROBE = 'echo "gpus=$CUDA_VISIBLE_DEVICES"; sleep %s; echo done'


@pytest.fixture(params=["tasks", "jobs"])
def ray_box(request, box, ray_cluster):
    """Both ways an attempt runs: a task of rgt's driver (the default), or one Ray Job each."""
    box.env.update(RGT_RAY_POLL="0.2", RGT_RAY_EXIT_GRACE="1", RGT_STOP_GRACE="5")
    box.cluster = ray_cluster
    box.attempts_as = request.param
    if request.param == "jobs":
        box.home.mkdir(parents=True, exist_ok=True)
        (box.home / "config.json").write_text(json.dumps({"ray_attempts": "jobs"}))
    yield box
    # A driver outlives its daemon by design (the next daemon re-adopts it); the session's one
    # cluster is shared by every test, so each test's drivers end with it.
    for rec in ray_cluster.jobs():
        if str(rec.get("submission_id")).startswith("rgt-driver-") and rec.get("status") in ("PENDING", "RUNNING"):
            ray_cluster.stop_job(rec["submission_id"])


# What does not depend on how an attempt is started (reading its log, pulling its files) runs
# once, on the default.
DEFAULT_ONLY = pytest.mark.parametrize("ray_box", ["tasks"], indirect=True)


def ray_records(box) -> Dict[str, Dict[str, Any]]:
    """submission id -> Ray's record of each attempt: the Jobs API's, or the driver's (same shape)."""
    if box.attempts_as == "jobs":
        return {j["submission_id"]: j for j in box.cluster.jobs()}
    out = {}
    for path in (box.home / "ray-driver").glob("*/state/*.json"):
        if not path.name.endswith((".start.json", ".shim.json")):
            out[path.name[:-5]] = json.loads(path.read_text())
    return out


def ray_records_of(box, sids: List[str]) -> Dict[str, Dict[str, Any]]:
    """Ray's records once it has one for every one of `sids`. The shim's exit file ends a run;
    Ray's own record of the attempt may come after it (as tasks, the driver writes it once
    ray.wait sees the task return, which polls that same exit file): wait for Ray's word on
    every attempt, never read it once."""
    return wait_for(lambda: (lambda got: got if all(sid in got for sid in sids) else None)(ray_records(box)),
                    30, "Ray's record of every attempt", interval=0.2)


def ray_job(box, name: str, *stages: Dict[str, Any], **top: Any) -> Dict[str, Any]:
    return job(name, box.workdir, *stages, backend="ray", ray={"address": box.cluster.dashboard}, **top)


def placement(box, run: str, stage: str = "s") -> Dict[str, Any]:
    """The stage's Ray placement in its state file ({} before the daemon wrote one)."""
    stages = box.run_state(run).get("stages") or []
    return next((s.get("placement") or {} for s in stages if s["name"] == stage), {})


def attempts(box, run: str) -> List[Dict[str, Any]]:
    """Every attempt of a run's stages as the shim and rgt recorded them: where, which GPUs, when."""
    out = []
    for path in sorted((box.home / "runs" / run / "stages").glob("*.ray")):
        stage, attempt = path.name[:-4].rsplit(".", 1)
        pid = json.loads((path.with_name("%s.%s.pid" % (stage, attempt))).read_text())
        end = json.loads((path.with_name("%s.%s.exit" % (stage, attempt))).read_text())
        out.append({"run": run, "stage": stage, "attempt": int(attempt), "sid": json.loads(path.read_text())["submission_id"],
                    "gpus": pid["ray"]["cuda_visible_devices"], "start": pid["started_at"], "end": end["ended_at"]})
    return out


def test_a_16_cell_sweep_spreads_over_both_nodes_and_no_gpu_is_held_twice(ray_box):
    box = ray_box
    box.daemon()
    out = box.submit(ray_job(box, "sw", {"name": "s", "run": PROBE % 1}, gpus=1,
                             matrix={"A": [str(i) for i in range(16)]}))
    assert out.returncode == 0, out.stderr
    names = ["sw-%d" % i for i in range(1, 17)]
    for name in names:
        assert box.wait_run(name, timeout=120)["state"] == "succeeded", box.diagnostics()
    runs = {}
    for name in names:
        (runs[name],) = attempts(box, name)
    jobs = ray_records_of(box, [a["sid"] for a in runs.values()])
    held = []
    for name in names:
        a = runs[name]
        node = jobs[a["sid"]]["driver_node_id"]
        # Status converges on Ray's end state once the next list call says it.
        placement = wait_for(lambda: (lambda p: p if p.get("state") == "SUCCEEDED" else None)(
            box.stage(name, "s").get("placement") or {}), 10, "Ray's end state in status")
        assert placement["node_id"] == node and placement["gpus"] == a["gpus"], placement
        held.append((node, a["gpus"], a["start"], a["end"]))
    assert {h[0] for h in held} == {box.cluster.head_id, box.cluster.worker_id}, held
    for i, (node, gpu, start, end) in enumerate(held):
        for other in held[i + 1:]:
            overlap = start < other[3] and other[2] < end
            assert not (overlap and node == other[0] and gpu == other[1]), (held[i], other)
    status = json.loads(box.agent("status", "--json").stdout)
    shown = {r["name"]: r for r in status["runs"]}
    assert shown["sw-1"]["node"]["node_id"] in (box.cluster.head_id, box.cluster.worker_id)
    if box.attempts_as == "tasks":
        # Each node kept the attempt's files in its own folder (as on machines with separate
        # disks), and the log the daemon read is the one the node streamed back, byte for byte.
        for name in names:
            (node_log,) = [p for h in box.cluster.node_homes.values() for p in h.glob("*/runs/%s/logs/s.1.log" % name)]
            on_head = box.home / "runs" / name / "logs" / "s.1.log"
            assert node_log.read_bytes() == on_head.read_bytes() and b"done" in node_log.read_bytes(), name


def test_cancel_stops_the_ray_job_and_frees_its_gpus(ray_box):
    box = ray_box
    box.daemon()
    assert box.submit(ray_job(box, "long", {"name": "s", "run": PROBE % 60}, gpus=4)).returncode == 0
    wait_for(lambda: placement(box, "long").get("state") == "RUNNING", 60, "running on Ray")
    wait_for(lambda: box.cluster.gpus_in_use() == 4, 20, "Ray's report of the 4 GPUs held")
    assert box.agent("cancel", "long").returncode == 0
    assert box.wait_run("long", timeout=30)["state"] == "cancelled"
    sid = box.stage("long", "s")["placement"]["job_id"]
    wait_for(lambda: box.cluster.gpus_in_use() == 0, 20, "Ray's GPUs free again")
    assert ray_records_of(box, [sid])[sid]["status"] == "STOPPED"


@DEFAULT_ONLY
def test_a_stage_failure_is_diagnosed_from_its_log_as_on_one_box(ray_box):
    box = ray_box
    box.daemon()
    crash = ('echo "epoch 1"; echo "Traceback (most recent call last):"; '
             'echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"; exit 1')
    assert box.submit(ray_job(box, "oom", {"name": "train", "run": crash}, gpus=1)).returncode == 0
    assert box.wait_run("oom", timeout=60)["state"] == "failed"
    cause = box.stage("oom", "train")["cause"]
    assert cause["class"] == "cuda_oom", cause
    assert any("CUDA out of memory" in e for e in cause["evidence"]), cause


def test_a_sigkilled_daemon_readopts_its_ray_jobs_and_starts_none_twice(ray_box):
    box = ray_box
    first = box.daemon()
    assert box.submit(ray_job(box, "ka", {"name": "s", "run": PROBE % 2}, gpus=1,
                              matrix={"A": [str(i) for i in range(10)]})).returncode == 0
    wait_for(lambda: len(list((box.home / "runs").glob("ka-*/stages/*.claim"))) >= 3, 60, "some cells running")
    first.send_signal(signal.SIGKILL)
    first.wait()
    box.daemon()
    names = ["ka-%d" % i for i in range(1, 11)]
    for name in names:
        assert box.wait_run(name, timeout=120)["state"] == "succeeded", box.diagnostics()
    ray_records_of(box, [a["sid"] for n in names for a in attempts(box, n)])
    mine = [sid for sid in ray_records(box) if any("-%s-s-1" % n in sid for n in names)]
    assert len(mine) == 10, mine
    assert all(len(attempts(box, n)) == 1 for n in names)
    logs = [(box.home / "runs" / n / "logs" / "s.1.log").read_text() for n in names]
    assert all(text.count("done") == 1 for text in logs), logs


def test_a_node_killed_mid_run_is_node_failure_with_rays_evidence_and_retried_on_the_other(ray_box):
    box = ray_box
    cluster = box.cluster
    box.daemon()
    # Two runs of 4 GPUs: Ray puts one on each node.
    assert box.submit(ray_job(box, "va", {"name": "s", "run": PROBE % 8, "retries": 1}, gpus=4)).returncode == 0
    assert box.submit(ray_job(box, "vb", {"name": "s", "run": PROBE % 8, "retries": 1}, gpus=4)).returncode == 0

    def placed():
        got = {n: placement(box, n) for n in ("va", "vb")}
        return got if all(p.get("state") == "RUNNING" for p in got.values()) else None
    where = wait_for(placed, 60, "both running")
    victim = next(n for n, p in where.items() if p["node_id"] == cluster.worker_id)
    other = "va" if victim == "vb" else "vb"
    dead = cluster.kill_worker()
    try:
        # Measured under load (2 cores, load average 9, tests/ray/ beside six CPU burners): Ray
        # fails the attempt 0.3-3 s after the kill, the State API lists the node DEAD at 1.2-1.5 s,
        # rgt judges it and starts attempt 2 within 4 s. The wait stops at the retry or at the
        # stage's end, so a run that failed instead says its cause here; a timeout says where
        # the time went (the daemon's log, Ray's jobs and nodes).
        try:
            st = wait_for(lambda: (lambda s: s if s.get("attempt") == 2 or s.get("state") in ("failed", "succeeded")
                                   else None)(box.stage(victim, "s")), 60, "a retry")
        except AssertionError as exc:
            raise AssertionError("%s\n%s\n--- Ray's jobs\n%s\n--- nodes\n%s" % (
                exc, box.diagnostics(), [(j.get("submission_id"), j.get("status"), j.get("message"))
                                         for j in cluster.jobs()],
                [(n.get("node_id"), n.get("state")) for n in cluster.nodes()])) from None
        assert st["attempt"] == 2, "%s\n%s" % (json.dumps(st, indent=1), box.diagnostics())
        events = [e for e in box.events("stage_retry") + box.events("stage_failed") if e.get("run") == victim]
        cause = events[0]["cause"]
        assert cause["class"] == "node_failure", cause
        assert any("DEAD" in e and dead in e for e in cause["evidence"]), cause
        assert box.wait_run(victim, timeout=90)["state"] == "succeeded", box.diagnostics()
        assert box.stage(victim, "s")["placement"]["node_id"] == cluster.head_id
        assert box.wait_run(other, timeout=60)["state"] == "succeeded"
    finally:
        cluster.add_worker()


@DEFAULT_ONLY
def test_pull_verifies_a_runs_files_written_on_the_node_that_ran_it(ray_box, agent_pyz, rgt_local, client_config, tmp_path):
    """The files a stage wrote on its node are on the shared filesystem: the manifest is built and
    `pull` verifies them where they live, from the box the user talks to."""
    import shutil
    box = ray_box
    box.daemon()
    shutil.copy(agent_pyz, box.home / "rgt-agent.pyz")          # what `rgt-client pull` runs on the box
    write = 'mkdir -p out && head -c 300000 /dev/urandom > out/model.bin && echo "$CUDA_VISIBLE_DEVICES" > out/gpu.txt'
    assert box.submit(ray_job(box, "art", {"name": "s", "run": write}, gpus=1,
                              artifacts={"include": ["out/**"]})).returncode == 0
    assert box.wait_run("art", timeout=60)["state"] == "succeeded", box.diagnostics()
    ran_on = wait_for(lambda: (lambda p: p if p.get("state") == "SUCCEEDED" else None)(placement(box, "art")),
                      10, "Ray's end state in status")
    assert ran_on.get("node_id") in (box.cluster.head_id, box.cluster.worker_id)
    assert (box.workdir / "out" / "gpu.txt").read_text().strip() == ran_on["gpus"]
    dest = tmp_path / "pulled"
    res = rgt_local("pull", "local", "art", str(dest), "--home", str(box.home))
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("OK 2/2 files") and (dest / "PULL_VERIFIED.json").exists(), res.stdout
    assert (dest / "out" / "model.bin").read_bytes() == (box.workdir / "out" / "model.bin").read_bytes()


@DEFAULT_ONLY
def test_a_ray_runs_cost_is_its_gpu_hours_and_its_end_is_notified(ray_box):
    """Cost per run and the notifications hold on Ray: the run-end event carries the GPU hours
    the run held on whichever node ran it, priced per GPU, and reaches a loopback receiver."""
    from tests.notify.receiver import Receiver
    box = ray_box
    receiver = Receiver()
    try:
        box.home.mkdir(parents=True, exist_ok=True)
        cfg_path = box.home / "config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        cfg_path.write_text(json.dumps(dict(cfg, cost={"price_per_hour": 8.0, "price_per_gpu_hour": 3.6})))
        entry = {"url": receiver.url + "/hook", "format": "json", "events": ["run_succeeded"]}
        assert box.agent("notify-set", stdin=json.dumps({"notify": [entry]})).returncode == 0
        box.daemon()
        assert box.submit(ray_job(box, "paid", {"name": "s", "run": "sleep 2"}, gpus=2)).returncode == 0
        assert box.wait_run("paid", timeout=60)["state"] == "succeeded", box.diagnostics()
        (done,) = [e for e in box.events("run_succeeded") if e["run"] == "paid"]
        cost = done["cost"]
        assert cost["price_per_gpu_hour"] == 3.6 and cost["priced_by"] == "price_per_gpu_hour", cost
        # 2 GPUs for the run's wall time (at least the stage's 2 s), priced per GPU-hour
        assert cost["gpu_hours"] == pytest.approx(2 * cost["hours"]) and cost["hours"] * 3600 >= 2.0, cost
        assert cost["spent"] == pytest.approx(cost["gpu_hours"] * 3.6), cost
        wait_for(lambda: any("paid" in r.text() for r in receiver.requests), 20, "the run's notification")
        sent = json.loads(next(r.text() for r in receiver.requests if "paid" in r.text()))
        assert sent["type"] == "run_succeeded" and sent["cost"]["gpu_hours"] == cost["gpu_hours"], sent
    finally:
        receiver.down()
