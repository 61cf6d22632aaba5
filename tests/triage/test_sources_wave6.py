"""Families read from the sources that the sixth wave's blind field set (tests/triage/field/
wave6: simulation codes, cryo-EM, protein folding, renderers, RL simulators, graph learning,
RAPIDS/dask, hashcat, FFmpeg) missed: each test writes the source's own message shapes (not a
case's log) into a log, runs the whole engine (report) and checks the class; the look-alikes
that mean something else keep their class."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report

BEFORE = ("[2025-03-02 10:00:01] INFO starting run on 1 device\n"
          "step 100 energy -1.23e5 kJ/mol\n"
          "step 200 energy -1.24e5 kJ/mol\n")


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


# -- the driver's PTX JIT compiler, as cuLinkAddData / cuModuleLoadDataEx hand its log back
@pytest.mark.parametrize("text", [
    # a program printing the driver's message, then the JIT log a few lines below
    "cuLinkAddData(): the provided PTX was compiled with an unsupported toolchain.\n\n"
    "* Device #1: Kernel ./OpenCL/shared.cl link failed. Error Log:\n\n"
    "ptxas application ptx input, line 9; fatal   : Unsupported .version 8.1; current version "
    "is '8.0'\n\n\n\n* Device #1: Kernel ./OpenCL/shared.cl build failed.\n",
    # the JIT log alone (a program that prints only the log it got back)
    "unknown CUDA error when building module log: ptxas application ptx input, line 9; fatal   : "
    "Unsupported .version 8.5; current version is '8.4'\n",
])
def test_the_drivers_ptx_jit_refusing_a_newer_ptx_is_the_driver_too_old(tmp_path, text):
    assert _cause(tmp_path, BEFORE + text)["class"] == "driver_too_old"


def test_a_standalone_ptxas_older_than_the_ptx_stays_the_toolchain(tmp_path):
    # Triton's (or the toolkit's) own ptxas names the file it read: the toolchain is too old
    text = ("ptxas /tmp/tmpb5kq.ptx, line 5; fatal   : Unsupported .version 8.7; current version "
            "is '8.4'\nptxas fatal   : Ptx assembly aborted due to errors\n")
    assert _cause(tmp_path, BEFORE + text)["class"] == "torch_arch_mismatch"


# -- hand-written CUDA checks relaying the runtime's / driver's "out of memory"
@pytest.mark.parametrize("text", [
    "GPUassert: out of memory /home/u/sim/kernel.cu 211\n",
    "CUDA error !!!!! <out of memory> !!!!!\nat CUDA call error code: # 2402\n"
    "Abort(1) on node 0 (rank 0 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) - "
    "process 0\n",
    "Error while calling cudaMalloc(&data, n*sizeof(float)) in file /src/dlib/cuda/gpu_data.cpp:"
    "188. code: 2, reason: out of memory\n",
    # PyCUDA raises the driver's CUDA_ERROR_OUT_OF_MEMORY as its own MemoryError
    "Traceback (most recent call last):\n  File \"refine.py\", line 20, in <module>\n"
    "    d = gpuarray.to_gpu(x)\npycuda._driver.MemoryError: cuMemAlloc failed: out of memory\n",
    # "CUDA by Example"'s HANDLE_ERROR
    "out of memory in /home/u/proj/src/solver.cu at line 77\n",
    # a CUDA error report with its fields one per line
    "CUDA Error:\n    File:       utilities/gpu_vector.cuh\n    Line:       83\n"
    "    Error code: 2\n    Error text: out of memory\n",
    # a C++ CUDA error class whose what() ends in the file and goes on below
    "terminate called after throwing an instance of 'CUDA::error'\n"
    "  what():  /opt/sim/include/mallocMC/pool.hpp(42):\nerror: out of memory\n",
])
def test_a_cuda_checks_out_of_memory_is_the_gpus(tmp_path, text):
    assert _cause(tmp_path, BEFORE + text)["class"] == "cuda_oom"


@pytest.mark.parametrize("text,cls", [
    # the same header whose fields say another CUDA error: the job's own
    ("CUDA Error:\n    File:       main.cu\n    Line:       140\n    Error code: 700\n"
     "    Error text: an illegal memory access was encountered\n", "code_error"),
    # host memory, whatever else the line holds
    ("Traceback (most recent call last):\n  File \"prep.py\", line 3, in <module>\n"
     "    buf = bytearray(n)\nMemoryError\n", "cgroup_oom"),
    ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n",
     "cgroup_oom"),
])
def test_look_alikes_of_a_cuda_out_of_memory_keep_their_class(tmp_path, text, cls):
    assert _cause(tmp_path, BEFORE + text)["class"] == cls


def test_a_cuda_check_printed_in_passing_by_a_run_that_exits_0_is_no_failure(tmp_path):
    text = BEFORE + "GPUassert: out of memory kernel.cu 12 (retrying with a smaller tile)\n" \
        "step 300 energy -1.25e5 kJ/mol\nRun finished.\n"
    assert _cause(tmp_path, text, 0) is None


# -- Blender Cycles: cuew's words for the driver's CUresult, in Cycles' formats
@pytest.mark.parametrize("text,cls", [
    ("Out of memory in cuStreamCreate(&cuda_stream_, CU_STREAM_NON_BLOCKING) "
     "(intern/cycles/device/cuda/queue.cpp:21)\n", "cuda_oom"),
    ("Failed to load CUDA kernel from '/opt/blender-3.2/3.2/scripts/addons/cycles/lib/"
     "kernel_sm_86.cubin' (Unsupported PTX version)\n", "driver_too_old"),
    ("Unsupported PTX version in cuModuleLoadDataEx(&cuModule, cubin_data.c_str(), 0, NULL, NULL) "
     "(intern/cycles/device/cuda/device_impl.cpp:410)\n", "driver_too_old"),
    ("CUDA binary kernel for this graphics card compute capability (3.5) not found.\n",
     "torch_arch_mismatch"),
    ("Failed to load CUDA kernel from '/opt/blender/lib/kernel_sm_30.cubin' (No binary for GPU)\n",
     "torch_arch_mismatch"),
])
def test_cycles_says_the_drivers_result_in_cuews_words(tmp_path, text, cls):
    assert _cause(tmp_path, "Fra:1 Mem:13.28M (Peak 13.59M) | Time:00:00.28 | Syncing\n" + text
                  + "Error: script failed, exiting.\n")["class"] == cls


# -- a molecular dynamics run blowing up, in OpenMM's words
@pytest.mark.parametrize("line", [
    "openmm.OpenMMException: Particle coordinate is NaN.  For more information, see "
    "https://github.com/openmm/openmm/wiki/Frequently-Asked-Questions#nan",
    "Exception: Particle coordinate is nan",
    "ValueError: Energy is NaN.  For more information, see https://github.com/openmm/openmm/wiki/"
    "Frequently-Asked-Questions#nan",
    "ValueError: Particle position is NaN",
])
def test_openmms_non_finite_particles_are_the_run_diverging(tmp_path, line):
    text = BEFORE + "Traceback (most recent call last):\n  File \"run_md.py\", line 138, in run_md\n" \
        "    simulation.step(config[\"num_steps\"])\n" + line + "\n"
    assert _cause(tmp_path, text)["class"] == "divergence"


# -- NumPy writing to a full disk, in its own words
@pytest.mark.parametrize("line,cls", [
    ("OSError: Not enough free space to write 292626432 bytes", "disk_full"),
    ("OSError: 536870912 requested and 0 written", "disk_full"),
])
def test_numpys_short_write_is_the_disk(tmp_path, line, cls):
    text = BEFORE + "Traceback (most recent call last):\n  File \"save.py\", line 9, in <module>\n" \
        "    np.save(fname, frame)\n" + line + "\n"
    assert _cause(tmp_path, text)["class"] == cls


# -- UCX's endpoint errors as its bindings log them
@pytest.mark.parametrize("text", [
    "[1662343841.790321] [gpu12.cluster:3241] UCXPY  DEBUG Error callback for endpoint "
    "0x2b492843d3c8 called with status -6: Destination is unreachable\n"
    "2022-09-04 22:11:08,567 - distributed.worker - INFO - Waiting to connect to:  "
    "ucx://10.3.1.11:8786\n",
    "ucp._libs.exceptions.UCXError: <stream_recv>: Connection reset by remote peer\n",
])
def test_ucx_bindings_reporting_the_peer_gone_is_the_interconnect(tmp_path, text):
    assert _cause(tmp_path, BEFORE + text)["class"] == "nccl"


# -- PyTorch 1.x c10d's socket helpers timing out
def test_c10d_socket_timeout_is_the_ranks_not_meeting(tmp_path):
    text = BEFORE + "Traceback (most recent call last):\n  File \"train_dist.py\", line 171, in " \
        "pad_data\n    dist.all_reduce(num_nodes, dist.ReduceOp.MAX)\n  File \"/opt/conda/lib/" \
        "python3.8/site-packages/torch/distributed/distributed_c10d.py\", line 1285, in all_reduce\n" \
        "    work = default_pg.allreduce([tensor], opts)\nRuntimeError: Socket Timeout\n"
    assert _cause(tmp_path, text)["class"] == "nccl"


# -- PhysX's GPU allocator
def test_physx_failing_to_allocate_device_memory_is_the_gpus(tmp_path):
    text = BEFORE + "+++ Using GPU PhysX\nPhysics Engine: PhysX\nPhysics Device: cuda:0\n" \
        "PxgCudaDeviceMemoryAllocator fail to allocate memory 268435456 bytes!! Result = 2\n"
    assert _cause(tmp_path, text)["class"] == "cuda_oom"


# -- AWS Batch's short form of a host going away, at a SIGKILL's end
def test_aws_batchs_host_terminated_is_a_preemption_not_an_oom(tmp_path):
    text = BEFORE + "Status Reason: Host EC2 Terminated\n"
    cause = _cause(tmp_path, text, 137)
    assert cause["class"] == "preempted"


def test_physx_internal_errors_before_a_segfault_are_the_jobs(tmp_path):
    text = BEFORE + "/buildAgent/work/1/source/gpucommon/include/PxgCudaUtils.h (54) : internal error " \
        ": SynchronizeStreams cuEventRecord failed\n\n/buildAgent/work/1/source/gpunarrowphase/src/" \
        "PxgNarrowphaseCore.cpp (2408) : internal error : memcpy failed fail!\n  700\n\n" \
        "Segmentation fault (core dumped)\n"
    assert _cause(tmp_path, text, 139)["class"] == "code_error"
