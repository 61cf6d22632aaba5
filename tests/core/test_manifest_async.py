"""The manifest of a finished run builds on a worker thread: the daemon's loop keeps ticking.

Hashing a few hundred GB takes minutes; built inline it froze the whole daemon (no status, no
heartbeat, no request, no SIGTERM) before run_succeeded. The artifacts here are real random bytes;
a "slow disk" gate (a sitecustomize in the daemon only) holds the hashing for as long as a test
needs to look at the daemon meanwhile, then lets it finish.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.realbox import REPO, job, wait_for

MB = 1 << 20

HOOK = '''
"""Test only: a slow disk. Hashing waits until the file named by RGT_TEST_HASH_GATE exists."""
import os
import time

from boxagent.artifacts import hashing

_GATE = os.environ.get("RGT_TEST_HASH_GATE")
_real = hashing.hash_file


def hash_file(path, buf=None):
    if _GATE:
        open(_GATE + ".waiting", "a").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(_GATE) and time.monotonic() < deadline:
            time.sleep(0.02)
    return _real(path, buf)


hashing.hash_file = hash_file
'''


def write_random(path: Path, n_mb: int) -> str:
    """A file of real random bytes (no sparse holes), written in 1 MB chunks; its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(path, "wb") as fh:
        for _ in range(n_mb):
            chunk = os.urandom(MB)
            h.update(chunk)
            fh.write(chunk)
    return h.hexdigest()


def slow_disk(box: Any, **more: str) -> Dict[str, str]:
    """Env for a daemon whose hashing waits for box.tmp/gate (created by open_gate)."""
    hook = box.tmp / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    return dict({"PYTHONPATH": "%s%s%s" % (hook, os.pathsep, REPO), "RGT_TEST_HASH_GATE": str(box.tmp / "gate")},
                **more)


def open_gate(box: Any) -> None:
    (box.tmp / "gate").touch()


def run_block(box: Any, name: str) -> Dict[str, Any]:
    return next((r for r in box.status_file().get("runs") or [] if r.get("name") == name), {})


def big_job(box: Any) -> Dict[str, Any]:
    train = {"name": "train", "run": "mkdir -p results && echo '{\"loss\": 0.1}' > results/metrics.json"}
    return job("big", box.workdir, train, artifacts={"include": ["ckpt/**", "results/*.json"]})


def wait_finalizing(box: Any, name: str = "big") -> Dict[str, Any]:
    block = wait_for(lambda: run_block(box, name).get("finalizing") and run_block(box, name), 30,
                     "run %s finalizing in status.json" % name)
    wait_for(lambda: (box.tmp / "gate.waiting").exists(), 10, "the hashing to start")
    return block


def check_succeeded(box: Any, model_sha: str, model_bytes: int) -> Dict[str, Any]:
    ev = box.wait_event("run_succeeded", timeout=30, run="big")
    raw = (box.home / "runs" / "big" / "manifest.json").read_bytes()
    manifest = json.loads(raw)
    files = {f["path"]: f for f in manifest["files"]}
    assert files["ckpt/model.pt"]["sha256"] == model_sha and files["ckpt/model.pt"]["bytes"] == model_bytes
    metrics = (box.workdir / "results" / "metrics.json").stat().st_size
    assert ev["artifacts"] == {"files": 2, "bytes": model_bytes + metrics, "sha256": hashlib.sha256(raw).hexdigest()}
    assert ev["stages"] == 1 and ev["duration_s"] >= 0 and ev["manifest_s"] >= 0
    assert box.run_state("big")["state"] == "succeeded"
    return ev


