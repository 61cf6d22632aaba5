"""GPU slots and sweeps in the scheduler, in-process (fakes at the ports: see test_scheduler.py);
tests/core/test_sweeps.py runs the same with the real daemon and the fake libnvidia-ml."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from boxagent.engine import jobspec, slots, states as S
from boxagent.engine.ports import AttemptRef
from tests.core.test_scheduler import Rig

EIGHT = [(i, "GPU-%d" % i) for i in range(8)]


@pytest.fixture
def rig(tmp_path):
    r = Rig(tmp_path)
    r.box.inventory = list(EIGHT)
    return r


def submit(rig, name, now=0.0, **top):
    job = {"name": name, "workdir": str(rig.tmp), "stage": [{"name": "s", "run": "x"}]}
    job.update(top)
    rig.sched.requests.submit({"spec": jobspec.validate(job)}, now)     # a sweep is one request


def settle(rig, now):
    """Ticks until nothing changes (manifests are built one run at a time)."""
    for i in range(20):
        rig.sched.tick(now + i * 0.01, now + i * 0.01)


def test_eight_one_gpu_runs_start_at_once_on_eight_distinct_gpus(rig):
    for i in range(8):
        submit(rig, "r%d" % i, gpus=1)
    submit(rig, "r8", gpus=1)
    rig.sched.tick(1.0, 1.0)
    started = [r for r in rig.sched.runs.values() if r.state == S.RUNNING]
    assert len(started) == 8 and rig.sched.runs["r8"].state == S.QUEUED
    assert sorted(i for r in started for i in r.gpus) == list(range(8))
    rig.procs.end(AttemptRef("r3", "s", 1), 0)
    rig.sched.tick(2.0, 2.0)
    assert rig.sched.runs["r8"].state == S.RUNNING and rig.sched.runs["r8"].gpus == [3]


def test_a_two_gpu_run_waits_for_two_and_a_later_one_gpu_run_may_go_first(rig):
    rig.box.inventory = EIGHT[:2]
    submit(rig, "one", gpus=1)
    submit(rig, "two", gpus=2)
    submit(rig, "small", gpus=1)
    rig.sched.tick(1.0, 1.0)
    state = {n: r.state for n, r in rig.sched.runs.items()}
    assert state == {"one": S.RUNNING, "two": S.QUEUED, "small": S.RUNNING}   # first fit
    rig.procs.end(AttemptRef("one", "s", 1), 0)
    rig.procs.end(AttemptRef("small", "s", 1), 0)
    rig.sched.tick(2.0, 2.0)
    assert rig.sched.runs["two"].state == S.RUNNING and rig.sched.runs["two"].gpus == [0, 1]


def test_an_all_run_waits_for_the_box_to_empty_and_blocks_the_runs_behind_it(rig):
    submit(rig, "a", gpus=1)
    submit(rig, "whole")                                 # gpus = "all", the default
    submit(rig, "b", gpus=1)
    rig.sched.tick(1.0, 1.0)
    assert [rig.sched.runs[n].state for n in ("a", "whole", "b")] == [S.RUNNING, S.QUEUED, S.QUEUED]
    rig.procs.end(AttemptRef("a", "s", 1), 0)
    settle(rig, 2.0)
    assert rig.sched.runs["whole"].state == S.RUNNING and rig.sched.runs["whole"].gpus is None
    assert rig.sched.runs["b"].state == S.QUEUED                  # the box is taken


def test_gpu_less_runs_go_beside_the_others_up_to_max_parallel(rig):
    rig.sched.config["max_parallel"] = 2
    for i in range(8):
        submit(rig, "g%d" % i, gpus=1)
    for i in range(3):
        submit(rig, "prep%d" % i, gpus=0)
    rig.sched.tick(1.0, 1.0)
    running = {n for n, r in rig.sched.runs.items() if r.state == S.RUNNING}
    assert {"prep0", "prep1"} <= running and "prep2" not in running and len(running) == 10
    assert rig.sched.runs["prep0"].gpus == []


def test_a_run_asking_more_gpus_than_the_box_has_fails_at_once_with_the_count(rig):
    rig.box.inventory = EIGHT[:4]
    submit(rig, "big", gpus=6)
    rig.sched.tick(1.0, 1.0)
    run = rig.sched.runs["big"]
    assert run.state == S.FAILED and "asks for 6 GPU(s); this box has 4" in run.cause["summary"]


def test_a_restarted_daemon_keeps_each_run_on_its_gpus(rig):
    for i in range(3):
        submit(rig, "r%d" % i, gpus=2)
    rig.sched.tick(1.0, 1.0)
    before = {n: r.gpus for n, r in rig.sched.runs.items()}
    rig.restart(2.0)
    rig.sched.tick(2.0, 2.0)
    assert {n: r.gpus for n, r in rig.sched.runs.items()} == before
    assert len(rig.procs.launches) == 3                           # none launched again
    submit(rig, "late", now=3.0, gpus=2)
    rig.sched.tick(3.0, 3.0)
    assert rig.sched.runs["late"].gpus == [6, 7]                  # the busy ones stay busy


def test_the_stage_env_names_the_gpus_by_uuid_in_pci_order(rig):
    assert slots.stage_env([slots.Gpu(3, "GPU-c"), slots.Gpu(5, "GPU-e")]) == {
        "CUDA_VISIBLE_DEVICES": "GPU-c,GPU-e", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "RGT_GPUS": "3,5"}
    assert slots.stage_env([])["CUDA_VISIBLE_DEVICES"] == ""      # gpus = 0 sees no GPU
    assert slots.stage_env(None) == {}                             # "all": the box as it is


def test_a_sweep_expands_first_key_slowest_and_ends_with_one_group_finished(rig):
    submit(rig, "abl", gpus=1, matrix={"LR": ["1e-3", "3e-4"], "SEED": ["1", "2", "3"]})
    runs = sorted(rig.sched.runs.values(), key=lambda r: r.seq)
    assert [r.name for r in runs] == ["abl-%d" % i for i in range(1, 7)]
    assert [r.matrix for r in runs][:4] == [{"LR": "1e-3", "SEED": "1"}, {"LR": "1e-3", "SEED": "2"},
                                            {"LR": "1e-3", "SEED": "3"}, {"LR": "3e-4", "SEED": "1"}]
    assert rig.sched.specs["abl-4"]["env"]["LR"] == "3e-4" and all(r.group == "abl" for r in runs)
    rig.sched.tick(1.0, 1.0)
    for i, r in enumerate(runs, start=1):
        rig.procs.end(AttemptRef(r.name, "s", 1), 0 if i != 3 else 2)
    settle(rig, 2.0)
    lines = [json.loads(x) for x in Path(rig.home.events).read_text().splitlines()]
    done = [e for e in lines if e["type"] == "group_finished"]
    assert len(done) == 1 and done[0]["severity"] == "warning"
    assert done[0]["succeeded"] == 5 and [f["run"] for f in done[0]["failed"]] == ["abl-3"]
    assert "abl-3 (nonzero_exit)" in done[0]["summary"]


def test_cancel_by_the_sweeps_name_cancels_every_run_of_it(rig):
    rig.box.inventory = EIGHT[:2]
    submit(rig, "sw", gpus=1, matrix={"X": ["a", "b", "c"]})
    rig.sched.tick(1.0, 1.0)
    rig.sched.requests.cancel("sw", 2.0, 2.0)
    for n in ("sw-1", "sw-2"):
        rig.procs.end(AttemptRef(n, "s", 1), None, 15)
    rig.sched.tick(3.0, 3.0)
    assert {n: r.state for n, r in rig.sched.runs.items()} == {"sw-1": S.CANCELLED, "sw-2": S.CANCELLED,
                                                               "sw-3": S.CANCELLED}


def test_a_gpu_fault_is_evidence_only_for_the_run_that_holds_that_gpu(rig):
    submit(rig, "on0", gpus=1)
    submit(rig, "on1", gpus=1)
    rig.sched.tick(1.0, 1.0)
    rig.box.faults = [{"type": "gpu_xid", "code": 79, "gpu": 1, "hardware": True, "summary": "Xid 79 on GPU 1"}]
    for n in ("on0", "on1"):
        rig.procs.end(AttemptRef(n, "s", 1), 1)
    rig.sched.tick(2.0, 2.0)
    assert rig.sched.runs["on1"].cause["class"] == "gpu_hardware"
    assert rig.sched.runs["on0"].cause["class"] != "gpu_hardware"


def test_a_job_that_picks_its_own_gpus_is_refused(rig):
    for extra in ({}, {"gpus": "all"}, {"gpus": 1}):
        with pytest.raises(jobspec.JobError, match="env.CUDA_VISIBLE_DEVICES: rgt assigns the GPUs: drop this key"):
            jobspec.validate(dict({"name": "x", "env": {"CUDA_VISIBLE_DEVICES": "3"},
                                   "stage": [{"name": "s", "run": "x"}]}, **extra))
    with pytest.raises(jobspec.JobError, match=r"stage\[1\].env.RGT_GPUS: rgt assigns the GPUs"):
        jobspec.validate({"name": "x", "gpus": 0, "stage": [{"name": "s", "run": "x"},
                                                            {"name": "t", "run": "y", "env": {"RGT_GPUS": "1"}}]})
