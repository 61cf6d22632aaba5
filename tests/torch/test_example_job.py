"""examples/torch/job.toml validates as a job (the core's example test globs examples/*.*,
not subfolders) and runs the train.py beside it."""
from __future__ import annotations

from pathlib import Path

import pytest

from boxagent.engine import jobspec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch"


def test_the_torch_example_job_is_valid():
    pytest.importorskip("tomllib")
    path = EXAMPLE / "job.toml"
    spec = jobspec.validate(jobspec.parse_text(path.read_text(), str(path)), str(path))
    train, evaluate = spec["stage"]
    assert train["run"].startswith("python train.py") and evaluate["run"].startswith("python train.py --eval")
    assert train["expect"] == ["ckpt/final.pt"] and train["progress_pattern"]
    assert spec["artifacts"]["include"]
    assert (EXAMPLE / "train.py").is_file()
