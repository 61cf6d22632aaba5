"""Every class, from a realistic log tail, through the daemon's path (StageWatch -> facts ->
diagnose) and the CLI's (scan_file with both engines)."""
from __future__ import annotations

import pytest

from boxagent.triage import diagnose, success_warnings
from boxagent.triage.builtin_rules import CLASS_RANK, TRANSIENT
from boxagent.triage.scanfile import scan_file
from tests.triage.conftest import CORPUS, corpus_facts

X79 = [{"type": "gpu_xid", "code": 79, "gpu": 0, "at": 1.0, "source": "nvml", "hardware": True,
        "summary": "Xid 79 (GPU fell off the bus) on GPU 0"}]

CASES = [
    # corpus file, facts beyond the log, expected class, text the cause must show
    ("cuda_oom__torch2.log", {"exit_code": 1}, "cuda_oom", "log line 15: torch.OutOfMemoryError"),
    ("cuda_oom__lightning.log", {"exit_code": 1}, "cuda_oom", "Tried to allocate 512.00 MiB"),
    ("cgroup_oom__dataloader.log", {"exit_code": 1, "oom_kill_delta": 1}, "cgroup_oom", "oom_kill counter +1"),
    # no cgroup counter on the box: a SIGKILL whose sender nobody saw stays `killed` (the OOM
    # killer named as likely, confidence low); offline the memory killer keeps the class
    ("cgroup_oom__bash_killed.log", {"exit_code": 137, "oom_kill_delta": None}, "killed", "4182 Killed"),
    ("cgroup_oom__bash_killed.log", {"exit_code": 137, "offline": True}, "cgroup_oom", "4182 Killed"),
    ("disk_full__torch_save.log", {"exit_code": 1}, "disk_full", "unexpected pos"),
    ("disk_full__oserror.log", {"exit_code": 1}, "disk_full", "[Errno 28]"),
    ("code_error__keyerror.log", {"exit_code": 1}, "code_error", "KeyError: 'scheduler'"),
    ("code_error__modulenotfound.log", {"exit_code": 1}, "code_error", "No module named 'peft'"),
    ("code_error__argparse.log", {"exit_code": 2}, "code_error", "unrecognized arguments"),
    ("nccl__watchdog.log", {"exit_code": 134}, "nccl", "Watchdog caught collective operation timeout"),
    ("network_transient__hf.log", {"exit_code": 1}, "network_transient", "Max retries exceeded"),
    ("network_transient__wandb.log", {"exit_code": 1}, "network_transient", "CommError"),
    ("gpu_hardware__unspecified_launch.log", {"exit_code": 1, "gpu_faults": X79}, "gpu_hardware",
     "Xid 79"),
    ("gpu_hardware__xid_in_log.log", {"exit_code": 1}, "gpu_hardware", "Xid (PCI:0000:3b:00): 79"),
    ("torch_arch_mismatch.log", {"exit_code": 1}, "torch_arch_mismatch", "no kernel image"),
    ("driver_too_old.log", {"exit_code": 1}, "driver_too_old", "too old"),
    ("truncated_checkpoint.log", {"exit_code": 1}, "truncated_checkpoint", "PytorchStreamReader"),
    ("crlf_script.log", {"exit_code": 127}, "crlf_script", "command not found"),
    ("divergence.log", {"exit_code": 1}, "divergence", "FloatingPointError"),
    ("hangup.log", {"exit_code": 129}, "hangup", "SIGHUP"),
    ("killed__terminated.log", {"exit_code": 143}, "killed", "SIGTERM"),
    ("torchrun_child_failed.log", {"exit_code": 1, "oom_kill_delta": None}, "killed", "exitcode"),
    ("torchrun_child_failed.log", {"exit_code": 1, "oom_kill_delta": 1}, "cgroup_oom", "oom_kill counter +1"),
    ("machine_restart__zero_tail.log", {"boot_changed": True, "vanished": True}, "machine_restart",
     "boot_id changed"),
    ("nonzero_exit__silent.log", {"exit_code": 3}, "nonzero_exit", "exit code 3"),
    # slurmstepd says why it signalled the job (read when Slurm's own record is gone or offline)
    ("timeout__slurm.log", {"signal": 15}, "timeout", "DUE TO TIME LIMIT"),
    ("preempted__slurm.log", {"exit_code": 143}, "preempted", "DUE TO PREEMPTION"),
    ("node_failure__slurm.log", {"signal": 9}, "node_failure", "DUE TO NODE FAILURE"),
    ("cgroup_oom__slurm.log", {"exit_code": 137, "oom_kill_delta": None}, "cgroup_oom", "oom-kill event"),
    ("innocent.log", {"exit_code": 1}, "nonzero_exit", "exit code 1"),
]


def _text(cause):
    return cause["summary"] + "\n" + "\n".join(cause["evidence"])


@pytest.mark.parametrize("name,extra,cls,needle", CASES, ids=[c[0] for c in CASES])
def test_corpus_diagnosis_through_the_stage_watch(name, extra, cls, needle):
    cause = diagnose(corpus_facts(name, **extra))
    assert cause["class"] == cls, cause
    assert needle in _text(cause)
    assert cause["retryable"] is (cls in TRANSIENT)
    assert cause["remediation"]


def test_the_corpus_covers_every_log_class():
    covered = set(c[2] for c in CASES)
    # inodes_full is the same ENOSPC text decided by the filesystem state (test_precedence)
    assert set(CLASS_RANK) - {"inodes_full"} <= covered


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.log")))
def test_both_engines_find_the_same_hits(name):
    py = scan_file(str(CORPUS / name), engine="python")
    gr = scan_file(str(CORPUS / name), engine="grep")
    assert gr["engine"] == "grep"
    assert py["hits"] == gr["hits"]
    assert (py["lines"], py["classes"], py["progress"]) == (gr["lines"], gr["classes"], gr["progress"])


def test_exit_zero_with_an_nccl_error_at_the_end_warns():
    w = success_warnings(corpus_facts("success__nccl_at_end.log", exit_code=0))
    assert any("NCCL" in x and "exited 0" in x for x in w), w


def test_exit_zero_with_a_traceback_after_the_last_progress_line_warns():
    w = success_warnings(corpus_facts("success__traceback_after_progress.log", exit_code=0))
    assert len(w) == 1
    assert "traceback follows the last progress line (line 4)" in w[0]
    assert "AttributeError" in w[0]


def test_innocent_error_words_are_not_a_crash():
    facts = corpus_facts("innocent.log", exit_code=0)
    assert [h for h in facts["hits"] if h["severity"] != "info"] == []
    assert success_warnings(facts) == []
