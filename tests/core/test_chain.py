"""The L1 chain with real processes: success gating, markers, expect, patterns, retries, waits."""
from __future__ import annotations


from tests.realbox import job


def test_happy_three_stage_chain(box):
    j = job("happy", box.workdir,
            {"name": "prep", "run": "echo prep > a.txt", "expect": ["a.txt"]},
            {"name": "train", "run": "echo 'Training completed'; echo $PYTHONUNBUFFERED > env.txt",
             "success_pattern": "Training completed"},
            {"name": "eval", "run": "cat a.txt > b.txt", "expect": ["b.txt"]})
    assert box.submit(j).returncode == 0
    box.start()
    run = box.wait_run("happy")
    assert run["state"] == "succeeded"
    box.wait_event("run_succeeded", run="happy")
    assert [s["state"] for s in run["stages"]] == ["succeeded"] * 3
    for name in ("prep", "train", "eval"):
        assert box.marker("happy", name).exists()
    assert (box.workdir / "b.txt").read_text() == "prep\n"
    assert (box.workdir / "env.txt").read_text() == "1\n"      # PYTHONUNBUFFERED always set
    types = [e["type"] for e in box.events() if e["run"] == "happy"]
    assert types == ["run_queued", "run_started", "stage_started", "stage_succeeded", "stage_started",
                     "stage_succeeded", "stage_started", "stage_succeeded", "run_succeeded"]
    done = box.events("run_succeeded")[0]
    assert done["stages"] == 3 and "artifacts" in done and done["duration_s"] >= 0
    st = box.events("stage_succeeded")[0]
    assert st["attempt"] == 1 and "duration_s" in st and st["warnings"] == []


def test_failure_mid_chain_stops_it_and_leaves_no_later_marker(box):
    j = job("mid", box.workdir,
            {"name": "a", "run": "true"},
            {"name": "b", "run": "echo boom; exit 3"},
            {"name": "c", "run": "touch c-ran"})
    box.submit(j)
    box.start()
    run = box.wait_run("mid")
    assert run["state"] == "failed" and run["failed_stage"] == "b"
    assert [s["state"] for s in run["stages"]] == ["succeeded", "failed", "pending"]
    assert box.marker("mid", "a").exists()
    assert not box.marker("mid", "b").exists() and not box.marker("mid", "c").exists()
    assert not (box.workdir / "c-ran").exists()
    b = run["stages"][1]
    assert b["exit_code"] == 3 and b["cause"]["class"]
    failed = box.events("stage_failed")[0]
    assert failed["cause"] == b["cause"] and failed["attempt"] == 1
    assert "boom" in failed["last_lines"] and failed["log"].endswith("b.1.log")
    assert box.wait_event("run_failed", run="mid")["failed_stage"] == "b"


def test_exit_zero_with_missing_expect_fails(box):
    box.submit(job("exp", box.workdir, {"name": "train", "run": "touch empty.pt", "expect": ["empty.pt", "nope.pt"]}))
    box.start()
    run = box.wait_run("exp")
    st = run["stages"][0]
    assert run["state"] == "failed" and st["exit_code"] == 0
    assert st["cause"]["class"] == "expect_missing"
    assert not box.marker("exp", "train").exists()


def test_success_pattern_required(box):
    box.submit(job("pat", box.workdir,
                   {"name": "ok", "run": "echo 'Training completed'", "success_pattern": "Training completed"},
                   {"name": "silent", "run": "echo nothing", "success_pattern": "Training completed"}))
    box.start()
    run = box.wait_run("pat")
    assert [s["state"] for s in run["stages"]] == ["succeeded", "failed"]
    assert run["stages"][1]["cause"]["class"] == "success_pattern_missing"


def test_fail_pattern_fails_an_exit_zero_stage(box):
    box.submit(job("fp", box.workdir, {"name": "s", "run": "echo 'loss is nan'; exit 0", "fail_pattern": "loss is nan"}))
    box.start()
    run = box.wait_run("fp")
    assert run["state"] == "failed" and run["stages"][0]["exit_code"] == 0


def test_job_and_stage_env_reach_the_command(box):
    box.submit(job("env", box.workdir,
                   {"name": "s", "run": 'echo "$A $B $OMP_NUM_THREADS $RGT_STAGE $RGT_ATTEMPT" > env.txt',
                    "env": {"B": "stage", "OMP_NUM_THREADS": "3"}},
                   env={"A": "job", "B": "job"}))
    box.start()
    assert box.wait_run("env")["state"] == "succeeded"
    assert (box.workdir / "env.txt").read_text().split() == ["job", "stage", "3", "s", "1"]


def test_wait_stages_file_log_and_pid(box):
    (box.workdir / "train.log").write_text("epoch 1\n")
    sleeper = __import__("subprocess").Popen(["sleep", "0.6"])
    try:
        box.submit(job("waits", box.workdir,
                       {"name": "f", "wait": {"file": "flag"}, "timeout": "20s"},
                       {"name": "l", "wait": {"log": "train.log", "pattern": "Training completed"}, "timeout": "20s"},
                       {"name": "p", "wait": {"pid": sleeper.pid}, "timeout": "20s"}))
        box.start()
        box.wait_stage("waits", "f", "running")
        (box.workdir / "flag").write_text("x")
        box.wait_stage("waits", "l", "running")
        with open(box.workdir / "train.log", "a") as fh:
            fh.write("Training completed\n")
        run = box.wait_run("waits")
        assert run["state"] == "succeeded", run
        assert [s["kind"] for s in run["stages"]] == ["wait"] * 3
    finally:
        sleeper.kill()
        sleeper.wait()


