"""The CPU captures (captured_libs/index.toml): real h5py, safetensors, numpy, pickle,
requests, urllib, pip, bash and C/C++ output recorded by capture/capture_libs.py. These hold
them to their provenance and their bytes; they read files, they run nothing."""
from __future__ import annotations

import datetime
import hashlib

import pytest

from tests.triage.field import figures as F
from tests.triage.field import score as S
from tests.triage.field.capture import capture_libs, index_file

INDEX = S.CAPTURED_LIBS_INDEX


def cases():
    return index_file.read(INDEX)


def test_every_scenario_was_captured_once():
    assert sorted(index_file.scenario_of(c) for c in cases()) == sorted(capture_libs.SCENARIOS)


@pytest.mark.parametrize("case", cases(), ids=lambda c: c["file"])
def test_a_capture_says_what_ran_and_its_bytes_are_unchanged(case):
    name = index_file.scenario_of(case)
    cls, setup, command = capture_libs.SCENARIOS[name][:3]
    assert (case["class"], case["setup"], case["command"]) == (cls, setup, command)
    assert case["file"] == name + ".log" and case["source"].startswith("captured: ")
    assert case["added"] == F.HELD_OUT and case["ecosystem"] == "captured-cpu"
    datetime.date.fromisoformat(case["captured_at"])
    data = (INDEX.parent / case["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == case["sha256"]
    assert capture_libs.SCENARIOS[name][3].encode() in data
    # exit 0 only for the innocent run, as the capture itself checked
    assert (case["exit_code"] == 0) == (cls == S.INNOCENT)
