"""Rows read from the sources of ecosystems the field corpus holds no case of: AMD ROCm/HIP,
Intel XPU (Level Zero, SYCL/UR) and Gaudi, OpenCL/Vulkan, Huawei Ascend (CANN, torch_npu, HCCL), NVIDIA's system layer
(DCGM, fabric manager, NVML), MPI and the fabrics (Open MPI, UCX, verbs, EFA), object stores
and tracking servers (S3, GCS, Azure Blob, MLflow, git-lfs), CUDA extensions built at run
time, and the LLM stacks' memory words. Each message is the source's own string; each goes
through the whole engine (report), inside a log around it, and decides its class; printed in
passing by a run that exits 0, it calls nothing a failure."""
from __future__ import annotations

import pytest

from boxagent.triage import vocab
from boxagent.triage.cli import report
from boxagent.triage.vocab import (ascend, batchsys, c10dstore, cudarelay, extbuild, gaudi, gpuapis, llmstacks,
                                   media, mounts, mpi, nogpu, nvsystem, rocm, storage, transfer,
                                   tritonrt, xpu)
from boxagent.triage.vocab.spelling import forms

MODULES = (rocm, xpu, gaudi, ascend, gpuapis, nvsystem, nogpu, mpi, c10dstore, storage, mounts, transfer, extbuild,
           tritonrt, cudarelay, llmstacks, media,
           batchsys)
ROWS = [(m.__name__.rsplit(".", 1)[1], r) for m in MODULES for r in m.ROWS]
IDS = ["%s:%s" % (name, r.pattern[:40]) for name, r in ROWS]

BEFORE = ("[2025-03-02 10:00:01] INFO starting run on 8 devices\n"
          "epoch 1 step 10/500 loss 2.3141 lr 1.0e-04\n"
          "epoch 1 step 20/500 loss 2.2017 lr 1.0e-04\n")


def _cause(tmp_path, text: str, exit_code: int):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "python", None, probe_disks=False)["cause"]


def test_the_new_tables_are_registered():
    names = [n for n, _ in vocab.TABLES]
    for m in MODULES:
        assert m.__name__.rsplit(".", 1)[1] in names
    # read from sources, not from field cases: no row names a case it was fitted to
    assert all(not r.found_via for _, r in ROWS)


@pytest.mark.parametrize("name,row", ROWS, ids=IDS)
def test_the_sources_message_at_a_failed_runs_end_decides_its_class(tmp_path, name, row):
    cause = _cause(tmp_path, BEFORE + "Traceback (most recent call last):\n"
                   "  File \"train.py\", line 88, in <module>\n" + row.example + "\n", 1)
    assert cause is not None and cause["class"] == row.cls, (name, row.example, cause)
    # the evidence names the row's source
    assert vocab.row_for(row.example, row.cls) is not None


@pytest.mark.parametrize("name,row", ROWS, ids=IDS)
def test_the_message_in_passing_in_a_run_that_exits_0_is_no_failure(tmp_path, name, row):
    text = BEFORE + row.example + "\n" + "epoch 2 step 500/500 loss 1.0203\nTraining finished.\n"
    assert _cause(tmp_path, text, 0) is None


@pytest.mark.parametrize("line,cls", [
    # the same allocator failure on four vendors' GPUs is one class
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.10 GiB of which 1.06 GiB is free.", "cuda_oom"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 191.98 GiB of which 1.06 GiB is free.", "cuda_oom"),
    ("torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 64.00 GiB.", "cuda_oom"),
    ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total "
     "capacity; 58.10 GiB already allocated; 1.01 GiB free)", "cuda_oom"),
    # the same missing kernel image for the GPU's architecture
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device",
     "torch_arch_mismatch"),
    ("RuntimeError: HIP error: invalid device function\nHIP kernel errors might be asynchronously "
     "reported at some other API call, so the stacktrace below might be incorrect.",
     "torch_arch_mismatch"),
])
def test_one_failure_on_every_accelerator_is_one_class(tmp_path, line, cls):
    assert _cause(tmp_path, BEFORE + line + "\n", 1)["class"] == cls


