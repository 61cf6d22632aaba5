"""The real daemon on the "login node" runs jobs with backend = "slurm" on the real one-node
cluster: the chain as sbatch jobs, status, markers, a failing stage, daemon death and SIGTERM,
cancel, resume, a node failure retried."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.realbox import job, wait_for

pytestmark = pytest.mark.slurm


def slurm_job(name, workdir, *stages, **top):
    return job(name, workdir, *stages, backend="slurm", **top)


def squeue_state(slurm, job_id):
    out = slurm.run("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T|%r").stdout.strip()
    return tuple(out.split("|")) if out else (None, None)


def test_three_stage_chain_succeeds_with_markers_and_job_ids_in_scontrol(login):
    slurm = login.slurm
    login.daemon()
    stamp = 'sleep {1}; echo {0} > {0}.out'
    res = login.submit(slurm_job("chain", login.workdir,
                                 {"name": "prep", "run": stamp.format("prep", 2), "expect": ["prep.out"]},
                                 {"name": "train", "run": stamp.format("train", 0), "expect": ["train.out"]},
                                 {"name": "eval", "run": stamp.format("eval", 0)}))
    assert res.returncode == 0, res.stderr
    # While the first stage runs, every stage already has its job, chained afterok.
    ids = wait_for(lambda: _job_ids(login, "chain"), 15, "job ids")
    third = slurm.job(ids[2])
    assert third["JobName"] == "rgt:chain:eval" and third["Dependency"].startswith("afterok:%s" % ids[1])
    assert third["StdOut"] == str(login.home / "runs" / "chain" / "logs" / "eval.1.log")
    wait_for(lambda: _status_stage(login, "chain", "eval").get("slurm_reason") == "Dependency", 10, "status")
    pending = _status_stage(login, "chain", "eval")
    assert pending["state"] == "pending" and pending["slurm_state"] == "PENDING"
    assert pending["slurm_waiting"]["text"] == "waiting for the stage before it"
    state = login.wait_run("chain", timeout=60)
    assert state["state"] == "succeeded", login.diagnostics()
    assert all(login.marker("chain", s).exists() for s in ("prep", "train", "eval"))
    assert [slurm.job(i)["JobState"] for i in ids] == ["COMPLETED"] * 3
    assert [slurm.job(i)["JobName"] for i in ids] == ["rgt:chain:%s" % s for s in ("prep", "train", "eval")]
    wait_for(lambda: _status_stage(login, "chain", "eval").get("slurm_state") == "COMPLETED", 10, "converged")
    assert [e["stage"] for e in login.events("stage_succeeded")] == ["prep", "train", "eval"]
    out = login.agent("status")
    assert "slurm job %s COMPLETED" % ids[0] in out.stdout
    # The handbook's own command finds the run's jobs on the cluster.
    handbook = (login.home / "runs" / "chain" / "HANDBOOK.md").read_text()
    line = next(l.strip() for l in handbook.splitlines() if l.strip().startswith("squeue "))
    import pwd
    import subprocess
    env = dict(slurm.env, USER=pwd.getpwuid(os.getuid()).pw_name)
    listed = subprocess.run(["bash", "-c", line + " -h -o %i"], env=env, capture_output=True, text=True,
                            timeout=30).stdout.split()
    assert sorted(listed) == sorted(ids)


@pytest.mark.slow
def test_a_failing_middle_stage_leaves_the_last_never_run_and_cancelled(login):
    login.daemon()
    login.submit(slurm_job("mid", login.workdir, {"name": "prep", "run": "true"},
                           {"name": "train", "run": "echo 'ValueError: bad lr'; exit 3"},
                           {"name": "eval", "run": "touch eval-ran"}))
    state = login.wait_run("mid", timeout=60)
    stages = {s["name"]: s for s in state["stages"]}
    assert state["state"] == "failed" and state["failed_stage"] == "train"
    assert stages["train"]["exit_code"] == 3 and stages["train"]["cause"]["class"] == "code_error"
    assert stages["eval"]["state"] == "cancelled"
    assert stages["eval"]["cause"]["summary"] == "stage train did not succeed"
    assert stages["eval"]["cause"]["evidence"][0].startswith("Slurm job %s: " % stages["eval"]["slurm_job_id"])
    wait_for(lambda: _stage(login, "mid", "eval").get("slurm_reason") == "DependencyNeverSatisfied", 15,
             "Slurm's own cancel of the stage left behind")
    assert not (login.workdir / "eval-ran").exists() and not login.marker("mid", "train").exists()
    assert [e["stage"] for e in login.events("stage_cancelled")] == ["eval"]


@pytest.mark.slow
def test_daemon_killed_mid_chain_slurm_finishes_it_and_the_restart_reports_each_transition(login):
    slurm = login.slurm
    first = login.daemon()
    login.submit(slurm_job("kill9", login.workdir, {"name": "prep", "run": "sleep 2"},
                           {"name": "train", "run": "sleep 1; echo trained > t.out", "expect": ["t.out"]},
                           {"name": "eval", "run": "true"}))
    login.wait_stage("kill9", "prep", "running", timeout=15)
    ids = wait_for(lambda: _job_ids(login, "kill9"), 15, "job ids")
    os.kill(first.pid, signal.SIGKILL)
    first.wait(5)
    wait_for(lambda: all(squeue_state(slurm, i)[0] == "COMPLETED" for i in ids), 60, "Slurm ran the chain")
    assert all(login.marker("kill9", s).exists() for s in ("prep", "train", "eval"))
    assert login.run_state("kill9")["state"] == "running"      # nobody was there to say it
    login.daemon()
    state = login.wait_run("kill9", timeout=30)
    assert state["state"] == "succeeded", login.diagnostics()
    assert [s["slurm_job_id"] for s in state["stages"]] == ids     # re-adopted, nothing resubmitted
    kinds = [(e["type"], e.get("stage")) for e in login.events() if e.get("run") == "kill9"]
    for stage in ("prep", "train", "eval"):
        assert kinds.count(("stage_succeeded", stage)) == 1
    assert kinds.count(("stage_started", "train")) == 1 and kinds.count(("run_succeeded", None)) == 1


@pytest.mark.slow
def test_sigterm_to_the_daemon_leaves_the_clusters_jobs_running(login):
    slurm = login.slurm
    first = login.daemon()
    login.submit(slurm_job("term", login.workdir, {"name": "train", "run": "sleep 4; echo ok"}))
    login.wait_stage("term", "train", "running", timeout=15)
    wait_for(lambda: _stage(login, "term", "train").get("slurm_state") == "RUNNING", 15, "job running")
    job_id = _stage(login, "term", "train")["slurm_job_id"]
    first.send_signal(signal.SIGTERM)
    assert first.wait(20) == 0
    assert squeue_state(slurm, job_id)[0] == "RUNNING" and login.run_state("term")["state"] == "running"
    assert not login.events("preempted")[0]["stages"]
    login.daemon()
    assert login.wait_run("term", timeout=30)["state"] == "succeeded"


@pytest.mark.slow
def test_cancel_scancels_the_runs_jobs(login):
    slurm = login.slurm
    login.daemon()
    login.submit(slurm_job("cxl", login.workdir, {"name": "train", "run": "sleep 120"},
                           {"name": "eval", "run": "true"}))
    wait_for(lambda: _stage(login, "cxl", "train").get("slurm_state") == "RUNNING", 20, "job running")
    ids = [s["slurm_job_id"] for s in login.run_state("cxl")["stages"]]
    assert login.agent("cancel", "cxl").returncode == 0
    state = login.wait_run("cxl", timeout=30)
    assert state["state"] == "cancelled"
    assert [s["state"] for s in state["stages"]] == ["cancelled", "cancelled"]
    assert state["stages"][0]["cause"]["class"] == "cancelled"
    wait_for(lambda: [squeue_state(slurm, i)[0] for i in ids] == ["CANCELLED", "CANCELLED"], 20, "scancel")


@pytest.mark.slow
def test_resume_after_a_failure_submits_only_the_unmarked_stages(login):
    login.daemon()
    login.submit(slurm_job("res", login.workdir, {"name": "prep", "run": "echo prep >> prep.count"},
                           {"name": "train", "run": "test -f fixed || exit 3"},
                           {"name": "eval", "run": "true"}))
    assert login.wait_run("res", timeout=60)["state"] == "failed"
    before = {s["name"]: s["slurm_job_id"] for s in login.run_state("res")["stages"]}
    (login.workdir / "fixed").write_text("yes")
    assert login.agent("resume", "res").returncode == 0
    login.wait_run("res", states="running", timeout=10)
    state = login.wait_run("res", timeout=60)
    assert state["state"] == "succeeded", login.diagnostics()
    stages = {s["name"]: s for s in state["stages"]}
    assert stages["prep"]["state"] == "skipped" and (login.workdir / "prep.count").read_text() == "prep\n"
    assert stages["train"]["attempt"] == 2 and stages["train"]["slurm_job_id"] != before["train"]
    assert stages["eval"]["slurm_job_id"] != before["eval"]
    assert not (login.home / "runs" / "res" / "stages" / "prep.2.job").exists()


TIME_LIMITED = {"name": "train", "run": "trap 'echo got TERM; exit 143' TERM; echo started; sleep 300 & wait"}


@pytest.fixture(scope="module", autouse=True)
def time_limited(slurm, tmp_path_factory):
    """The time-limit run takes 60-90 s of Slurm's clock (its unit is the minute and slurmctld
    checks limits every 30 s), the longest wait here: it starts with this module, in a home and
    daemon of its own, and runs beside the tests before its own, which use one CPU at a time (the
    node-failure test, which takes the node down, comes after it). On a one-CPU node it would
    block them: there its test starts it."""
    if int(slurm.hardware["CPUs"]) < 2:
        yield None
        return
    box = _time_limited_box(slurm, tmp_path_factory.mktemp("timelimit"))
    yield box
    _cleanup_login(box)


def _time_limited_box(slurm, tmp):
    from tests.realbox import Box
    box = Box(tmp)
    box.env.update(SLURM_CONF=str(slurm.conf), RGT_SLURM_POLL="0.5", RGT_SLURM_EXIT_GRACE="3")
    box.slurm = slurm
    box.daemon()
    box.t0 = time.monotonic()
    res = box.submit(slurm_job("tl", box.workdir, TIME_LIMITED, slurm={"time": "1m"}))
    assert res.returncode == 0, res.stderr
    return box


def _cleanup_login(box):
    box.cleanup()
    ids = [json.loads(p.read_text()).get("job_id") for p in (box.home / "runs").glob("*/stages/*.job")]
    if any(ids):
        box.slurm.run("scancel", *[i for i in ids if i], timeout=30)


@pytest.mark.slow
def test_a_stage_over_its_time_ends_timeout(time_limited, login):
    """One time-limited run read at every level: the record the real poll parses, the line
    slurmstepd writes into the log, the stage's TERM, and the cause the daemon gives."""
    from boxagent.slurm import states
    from tests.slurm.jobs import Jobs
    box = time_limited or _time_limited_box(login.slurm, login.tmp / "timelimit")
    try:
        state = box.wait_run("tl", timeout=240)
        assert 55 < time.monotonic() - box.t0
        st = state["stages"][0]
        cause = st["cause"]
        # once in a full run under load the stage ended with no cause: say what it held instead
        assert cause is not None, (state.get("state"), st, box.diagnostics())
        assert cause["class"] == "timeout" and "slurm.time" in cause["remediation"] and "0:01:00" in cause["summary"], cause
        assert st["slurm_state"] == "TIMEOUT"
        rec = Jobs(box.slurm, box.workdir).poll([st["slurm_job_id"]])["records"][st["slurm_job_id"]]
        assert rec["state"] == "TIMEOUT" and rec["reason"] == "TimeLimit" and rec["time_limit_s"] == 60
        log = (box.home / "runs" / "tl" / "logs" / "train.1.log").read_text()
        assert states.cancel_line(log)["due"] == "TIME LIMIT" and "got TERM" in log
    finally:
        if time_limited is None:
            _cleanup_login(box)


