"""Chains on the real cluster, submitted with the real argv builder: order, dependencies, a failing
middle stage, the agent's own shim on the node, and the traps found on the way."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from boxagent.base.fsutil import atomic_write_json
from boxagent.base.home import Home
from boxagent.engine import shim
from boxagent.engine.launch import launch_record, slurm_record
from boxagent.slurm import follow, probe, states, submit
from boxagent.slurm.cmd import run_command

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
SECRET = "tok-" + "9f3b2c1d0e"     # a stage env value that must stay in the launch file


def test_three_stage_chain_runs_in_order(jobs, slurm):
    stamp = 'date +%s.%N > "{0}.start"; sleep {1}; echo {0} > "{0}.out"; date +%s.%N > "{0}.end"'
    a = jobs.stage("prep", stamp.format("prep", 2))
    b = jobs.stage("train", stamp.format("train", 1), after=a)
    c = jobs.stage("eval", stamp.format("eval", 0), after=b)
    assert a.isdigit() and int(a) < int(b) < int(c)
    jb, jc = slurm.job(b), slurm.job(c)
    assert jb["Dependency"].startswith("afterok:%s(" % a) and jc["Dependency"].startswith("afterok:%s(" % b)
    assert jb["JobName"] == "rgt:%s:train" % jobs.run and jb["KillOInInvalidDependent"] == "Yes"
    assert jb["StdOut"] == jb["StdErr"] == str(jobs.log("train")) and jb["Requeue"] == "0"
    assert jb["WorkDir"] == str(jobs.shared)
    recs = jobs.wait([a, b, c])
    assert [recs[i]["state"] for i in (a, b, c)] == ["COMPLETED"] * 3
    def read(name):
        return float((jobs.shared / name).read_text())
    assert read("prep.end") <= read("train.start") and read("train.end") <= read("eval.start")
    assert all(states.end_cause(recs[i]) is None for i in (a, b, c))


def test_failing_middle_stage_leaves_the_third_never_run(jobs):
    a = jobs.stage("prep", "sleep 1; echo prep")
    b = jobs.stage("train", "echo boom; exit 3", after=a)
    c = jobs.stage("eval", "touch eval-ran", after=b)
    recs = jobs.wait([a, b, c])
    assert recs[b]["state"] == "FAILED" and recs[b]["reason"] == "NonZeroExitCode"
    assert states.end_cause(recs[b]) is None            # a non-zero exit goes to log triage
    detail = follow.show_job(b, runner=jobs.runner)
    assert (detail["exit_code"], detail["signal"]) == (3, None)
    assert recs[c]["state"] == "CANCELLED" and recs[c]["reason"] == "DependencyNeverSatisfied"
    assert recs[c]["start_at"] == recs[c]["end_at"] and recs[c]["node"] is None
    assert not (jobs.shared / "eval-ran").exists() and not jobs.log("eval").exists()
    cause = states.end_cause(recs[c])
    assert cause["class"] == "cancelled" and "did not succeed" in cause["summary"]


@pytest.mark.parametrize("form", ["pyz", "source"])
def test_shim_on_the_node_reads_the_launch_file(jobs, slurm, form, request):
    """The batch script runs the shim on the node, as shipped (`<python> <RGT_HOME>/rgt-agent.pyz
    exec-stage ...`) and from this source tree (`python -m boxagent`): the stage env reaches the
    command through the launch file; no secret reaches sbatch, the script or Slurm."""
    home = Home(str(jobs.shared / "rgt-home"))
    home.ensure()
    home.ensure_run(jobs.run)
    log = home.stage_log(jobs.run, "train", 1)
    command = 'echo "token=$RGT_TEST_TOKEN" > got.txt; echo from-the-command'
    atomic_write_json(home.stage_launch(jobs.run, "train", 1),
                      launch_record({"run": command}, str(jobs.shared), {"RGT_TEST_TOKEN": SECRET}, log), mode=0o600)
    if form == "pyz":
        shutil.copy(str(request.getfixturevalue("agent_pyz")), home.pyz)
        shim, env = submit.shim_argv(home.root, jobs.run, "train", 1, python=sys.executable), {}
        assert shim[1] == home.pyz
    else:
        shim = submit.shim_argv(home.root, jobs.run, "train", 1, python=sys.executable, agent=["-m", "boxagent"])
        env = {"PYTHONPATH": str(REPO)}
    script = Path(home.stage_dir(jobs.run)) / "train.1.sbatch"
    script.write_text(submit.batch_script(shim, title="rgt %s/train attempt 1" % jobs.run, env=env))
    argv = submit.sbatch_argv(str(script), jobs.run, "train", log, str(jobs.shared))
    job = submit.submit(argv, runner=jobs.runner)
    jobs.ids.append(job)
    recs = jobs.wait([job])
    assert recs[job]["state"] == "COMPLETED"
    exit_info = json.loads(Path(home.stage_exit(jobs.run, "train", 1)).read_text())
    assert exit_info["exit_code"] == 0 and exit_info["signal"] is None
    assert (jobs.shared / "got.txt").read_text() == "token=%s\n" % SECRET
    assert "from-the-command" in Path(log).read_text()
    pid = json.loads(Path(home.stage_pid(jobs.run, "train", 1)).read_text())
    assert pid["pid"] and pid["boot_id"]
    stored = slurm.run("scontrol", "write", "batch_script", job, "-").stdout   # slurmctld's copy
    assert stored == script.read_text()
    seen = " ".join(argv) + stored + slurm.run("scontrol", "show", "job", "-o", job).stdout \
        + slurm.run("squeue", "-h", "-t", "all", "-o", "%all").stdout
    assert SECRET not in seen


def test_failed_command_under_the_shim_stops_the_chain(jobs):
    """The shim on the node exits with the stage's verdict: a failed command fails the batch job,
    so Slurm cancels the stage after it (afterok) and no marker is written."""
    home = Home(str(jobs.shared / "rgt-home"))
    home.ensure()
    home.ensure_run(jobs.run)
    ids = _shim_chain(jobs, home, (("train", "exit 3", {}), ("eval", "touch eval-ran", {})))
    recs = jobs.wait(ids)
    assert json.loads(Path(home.stage_exit(jobs.run, "train", 1)).read_text())["exit_code"] == 3
    assert recs[ids[0]]["state"] == "FAILED" and recs[ids[1]]["state"] == "CANCELLED"
    assert recs[ids[1]]["reason"] == "DependencyNeverSatisfied"
    assert not (jobs.shared / "eval-ran").exists()
    assert not os.path.exists(home.marker(jobs.run, "train"))


def test_exit_zero_without_its_expect_file_stops_the_chain_too(jobs):
    home = Home(str(jobs.shared / "rgt-home"))
    home.ensure()
    home.ensure_run(jobs.run)
    ids = _shim_chain(jobs, home, (("train", "echo done", {"expect": ["model.pt"]}),
                                   ("eval", "touch eval-ran", {})))
    recs = jobs.wait(ids)
    assert recs[ids[0]]["state"] == "FAILED" and recs[ids[1]]["state"] == "CANCELLED"
    detail = follow.show_job(ids[0], runner=jobs.runner)
    assert detail["exit_code"] == shim.EXIT_UNMET
    assert json.loads(Path(home.stage_exit(jobs.run, "train", 1)).read_text())["exit_code"] == 0


def test_a_succeeded_stage_leaves_its_marker_before_the_next_starts(jobs):
    home = Home(str(jobs.shared / "rgt-home"))
    home.ensure()
    home.ensure_run(jobs.run)
    marker = home.marker(jobs.run, "train")
    ids = _shim_chain(jobs, home, (("train", "echo Training completed > model.pt; echo Training completed",
                                    {"expect": ["model.pt"], "success_pattern": "Training completed"}),
                                   ("eval", "test -s %s && echo saw-marker > eval-ran" % marker, {})))
    recs = jobs.wait(ids)
    assert [recs[i]["state"] for i in ids] == ["COMPLETED", "COMPLETED"]
    assert (jobs.shared / "eval-ran").read_text() == "saw-marker\n"
    assert json.loads(Path(marker).read_text())["spec_sha256"] == "abc"


def _shim_chain(jobs, home, stages):
    """Each stage as the engine launches a Slurm stage: its judged launch record, the shim in the
    batch script, chained afterok."""
    ids = []
    for stage, command, keys in stages:
        sspec = dict({"name": stage, "run": command}, **keys)
        log = home.stage_log(jobs.run, stage, 1)
        record = slurm_record(launch_record(sspec, str(jobs.shared), {}, log), sspec, home.marker(jobs.run, stage),
                              {"run": jobs.run, "stage": stage, "attempt": 1, "spec_sha256": "abc"})
        atomic_write_json(home.stage_launch(jobs.run, stage, 1), record)
        argv = submit.shim_argv(home.root, jobs.run, stage, 1, python=sys.executable, agent=["-m", "boxagent"])
        script = Path(home.stage_dir(jobs.run)) / ("%s.1.sbatch" % stage)
        script.write_text(submit.batch_script(argv, env={"PYTHONPATH": str(REPO)}))
        ids.append(jobs.submit_script(stage, script, after=ids[-1] if ids else None, log=Path(log)))
    return ids


def test_afterok_on_a_job_slurm_forgot_is_ignored(jobs):
    """Slurm drops a dependency on a job id it does not know (purged after MinJobAge, or a
    controller that lost its state) and runs the job at once: a resubmitted stage may only
    follow a job squeue still knows; otherwise the previous stage's marker must decide."""
    job = jobs.stage("eval", "touch eval-ran", after="67000000")
    recs = jobs.wait([job])
    assert recs[job]["state"] == "COMPLETED" and (jobs.shared / "eval-ran").exists()