def test_an_extension_built_for_another_torch_is_an_install_failure_whatever_the_package(tmp_path):
    for so in ("flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so",
               "xformers/_C.so", "vllm/_C.abi3.so", "apex_C.cpython-311-x86_64-linux-gnu.so"):
        for sym in ("_ZN3c104cuda9SetDeviceEi", "_ZN2at4_ops5zeros4callEN3c108ArrayRefIlEE",
                    "_ZN5torch3jit17parseSchemaOrNameERKSs"):
            line = "ImportError: /env/lib/python3.10/site-packages/%s: undefined symbol: %s" % (so, sym)
            cause = _cause(tmp_path, BEFORE + line + "\n", 1)
            assert cause["class"] == "code_error", line
            assert "failed to install" in cause["remediation"], cause["remediation"]
    # a symbol of the job's own library is not torch's ABI
    line = "ImportError: /app/libmine.so: undefined symbol: _ZN4mine3fooEv"
    cause = _cause(tmp_path, BEFORE + line + "\n", 1)
    assert "failed to install" not in (cause or {}).get("remediation", "")


def test_a_rank_killed_by_signal_9_under_mpirun_reads_as_memory_but_not_certainly(tmp_path):
    text = BEFORE + ("-" * 74 + "\nmpirun noticed that process rank 5 with PID 0 on node gpu-7 exited "
                     "on signal 9 (Killed).\n" + "-" * 74 + "\n")
    cause = _cause(tmp_path, text, 137)
    assert cause["class"] == "cgroup_oom" and cause["confidence"] != "high", cause
    # a segfault under mpirun is not memory
    text = BEFORE + ("mpirun noticed that process rank 0 with PID 12724 on node vegas12 exited on "
                     "signal 11 (Segmentation fault).\n")
    assert _cause(tmp_path, text, 139)["class"] != "cgroup_oom"


def test_an_object_stores_refusal_and_its_outage_are_told_apart(tmp_path):
    refused = ("botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the "
               "PutObject operation: Access Denied")
    throttled = ("botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the "
                 "PutObject operation (reached max retries: 4): Please reduce your request rate.")
    assert _cause(tmp_path, BEFORE + refused + "\n", 1)["class"] == "code_error"
    assert _cause(tmp_path, BEFORE + throttled + "\n", 1)["class"] == "network_transient"


@pytest.mark.parametrize("code,cls", [("7", "nccl"), ("9", "nccl"), ("11", "nccl"), ("19", "nccl"),
                                      ("1", "code_error"), ("5", "code_error"), ("24", "cuda_oom")])
def test_hccls_result_code_decides_as_nccls_would(tmp_path, code, cls):
    """HcclResult (hccl_types.h): a timeout or a connect/transfer failure is the collective's,
    a parameter error the job's call, HCCL_E_OOM device memory."""
    line = ("RuntimeError: createHCCLComm:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1508 "
            "HCCL function error: HcclGetRootInfo(&hcclID), error code is %s" % code)
    assert _cause(tmp_path, BEFORE + line + "\n", 1)["class"] == cls


def test_ascends_generic_inner_error_code_is_not_read_as_a_cause(tmp_path):
    """EZ9999/EE9999 name no cause (CANN's "Inner Error"): no row decides from them."""
    for code in ("EZ9999", "EE9999", "EH9999"):
        line = "[ERROR] RUNTIME(1234,python):2025-01-01-00:00:00.000.000 %s: Inner Error!" % code
        assert vocab.row_for(line) is None, code


