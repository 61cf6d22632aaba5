"""A job stopped by SIGTERM after its platform announced why: the announcement decides
(notices.py). The platforms' own notice words (their docs and code), each through the whole
engine, and the cases where the signal must stay `killed`: no notice, a notice that names a
resource, a job whose own error decides, and a notice with no SIGTERM after it."""
from __future__ import annotations

import pytest

from boxagent.triage import notices
from boxagent.triage.cli import report

SIGTERM_EXIT = 143
WORK = "step 1200 loss 2.31\nstep 1300 loss 2.29\n"


def _cause(tmp_path, text: str, exit_code: int = SIGTERM_EXIT):
    p = tmp_path / "x.log"
    p.write_text(WORK + text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


@pytest.mark.parametrize("line", [
    # AWS: the two-minute Spot interruption notice, as a termination handler logs it
    "2025-03-31T16:32:36Z WARN spot-handler: received Spot Instance interruption notice, draining",
    "node-termination-handler: Spot interruption warning for i-0abc12: shutting down in 2m",
    # Google Compute Engine: the preemption notice is an ACPI G2 soft off (systemd-logind)
    "Dec 17 16:04:09 gpu-1 systemd-logind[612]: Power key pressed.",
    "maintenance-event: TERMINATE_ON_HOST_MAINTENANCE",
    "watcher: instance/preempted = TRUE: preemption in progress",
    # Azure Scheduled Events (Spot eviction), Kubernetes scheduler preemption
    "scheduled-events: {\"EventType\": \"Preempt\", \"ResourceType\": \"VirtualMachine\"}",
    "Warning  Preempted  pod/train-0  Preempted by default/high-prio-job on node gpu-7",
    # a handler's own wording of the two-minute notice, and a spot VM reclaimed
    "WARNING: spot instance will be terminated in 2 minutes (instance-action: terminate)",
    "node-agent: this Spot VM is being reclaimed by the provider",
    # SkyPilot's managed-job controller
    "I 05-04 00:52:46 controller.py:100] The cluster is preempted.",
])
def test_a_sigterm_the_platform_announced_is_preemption(tmp_path, line):
    c = _cause(tmp_path, line + "\nTerminated\n")
    assert c["class"] == "preempted", c
    if any(e.startswith("the log's notice: ") for e in c["evidence"]):
        # read as a notice (no vocabulary row holds the words): a word family, so not certain
        assert c["confidence"] == "medium" and c["runner_up"] == "killed", c
    else:       # a vocabulary row read from the platform's source holds them: its verdict
        assert c["confidence"] == "high", c


def test_words_no_row_holds_are_read_as_a_notice(tmp_path):
    c = _cause(tmp_path, "spot-handler: received Spot Instance interruption notice, draining\n")
    assert c["class"] == "preempted" and c["confidence"] == "medium", c
    assert c["evidence"][0].startswith("the log's notice: spot-handler"), c


def test_slurms_plain_cancel_line_is_a_cancel(tmp_path):
    c = _cause(tmp_path, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
               "slurmstepd: error: *** JOB 4411 ON gpu-a03 CANCELLED AT 2025-02-13T15:47:35 ***\n")
    assert c["class"] == "cancelled" and c["runner_up"] == "killed", c


def test_a_slurm_cancel_with_a_reason_is_read_for_the_reason(tmp_path):
    c = _cause(tmp_path, "slurmstepd: error: *** JOB 77 ON n14 CANCELLED AT 2024-06-11T14:03:55 "
               "DUE TO PREEMPTION ***\n")
    assert c["class"] == "preempted", c


@pytest.mark.parametrize("text", [
    "Terminated\n",                                                      # nothing said why
    "read(): interrupted system call, retrying\nTerminated\n",           # EINTR is no notice
    "Warning  Evicted  The node was low on resource: memory. Container was using 61Gi.\n",
    "  Compute Preemption:                            Yes\nTerminated\n",        # deviceQuery
    "spot interruption handler installed (polling every 5s)\nTerminated\n",
])
def test_a_sigterm_with_no_notice_stays_killed(tmp_path, text):
    assert _cause(tmp_path, text)["class"] == "killed"


def test_a_notice_never_overrides_the_jobs_own_error(tmp_path):
    c = _cause(tmp_path, "Spot instance interruption notice received\nTraceback (most recent "
               "call last):\n  File \"t.py\", line 3, in <module>\ntorch.OutOfMemoryError: CUDA "
               "out of memory. Tried to allocate 2.00 GiB\n")
    assert c["class"] != "preempted", c


def test_a_notice_without_a_sigterm_changes_nothing(tmp_path):
    c = _cause(tmp_path, "The cluster is preempted or failed.\nERROR: job failed\n", exit_code=1)
    assert c["class"] != "cancelled"
    c = _cause(tmp_path, "fetching spot interruption notice: 404\n", exit_code=0)
    assert c is None


def test_the_latest_notice_in_the_last_lines_is_the_one_read():
    lines = ["Spot interruption warning"] + ["x"] * (notices.LOOK_BACK + 5)
    assert notices.notice(lines) is None
    found = notices.notice(["*** JOB 1 ON n CANCELLED AT 2025-01-01T00:00:00 ***",
                            "The cluster is preempted."])
    assert found is not None and found[0] == "preempted" and found[1] == 1


@pytest.mark.parametrize("code,sig", [(247, "SIGKILL"), (241, "SIGTERM")])
def test_a_launchers_sys_exit_of_a_negative_returncode_is_the_childs_signal(code, sig):
    from boxagent.triage import evidence as E
    name, how = E.signal_of({"exit_code": code})
    assert name == sig and "256 - " in how


def test_other_high_statuses_are_no_signal():
    from boxagent.triage import evidence as E
    assert E.signal_of({"exit_code": 255}) == (None, None)
    assert E.signal_of({"exit_code": 250}) == (None, None)


def test_a_deepspeed_style_exit_247_is_read_as_a_sigkill(tmp_path):
    c = _cause(tmp_path, "[INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266\n",
               exit_code=247)
    assert c["class"] in ("cgroup_oom", "killed") and c["confidence"] == "low", c
    assert any("256 - 9" in e for e in c["evidence"]), c


def test_a_hard_stop_after_the_notice_is_preemption_too(tmp_path):
    # the VM went away after its two minutes: SIGKILL, bash's "Killed", no OOM words
    c = _cause(tmp_path, "spot-handler: received Spot Instance interruption notice, draining\n"
               "Killed\n", exit_code=137)
    assert c["class"] == "preempted", c


def test_the_oom_killers_own_words_still_decide_a_sigkill(tmp_path):
    c = _cause(tmp_path, "spot-handler: received Spot Instance interruption notice, draining\n"
               "[ 812.1] Out of memory: Killed process 4121 (python) total-vm:81234567kB\n",
               exit_code=137)
    assert c["class"] == "cgroup_oom", c


def test_a_kubelet_eviction_for_a_node_condition_names_its_sender(tmp_path):
    c = _cause(tmp_path, "Warning  Evicted  kubelet  The node had condition: [DiskPressure].\n",
               exit_code=137)
    assert c["class"] == "disk_full", c


def test_a_memory_supervisors_sigterm_is_memory(tmp_path):
    # earlyoom (main.c, kill.c) sends SIGTERM first: its own line says why, as a notice does
    c = _cause(tmp_path, "earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%\n"
               "earlyoom[845]: sending SIGTERM to process 4012 uid 1000 \"python3\": oom_score 1282\n")
    assert c["class"] == "cgroup_oom", c
