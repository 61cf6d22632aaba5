"""How sure a cause is, the fact that decided it, and what a person sees of both: the cause
the agent gives (confidence, runner_up, tell_apart, decided_by_fact), the triage command's
text, `status`, patrol's one line and the phone message."""
from __future__ import annotations

from boxagent.notify.messages import render_event
from boxagent.triage import diagnose
from boxagent.triage.cli import render_text
from rgt_client.status.render_run import run_line, stage_lines
from tests.triage.conftest import watch_file

TB = "Traceback (most recent call last):\n  File \"train.py\", line 41, in <module>\n    main()\n"


def _cause(tmp_path, text, **facts):
    p = tmp_path / "stage.log"
    p.write_text(text)
    f = watch_file(p).facts()
    f.update(facts)
    return diagnose(f)


def _disk(path, b, i=5.0, role="workdir"):
    return {"path": path, "role": role, "bytes_used_pct": b, "inodes_used_pct": i}


# -- high only where the evidence is unambiguous
def test_a_vocabulary_line_naming_the_class_is_high(tmp_path):
    # pytorch's CUDA caching allocator; bash's CR-quoting (two unrelated vocabularies)
    oom = TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    crlf = "run.sh: line 3: $'\\r': command not found\n"
    for text, cls in ((oom, "cuda_oom"), (crlf, "crlf_script")):
        c = _cause(tmp_path, text, exit_code=1)
        assert c["class"] == cls and c["confidence"] == "high", c
        assert "runner_up" not in c and "tell_apart" not in c


def test_a_box_fact_is_high_and_names_itself(tmp_path):
    c = _cause(tmp_path, "epoch 1\nKilled\n", exit_code=137, oom_kill_delta=1)
    assert c["class"] == "cgroup_oom" and c["confidence"] == "high"
    assert c["decided_by_fact"] == "cgroup oom_kill counter +1 during the stage"
    c = _cause(tmp_path, "working\n", exit_code=1, boot_changed=True)
    assert c["class"] == "machine_restart" and c["decided_by_fact"] == "boot_id changed while the stage ran"


def test_a_cuda_error_in_a_generic_exception_is_medium_with_the_gpu_as_runner_up(tmp_path):
    # torch's c10 CUDA_CHECK wording: the code or the GPU (an Xid tells)
    for err in ("RuntimeError: CUDA error: an illegal memory access was encountered",
                "RuntimeError: CUDA error: unspecified launch failure"):
        c = _cause(tmp_path, TB + err + "\n", exit_code=1)
        assert c["class"] == "code_error" and c["confidence"] == "medium", c
        assert c["runner_up"] == "gpu_hardware" and "xid" in c["tell_apart"].lower()


def test_enospc_without_the_filesystem_is_medium_with_inodes_as_runner_up(tmp_path):
    # errno ENOSPC from Python's io and from GNU coreutils' cp
    for line in ("OSError: [Errno 28] No space left on device: '/data/ckpt.pt'",
                 "cp: error writing '/data/shard_9.tar': No space left on device"):
        c = _cause(tmp_path, line + "\n", exit_code=1, offline=True)
        assert c["class"] == "disk_full" and c["confidence"] == "medium", c
        assert c["runner_up"] == "inodes_full" and "df -i" in c["tell_apart"]
    c = _cause(tmp_path, "OSError: [Errno 28] No space left on device: '/data/ckpt.pt'\n",
               exit_code=1, disks=[_disk("/data", 100.0)])
    assert c["confidence"] == "high"


# -- issue: with no cgroup, an unexplained SIGKILL is a guess, not a fact
def test_an_unexplained_sigkill_on_a_box_with_no_cgroup_stays_killed(tmp_path):
    for text, ec in (("epoch 3/10\nKilled\n", 137), ("epoch 3/10\n", -9)):
        c = _cause(tmp_path, text, exit_code=ec, oom_kill_delta=None, cgroup_version=None)
        assert c["class"] == "killed" and c["confidence"] == "low", c
        assert c["runner_up"] == "cgroup_oom" and "dmesg -T | grep -i -e oom" in c["tell_apart"]
        assert "decided_by_fact" not in c
        # patrol's one line says it is a guess
        run = {"name": "r1", "state": "failed", "stages": [{"name": "train", "state": "failed",
                                                             "cause": c}]}
        line = run_line(run)
        assert "killed (a guess, maybe cgroup_oom)" in line, line


def test_a_kernel_oom_line_is_the_oom_killer_whatever_the_counter(tmp_path):
    # linux mm/oom_kill.c; slurmstepd's task/cgroup plugin
    for line in ("Out of memory: Killed process 4182 (python) total-vm:81234kB",
                 "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.batch."):
        c = _cause(tmp_path, "epoch 2\n" + line + "\n", exit_code=137)
        assert c["class"] == "cgroup_oom" and c["confidence"] == "high", c


