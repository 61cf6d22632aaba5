"""Progress from real bar formats, ETA from the rate; stall and buffered-stdout specs;
suspiciously fast."""
from __future__ import annotations

from pathlib import Path

import pytest

from boxagent.triage import StageWatch, fast_spec, success_warnings
from boxagent.triage.progress import ProgressTracker, compile_progress_pattern, parse


@pytest.mark.parametrize("line,done,total", [
    (" 45%|####5     | 4500/10000 [01:23<01:40, 54.2it/s, loss=0.3]", 4500, 10000),
    ("Epoch 3:  12%|#2  | 120/1000 [00:41<05:02,  2.91it/s, v_num=3]", 120, 1000),
    ("450/1000 [=============>................] - ETA: 1:23 - loss: 0.2312", 450, 1000),
    ("[ 450/1000] loss 2.31", 450, 1000),
    ("step 450/1000 loss 2.3", 450, 1000),
    ("Iteration 5 of 20", 5, 20),
    ("Epoch 3/10", 3, 10),
    ("global_step=1200 loss=0.2", 1200, None),
])
def test_builtin_progress_forms(line, done, total):
    p = parse(line)
    assert (p["done"], p["total"]) == (done, total)


def test_not_progress():
    for line in ("2024/10 [INFO] started", "loss 0.3", "saved to /a/b/c", "ratio 3/4 ["):
        p = parse(line)
        assert p is None or p["total"] != 4 or p["done"] <= p["total"], line


def test_keras_epoch_and_bar_give_the_whole_runs_fraction():
    p = parse("Epoch 3/10: 50%|#####     | 500/1000 [00:10<00:10]")
    assert p["done"] == 2 and p["total"] == 10 and p["fraction"] == pytest.approx(0.25)   # 2 epochs done


def test_tqdm_remaining_time_is_the_eta():
    t = ProgressTracker()
    t.update(" 45%|####5     | 4500/10000 [01:23<01:40, 54.2it/s]", 1, 0.0)
    assert t.block()["eta_s"] == 100.0


def test_eta_from_the_rate_and_a_new_bar_restarts_it():
    t = ProgressTracker(min_gap_s=0)
    t.update("step 100/1000", 1, 0.0)
    t.update("step 200/1000", 2, 10.0)
    assert t.block()["eta_s"] == pytest.approx(80.0)
    t.update("step 10/1000", 3, 20.0)          # the next epoch's bar: no negative rate
    assert t.block()["eta_s"] is None and t.block()["done"] == 10


def test_progress_pattern_overrides_and_is_validated(tmp_path):
    p = tmp_path / "p.log"
    p.write_bytes(b"step 5/100\nshard 7 of 64 written\n")
    w = StageWatch(str(p), progress_pattern=r"shard (?P<done>\d+) of (?P<total>\d+)")
    w.poll(1.0)
    assert w.progress["done"] == 7 and w.progress["total"] == 64
    assert w.progress["last_line"] == "shard 7 of 64 written"
    with pytest.raises(ValueError, match="named group `done`"):
        compile_progress_pattern(r"shard \d+")
    w = StageWatch(str(p), progress_pattern=r"shard \d+")    # degrades, keeps the watch
    w.poll(1.0)
    assert w.progress_error and w.progress["done"] == 5


def test_progress_of_a_bar_still_being_drawn(tmp_path):
    """tqdm in a file: \\r updates and no newline until the bar ends."""
    p = tmp_path / "bar.log"
    p.write_bytes(b"start\n\r  1%|   | 10/1000 [00:01<01:39]\r  2%|   | 20/1000 [00:02<01:38]")
    w = StageWatch(str(p))
    w.poll(1.0)
    assert w.progress["done"] == 20 and w.progress_line_no == 2
    assert w.status_block() == {"progress": w.progress}
    assert w.last_lines(1) == ["  2%|   | 20/1000 [00:02<01:38]"]


def _watch(tmp_path, started=0.0):
    p = tmp_path / "s.log"
    p.write_bytes(b"step 1/10\n")
    w = StageWatch(str(p), started_at=started)
    w.poll(10.0)
    return w, p


