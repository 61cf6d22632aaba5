"""Runner-ups that mean something: the class a person would weigh against an uncertain cause,
with a check they can run; `nonzero_exit` is never the runner-up of a crash."""
from __future__ import annotations

from boxagent.triage.cli import report

TB = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    save()\n"


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "python", None, probe_disks=False)["cause"]


def test_a_checkpoint_write_that_cannot_be_opened_has_disk_full_as_runner_up(tmp_path):
    for line in ("RuntimeError: File /w/ckpt.pt cannot be opened.",
                 "OSError: [Errno 5] Input/output error: '/w/ckpt.pt'",
                 "Error: write /w/ckpt.bin: input/output error"):
        c = _cause(tmp_path, TB + line + "\n")
        assert c["class"] == "code_error" and c["runner_up"] == "disk_full", (line, c)
        assert "df -h" in c["tell_apart"]


def test_a_load_that_failed_has_truncated_checkpoint_as_runner_up(tmp_path):
    c = _cause(tmp_path, TB + "RuntimeError: Error(s) in loading state_dict for Net:\n")
    assert c["runner_up"] == "truncated_checkpoint" and "ls -l" in c["tell_apart"], c


def test_pip_finding_no_version_may_be_an_unreachable_index(tmp_path):
    c = _cause(tmp_path, "ERROR: Could not find a version that satisfies the requirement foo==1.0 "
               "(from versions: none)\nERROR: No matching distribution found for foo==1.0\n")
    assert c["class"] == "code_error" and c["runner_up"] == "network_transient", c


def test_a_launcher_report_alone_names_the_childs_own_error_as_runner_up(tmp_path):
    c = _cause(tmp_path, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
               "train.py FAILED\n")
    assert c["class"] == "nonzero_exit" and c["runner_up"] == "code_error", c
    assert "rank" in c["tell_apart"]


def test_a_bare_exit_has_a_runner_up_and_a_check(tmp_path):
    c = _cause(tmp_path, "loading data\nstep 1\n")
    assert c["class"] == "nonzero_exit" and c["runner_up"] == "code_error" and c["tell_apart"], c


def test_a_generic_crash_never_names_nonzero_exit_as_its_runner_up(tmp_path):
    c = _cause(tmp_path, TB + "RuntimeError: one of the variables needed for gradient computation "
               "has been modified by an inplace operation\n")
    assert c["class"] == "code_error" and c.get("runner_up") != "nonzero_exit", c


def test_words_their_source_marks_suggestive_are_never_high(tmp_path):
    for line, cls in (("The job cluster is preempted or failed.", "preempted"),
                      ("nvidia-container-cli: initialization error: nvml error: driver not loaded: "
                       "unknown", "driver_too_old")):
        c = _cause(tmp_path, line + "\n")
        assert c["class"] == cls and c["confidence"] == "medium", c
    c = _cause(tmp_path, "nvidia-container-cli: requirement error: unsatisfied condition: "
               "cuda>=12.8, please update your driver to a newer version\n")
    assert c["class"] == "driver_too_old" and c["confidence"] == "high", c


def test_exit_124_names_a_timeout_wrapper_as_runner_up(tmp_path):
    c = _cause(tmp_path, "step 3/100\n", exit_code=124)
    assert c["class"] == "nonzero_exit" and c["runner_up"] == "timeout", c
