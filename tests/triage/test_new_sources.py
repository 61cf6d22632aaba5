"""Rows read from the sources of ecosystems the field corpus barely has: every compute
capability NVIDIA documents in the run-time compilers' words, container runtimes, serving
runtimes, CI/Kubernetes/Modal limits, Go's network errors, Ray's exceptions."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report

# CUDA C Programming Guide 12.9, "Compute Capabilities", and the arch-specific (a) and
# family (f) variants of CUDA 12.9
ARCHES = ["50", "52", "53", "60", "61", "62", "70", "72", "75", "80", "86", "87", "89", "90",
          "90a", "100", "100a", "100f", "101", "101a", "103", "103a", "103f", "110", "110a",
          "120", "120a", "120f", "121", "121a"]


def _cls(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text + "\n", encoding="utf-8")
    c = report(str(p), exit_code, [], "python", None, probe_disks=False)["cause"]
    return c and c["class"]


@pytest.mark.parametrize("arch", ARCHES)
def test_every_compute_capability_in_the_compilers_words_is_an_arch_mismatch(tmp_path, arch):
    for line in ("ptxas fatal   : Value 'sm_%s' is not defined for option 'gpu-name'" % arch,
                 "nvcc fatal   : Unsupported gpu architecture 'compute_%s'" % arch,
                 "triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n"
                 "ptxas /tmp/x.ptx, line 5; error   : PTX .version 8.4 does not support .target "
                 "sm_%s" % arch):
        assert _cls(tmp_path, line) == "torch_arch_mismatch", line


@pytest.mark.parametrize("line,cls", [
    ("docker: Error response from daemon: failed to create task for container: failed to create "
     "shim task: OCI runtime create failed: runc create failed: unable to start container process: "
     "error during container init: error running hook #0: error running hook: exit status 1, "
     "stdout: , stderr: Auto-detected mode as 'legacy'\\nnvidia-container-cli: requirement error: "
     "unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an "
     "earlier cuda container: unknown.", "driver_too_old"),
    ("Failed to initialize NVML: Driver/library version mismatch", "driver_too_old"),
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
     "driver_too_old"),
    ("  Warning  Evicted  kubelet  The node was low on resource: ephemeral-storage. Threshold "
     "quantity: 10Gi, available: 2Gi.", "disk_full"),
    ("    Reason:       OOMKilled", "cgroup_oom"),
    ("llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the "
     "file bounds, model is corrupted or incomplete", "truncated_checkpoint"),
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc "
     "failed: out of memory", "cuda_oom"),
    ("[TRT] [E] 6: The engine plan file is generated on an incompatible device, expecting compute "
     "8.9 got compute 12.0, please rebuild.", "torch_arch_mismatch"),
    ("##[error]The job running on runner gpu-runner-3 has exceeded the maximum execution time of "
     "360 minutes.", "timeout"),
    ("##[error]The job running on agent gpu-agent ran longer than the maximum time of 60 minutes.",
     "timeout"),
    ("Warning  DeadlineExceeded  4m  job-controller  Job was active longer than specified deadline",
     "timeout"),
    ("Error: pull model manifest: Get \"https://registry.ollama.ai/v2/library/x/manifests/latest\": "
     "dial tcp: lookup registry.ollama.ai on 127.0.0.53:53: server misbehaving",
     "network_transient"),
    ("Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp "
     "3.94.224.37:443: i/o timeout", "network_transient"),
    ("ray.exceptions.NodeDiedError: Task failed due to the node dying.", "node_failure"),
])
def test_the_new_sources_decide_their_class(tmp_path, line, cls):
    assert _cls(tmp_path, line) == cls


def test_docker_inspect_oomkilled_false_is_no_oom(tmp_path):
    assert _cls(tmp_path, '        "OOMKilled": false,') != "cgroup_oom"


@pytest.mark.parametrize("text,cls", [
    ("Error in library(data.table) : there is no package called 'data.table'\nExecution halted",
     "code_error"),
    ("Error: cannot allocate vector of size 7.5 Gb\nExecution halted", "cgroup_oom"),
    ("ERROR: LoadError: Out of GPU memory trying to allocate 2.000 GiB", "cuda_oom"),
    ("panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:",
     "code_error"),
    ("fatal error: runtime: out of memory", "cgroup_oom"),
    ("thread 'main' panicked at src/main.rs:14:5:\ncalled `Result::unwrap()` on an `Err` value",
     "code_error"),
    ("memory allocation of 8589934592 bytes failed", "cgroup_oom"),
    ("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
     "cgroup_oom"),
    ("Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space", "cgroup_oom"),
    ("RuntimeError: Rank 3: found NaN in local grad norm in backward pass before data-parallel "
     "communication collective. Device: 3, node: n7", "divergence"),
])
def test_other_runtimes_words_decide_their_class(tmp_path, text, cls):
    assert _cls(tmp_path, text) == cls
