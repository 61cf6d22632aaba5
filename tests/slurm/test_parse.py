"""The pure parts against Slurm's exact words: squeue/scontrol/sacct lines as Slurm 22.05 printed
them on the test cluster (and slurmdbd's "CANCELLED by N"), the sbatch argv and batch script, the
end-state mapping, and the probe. No cluster needed; the command seam is faked where a test
needs Slurm to say something it cannot be made to say on one node."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from boxagent.slurm import follow, probe, states, submit
from boxagent.slurm.cmd import RC_NOT_FOUND, RC_TIMEOUT, Result, run_command, slurm_env

SCONTROL_LINE = (
    "JobId=3 JobName=rgt:r:s UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 "
    "Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=0 "
    "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:01 TimeLimit=01:00:00 TimeMin=N/A "
    "SubmitTime=2026-11-23T02:50:22 EligibleTime=2026-11-23T02:50:22 StartTime=2026-11-23T02:50:22 "
    "EndTime=2026-11-23T02:50:23 Deadline=N/A Partition=debug AllocNode:Sid=localhost:16564 "
    "NodeList=localhost BatchHost=localhost NumNodes=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=512M,node=1,billing=1 Command=/x/a b.sh WorkDir=/scratch/u/my dir Comment=a b=c  "
    "StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= ")


def ts(text):
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


# -- scontrol
def test_scontrol_values_with_spaces():
    rec = follow.parse_scontrol(SCONTROL_LINE)["3"]
    assert rec["state"] == "FAILED" and rec["reason"] == "NonZeroExitCode"
    assert (rec["exit_code"], rec["signal"]) == (3, None)
    assert rec["name"] == "rgt:r:s" and rec["node"] == "localhost" and rec["partition"] == "debug"
    assert rec["start_at"] == ts("2026-11-23T02:50:22") and rec["end_at"] == ts("2026-11-23T02:50:23")
    assert rec["time_limit_s"] == 3600 and rec["dependency"] is None
    pairs = follow.parse_pairs(SCONTROL_LINE)
    assert pairs["WorkDir"] == "/scratch/u/my dir" and pairs["Command"] == "/x/a b.sh"
    assert pairs["Comment"] == "a b=c"          # a lower-case word=... inside a value is not a key
    assert pairs["TRES"] == "cpu=1,mem=512M,node=1,billing=1"


def test_scontrol_signal_and_unlimited():
    line = SCONTROL_LINE.replace("ExitCode=3:0", "ExitCode=0:15").replace("TimeLimit=01:00:00", "TimeLimit=UNLIMITED")
    rec = follow.parse_scontrol(line.replace("JobState=FAILED", "JobState=CANCELLED"))["3"]
    assert (rec["exit_code"], rec["signal"]) == (0, 15) and rec["time_limit_s"] is None


def test_scontrol_pending_start_is_an_estimate():
    line = SCONTROL_LINE.replace("JobState=FAILED", "JobState=PENDING").replace("Reason=NonZeroExitCode", "Reason=Priority")
    rec = follow.parse_scontrol(line)["3"]
    assert rec["start_at"] is None and rec["end_at"] is None
    assert rec["expected_start_at"] == ts("2026-11-23T02:50:22")


# -- squeue
def test_squeue_lines_name_with_separator_and_headers():
    text = ("CLUSTER: rgttest\n"
            "7|PENDING|Dependency|2026-11-23T02:38:26|N/A|N/A||debug|1-00:00:00|afterok:6(unfulfilled)|rgt:a:b\n"
            "6|RUNNING|None|2026-11-23T02:38:26|2026-11-23T02:38:29|2026-11-23T03:38:29|localhost|debug|1:00:00|(null)|rgt:x|y\n"
            "5|CANCELLED|DependencyNeverSatisfied|2026-11-23T02:38:26|2026-11-23T02:38:35|2026-11-23T02:38:35||debug|UNLIMITED|(null)|n\n")
    recs = follow.parse_squeue(text)
    assert list(recs) == ["7", "6", "5"]
    assert recs["7"]["reason"] == "Dependency" and recs["7"]["dependency"] == "afterok:6(unfulfilled)"
    assert recs["7"]["node"] is None and recs["7"]["time_limit_s"] == 86400
    assert recs["6"]["name"] == "rgt:x|y" and recs["6"]["end_at"] is None   # a running job's end is its limit
    assert recs["6"]["time_limit_s"] == 3600
    assert recs["5"]["end_at"] == ts("2026-11-23T02:38:35")


def test_squeue_argv_one_call_for_many_jobs():
    argv = follow.squeue_argv(["1", "2", "3"], user="1000")
    assert argv[:5] == ["squeue", "--noheader", "--states=all", "--jobs=1,2,3", "--user=1000"]
    assert argv[5].startswith("--format=%i|%T|%r|") and argv[5].endswith("|%j")


def test_poll_asks_for_this_users_jobs_only():
    """Without one --user, squeue fetches every job of the cluster to pick out ours."""
    runner = FakeRunner(Result(0, "", ""))
    follow.poll(["1", "2"], runner=runner)
    assert "--user=%d" % os.getuid() in runner.calls[0]


# -- sacct
def test_sacct_cancelled_by_uid():
    text = ("41|CANCELLED by 1234|0:15||2026-11-23T02:38:26|2026-11-23T02:38:29|2026-11-23T02:40:00|gpu7|gpu|2-00:00:00|rgt:r:train\n"
            "42|OUT_OF_MEMORY|0:125|OutOfMemory|2026-11-23T02:38:26|2026-11-23T02:38:29|2026-11-23T02:39:00|gpu7|gpu|01:00:00|rgt:r:eval\n")
    recs = follow.parse_sacct(text)
    assert recs["41"]["state"] == "CANCELLED" and recs["41"]["cancelled_by_uid"] == 1234
    assert recs["41"]["time_limit_s"] == 2 * 86400 and recs["41"]["signal"] == 15
    assert recs["42"]["state"] == "OUT_OF_MEMORY" and recs["42"]["cancelled_by_uid"] is None


def test_sacct_argv_completion():
    assert follow.sacct_argv(["1"], completion=True)[-1] == "--completion"
    assert "--completion" not in follow.sacct_argv(["1"])


# -- poll through the seam (what one node cannot be made to say)
class FakeRunner:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append(argv)
        return self.answers.pop(0)


def test_poll_controller_down_is_an_error_not_gone():
    down = Result(1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    out = follow.poll(["1", "2"], runner=FakeRunner(down))
    assert out["gone"] == [] and out["records"] == {}
    assert out["error"] == "squeue exited 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


def test_poll_timeout_is_an_error_not_gone():
    out = follow.poll(["1"], runner=FakeRunner(Result(RC_TIMEOUT, "", "")))
    assert out["gone"] == [] and out["error"] == "squeue did not answer in time"


def test_poll_sacct_only_for_the_missing():
    sq = Result(0, "1|RUNNING|None|N/A|N/A|N/A|n1|p|1:00|(null)|a\n", "")
    sa = Result(0, "2|COMPLETED|0:0||N/A|N/A|N/A|n1|p|1:00|b\n", "")
    runner = FakeRunner(sq, sa)
    out = follow.poll(["1", "2", "3"], runner=runner, sacct="accounting")
    assert sorted(out["records"]) == ["1", "2"] and out["gone"] == ["3"] and out["calls"] == 2
    assert "--jobs=2,3" in runner.calls[1] and "--completion" not in runner.calls[1]


# -- submit
def test_sbatch_argv_exact():
    argv = submit.sbatch_argv("/h/runs/r/stages/train.1.sbatch", "r", "train", "/h/runs/r/logs/train.1.log",
                              "/scratch/proj", {"partition": "gpu", "gres": "gpu:1", "time": "12:00:00",
                                                "mem": "all", "cpus_per_task": 8, "extra": ["--exclusive"]},
                              after="41")
    assert argv == ["sbatch", "--parsable", "--job-name=rgt:r:train",
                    "--output=/h/runs/r/logs/train.1.log", "--error=/h/runs/r/logs/train.1.log",
                    "--open-mode=append", "--no-requeue", "--chdir=/scratch/proj", "--kill-on-invalid-dep=yes",
                    "--dependency=afterok:41", "--partition=gpu", "--gres=gpu:1", "--time=12:00:00",
                    "--mem=0", "--cpus-per-task=8", "--exclusive", "/h/runs/r/stages/train.1.sbatch"]


def test_first_stage_has_no_dependency():
    argv = submit.sbatch_argv("s", "r", "prep", "/l", "/w")
    assert not [a for a in argv if a.startswith("--dependency")]


def test_log_path_with_percent_is_escaped():
    assert submit.output_path("/h/100%/x.log") == "/h/100%%/x.log"
    assert submit.output_path("/h/a\\b%j.log") == "/h/a\\b%j.log"   # a backslash turns expansion off


@pytest.mark.parametrize("out,expected", [("123\n", ("123", None)), ("123;hpc2\n", ("123", "hpc2")),
                                          ("sbatch: warning: x\n77\n", ("77", None))])
def test_parse_job_id(out, expected):
    assert submit.parse_job_id(out) == expected


@pytest.mark.parametrize("out", ["", "Submitted batch job 5\n", "12a\n"])
def test_parse_job_id_refuses(out):
    with pytest.raises(ValueError):
        submit.parse_job_id(out)


def test_batch_script_quotes_every_word(tmp_path):
    home = str(tmp_path / "it's a home")
    shim = submit.shim_argv(home, "r", "s", 2)
    assert shim == ["python3", home + "/rgt-agent.pyz", "exec-stage", "--home", home, "--run", "r",
                    "--stage", "s", "--attempt", "2"]
    script = submit.batch_script(["printf", "%s\\n", "$HOME `id` it's"], title="rgt r/s\nattempt 2",
                                 env={"PYTHONPATH": "/a b"})
    assert script.startswith("#!/bin/bash\n# rgt r/s attempt 2\n")
    path = tmp_path / "b.sh"
    path.write_text(script)
    out = subprocess.run(["bash", str(path)], capture_output=True, text=True)
    assert out.stdout == "$HOME `id` it's\n"


def test_batch_script_refuses_bad_env_name():
    with pytest.raises(ValueError):
        submit.batch_script(["true"], env={"A;B": "x"})


@pytest.mark.parametrize("said,hint", [
    ("sbatch: error: Batch job submission failed: Invalid partition name specified", "sinfo -h -o %P"),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", "sacctmgr"),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available", "fewer CPUs"),
    ("sbatch: error: something new", "[slurm] table"),
])
def test_submit_refusal_hint(said, hint):
    with pytest.raises(submit.SubmitError) as exc:
        submit.submit(["sbatch"], runner=FakeRunner(Result(1, "", said + "\n")))
    assert said in exc.value.message and hint in exc.value.hint


def test_submit_timeout_says_the_job_may_exist():
    with pytest.raises(submit.SubmitError) as exc:
        submit.submit(["sbatch"], runner=FakeRunner(Result(RC_TIMEOUT, "", "")))
    assert "may exist" in exc.value.message


# -- states
@pytest.mark.parametrize("state,reason,cls,retryable", [
    ("OUT_OF_MEMORY", "OutOfMemory", "cgroup_oom", False),
    ("TIMEOUT", "TimeLimit", "timeout", False),
    ("PREEMPTED", None, "preempted", True),
    ("NODE_FAIL", "NodeDown", "node_failure", True),
    ("BOOT_FAIL", None, "node_failure", True),
    ("CANCELLED", "DependencyNeverSatisfied", "cancelled", False),
    ("CANCELLED", None, "killed", False),
])
def test_end_cause(state, reason, cls, retryable):
    cause = states.end_cause({"job_id": "9", "state": state, "reason": reason, "node": "n1", "source": "squeue"})
    assert (cause["class"], cause["retryable"]) == (cls, retryable)
    assert cause["evidence"][0].startswith("Slurm job 9: %s" % state)


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "RUNNING", "PENDING"])
def test_no_cause_from_state_alone(state):
    assert states.end_cause({"job_id": "9", "state": state, "exit_code": 3}) is None


def test_cancelled_by_rgt_is_cancelled():
    assert states.end_cause({"job_id": "9", "state": "CANCELLED"}, cancelled_by_rgt=True)["class"] == "cancelled"


def test_cancelled_from_outside_names_who_and_when():
    cause = states.end_cause({"job_id": "9", "state": "CANCELLED", "cancelled_by_uid": 0},
                             log_line={"at": "2026-11-23T02:39:01", "due": None})
    assert cause["class"] == "killed"
    assert "by root (uid 0)" in cause["summary"] and "at 2026-11-23T02:39:01" in cause["summary"]


def test_cancel_line_due_to_time_limit_says_timeout():
    line = states.cancel_line("x\nslurmstepd-n1: error: *** JOB 3 ON n1 CANCELLED AT 2026-11-23T02:49:13 DUE TO TIME LIMIT ***\n")
    assert line == {"job": "3", "node": "n1", "at": "2026-11-23T02:49:13", "due": "TIME LIMIT"}
    assert states.end_cause({"job_id": "3", "state": "CANCELLED"}, log_line=line)["class"] == "timeout"


@pytest.mark.parametrize("text,due", [
    ("*** JOB 5 ON localhost CANCELLED AT 2026-11-23T02:49:23 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "NODE FAILURE"),
    ("*** JOB 1 ON localhost CANCELLED AT 2026-11-23T02:49:45 DUE TO PREEMPTION ***", "PREEMPTION"),
    ("*** JOB 4 ON localhost CANCELLED AT 2026-11-23T02:39:01 ***", None),
    ("*** JOB 4 CANCELLED AT 2026-11-23T02:39:01 ***", None),
    ("*** STEP 4.0 ON n CANCELLED AT 2026-11-23T02:39:01 ***", None),
])
def test_cancel_line_forms(text, due):
    assert states.cancel_line("slurmstepd: error: " + text)["due"] == due


def test_phase_and_pending_words():
    assert [states.phase(s) for s in ("PENDING", "COMPLETING", "NODE_FAIL", "WEIRD", None)] == \
        ["pending", "running", "ended", "unknown", "unknown"]
    assert states.pending_text("Resources")["blocked"] is False
    assert states.pending_text("DependencyNeverSatisfied")["blocked"] is True
    assert states.pending_text("SomethingNew") == {"reason": "SomethingNew", "text": "waiting (SomethingNew)", "blocked": False}


# -- probe
def test_probe_without_slurm_starts_nothing():
    runner = FakeRunner()
    out = probe.probe(runner=runner, which=lambda name: None)
    assert out["available"] is False and out["errors"] == [] and runner.calls == []


def test_probe_client_package_without_a_cluster():
    said = ("scontrol: error: fetch_config: DNS SRV lookup failed\n"
            "scontrol: fatal: Could not establish a configuration source\n")
    out = probe.probe(runner=FakeRunner(Result(1, "", said)), which=lambda n: "/usr/bin/" + n)
    assert out["available"] is False and out["configured"] is False and out["errors"] == []


def test_probe_controller_down_is_reported():
    out = probe.probe(runner=FakeRunner(Result(RC_TIMEOUT, "", ""), Result(0, "gpu*\ncpu\n", "")),
                      which=lambda n: "/usr/bin/" + n)
    assert out["available"] is True and out["errors"] == ["scontrol show config did not answer in time"]
    assert out["partitions"] == [{"name": "gpu", "default": True}, {"name": "cpu", "default": False}]


def test_probe_partial_install_is_named():
    out = probe.probe(runner=FakeRunner(), which=lambda n: None if n == "sbatch" else "/usr/bin/" + n)
    assert out["available"] is False and out["errors"] == ["not on PATH: sbatch"]


# -- the command seam
def test_run_command_timeout_kills():
    t0 = time.monotonic()
    res = run_command(["sleep", "30"], timeout=0.3)
    assert res.rc == RC_TIMEOUT and time.monotonic() - t0 < 10


def test_run_command_missing_binary():
    assert run_command(["rgt-no-such-slurm-tool"], timeout=5).rc == RC_NOT_FOUND


def test_user_time_format_cannot_change_what_we_parse():
    env = slurm_env({"SLURM_TIME_FORMAT": "relative", "SQUEUE_FORMAT": "%i", "SQUEUE_SORT": "-t",
                     "SLURM_CLUSTERS": "a,b", "SBATCH_ACCOUNT": "mine", "PATH": "/usr/bin"})
    assert env == {"SLURM_TIME_FORMAT": "standard", "SBATCH_ACCOUNT": "mine", "PATH": "/usr/bin"}
    out = run_command([sys.executable, "-c", "import os; print(os.environ.get('SQUEUE_FORMAT'))"], timeout=30,
                      env=dict(os.environ, SQUEUE_FORMAT="%i"))
    assert out.out.strip() == "None"