@pytest.mark.parametrize("seen", [
    "2025-01-01 00:00:00.000000: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] "
    "failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
    "/env/lib/python3.10/site-packages/torch/cuda/__init__.py:118: UserWarning: CUDA initialization: "
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx (Triggered internally at "
    "../c10/cuda/CUDAFunctions.cpp:108.)",
])
def test_a_cpu_run_that_notes_no_gpu_and_fails_otherwise_is_not_the_gpus_fault(tmp_path, seen):
    failed = (seen + "\n" + BEFORE + "Traceback (most recent call last):\n  File \"train.py\", line "
              "9, in <module>\nKeyError: 'label'\n")
    assert _cause(tmp_path, failed, 1)["class"] == "code_error"
    for exit_code in (0, None):          # None: a live log whose process has not ended
        assert _cause(tmp_path, seen + "\n" + BEFORE + "done\n", exit_code) is None
    # the fatal forms of the same words are the GPU not reachable
    fatal = "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU"
    assert _cause(tmp_path, BEFORE + fatal + "\n", 1)["class"] == "driver_too_old"


@pytest.mark.parametrize("line,cls", [
    # CUDA's device memory under a C++ bad_alloc that Python shows as MemoryError (RMM, XGBoost)
    ("MemoryError: std::bad_alloc: out_of_memory: CUDA error at: /rmm/include/rmm/mr/device/"
     "cuda_memory_resource.hpp:70: cudaErrorMemoryAllocation out of memory", "cuda_oom"),
    ("xgboost.core.XGBoostError: [10:00:00] ../src/common/device_helpers.cuh:431: Memory allocation "
     "error on worker 0: std::bad_alloc: cudaErrorMemoryAllocation: out of memory", "cuda_oom"),
    ("pyopencl._cl.MemoryError: clEnqueueNDRangeKernel failed: MEM_OBJECT_ALLOCATION_FAILURE",
     "cuda_oom"),
    # ... while the host's MemoryError and bad_alloc stay the host's
    ("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.00 GiB for an array with "
     "shape (1000, 1000, 400) and data type float64", "cgroup_oom"),
    ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc",
     "cgroup_oom"),
])
def test_device_memory_under_a_host_exceptions_name_is_the_devices(tmp_path, line, cls):
    assert _cause(tmp_path, BEFORE + line + "\n", 1)["class"] == cls


@pytest.mark.parametrize("spec", mounts.MOUNT_ERRNOS, ids=[m[2] for m in mounts.MOUNT_ERRNOS])
def test_a_mount_going_away_decides_its_class_in_every_spelling(tmp_path, spec):
    """glibc's, Go's (gcsfuse, rclone), CPython's, Rust's, Node's and the JVM's forms of a
    stale handle or a dead FUSE mount are one class."""
    cls, num, name, msg, kind = spec
    for line in forms(num, name, msg, kind):
        assert _cause(tmp_path, BEFORE + line + "\n", 1)["class"] == cls, line


def test_a_dead_mount_is_storage_but_the_same_errno_in_a_collective_is_the_collectives(tmp_path):
    mount = "OSError: [Errno 107] Transport endpoint is not connected: '/mnt/gcs/data/shard-0001.tar'"
    gloo = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error "
            "[10.0.0.2]:35122: Transport endpoint is not connected")
    assert _cause(tmp_path, BEFORE + mount + "\n", 1)["class"] == "network_transient"
    assert _cause(tmp_path, BEFORE + gloo + "\n", 1)["class"] == "nccl"


def test_every_rows_keywords_are_whole_literals():
    """A keyword is a literal of at least anchors.MIN_SUFFIX characters: a bare string passed
    where the tuple goes would become one keyword per letter, every line a candidate, and the
    prefilter's passes start on common letters (it happened once, to a row of this wave)."""
    from boxagent.triage.anchors import MIN_SUFFIX
    for name, mod in vocab.TABLES:
        for r in mod.ROWS:
            assert isinstance(r.keywords, tuple) and r.keywords, (name, r.pattern)
            assert all(len(k) >= MIN_SUFFIX for k in r.keywords), (name, r.keywords)
            assert isinstance(r.definitive, bool) and isinstance(r.emitter, (str, type(None)))