@pytest.mark.slow
def test_node_failure_is_retried_with_the_rest_of_the_chain(login):
    slurm = login.slurm
    login.daemon()
    login.submit(slurm_job("nf", login.workdir,
                           {"name": "train", "run": "test -f again || { touch again; sleep 120; }", "retries": 1},
                           {"name": "eval", "run": "echo evaluated > e.out", "expect": ["e.out"]}))
    wait_for(lambda: _stage(login, "nf", "train").get("slurm_state") == "RUNNING", 20, "job running")
    first = [s["slurm_job_id"] for s in login.run_state("nf")["stages"]]
    try:
        slurm.run("scontrol", "update", "nodename=" + slurm.node, "state=down", "reason=rgt-test", check=True)
        retry = login.wait_event("stage_retry", timeout=30, run="nf")
    finally:
        from tests.slurm.test_cluster_states import _resume_node
        _resume_node(slurm)
    assert retry["cause"]["class"] == "node_failure" and slurm.node in retry["cause"]["summary"]
    state = login.wait_run("nf", timeout=90)
    assert state["state"] == "succeeded", login.diagnostics()
    now = [s["slurm_job_id"] for s in state["stages"]]
    assert now[0] != first[0] and now[1] != first[1]                 # both submitted again
    assert squeue_state(slurm, first[1]) == ("CANCELLED", "DependencyNeverSatisfied")


