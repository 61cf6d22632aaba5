"""tests/torchenv.py: where the torch interpreter comes from, and the plans it refuses (cheap:
no torch, no pip run)."""
from __future__ import annotations

import sys

from tests import torchenv

LOCAL = "file:///wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def plan(*items):
    return [{"name": n, "version": "1", "url": u} for n, u in items]


def test_a_local_cpu_wheel_is_accepted():
    assert torchenv.refuse_plan(plan(("torch", LOCAL), ("tqdm", "https://files.example/tqdm.whl"))) == ""


def test_a_plan_that_brings_the_cuda_stack_is_refused():
    why = torchenv.refuse_plan(plan(("torch", LOCAL), ("nvidia-cublas-cu12", "https://x"),
                                    ("triton", "https://y")))
    assert why.startswith("refused:") and "nvidia-cublas-cu12" in why and torchenv.ENV_PYTHON in why


def test_torch_from_the_registry_is_refused():
    why = torchenv.refuse_plan(plan(("torch", "https://files.example/torch-2.13.0-cp310.whl")))
    assert why.startswith("refused:") and "not taken from a local file" in why


def test_a_plan_without_torch_is_refused():
    assert torchenv.refuse_plan(plan(("tqdm", LOCAL))).startswith("refused:")


def test_none_turns_torch_tests_off(monkeypatch):
    monkeypatch.setenv(torchenv.ENV_PYTHON, "none")
    python, why = torchenv._find_or_make(sys.executable)
    assert python is None and "turned off" in why


def test_a_chosen_interpreter_without_torch_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv(torchenv.ENV_PYTHON, sys.executable)     # the project's venv: no torch
    monkeypatch.setenv(torchenv.ENV_CACHE, str(tmp_path))         # and nothing made there
    python, why = torchenv._find_or_make(sys.executable)
    assert python is None and "cannot import torch" in why and sys.executable in why
    assert list(tmp_path.iterdir()) == []
