"""Wrappers and second-hand reports as structure: the innermost library words decide; a
library relaying another's failure is read for that failure; NaN under another name is
divergence; a CRLF file read by any interpreter is crlf_script."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report

TB = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    step()\n"


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "python", None, probe_disks=False)["cause"]


def test_ray_task_error_decides_by_the_exception_it_carries(tmp_path):
    text = ("ray.exceptions.RayTaskError(OutOfMemoryError): ray::Trainer.train() (pid=4121, "
            "ip=10.0.0.4)\n" + TB +
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert _cause(tmp_path, text)["class"] == "cuda_oom"


def test_a_dead_ray_worker_alone_names_memory_as_runner_up(tmp_path):
    c = _cause(tmp_path, TB + "ray.exceptions.WorkerCrashedError: The worker died unexpectedly "
               "while executing this task. Check python-core-worker-*.log files for more "
               "information.\n")
    assert c["class"] == "nonzero_exit" and c["runner_up"] == "cgroup_oom", c


@pytest.mark.parametrize("line", [
    "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled system error",
    "tensorflow.python.framework.errors_impl.UnknownError: ncclUnhandledCudaError: Call to CUDA "
    "function failed.",
])
def test_a_wrapper_carrying_an_nccl_result_is_nccl(tmp_path, line):
    assert _cause(tmp_path, TB + line + "\n")["class"] == "nccl"


def test_nccl_relaying_a_cuda_out_of_memory_is_gpu_memory(tmp_path):
    text = ("node1:99:120 [0] include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'\n" + TB +
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n")
    assert _cause(tmp_path, text)["class"] == "cuda_oom"


@pytest.mark.parametrize("text", [
    TB + "AssertionError: tensor([nan, nan, nan], device='cuda:0', grad_fn=<AddBackward0>)\n",
    TB + "AssertionError\n" + "tensor([[nan, nan],\n        [nan, nan]])\n",
    TB + "ValueError: Expected parameter loc (Tensor of shape (64, 2)) of distribution Normal("
         "loc: torch.Size([64, 2])) to satisfy the constraint Real(), but found invalid values:\n"
         "tensor([[nan, nan]])\n",
    TB + "RuntimeError: Loss is not finite: nan\n",
    TB + "ValueError: Input X contains NaN.\n",
])
def test_an_error_whose_payload_is_nan_is_divergence(tmp_path, text):
    c = _cause(tmp_path, text)
    assert c["class"] == "divergence", c


def test_an_ordinary_assertion_stays_the_codes(tmp_path):
    c = _cause(tmp_path, TB + "AssertionError: expected 3 channels, got 4\n")
    assert c["class"] == "code_error"


@pytest.mark.parametrize("line", [
    "/usr/bin/env: 'Rscript\\r': No such file or directory",                 # env, any interpreter
    "/usr/bin/env: ‘julia\\r’: No such file or directory",
    "Fatal error: cannot open file 'train.R\\r': No such file or directory",   # Rscript
    "ERROR: SystemError: opening file \"data.csv\\r\": No such file or directory",   # Julia
    "./run.sh: line 2: $'\\r': command not found",                            # bash
])
def test_crlf_read_by_other_interpreters_is_crlf_script(tmp_path, line):
    assert _cause(tmp_path, line + "\n")["class"] == "crlf_script", line


@pytest.mark.parametrize("line", ["epoch 3 loss=tensor(nan, device='cuda:0', grad_fn=<MeanBackward0>)",
                                  "step 40 | loss: -inf | lr 1e-4"])
def test_an_exit_zero_run_whose_loss_reads_nan_is_a_warning_not_a_failure(tmp_path, line):
    p = tmp_path / "x.log"
    p.write_text("step 1/10\n%s\ndone\n" % line, encoding="utf-8")
    rep = report(str(p), 0, [], "python", None, probe_disks=False)
    assert rep["cause"] is None and any("NaN" in w for w in rep["warnings"]), rep["warnings"]