@pytest.mark.slow
def test_a_refused_submission_fails_the_stage_with_slurms_words(login):
    login.daemon()
    login.submit(slurm_job("bad", login.workdir, {"name": "train", "run": "true"},
                           slurm={"partition": "nope"}))
    state = login.wait_run("bad", timeout=30)
    cause = state["stages"][0]["cause"]
    assert state["state"] == "failed" and "Invalid partition name specified" in cause["summary"]
    assert "sinfo" in cause["remediation"]


@pytest.mark.slow
def test_a_notification_reaches_a_loopback_receiver(login):
    from tests.notify.receiver import Receiver
    receiver = Receiver()
    try:
        entry = {"url": receiver.url + "/hook", "format": "json", "events": ["stage_failed", "run_failed"]}
        assert login.agent("notify-set", stdin=json.dumps({"notify": [entry]})).returncode == 0
        login.daemon()
        login.submit(slurm_job("note", login.workdir, {"name": "train", "run": "exit 4"}))
        login.wait_run("note", timeout=30)
        wait_for(lambda: len(receiver.requests) >= 2, 20, "two notifications")
        bodies = [r.text() for r in receiver.requests]
        assert any("stage_failed" in b and "note" in b for b in bodies)
        assert any("run_failed" in b for b in bodies)
    finally:
        receiver.down()


