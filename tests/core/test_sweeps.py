"""GPU slots and sweeps with the real daemon on a box of 8 GPUs (the fake libnvidia-ml.so.1 under
the real nvidia-ml-py): runs side by side on their own GPUs, a matrix expanded into runs, one
message when the sweep ends, a GPU's fault naming only the run on it, a restart mid-sweep."""
from __future__ import annotations

import json
import signal

import pytest

from tests.realbox import job, wait_for
from tests.health.conftest import healthy

# Each stage says when it ran and on which GPUs it was given.
PROBE = 'echo "$CUDA_VISIBLE_DEVICES|$RGT_GPUS|$CUDA_DEVICE_ORDER|$(date +%s.%N)" > "$RGT_RUN.start"; ' \
        'sleep 1.5; date +%s.%N > "$RGT_RUN.end"'


@pytest.fixture
def gpu_box(box, fake_nvml_lib):
    state = box.tmp / "nvml.json"
    state.write_text(json.dumps(healthy(8)))
    (box.tmp / "kmsg").write_text("")
    box.env.update(RGT_NVML_LIB=str(fake_nvml_lib), FAKE_NVML_STATE=str(state),
                   RGT_KMSG_PATH=str(box.tmp / "kmsg"))
    box.nvml_state = state
    return box


def _started(box, name):
    uuids, indices, order, at = (box.workdir / ("%s.start" % name)).read_text().strip().split("|")
    return uuids, indices, order, float(at)


@pytest.mark.slow
def test_eight_one_gpu_runs_overlap_on_eight_distinct_gpus_by_uuid(gpu_box):
    box = gpu_box
    for i in range(8):
        assert box.submit(job("r%d" % i, box.workdir, {"name": "s", "run": PROBE}, gpus=1)).returncode == 0
    box.start()
    ends = []
    for i in range(8):
        assert box.wait_run("r%d" % i, timeout=30)["state"] == "succeeded"
        ends.append(float((box.workdir / ("r%d.end" % i)).read_text()))
    seen = [_started(box, "r%d" % i) for i in range(8)]
    assert max(s[3] for s in seen) < min(ends), "the eight runs did not run side by side"
    want = {str(i): "GPU-%08d-fake" % i for i in range(8)}
    assert sorted((s[1], s[0]) for s in seen) == sorted(want.items())   # UUIDs, each its own GPU
    assert all(s[2] == "PCI_BUS_ID" for s in seen)
    status = json.loads(box.agent("status", "--json").stdout)
    assert sorted(r["gpus"][0] for r in status["runs"]) == list(range(8))


def test_a_2x3_matrix_is_six_runs_with_their_values_and_one_group_finished_message(gpu_box):
    box = gpu_box
    sink = box.tmp / "sink.jsonl"
    assert box.agent("notify-set", stdin=json.dumps({"notify": [{"url": "file://%s" % sink}]})).returncode == 0
    out = box.submit(job("abl", box.workdir, {"name": "s", "run": 'echo "$LR $SEED" > "$RGT_RUN.vars"; '
                                                          '[ "$RGT_RUN" != abl-5 ]'},
                         gpus=1, matrix={"LR": ["1e-3", "3e-4"], "SEED": ["1", "2", "3"]}))
    assert out.returncode == 0 and "sweep abl: 6 run(s) queued (abl-1 .. abl-6)" in out.stdout, out.stdout
    box.start()
    done = box.wait_event("group_finished", timeout=30, group="abl")
    values = {i: (box.workdir / ("abl-%d.vars" % i)).read_text().split() for i in range(1, 7)}
    assert values == {1: ["1e-3", "1"], 2: ["1e-3", "2"], 3: ["1e-3", "3"],
                      4: ["3e-4", "1"], 5: ["3e-4", "2"], 6: ["3e-4", "3"]}
    assert done["succeeded"] == 5 and [f["run"] for f in done["failed"]] == ["abl-5"]
    status = json.loads(box.agent("status", "--json").stdout)
    assert {r["name"]: r["matrix"]["SEED"] for r in status["runs"]}["abl-6"] == "3"
    assert all(r["group"] == "abl" for r in status["runs"])
    msgs = wait_for(lambda: [m for m in _lines(sink) if m["type"] == "group_finished"], 10, "the message")
    assert len(msgs) == 1 and "5 of 6 succeeded" in msgs[0]["text"] and "abl-5" in msgs[0]["text"]


def test_an_xid_on_gpu_5_names_only_the_run_on_gpu_5(gpu_box):
    box = gpu_box
    for i in range(8):
        box.submit(job("x%d" % i, box.workdir, {"name": "s", "run": "sleep 30"}, gpus=1))
    box.start()
    for i in range(8):
        box.wait_stage("x%d" % i, "s", "running")
    holder = next(r["name"] for r in json.loads(box.agent("status", "--json").stdout)["runs"] if r["gpus"] == [5])
    scenario = healthy(8)
    scenario["events"] = [{"gpu": 5, "xid": 79}]
    box.nvml_state.write_text(json.dumps(scenario))
    alert = box.wait_event("gpu_xid", timeout=20)
    assert (alert["run"], alert["gpu"]) == (holder, 5) and alert["running"] == [[holder, "s"]]
    health = json.loads(box.agent("status", "--json").stdout)["health"]
    assert {g["index"]: g["run"] for g in health["gpus"]}[5] == holder
    box.agent("cancel", "x0")


