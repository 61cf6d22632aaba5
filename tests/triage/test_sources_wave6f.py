"""Families read from the sources that the sixth wave's second blind field set (tests/triage/
field/wave6/f.toml: video generation, image apps, quantisation, RLHF, Mamba, medical imaging)
missed: each test writes the source's own message shapes (not a case's log) into a log, runs
the whole engine (report) and checks the class; the look-alikes that mean something else keep
their class."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report

BEFORE = ("[2025-03-02 10:00:01] INFO starting run on 1 device\n"
          "step 100 loss 0.412\n"
          "step 200 loss 0.398\n")


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


# -- Winsock's numbers as CPython prints them on Windows, whatever the language of the text
@pytest.mark.parametrize("text", [
    # a Chinese Windows: only the number is the same as on an English one
    "Traceback (most recent call last):\n  File \"urllib\\request.py\", line 1348, in do_open\n"
    "  File \"socket.py\", line 833, in create_connection\nTimeoutError: [WinError 10060] "
    "\u7531\u4e8e\u8fde\u63a5\u65b9\u5728\u4e00\u6bb5\u65f6\u95f4\u540e\u6ca1\u6709\u6b63\u786e"
    "\u7b54\u590d\u3002\n",
    # a German one
    "OSError: [WinError 10065] Es wurde ein Socketvorgang f\u00fcr einen nicht erreichbaren Host "
    "ausgef\u00fchrt\n",
    "OSError: [WinError 10051] A socket operation was attempted to an unreachable network\n",
    # the repr a wrapping exception shows, the number first
    "urllib3.exceptions.ProtocolError: ('Connection aborted.', ConnectionAbortedError(10053, "
    "'\u4f60\u7684\u4e3b\u673a\u4e2d\u7684\u8f6f\u4ef6\u4e2d\u6b62\u4e86\u4e00\u4e2a\u5df2\u5efa"
    "\u7acb\u7684\u8fde\u63a5\u3002', None, 10053, None))\n",
])
def test_a_winsock_network_error_in_any_language_is_the_network(tmp_path, text):
    assert _cause(tmp_path, BEFORE + text)["class"] == "network_transient"


@pytest.mark.parametrize("text", [
    # other Windows errors keep their own class: a file held open, a DLL that will not load
    "PermissionError: [WinError 32] The process cannot access the file because it is being "
    "used by another process: 'C:\\\\runs\\\\ckpt.pt'\n",
    "OSError: [WinError 126] The specified module could not be found. Error loading "
    "\"C:\\\\env\\\\lib\\\\site-packages\\\\torch\\\\lib\\\\c10.dll\" or one of its dependencies.\n",
])
def test_a_windows_error_that_is_not_a_socket_is_not_the_network(tmp_path, text):
    assert _cause(tmp_path, BEFORE + text)["class"] != "network_transient"


# -- PyTorch's NCCL watchdog relaying the CUDA error its work check hit
WATCHDOG = ("[rank1]:[E ProcessGroupNCCL.cpp:1182] [Rank 1] NCCL watchdog thread terminated with "
            "exception: CUDA error: %s\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n")
# PyTorch >= 2.3 words it "Process group watchdog" and throws it on as c10::DistBackendError
PG_WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:1423] [PG 0 (default_pg) Rank 0] Process group "
               "watchdog thread terminated with exception: CUDA error: %s\n"
               "Exception raised from c10_cuda_check_implementation at ../c10/cuda/"
               "CUDAException.cpp:43 (most recent call first):\n"
               "terminate called after throwing an instance of 'c10::DistBackendError'\n"
               "  what():  [PG 0 (default_pg) Rank 0] Process group watchdog thread terminated "
               "with exception: CUDA error: %s\n")


@pytest.mark.parametrize("shape", ["watchdog", "pg_watchdog"])
@pytest.mark.parametrize("error, cls", [
    ("an illegal memory access was encountered", "code_error"),
    ("misaligned address", "code_error"),
    ("uncorrectable ECC error encountered", "gpu_hardware"),
    ("out of memory", "cuda_oom"),
])
def test_a_cuda_error_the_nccl_watchdog_relays_is_that_errors_class(tmp_path, shape, error, cls):
    text = WATCHDOG % error if shape == "watchdog" else PG_WATCHDOG % (error, error)
    assert _cause(tmp_path, BEFORE + text, 134)["class"] == cls


@pytest.mark.parametrize("text", [
    # the watchdog relaying a collective that timed out, or NCCL's own error: the collective's
    "[rank0]:[E ProcessGroupNCCL.cpp:1423] [PG 0 Rank 0] Process group watchdog thread terminated "
    "with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, "
    "OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800010 "
    "milliseconds before timing out.\n"
    "terminate called after throwing an instance of 'c10::DistBackendError'\n",
    "[E ProcessGroupNCCL.cpp:475] [Rank 3] NCCL watchdog thread terminated with exception: NCCL "
    "error: remote process exited or there was a network error, NCCL version 2.18.1\n",
])
def test_the_watchdog_relaying_the_collectives_own_failure_stays_nccl(tmp_path, text):
    assert _cause(tmp_path, BEFORE + text, 134)["class"] == "nccl"