def test_wait_times_out_and_fail_pattern_ends_a_wait(box):
    (box.workdir / "t.log").write_text("RuntimeError: boom\n")
    box.submit(job("w1", box.workdir, {"name": "never", "wait": {"file": "nope"}, "timeout": "0.5s"}))
    box.submit(job("w2", box.workdir, {"name": "bad", "wait": {"log": "t.log", "pattern": "done",
                                                                  "fail_pattern": "Error"}, "timeout": "20s"}))
    box.start()
    r1 = box.wait_run("w1")
    assert r1["state"] == "failed" and r1["stages"][0]["cause"]["class"] == "timeout"
    r2 = box.wait_run("w2")
    assert r2["state"] == "failed"


def test_timeout_kills_the_process_group(box):
    box.submit(job("slow", box.workdir, {"name": "s", "run": "trap '' TERM; sleep 30 & sleep 30; wait", "timeout": "2s"}))
    box.start()
    run = box.wait_run("slow", timeout=15)
    st = run["stages"][0]
    assert run["state"] == "failed" and st["cause"]["class"] == "timeout"
    assert st["signal"] in (15, 9)
    pidinfo = __import__("json").loads((box.home / "runs/slow/stages/s.1.pid").read_text())
    from boxagent.base.procs import group_members
    from boxagent.base.roots import Roots
    assert group_members(Roots(), pidinfo["pgid"]) == [], "the stage's background child must die with its group"


def test_transient_failure_is_retried_identically(box):
    # A job rule classes this line as transient (retryable); the second attempt succeeds.
    cmd = 'n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; if [ $n -lt 2 ]; then echo "ConnectionError: reset"; exit 1; fi'
    box.submit(job("retry", box.workdir, {"name": "s", "run": cmd, "retries": 2},
                   rule=[{"class": "network_transient", "pattern": "ConnectionError", "retryable": True}]))
    box.start()
    run = box.wait_run("retry")
    assert run["state"] == "succeeded", run["stages"][0]["cause"]
    assert run["stages"][0]["attempt"] == 2
    assert (box.workdir / "n").read_text().strip() == "2"
    assert box.events("stage_retry")[0]["next_attempt"] == 2


def test_non_retryable_failure_is_not_retried(box):
    box.submit(job("noretry", box.workdir, {"name": "s", "run": "echo x >> count; exit 1", "retries": 3}))
    box.start()
    run = box.wait_run("noretry")
    assert run["state"] == "failed" and run["stages"][0]["attempt"] == 1
    assert (box.workdir / "count").read_text() == "x\n"


def test_runs_queue_fifo_one_at_a_time(box):
    box.submit(job("q1", box.workdir, {"name": "s", "run": "echo q1-start >> order; sleep 0.3; echo q1-end >> order"}))
    box.submit(job("q2", box.workdir, {"name": "s", "run": "echo q2 >> order"}))
    box.start()
    box.wait_run("q2")
    assert (box.workdir / "order").read_text().split() == ["q1-start", "q1-end", "q2"]


def test_a_missing_workdir_is_refused_at_submit_and_named(box):
    out = box.submit(job("nowd", box.workdir / "missing", {"name": "s", "run": "true"}))
    assert out.returncode == 2 and "workdir %s does not exist on this box" % (box.workdir / "missing") in out.stderr
    assert "mkdir -p" in out.stderr and not (box.home / "runs" / "nowd").exists()


def test_a_workdir_removed_after_submit_fails_the_stage_with_the_reason_in_its_log(box):
    gone = box.workdir / "gone"
    gone.mkdir()
    assert box.submit(job("nowd", gone, {"name": "s", "run": "true"})).returncode == 0
    gone.rmdir()
    box.start()
    run = box.wait_run("nowd")
    assert run["state"] == "failed"
    log = (box.home / "runs/nowd/logs/s.1.log").read_text()
    assert "cannot start the stage" in log


def test_an_empty_pythonunbuffered_in_the_job_is_honoured(box):
    box.submit(job("buf", box.workdir, {"name": "s", "run": 'echo "[$PYTHONUNBUFFERED]" > buf.txt'},
                   env={"PYTHONUNBUFFERED": ""}))
    box.start()
    assert box.wait_run("buf")["state"] == "succeeded"
    assert (box.workdir / "buf.txt").read_text() == "[]\n"


def test_suspiciously_fast_stage_is_flagged(box):
    box.submit(job("fast", box.workdir, {"name": "train", "run": "true", "expected_duration": "1h"}))
    box.start()
    assert box.wait_run("fast")["state"] == "succeeded"
    ev = box.wait_event("suspiciously_fast", run="fast")
    assert ev["stage"] == "train" and ev["severity"] == "warning"
