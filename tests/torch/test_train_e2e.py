"""examples/torch/train.py for real, through a Python with torch: alone (checkpoints that load,
resume, eval), then as the stages of examples/torch/job.toml under the real daemon."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: the dev extra installs tomli
    import tomli as tomllib  # type: ignore[no-redef]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch"
pytestmark = [pytest.mark.torch, pytest.mark.slow]

LOAD_ALL = """
import glob, json, torch
out = {}
for p in sorted(glob.glob("ckpt/*.pt")):
    s = torch.load(p)
    out[p] = {"epoch": s.get("epoch"), "epochs": s.get("epochs"), "keys": sorted(s)}
print(json.dumps(out))
"""


def _train(python: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([python, str(EXAMPLE / "train.py"), *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=300)


def test_train_writes_checkpoints_that_load_and_resume(torch_python, tmp_path):
    first = _train(torch_python, tmp_path, "--epochs", "2", "--steps", "8")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Epoch 2/2 loss" in first.stdout and "Training completed" in first.stdout
    assert "8/8 [" in first.stderr                               # the tqdm bar, on stderr
    again = _train(torch_python, tmp_path, "--epochs", "3", "--steps", "8", "--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Resumed from ckpt/last.pt (epoch 2)" in again.stdout
    assert "Epoch 1/3" not in again.stdout and "Epoch 3/3 loss" in again.stdout
    assert not list(tmp_path.glob("ckpt/*.tmp"))                 # every save renamed into place
    loaded = subprocess.run([torch_python, "-c", LOAD_ALL], cwd=str(tmp_path), capture_output=True,
                            text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    ckpts = json.loads(loaded.stdout)
    assert sorted(ckpts) == ["ckpt/epoch_001.pt", "ckpt/epoch_002.pt", "ckpt/epoch_003.pt",
                             "ckpt/final.pt", "ckpt/last.pt"]
    assert [ckpts["ckpt/epoch_%03d.pt" % e]["epoch"] for e in (1, 2, 3)] == [1, 2, 3]
    assert ckpts["ckpt/last.pt"]["epoch"] == 3 and ckpts["ckpt/final.pt"]["epochs"] == 3
    assert ckpts["ckpt/last.pt"]["keys"] == ["epoch", "loss", "model", "optimizer", "step"]
    ev = _train(torch_python, tmp_path, "--eval", "ckpt/final.pt", "--out", "results/metrics.json")
    assert ev.returncode == 0, ev.stderr[-3000:]
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and metrics["mse"] >= 0


def _example_job(box, torch_python: str, extra_args: str = "") -> Dict[str, Any]:
    """examples/torch/job.toml as is, in the box's workdir, `python` being the torch one."""
    shutil.copy(EXAMPLE / "train.py", box.workdir / "train.py")
    with open(EXAMPLE / "job.toml", "rb") as fh:
        spec = tomllib.load(fh)
    spec["workdir"] = str(box.workdir)
    spec.setdefault("env", {})["PATH"] = "%s:%s" % (os.path.dirname(torch_python), os.environ["PATH"])
    if extra_args:
        spec["stage"][0]["run"] += " " + extra_args
    return spec


def test_the_example_job_succeeds_under_the_daemon(box, torch_python):
    spec = _example_job(box, torch_python)
    assert box.submit(spec).returncode == 0
    box.start()
    state = box.wait_run(spec["name"], timeout=240)
    assert state["state"] == "succeeded", json.dumps(state, indent=1)
    train = box.stage(spec["name"], "train")
    assert train["state"] == "succeeded" and train["exit_code"] == 0
    progress = train["progress"]
    assert (progress["done"], progress["total"], progress["fraction"]) == (3, 3, 1.0), progress
    assert box.stage(spec["name"], "eval")["state"] == "succeeded"
    assert box.marker(spec["name"], "train").exists() and box.marker(spec["name"], "eval").exists()
    assert (box.workdir / "results" / "metrics.json").exists()
    manifest = json.loads((box.home / "runs" / spec["name"] / "manifest.json").read_text())
    paths = sorted(f["path"] for f in manifest["files"])
    assert paths == ["ckpt/epoch_001.pt", "ckpt/epoch_002.pt", "ckpt/epoch_003.pt", "ckpt/final.pt",
                     "results/metrics.json"], paths


@pytest.mark.parametrize("args, cls", [
    ("--fail-at 25", "code_error"),     # a KeyError in a traceback: never retried
    ("--nan-at 30", "divergence"),      # exit 0, but the job's fail_pattern sees `loss nan`
])
def test_injected_failures_get_their_cause(box, torch_python, args, cls):
    spec = _example_job(box, torch_python, args)
    assert box.submit(spec).returncode == 0
    box.start()
    state = box.wait_run(spec["name"], timeout=240)
    assert state["state"] == "failed", json.dumps(state, indent=1)
    train = box.stage(spec["name"], "train")
    assert train["cause"]["class"] == cls, train["cause"]
    assert box.stage(spec["name"], "eval")["state"] == "pending"    # the chain stopped
    assert not box.marker(spec["name"], "train").exists()