def test_stall_needs_log_artifacts_and_gpu_all_idle(tmp_path):
    w, p = _watch(tmp_path)
    assert w.stall_check(100.0, 300, None, False) == []                  # not long enough
    assert w.stall_check(400.0, 300, None, True) == []                   # GPU busy: long eval
    specs = w.stall_check(400.0, 300, 50.0, False)
    assert [s["type"] for s in specs] == ["stalled"]
    s = specs[0]
    assert s["severity"] == "warning" and "GPU idle" in s["summary"]
    assert any("no new log bytes for 6m30s" in e for e in s["evidence"])
    assert w.stall_check(500.0, 300, 50.0, False) == []                  # once per episode
    with open(p, "ab") as fh:
        fh.write(b"step 2/10\n")
    w.poll(600.0)
    cleared = w.stall_check(601.0, 300, 50.0, False)
    assert [c["type"] for c in cleared] == ["stall_cleared"]
    assert w.stall_check(1000.0, 300, 50.0, False)[0]["type"] == "stalled"   # a new episode


def test_silent_log_with_advancing_artifacts_is_buffered_stdout_not_a_stall(tmp_path):
    w, _ = _watch(tmp_path)
    specs = w.stall_check(400.0, 300, 390.0, None)
    assert [s["type"] for s in specs] == ["log_silent"]
    assert "log silent, artifacts advancing — buffered stdout?" in specs[0]["summary"]
    assert w.stall_check(410.0, 300, 405.0, None) == []


def test_no_output_ever_counts_from_the_start(tmp_path):
    w = StageWatch(str(tmp_path / "none.log"), started_at=0.0)
    w.poll(1.0)
    assert w.stall_check(1000.0, 600, None, None)[0]["type"] == "stalled"


def test_suspiciously_fast():
    spec = fast_spec({"duration_s": 120.0, "expected_duration_s": 3600.0})
    assert spec["type"] == "suspiciously_fast" and spec["severity"] == "warning"
    assert spec["duration_s"] == 120.0 and spec["expected_duration_s"] == 3600.0
    assert fast_spec({"duration_s": 2000.0, "expected_duration_s": 3600.0}) is None
    assert fast_spec({"duration_s": 2000.0, "expected_duration_s": 3600.0, "fast_ratio": 0.6}) is not None
    assert fast_spec({"duration_s": 10.0, "previous_duration_s": 100.0})["evidence"][1].startswith(
        "its last successful run")
    assert fast_spec({"duration_s": 10.0}) is None
    w = success_warnings({"exit_code": 0, "duration_s": 60.0, "expected_duration_s": 7200.0})
    assert w == ["suspiciously fast: finished in 1m00s, under 50% of expected_duration (2h00m)"]


def test_success_warnings_for_faults_during_a_good_stage():
    w = success_warnings({"exit_code": 0, "oom_kill_delta": 1,
                          "gpu_faults": [{"type": "gpu_xid", "code": 31, "summary": "Xid 31 on GPU 0"}],
                          "hits": [{"class": "divergence", "severity": "warning", "line_no": 9,
                                    "line": "loss=nan"}]})
    assert any("NaN" in x for x in w) and any("Xid 31" in x for x in w)
    assert any("OOM killer" in x for x in w)


def test_a_live_run_whose_loss_turns_nan_alerts_once(tmp_path):
    """the run goes on (it may recover): a warning the daemon emits, never a kill"""
    p = tmp_path / "stage.log"
    p.write_text("step 1/100 loss=2.31\n")
    w = StageWatch(str(p))
    assert w.poll(1.0) == []
    with open(p, "a") as fh:
        fh.write("step 2/100 loss=nan\nstep 3/100 loss=nan\n")
    specs = w.poll(2.0)
    assert [s["type"] for s in specs] == ["divergence"] and specs[0]["severity"] == "warning"
    assert specs[0]["summary"].startswith("the loss became NaN/inf (line 2)")
    with open(p, "a") as fh:
        fh.write("step 4/100 loss=nan\n")
    assert w.poll(3.0) == []