# -- the box's facts decide where the log is silent or ambiguous
def test_a_silent_stage_on_a_full_workdir_filesystem_is_disk_full(tmp_path):
    c = _cause(tmp_path, "copying shards\n", exit_code=1, workdir="/mnt/scratch/job",
               disks=[_disk("/mnt/scratch", 100.0)])
    assert c["class"] == "disk_full" and c["confidence"] == "high", c
    assert c["decided_by_fact"] == "statvfs /mnt/scratch: 100% of bytes used at the stage's end"
    c = _cause(tmp_path, "copying shards\n", exit_code=1, workdir="/w",
               disks=[_disk("/w", 40.0, 100.0)])
    assert c["class"] == "inodes_full" and "inodes used" in c["decided_by_fact"]
    # another full filesystem (not the workdir's) decides nothing, "/" included
    c = _cause(tmp_path, "copying shards\n", exit_code=1, workdir="/w",
               disks=[_disk("/w", 40.0), _disk("/var/log", 100.0, role="state")])
    assert c["class"] == "nonzero_exit"
    c = _cause(tmp_path, "copying shards\n", exit_code=1, workdir="/mnt/data/job",
               disks=[_disk("/", 100.0, role="state"), _disk("/mnt/data", 40.0, role="data")])
    assert c["class"] == "nonzero_exit"


def test_an_io_error_writing_a_checkpoint_on_a_full_volume_is_disk_full(tmp_path):
    # HDF5 (h5py) and torch's zip writer word a failed write without ENOSPC
    h5 = TB + ("OSError: Unable to create file (unable to open file: name = '/w/ckpt.h5', "
               "errno = 5, error message = 'Input/output error')\n")
    zipw = TB + "RuntimeError: File /w/ckpt.pt cannot be opened.\n"
    for text in (h5, zipw):
        c = _cause(tmp_path, text, exit_code=1, workdir="/w", disks=[_disk("/w", 99.5)])
        assert c["class"] == "disk_full" and "statvfs /w" in c["decided_by_fact"], c
        assert c["decided_by"].startswith("log line 4:")
        # the same error on a volume with room is the code's (or the file system's)
        assert _cause(tmp_path, text, exit_code=1, workdir="/w",
                      disks=[_disk("/w", 30.0)])["class"] == "code_error"


# -- exit 127 names the missing command
def test_python_command_not_found_suggests_python3_or_the_env(tmp_path):
    c = _cause(tmp_path, "run.sh: line 4: python: command not found\n", exit_code=127)
    assert c["class"] == "code_error" and "command not found: python" in c["summary"], c
    assert "python3" in c["remediation"] and "conda activate" in c["remediation"]
    c = _cause(tmp_path, "bash: line 1: torchrun: command not found\n", exit_code=127)
    assert "command not found: torchrun" in c["summary"] and "activate" in c["remediation"]
    c = _cause(tmp_path, "/bin/sh: 1: nvcc: command not found\n", exit_code=127)
    assert "`nvcc` is not installed or not on PATH" in c["remediation"], c


# -- what a person sees
def test_triage_text_status_and_the_phone_show_the_confidence(tmp_path):
    c = _cause(tmp_path, "epoch 3/10\nKilled\n", exit_code=137, oom_kill_delta=None)
    text = render_text({"log": "x.log", "lines": 2, "bytes": 10, "engine": "python", "hits": [],
                        "classes": {}, "cause": c, "warnings": [], "verdict": "failed"})
    assert "  confidence: low: maybe cgroup_oom instead; check `dmesg" in text, text
    st = {"name": "train", "state": "failed", "cause": c}
    shown = "\n".join(stage_lines(st))
    assert "confidence: low: maybe cgroup_oom instead" in shown, shown
    msg = render_event({"type": "stage_failed", "run": "r1", "stage": "train", "cause": c,
                        "severity": "critical"}, "box1")
    assert "Confidence: low (maybe cgroup_oom instead: check `dmesg" in msg.plain(), msg.plain()
    high = _cause(tmp_path, "run.sh: line 3: $'\\r': command not found\n", exit_code=127)
    assert "confidence: high" in "\n".join(stage_lines({"name": "s", "state": "failed",
                                                        "cause": high}))


def test_words_two_failures_share_are_not_high(tmp_path):
    # huggingface_hub: the same words for an unreachable hub and a repo that does not exist
    hub = (TB + "OSError: We couldn't connect to 'https://huggingface.co' to load this file, "
           "couldn't find it in the cached files and it looks like org/modle is not the path "
           "to a directory containing a file named config.json.\n")
    c = _cause(tmp_path, hub, exit_code=1)
    assert c["class"] == "network_transient" and c["confidence"] == "medium", c
    assert c["runner_up"] == "code_error" and "repo id" in c["tell_apart"]
    # torch.load (torch/serialization.py): an UnpicklingError of a whole file of another format
    pick = TB + "_pickle.UnpicklingError: invalid load key, '<'.\n"
    c = _cause(tmp_path, pick, exit_code=1)
    assert c["class"] == "truncated_checkpoint" and c["confidence"] == "medium", c
    cut = TB + "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory\n"
    assert _cause(tmp_path, cut, exit_code=1)["confidence"] == "high"