@pytest.mark.slow
def test_a_daemon_killed_mid_sweep_restarts_without_starting_or_moving_any_run(gpu_box):
    box = gpu_box
    cmd = 'echo "$RGT_GPUS" >> "$RGT_RUN.gpus"; while [ ! -e go ]; do sleep 0.05; done'
    for i in range(10):
        box.submit(job("k%d" % i, box.workdir, {"name": "s", "run": cmd}, gpus=1))
    d = box.daemon()
    for i in range(8):
        box.wait_stage("k%d" % i, "s", "running")
    before = {r["name"]: r["gpus"] for r in json.loads(box.agent("status", "--json").stdout)["runs"]}
    d.send_signal(signal.SIGKILL)
    d.wait(5)
    box.daemon()
    wait_for(lambda: (box.home / "status.json").exists(), 5)
    after = {r["name"]: r["gpus"] for r in json.loads(box.agent("status", "--json").stdout)["runs"]}
    assert after == before and sum(1 for g in after.values() if g) == 8
    (box.workdir / "go").write_text("")
    for i in range(10):
        assert box.wait_run("k%d" % i, timeout=30)["state"] == "succeeded"
    for i in range(10):
        assert len((box.workdir / ("k%d.gpus" % i)).read_text().split()) == 1   # each started once


def _ran(box, name):
    """(start, end, CUDA_VISIBLE_DEVICES) of a PROBE run."""
    uuids, _indices, _order, start = _started(box, name)
    return start, float((box.workdir / ("%s.end" % name)).read_text()), uuids


@pytest.mark.slow
def test_a_2_gpu_run_waits_for_two_free_gpus_while_a_later_smaller_run_fits(gpu_box):
    box = gpu_box
    hold = 'sleep 2.5; date +%s.%N > "$RGT_RUN.end"'
    for i in range(7):                                  # GPUs 0..6 busy, GPU 7 free
        box.submit(job("h%d" % i, box.workdir, {"name": "s", "run": hold}, gpus=1))
    box.submit(job("big", box.workdir, {"name": "s", "run": PROBE}, gpus=2))
    box.submit(job("small", box.workdir, {"name": "s", "run": PROBE}, gpus=1))
    box.start()
    for name in ["h%d" % i for i in range(7)] + ["big", "small"]:
        assert box.wait_run(name, timeout=40)["state"] == "succeeded", name
    first_free = min(float((box.workdir / ("h%d.end" % i)).read_text()) for i in range(7))
    big, small = _ran(box, "big"), _ran(box, "small")
    assert small[0] < first_free, "the later one-GPU run should have taken the free GPU at once"
    assert big[0] >= min(first_free, small[1]) - 0.05, "the 2-GPU run started before two GPUs were free"
    assert len(set(big[2].split(","))) == 2
    if big[0] < small[1]:                              # side by side: never on the same GPU
        assert small[2] not in big[2].split(",")


@pytest.mark.slow
def test_an_all_run_waits_for_the_box_to_empty_and_blocks_the_runs_after_it(gpu_box):
    box = gpu_box
    box.submit(job("first", box.workdir, {"name": "s", "run": PROBE}, gpus=1))
    box.submit(job("whole", box.workdir, {"name": "s", "run": PROBE}))          # gpus = "all", the default
    box.submit(job("later", box.workdir, {"name": "s", "run": PROBE}, gpus=1))
    box.start()
    for name in ("first", "whole", "later"):
        assert box.wait_run(name, timeout=40)["state"] == "succeeded", name
    first, whole, later = _ran(box, "first"), _ran(box, "whole"), _ran(box, "later")
    assert whole[0] >= first[1] - 0.05 and later[0] >= whole[1] - 0.05     # 7 GPUs were free all along
    assert whole[2] == ""                  # the whole box: rgt narrows nothing (the job's own env is refused)


@pytest.mark.slow
def test_gpu_less_runs_beside_the_others_up_to_max_parallel(gpu_box):
    box = gpu_box
    assert box.agent("configure", stdin=json.dumps({"max_parallel": 2})).returncode == 0
    for i in range(4):
        box.submit(job("c%d" % i, box.workdir, {"name": "s", "run": PROBE}, gpus=0))
    box.start()
    spans = []
    for i in range(4):
        assert box.wait_run("c%d" % i, timeout=40)["state"] == "succeeded"
        start, end, uuids = _ran(box, "c%d" % i)
        assert uuids == ""                                   # gpus = 0: no GPU visible
        spans.append((start, end))
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2, spans


def test_a_run_asking_more_gpus_than_the_box_has_is_refused_at_submit(gpu_box):
    box = gpu_box
    box.start()
    wait_for(lambda: (json.loads((box.home / "status.json").read_text()).get("health") or {}).get("gpus"), 10, "a sample")
    out = box.submit(job("big", box.workdir, {"name": "s", "run": "true"}, gpus=9))
    assert out.returncode == 2 and "asks for 9 GPU(s); this box has 8" in out.stderr, out.stderr


def _lines(path):
    try:
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    except OSError:
        return []