DATA = Path(__file__).resolve().parent / "data"


def _progress_while_written(tmp_path, name):
    """(progress after each tqdm redraw) as the daemon sees a real tqdm log being written.
    The logs were captured from tqdm 4.70 (`for epoch in ...: for _ in tqdm(range(n),
    desc=f"Epoch {epoch}/{E}", file=f, mininterval=0)`), 1-based and 0-based epochs."""
    data = (DATA / name).read_bytes()
    p = tmp_path / name
    p.write_bytes(b"")
    w = StageWatch(str(p))
    out, pos, now = [], 0, 0.0
    cuts = [i for i in range(1, len(data) + 1) if data[i - 1:i] in (b"\r", b"\n")] + [len(data)]
    for cut in cuts:
        with open(p, "ab") as fh:
            fh.write(data[pos:cut])
        pos, now = cut, now + 1
        w.poll(now)
        pr = w.progress
        if pr and (not out or out[-1] != (pr["done"], pr["total"], pr["fraction"])):
            out.append((pr["done"], pr["total"], pr["fraction"]))
    return out


def test_per_epoch_tqdm_bars_count_an_epoch_done_only_when_its_bar_is_full(tmp_path):
    seen = _progress_while_written(tmp_path, "tqdm_epochs_1based.log")
    assert seen[0] == (0, 6, 0.0)                         # was (1, 6, 0.0): "0% (1/6)"
    assert (0, 6, pytest.approx(2 / 18, abs=1e-3)) in seen
    assert (1, 6, pytest.approx(1 / 6, abs=1e-3)) in seen  # epoch 1's bar full
    assert (5, 6, pytest.approx(5 / 6, abs=1e-3)) in seen  # epoch 6 starting: was "83% (6/6)"
    assert seen[-1] == (6, 6, 1.0)
    assert all(d <= 6 * f + 1e-3 for d, _, f in seen)     # done never runs ahead of the fraction


def test_epochs_counted_from_zero(tmp_path):
    seen = _progress_while_written(tmp_path, "tqdm_epochs_0based.log")
    assert seen[0] == (0, 3, 0.0)
    assert (1, 3, pytest.approx(1 / 3, abs=1e-3)) in seen   # `Epoch 0/3: 100%`
    assert (2, 3, pytest.approx(2.5 / 3, abs=1e-3)) in seen  # `Epoch 2/3: 50%`: the last epoch
    assert seen[-1] == (3, 3, 1.0)


def test_silent_but_busy_on_cpu_without_a_gpu_is_buffered_stdout_not_a_stall(tmp_path):
    """A CPU-only box, a process with block-buffered stdout working hard: it was called
    stalled because nothing but the log, the artifacts and the GPU was asked."""
    w, _ = _watch(tmp_path)
    specs = w.stall_check(400.0, 300, None, None, cpu_s=290.0)       # ~1 core over 5 min
    assert [s["type"] for s in specs] == ["log_silent"]
    assert "busy on CPU — buffered stdout?" in specs[0]["summary"] and specs[0]["cpu_s"] == 290.0
    assert w.stall_check(500.0, 300, None, None, cpu_s=290.0) == []   # once per episode
    stalled = w.stall_check(700.0, 300, None, None, cpu_s=1.0)       # then it went quiet
    assert [s["type"] for s in stalled] == ["stalled"]
    assert any("1 CPU-seconds in the last 5m00s" in e for e in stalled[0]["evidence"])


def test_an_idle_process_is_still_stalled_and_unknown_cpu_changes_nothing(tmp_path):
    w, _ = _watch(tmp_path)
    assert [s["type"] for s in w.stall_check(400.0, 300, None, None, cpu_s=3.0)] == ["stalled"]
    w, _ = _watch(tmp_path)
    assert [s["type"] for s in w.stall_check(400.0, 300, None, False)] == ["stalled"]
    w, _ = _watch(tmp_path)
    assert w.stall_check(400.0, 300, None, True, cpu_s=290.0) == []   # GPU busy: as before