def test_log_path_with_percent(jobs):
    log = jobs.shared / "100%j" / "train.1.log"
    job = jobs.submit_script("train", _script(jobs.shared, "echo in-the-log"), log=log)
    jobs.wait([job])
    assert log.read_text() == "in-the-log\n"


def test_refused_submission_names_the_fix(jobs):
    argv = submit.sbatch_argv(str(_script(jobs.shared, "true")), jobs.run, "s", str(jobs.log("s")),
                              str(jobs.shared), {"partition": "nope"})
    with pytest.raises(submit.SubmitError) as exc:
        submit.submit(argv, runner=jobs.runner)
    assert "Invalid partition name specified" in exc.value.message and "sinfo" in exc.value.hint


def test_poll_known_unknown_and_by_name(jobs):
    job = jobs.stage("prep", "true")
    jobs.wait([job])
    out = jobs.poll([job, "67000001"])
    assert list(out["records"]) == [job] and out["gone"] == ["67000001"] and out["error"] is None
    assert out["calls"] == 1
    none_known = jobs.poll(["67000001", "67000002"])
    assert none_known["gone"] == ["67000001", "67000002"] and none_known["error"] is None
    res = jobs.runner(follow.squeue_by_name_argv([submit.job_name(jobs.run, "prep")]), 20)
    assert list(follow.parse_squeue(res.out)) == [job]