def _job_ids(login, run):
    """Every stage's job id once each has one (None before: state.json may not exist yet)."""
    ids = [s.get("slurm_job_id") for s in login.run_state(run).get("stages") or []]
    return ids if ids and all(ids) else None


def _stage(login, run, stage):
    """The stage in state.json ({} before the daemon wrote the run)."""
    return next((s for s in login.run_state(run).get("stages") or [] if s["name"] == stage), {})


def _status_stage(login, run, stage):
    for r in login.status_file().get("runs") or []:
        if r["name"] == run:
            return next((s for s in r["stages"] if s["name"] == stage), {})
    return {}


@pytest.mark.slow
def test_a_memory_limited_stage_ends_cgroup_oom(login):
    if login.slurm.mem_enforcement != "cgroup":
        pytest.skip("this cluster does not end a job OUT_OF_MEMORY (--mem is enforced by jobacct_gather's "
                    "OverMemoryKill here): %s" % login.slurm.mem_enforcement_reason)
    login.daemon()
    login.submit(slurm_job("oom", login.workdir,
                           {"name": "train", "run": "python3 -c 'x = bytearray(400 << 20); print(len(x))'"},
                           slurm={"mem": "64M"}))
    state = login.wait_run("oom", timeout=60)
    st = state["stages"][0]
    assert st["cause"]["class"] == "cgroup_oom" and "slurm.mem" in st["cause"]["remediation"]
    assert st["slurm_state"] == "OUT_OF_MEMORY"
    assert "OUT_OF_MEMORY" in " ".join(st["cause"]["evidence"])


@pytest.mark.slow
def test_the_nodes_run_the_shim_with_slurm_python(login):
    """config.json `slurm_python`: the Python the nodes have (here the oldest the agent supports)."""
    import glob
    import shutil
    found = sorted(glob.glob("/root/.pyenv/versions/3.8*/bin/python3.8")) + [shutil.which("python3.8")]
    py38 = next((p for p in found if p and "shims" not in p), None)
    if py38 is None:
        pytest.skip("no python3.8 on this machine to stand for the nodes' Python")
    login.home.mkdir(parents=True, exist_ok=True)
    (login.home / "config.json").write_text(json.dumps({"slurm_python": py38}))
    login.daemon()
    login.submit(slurm_job("py38", login.workdir, {"name": "train", "run": "echo ok > out", "expect": ["out"]}))
    assert login.wait_run("py38", timeout=30)["state"] == "succeeded", login.diagnostics()
    script = (login.home / "runs" / "py38" / "stages" / "train.1.sbatch").read_text()
    assert "exec %s -S " % py38 in script


@pytest.mark.slow
def test_a_python_the_nodes_lack_is_named_with_the_fix(login):
    login.home.mkdir(parents=True, exist_ok=True)
    (login.home / "config.json").write_text(json.dumps({"slurm_python": "/opt/nowhere/bin/python3"}))
    login.daemon()
    login.submit(slurm_job("nopy", login.workdir, {"name": "train", "run": "true"}))
    cause = login.wait_run("nopy", timeout=40)["stages"][0]["cause"]
    assert "could not run the stage shim with /opt/nowhere/bin/python3" in cause["summary"]
    assert "slurm_python" in cause["remediation"]


@pytest.mark.slow
def test_stop_kill_cancels_the_slurm_jobs_too(login):
    """`stop --kill` asks to end every running stage: on a cluster that is a scancel, and the
    run ends cancelled as soon as Slurm says the job is gone (not after stop_grace)."""
    slurm = login.slurm
    login.env["RGT_STOP_GRACE"] = "20"
    login.daemon()
    login.submit(slurm_job("sk", login.workdir, {"name": "train", "run": "sleep 120"}))
    wait_for(lambda: _stage(login, "sk", "train").get("slurm_state") == "RUNNING", 20, "job running")
    job_id = _stage(login, "sk", "train")["slurm_job_id"]
    t0 = time.monotonic()
    out = login.agent("stop", "--kill", "--timeout", "30")
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - t0 < 15
    assert login.run_state("sk")["state"] == "cancelled"
    assert squeue_state(slurm, job_id)[0] in ("CANCELLED", "COMPLETING")
