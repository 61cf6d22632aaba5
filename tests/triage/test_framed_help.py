"""A help message framed by Open MPI's rules (opal/util/show_help.c and PRRTE's show_help
print each message between two lines of exactly 74 dashes) at the end of a failed log is the
launcher's own error: its first sentence decides, as a tool's `Error:` line would. A warning
block, mpirun's report of a failed rank, or torchrun's report (60-dash rules) is none, and an
exit-0 run that printed one decides nothing."""
from __future__ import annotations

import pytest

from boxagent.triage import tailread
from boxagent.triage.cli import report

RULE = "-" * 74


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


def _framed(body: str, closed: bool = True) -> str:
    return RULE + "\n" + body + ("\n" + RULE + "\n" if closed else "\n")


# Open MPI 4.1 (mpirun, mpiexec) and 5.0's PRRTE (prterun) help texts, in their own words
NOT_FOUND = ("%s was unable to find the specified executable file, and therefore\n"
             "did not launch the job.  This error was first reported for process\n"
             "rank 0; it may have occurred for other processes as well.\n\n"
             "NOTE: A common cause for this error is misspelling a %s command\n"
             "      line parameter option (remember that %s interprets the first\n"
             "      unrecognized command line token as the executable).\n\n"
             "Node:       gpu-1\nExecutable: train.py")
AS_ROOT = ("%s has detected an attempt to run as root.\n\n"
           "Running as root is *strongly* discouraged as any mistake (e.g., in\n"
           "defining TMPDIR) or bug can result in catastrophic damage to the OS\n"
           "file system, leaving your system in an unusable state.\n\n"
           "We strongly suggest that you run %s as a non-root user.\n\n"
           "You can override this protection by adding the --allow-run-as-root option\n"
           "to the cmd line or by setting two environment variables in the following way:\n"
           "the variable OMPI_ALLOW_RUN_AS_ROOT=1 to allow running as root")
SLOTS = ("There are not enough slots available in the system to satisfy the 4\n"
         "slots that were requested by the application:\n\n  python3\n\n"
         "Either request fewer slots for your application, or make more slots\n"
         "available for use.")


@pytest.mark.parametrize("tool", ["mpirun", "mpiexec", "prterun"])
@pytest.mark.parametrize("text,first", [(NOT_FOUND, "was unable to find the specified executable "
                                         "file, and therefore did not launch the job."),
                                        (AS_ROOT, "has detected an attempt to run as root.")])
@pytest.mark.parametrize("closed", [True, False])
def test_mpiruns_refusal_to_launch_is_the_jobs_error(tmp_path, tool, text, first, closed):
    body = text.replace("%s", tool)
    c = _cause(tmp_path, "$ %s -np 2 train.py\n" % tool + _framed(body, closed))
    assert c["class"] == "code_error", c
    assert (tool + " " + first) in c["summary"], c


def test_a_closed_block_followed_by_the_aggregation_hint_still_decides(tmp_path):
    text = _framed(NOT_FOUND.replace("%s", "mpirun")) + (
        "[gpu-1:01234] 1 more process has sent help message help-orterun.txt / "
        "orterun:executable-not-found\n[gpu-1:01234] Set MCA parameter "
        "\"orte_base_help_aggregate\" to 0 to see all help / error messages\n")
    assert _cause(tmp_path, text)["class"] == "code_error"


def test_the_same_help_message_in_a_run_that_ended_0_decides_nothing(tmp_path):
    assert _cause(tmp_path, _framed(AS_ROOT.replace("%s", "mpirun")), exit_code=0) is None


@pytest.mark.parametrize("body", [
    # Open MPI 4.1 opal/mca/btl/openib/help-mpi-btl-openib.txt: a warning, the run goes on
    "WARNING: There was an error initializing an OpenFabrics device.\n\n"
    "  Local host:   gpu-1\n  Local device: mlx5_0",
    # orte/tools/orterun/help-orterun.txt: mpirun's report of a rank that failed
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.",
])
def test_a_warning_block_or_mpiruns_report_of_a_rank_is_no_error(body):
    assert tailread.native_error(_framed(body).splitlines()) is None


def test_torchruns_sixty_dash_report_is_no_open_mpi_help_message():
    rule = "-" * 60
    lines = [rule, "Root Cause (first observed failure):", "[0]:", "  exitcode  : 1 (pid: 42)", rule]
    assert tailread.native_error(lines) is None


def test_an_open_mpi_block_far_above_the_end_is_not_the_failure():
    lines = _framed(SLOTS).splitlines() + ["step %d" % i for i in range(20)]
    assert tailread.native_error(lines) is None
