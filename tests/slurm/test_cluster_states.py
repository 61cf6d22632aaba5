"""Slurm's states on the real cluster, read with the real parsers and mapped to rgt causes:
pending reasons, scancel from outside, NODE_FAIL, PREEMPTED and OUT_OF_MEMORY (TIMEOUT, the
slow one, is read at every level in test_daemon_chain)."""
from __future__ import annotations

import time

import pytest

from boxagent.slurm import states
from boxagent.slurm.spec import check_job

pytestmark = pytest.mark.slurm


def test_pending_reasons_while_running(jobs, slurm):
    cpus = int(slurm.hardware["CPUs"])
    busy = jobs.stage("busy", "sleep 120", options={"cpus_per_task": cpus})
    jobs.wait([busy], phase="running", timeout=60)
    blocked = jobs.stage("blocked", "true")                 # first in line: Resources
    behind = jobs.stage("behind", "true")                   # behind it: Priority
    chained = jobs.stage("chained", "true", after=busy)     # Dependency
    held = jobs.stage("held", "true", options={"extra": ["--begin=now+1hour"]})
    recs = jobs.wait([blocked, behind, chained, held], phase="pending", timeout=60, reasons={
        blocked: "Resources", behind: "Priority", chained: "Dependency", held: "BeginTime"})
    assert recs[chained]["dependency"].startswith("afterok:%s" % busy)
    assert states.pending_text(recs[blocked]["reason"])["text"] == "waiting for CPUs/GPUs/memory to free up"
    assert recs[blocked]["start_at"] is None
    assert jobs.poll([busy])["records"][busy]["start_at"] <= time.time()


def test_scancel_from_outside_is_killed_with_when(jobs, slurm):
    job = jobs.stage("train", "echo started; sleep 120")
    jobs.wait([job], phase="running", timeout=60)
    slurm.run("scancel", job, check=True)
    rec = jobs.wait([job])[job]
    assert rec["state"] == "CANCELLED"
    line = _wait_cancel_line(jobs.log("train"))
    assert line["due"] is None and line["job"] == job
    cause = states.end_cause(rec, log_line=line)
    assert cause["class"] == "killed" and cause["retryable"] is False
    assert "cancelled from outside rgt" in cause["summary"] and "at %s" % line["at"] in cause["summary"]
    # rgt's own cancel of the same job is no "kill"
    assert states.end_cause(rec, cancelled_by_rgt=True, log_line=line)["class"] == "cancelled"


def test_node_failure(jobs, slurm):
    job = jobs.stage("train", "sleep 120")
    jobs.wait([job], phase="running", timeout=60)
    try:
        slurm.run("scontrol", "update", "nodename=" + slurm.node, "state=down", "reason=rgt-test", check=True)
        rec = jobs.wait([job], timeout=60)[job]
    finally:
        _resume_node(slurm)
    assert rec["state"] == "NODE_FAIL" and rec["node"] == slurm.node
    line = _wait_cancel_line(jobs.log("train"))
    assert line["due"] == "NODE FAILURE"
    cause = states.end_cause(rec, log_line=line)
    assert (cause["class"], cause["retryable"]) == ("node_failure", True)
    assert slurm.node in cause["summary"]


def test_preempted_by_a_higher_tier_partition(jobs, slurm):
    cpus = int(slurm.hardware["CPUs"])
    victim = jobs.stage("train", "sleep 120", options={"partition": "long", "cpus_per_task": cpus})
    jobs.wait([victim], phase="running", timeout=60)
    urgent = jobs.stage("urgent", "true", options={"partition": "urgent"})
    recs = jobs.wait([victim, urgent], timeout=60)
    assert recs[victim]["state"] == "PREEMPTED" and recs[urgent]["state"] == "COMPLETED"
    assert _wait_cancel_line(jobs.log("train"))["due"] == "PREEMPTION"
    cause = states.end_cause(recs[victim])
    assert (cause["class"], cause["retryable"]) == ("preempted", True)


def test_out_of_memory(jobs, slurm):
    if slurm.mem_enforcement != "cgroup":
        pytest.skip("no OUT_OF_MEMORY state here: --mem is enforced by jobacct_gather's OverMemoryKill "
                    "(job FAILED, signal 9): %s" % slurm.mem_enforcement_reason)
    options = check_job({"backend": "slurm", "slurm": {"mem": "64M"}}, _no_problems)["slurm"]
    job = jobs.stage("train", "python3 -c 'x = bytearray(400 << 20); print(len(x))'", options=options)
    rec = jobs.wait([job], timeout=90)[job]
    assert rec["state"] == "OUT_OF_MEMORY" and rec["reason"] == "OutOfMemory"
    cause = states.end_cause(rec)
    assert (cause["class"], cause["retryable"]) == ("cgroup_oom", False)
    assert "oom-kill" in jobs.log("train").read_text()     # slurmstepd says so in the job's log


def _no_problems(path, what):
    raise AssertionError("%s: %s" % (path, what))


def _wait_cancel_line(log, timeout=20):
    """slurmstepd writes its line into the job's output as it kills the job: moments after the
    state changed, so wait for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = states.cancel_line(log.read_text()) if log.exists() else None
        if line:
            return line
        time.sleep(0.2)
    raise AssertionError("no slurmstepd cancel line in %s: %r" % (log, log.read_text() if log.exists() else None))


def _resume_node(slurm, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = slurm.run("sinfo", "-h", "-n", slurm.node, "-o", "%T").stdout.split()
        # back in service: idle, or already running the job that waited for it (the chain's
        # retried stage starts the moment the node returns, and "mixed" is not "down")
        if state and set(state) <= {"idle", "mixed", "allocated", "completing"}:
            return
        # ReturnToService=2 usually brings the node back by itself; resume where it did not.
        slurm.run("scontrol", "update", "nodename=" + slurm.node, "state=resume")
        time.sleep(0.5)
    raise AssertionError("node %s did not come back (sinfo said %r): %s" % (slurm.node, state, slurm.log_tail()))
