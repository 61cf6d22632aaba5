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
