"""One library relaying another's failure in that library's own words: the words decide by
who first said them (emitters.py), whichever exception type carries them."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


@pytest.mark.parametrize("line", [
    # a CUDA check macro printing the runtime's string for cudaErrorMemoryAllocation (no row
    # holds the words: the emitter reads them)
    "RuntimeError: [enforce fail at context_gpu.cu:415] error == cudaSuccess. Error at: "
    "context_gpu.cu:415: out of memory",
    "RuntimeError: CHECK failed: cudaMallocAsync(&ptr, bytes, stream): out of memory",
    "ERROR: LoadError: out of memory (cuMemAlloc_v2 returned 2)",
    # torch's memory-fraction refusal as a Rust server relays it in a panic
    "thread 'main' panicked at 'Unable to warmup: Generation(\"Allocation on device 1 would exceed "
    "allowed memory. (out of memory)\nCurrently allocated : 9.1 GiB\nFree (according to CUDA): "
    "3 MiB\")'",
])
def test_out_of_memory_relayed_from_a_cuda_call_is_the_gpus(tmp_path, line):
    c = _cause(tmp_path, "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
               + line + "\n")
    assert c["class"] == "cuda_oom", c


def test_out_of_memory_from_the_host_allocator_stays_host_memory(tmp_path):
    c = _cause(tmp_path, "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
               "RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: "
               "can't allocate memory: you tried to allocate 8589934592 bytes. Error code 12 "
               "(Cannot allocate memory)\n")
    assert c["class"] == "cgroup_oom", c


def test_an_exception_whose_message_is_a_launchers_report_is_looked_through(tmp_path):
    # torch.multiprocessing.spawn before ProcessRaisedException: `raise Exception(msg)` with
    # the message on the next lines; the child's own error above decides, not `Exception:`
    c = _cause(tmp_path, "[rank1] RuntimeError: CUDA error: an illegal memory access was "
               "encountered\nTraceback (most recent call last):\n  File \"train.py\", line 30, in "
               "<module>\n    mp.spawn(main, nprocs=2)\nException:\n\n-- Process 1 terminated "
               "with the following error:\nTraceback (most recent call last):\n")
    assert c["class"] != "code_error" or "illegal memory access" in c["decided_by"], c
    assert "Exception:" not in c["decided_by"], c


def test_an_empty_exception_message_with_no_launcher_after_it_still_decides(tmp_path):
    c = _cause(tmp_path, "Traceback (most recent call last):\n  File \"t.py\", line 3, in "
               "<module>\nValueError:\n")
    assert c["class"] == "code_error" and "ValueError:" in c["decided_by"], c


@pytest.mark.parametrize("line", [
    # Ray's raylet summary (node_manager.cc) and systemd-oomd's kill line (oomd-manager.c)
    "(raylet) node_manager.cc:3064: 3 Workers (tasks / actors) killed due to memory pressure "
    "(OOM), 0 Workers crashed due to other reasons at node (ID: 9f1e, IP: 10.0.0.7)",
    "systemd-oomd[611]: Killed /user.slice/user-1000.slice/session-3.scope due to memory "
    "pressure for /user.slice/user-1000.slice being 71.44% > 50.00% for > 20s with reclaim activity",
    # earlyoom's warning before its kill (main.c), then kill.c's line: the SIGTERM it sends
    # is not the user's
    "earlyoom[845]: low memory! at or below SIGTERM limits: mem 10.00%, swap 10.00%\n"
    "earlyoom[845]: sending SIGTERM to process 4012 uid 1000 \"python\": badness 900, VmRSS 29931 MiB\n"
    "Terminated",
])
def test_a_supervisor_that_killed_for_memory_is_memory_even_with_no_counter_move(tmp_path, line):
    p = tmp_path / "x.log"
    p.write_text("epoch 2 step 400\n" + line + "\n", encoding="utf-8")
    from boxagent.triage import diagnose
    rep = report(str(p), 1, [], "auto", None, probe_disks=False)
    assert rep["cause"]["class"] == "cgroup_oom", rep["cause"]
    # on the box the cgroup counter need not move (the supervisor, not the kernel, killed)
    facts = {"exit_code": 1, "hits": rep["hits"], "last_lines": rep["last_lines"],
             "oom_kill_delta": 0}
    assert diagnose(facts)["class"] == "cgroup_oom"


def test_killed_for_another_reason_is_no_memory_kill(tmp_path):
    c = _cause(tmp_path, "worker 3 killed due to heartbeat timeout after 60s\n")
    assert c["class"] != "cgroup_oom", c


@pytest.mark.parametrize("line", [
    # ncclGetErrorString before NCCL 2.12 (no "(run with NCCL_DEBUG=INFO ...)"), as callers quote it
    "NCCL failure train.cu:88 'unhandled system error'",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/"
    "nccl_utils.cc:297: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: "
    "unhandled cuda error.",
    # and after it
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
    "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
])
def test_ncclgeterrorstring_in_every_versions_spelling_is_nccl(tmp_path, line):
    assert _cause(tmp_path, line + "\n")["class"] == "nccl"


@pytest.mark.parametrize("line", [
    # torch's C10D_NCCL_CHECK around an old NCCL's bare "internal error"
    "RuntimeError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
    "825, internal error, NCCL version 2.7.8",
    # XLA's status around any result
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: nccl_utils.cc:297: NCCL operation "
    "ncclAllReduce(send, recv, n, dtype, op, comm, stream) failed: invalid usage. Last NCCL "
    "warning(error) log entry (may be unrelated) ''.",
])
def test_a_callers_frame_around_an_nccl_result_is_nccl(tmp_path, line):
    assert _cause(tmp_path, line + "\n")["class"] == "nccl"


def test_an_nccl_warn_line_with_its_file_and_line_is_ncclss_own(tmp_path):
    # debug.cc prints "[dev] file:line NCCL WARN ": the only failure line of this tail
    c = _cause(tmp_path, "node3:4411:4502 [1] transport/net_socket.cc:540 NCCL WARN NET/Socket : "
               "peer 10.0.0.4<43117> message truncated : receiving 1048576 bytes instead of 65536\n")
    assert c["class"] == "nccl", c