@pytest.mark.slow
def test_status_heartbeats_and_a_cancel_go_on_while_200mb_hash(box):
    model_sha = write_random(box.workdir / "ckpt" / "model.pt", 200)
    box.submit(big_job(box))
    box.submit(job("next", box.workdir, {"name": "a", "run": "touch next-ran"}))
    box.daemon(env=slow_disk(box, RGT_HEARTBEAT_EVERY="0.3"))

    block = wait_finalizing(box)
    # The run stays `running` (no new run state), with no current stage while its manifest builds.
    assert block["state"] == "running" and block["current_stage"] is None
    assert block["finalizing"]["step"] == "manifest" and block["finalizing"]["since"]
    assert [s["state"] for s in block["stages"]] == ["succeeded"]
    st = box.run_state("big")
    assert st["state"] == "running" and st["current_stage"] is None
    assert not box.events("run_succeeded")

    # The loop ticks on: status.json is rewritten (sample_every 0.5 s), heartbeats go out...
    seen: List[str] = []
    beats_before = len(box.events("heartbeat"))

    def rewritten() -> bool:
        b = run_block(box, "big")
        assert b.get("state") == "running" and b.get("finalizing"), b
        at = box.status_file().get("observed_at")
        if at and at not in seen:
            seen.append(at)
        return len(seen) >= 4 and len(box.events("heartbeat")) >= beats_before + 2
    wait_for(rewritten, 15, "status.json rewritten and heartbeats while the manifest builds")
    assert all(e["runs"] == ["big"] for e in box.events("heartbeat")[beats_before:])
    assert run_block(box, "big")["finalizing"]["elapsed_s"] > 0

    # ...and requests are handled: the queued run is cancelled; a cancel of the finishing run is
    # ignored (every stage succeeded: it must not lose that for a manifest).
    assert box.agent("cancel", "big").returncode == 0
    assert box.agent("cancel", "next").returncode == 0
    box.wait_event("run_cancelled", run="next")
    assert box.run_state("big")["state"] == "running" and not box.events("run_succeeded")
    # status.json is rewritten at the end of the tick whose event said so: a read in between saw "queued"
    wait_for(lambda: run_block(box, "next").get("state") == "cancelled", 10, "status to say next is cancelled")

    t_open = time.time()
    open_gate(box)
    ev = check_succeeded(box, model_sha, 200 * MB)
    assert ev["manifest_s"] >= 1.0          # it did wait on the gate: the loop ran meanwhile
    assert time.time() - t_open < 30
    types = [(e["type"], e["run"]) for e in box.events() if e["type"].startswith("run_")]
    assert types.index(("run_cancelled", "next")) < types.index(("run_succeeded", "big"))
    assert [e["run"] for e in box.events("run_cancelled")] == ["next"]
    assert not (box.workdir / "next-ran").exists()
    wait_for(lambda: run_block(box, "big").get("state") == "succeeded", 10, "status.json says succeeded")
    assert "finalizing" not in run_block(box, "big")


def test_sigterm_or_stop_while_the_manifest_builds_then_the_next_daemon_finishes_the_run(box):
    model_sha = write_random(box.workdir / "ckpt" / "model.pt", 64)
    box.submit(big_job(box))

    # SIGTERM (preemption) mid-build: the daemon exits at once, the run is left `running`.
    first = box.daemon(env=slow_disk(box))
    wait_finalizing(box)
    first.send_signal(signal.SIGTERM)
    assert first.wait(15) == 0
    st = box.run_state("big")
    assert st["state"] == "running" and [s["state"] for s in st["stages"]] == ["succeeded"]
    assert st["current_stage"] is None
    assert not box.events("run_interrupted") and not box.events("run_succeeded")
    assert box.events("preempted")
    assert "manifest" in box.events("daemon_stopped")[-1]["summary"]
    assert not (box.home / "runs" / "big" / "manifest.json").exists()
    assert "exiting while the manifest of run big builds" in (box.tmp / "daemon-0.log").read_text()

    # `rgt-agent stop` mid-build (the upgrade path): the same.
    (box.tmp / "gate.waiting").unlink()
    second = box.daemon(env=slow_disk(box))
    wait_finalizing(box)
    assert box.agent("stop").returncode == 0
    assert second.wait(15) == 0
    assert box.run_state("big")["state"] == "running" and not box.events("run_succeeded")

    # The next daemon builds the manifest again and ends the run, once.
    open_gate(box)
    box.daemon(env=slow_disk(box))
    check_succeeded(box, model_sha, 64 * MB)
    time.sleep(0.3)
    assert len(box.events("run_succeeded")) == 1 and not box.events("run_interrupted")
    assert (box.workdir / "results" / "metrics.json").exists()


def test_a_manifest_that_cannot_be_built_keeps_the_run_succeeded(box):
    gone = box.tmp / "gone"
    gone.mkdir()
    # The workdir vanishes (an unmounted disk, say) after the stage succeeded: no manifest.
    box.submit(job("lost", gone, {"name": "a", "run": "rm -rf \"$PWD\""}, artifacts={"include": ["*.pt"]}))
    box.daemon()
    ev = box.wait_event("run_succeeded", timeout=20, run="lost")
    assert box.run_state("lost")["state"] == "succeeded"
    assert ev["artifacts"] == {"files": 0, "bytes": 0, "sha256": None}
    assert "does not exist" in ev["manifest_error"] and ev["evidence"]
    assert "building the manifest failed" in (box.tmp / "daemon-0.log").read_text()