def test_sacct_completion_log_answers_for_ended_jobs(jobs):
    a = jobs.stage("prep", "true")
    b = jobs.stage("train", "exit 4", after=a)
    jobs.wait([a, b])
    res = jobs.runner(follow.sacct_argv([a, b], completion=True), 20)
    recs = follow.parse_sacct(res.out)
    assert recs[a]["state"] == "COMPLETED" and recs[b]["state"] == "FAILED" and recs[b]["exit_code"] == 4
    assert recs[b]["name"] == submit.job_name(jobs.run, "train")


def test_controller_not_answering_is_an_error_never_gone(slurm, tmp_path):
    dead = tmp_path / "dead.conf"
    text = slurm.conf.read_text().splitlines()
    port = [line for line in text if line.startswith("SlurmctldPort=")][0]
    from tests.slurm.cluster import free_ports
    dead.write_text("\n".join(line.replace(port, "SlurmctldPort=%d" % free_ports(1)[0]) for line in text) + "\n")
    runner = functools.partial(run_command, env=dict(slurm.env, SLURM_CONF=str(dead)))
    out = follow.poll(["1", "2"], runner=runner, timeout=2)
    assert out["gone"] == [] and out["error"] == "squeue did not answer in time"


def test_probe_on_the_submit_host(slurm):
    out = probe.probe(runner=functools.partial(run_command, env=slurm.env))
    assert out["available"] and out["configured"] and out["errors"] == []
    assert out["cluster_name"] == "rgttest" and out["version"]
    assert out["partitions"] == [{"name": "debug", "default": True}, {"name": "long", "default": False},
                                 {"name": "urgent", "default": False}]
    assert out["sacct"] == "completion" and out["kill_wait_s"] == 2 and out["min_job_age_s"] == 300


def test_probe_cli_has_the_slurm_key(slurm, tmp_path):
    env = dict(slurm.env, RGT_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "boxagent", "probe", "--json"], capture_output=True, text=True,
                         env=env, timeout=120, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["slurm"]["cluster_name"] == "rgttest" and report["slurm"]["available"] is True
    text = subprocess.run([sys.executable, "-m", "boxagent", "probe"], capture_output=True, text=True,
                          env=env, timeout=120, cwd=str(REPO)).stdout
    assert "slurm:   cluster rgttest" in text and "debug*, long, urgent" in text


def _script(d: Path, body: str) -> Path:
    path = d / ("s%d.sh" % len(os.listdir(str(d))))
    path.write_text("#!/bin/bash\n" + body + "\n")
    return path


def test_install_says_what_the_login_node_has(slurm):
    """`rgt-client install` prints the probe's Slurm facts: the cluster, its partitions and the
    four commands rgt runs (a plain box, without them, gets no line)."""
    from rgt_client.install.render import box_summary
    found = probe.probe(runner=functools.partial(run_command, env=slurm.env))
    lines = box_summary({"python_version": "3.11", "python": sys.executable,
                         "probe": {"slurm": found, "deps": {}}})
    line = next(l for l in lines if l.strip().startswith("slurm"))
    assert "cluster rgttest" in line and "partitions debug*, long, urgent" in line
    assert line.endswith("sbatch squeue scontrol scancel found")
    partial = dict(found, available=False, commands=dict(found["commands"], scancel=None))
    assert "not on PATH: scancel" in box_summary({"probe": {"slurm": partial, "deps": {}}})[-1]
    nothing = dict(found, available=False, commands={c: None for c in found["commands"]})
    assert not [l for l in box_summary({"probe": {"slurm": nothing, "deps": {}}}) if "slurm" in l]
