"""An exception line with its message but no traceback near it (a paste of the last line, a
framework printing only type and message) is the job's own error: code_error with the line as
evidence, never a bare exit code. Far from the end it is not the failure."""
from __future__ import annotations

import pytest

from boxagent.triage import tailread
from boxagent.triage.cli import report


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


@pytest.mark.parametrize("line", [
    "UnimplementedError (see above for traceback): File system scheme 'hdfs' not implemented",
    "tensorflow.python.framework.errors_impl.FailedPreconditionError: Attempting to use "
    "uninitialized value conv1/weights",
    "SchemaValidationException: field 'id' is required",
])
def test_a_bare_exception_line_at_the_end_is_the_jobs_error(tmp_path, line):
    c = _cause(tmp_path, "step 10\n" + line + "\n\t [[Node: save/RestoreV2]]\n")
    assert c["class"] == "code_error" and line[:40] in c["decided_by"], c


def test_a_bare_exception_line_far_above_the_end_is_not_the_failure():
    lines = ["ValueError: retried, fine"] + ["step %d" % i for i in range(20)]
    assert tailread.native_error(lines) is None


def test_a_metric_named_like_an_error_is_no_exception():
    assert tailread.native_error(["epoch 3", "MeanSquaredError: 0.0512"]) is None


def test_a_launchers_report_is_no_bare_exception():
    assert tailread.native_error(["subprocess.CalledProcessError: Command '['python', 't.py']' "
                                  "returned non-zero exit status 1."]) is None


@pytest.mark.parametrize("line", [
    "##[error]The job exceeded the maximum allowed time of 00:30:00 and was stopped.",
    "worker: Task's current input in-01HZ hit its timeout of 600s",
    "ERROR: the run has exceeded its wall time of 4h and was stopped by the scheduler",
    "job 981 reached its time limit (24:00:00) and was terminated",
])
def test_a_platform_time_limit_in_its_own_words_is_a_timeout(tmp_path, line):
    c = _cause(tmp_path, "step 10\n" + line + "\n")
    assert c["class"] == "timeout", c


@pytest.mark.parametrize("line", [
    "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='hf.co', port=443): Read timed "
    "out. (read timeout=10)",
    "Error: rpc error: code = DeadlineExceeded desc = context deadline exceeded",
    "RuntimeError: memory usage exceeded the limit of 16 GiB",
])
def test_a_network_wait_or_another_limit_is_no_time_limit(tmp_path, line):
    assert _cause(tmp_path, "step 10\n" + line + "\n")["class"] != "timeout"


def test_the_family_words_alone_are_not_certain(tmp_path):
    c = _cause(tmp_path, "step 10\nERROR: the run has exceeded its wall time of 4h\n")
    assert c["class"] == "timeout" and c["confidence"] == "medium", c


MEGATRON_CASE = "wave4/cases/divergence/b-megatron-ds-396-grad-norm-nan-no-loss.log"


def test_a_nan_gradient_norm_in_megatrons_spelling_warns_on_a_run_that_exits_0(tmp_path):
    # in an engine without the Megatron row that case led to: the built-in spelling alone
    import json
    import os
    import subprocess
    import sys
    from boxagent.triage import vocab
    p = tmp_path / "x.log"
    p.write_text("".join(" iteration %5d/  250000 | learning rate: 2.999E-04 | loss scale: 1.0 | "
                         "grad norm: nan | actual seqlen:  2048 |\n" % i for i in range(1, 6)),
                 encoding="utf-8")
    code = ("import json, sys; from boxagent.triage.cli import report; "
            "r = report(sys.argv[1], 0, [], 'auto', None, probe_disks=False); "
            "print(json.dumps([r['cause'], [str(w) for w in r['warnings']]]))")
    env = dict(os.environ, **{vocab.HOLD_OUT_ENV: MEGATRON_CASE})
    out = subprocess.run([sys.executable, "-c", code, str(p)], env=env, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True)
    cause, warnings = json.loads(out.stdout)
    assert cause is None and any("nan" in w.lower() for w in warnings), (cause, warnings)


def test_a_finite_gradient_norm_in_megatrons_spelling_does_not_warn(tmp_path):
    p = tmp_path / "x.log"
    p.write_text(" iteration 10/ 100 | grad norm: 1.234 | loss scale: 1.0 |\n", encoding="utf-8")
    rep = report(str(p), 0, [], "auto", None, probe_disks=False)
    assert rep["cause"] is None and not rep["warnings"], rep


@pytest.mark.parametrize("line", [
    "OSError: image file is truncated (27 bytes not processed)",                  # PIL
    "OSError: Unable to open file (Truncated file: eof = 1503, sblock->base_addr = 0, "
    "stored_eoa = 1580)",                                                           # h5py 2
    "RuntimeError: checkpoint shard 3 is a truncated archive: re-download it",
])
def test_a_file_cut_short_in_any_readers_words_is_truncated(tmp_path, line):
    c = _cause(tmp_path, "Traceback (most recent call last):\n  File \"t.py\", line 3, in "
               "<module>\n" + line + "\n")
    assert c["class"] == "truncated_checkpoint", c


def test_a_shell_scripts_unexpected_end_is_no_truncated_file(tmp_path):
    c = _cause(tmp_path, "run.sh: line 40: syntax error: unexpected end of file\n", 2)
    assert c["class"] != "truncated_checkpoint", c


def test_sruns_report_of_a_task_killed_reads_like_bashs_killed(tmp_path):
    c = _cause(tmp_path, "epoch 3 step 900\nsrun: error: gpu-a07: task 0: Killed\n"
               "srun: launch/slurm: _step_signal: Terminating StepId=4411.0\n", 1)
    assert c["class"] == "cgroup_oom" and c["confidence"] == "low", c
