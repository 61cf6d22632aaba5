"""Error vocabularies as data: one row per code or message, each naming its source.

TABLES lists the vocabularies (one module each, a ROWS tuple of table.Row). The rule engine
does not see rows one by one: rule_specs() folds the rows of one class (and severity and
remediation) into ONE rule whose pattern is the alternation of theirs and whose keywords are
the union of theirs, so a tenfold vocabulary adds literals to the prefilter (one search over
all of them) and a few rules, not hundreds of regexes per candidate line.
row_for(line) says which row a line matched: the evidence can name the source and whether
the words are definitive.
A row found through field cases (Row.found_via) is left out while those cases are held out
(HOLD_OUT_ENV): leave-one-ecosystem-out scores each ecosystem without the rows that only its
own cases led to, so the figure measures words read from sources, not words fitted to it.
"""
from __future__ import annotations

import os
import re
from types import ModuleType
from typing import Any, Dict, List, Optional, Pattern, Tuple

from boxagent.triage.vocab import (cloud, cuda, cxx, errno, files, frameworks, http, install,
                                   kernel, nccl, sched, torch)
from boxagent.triage.vocab import (allocators, cuda11, h5py2, jobs, launchers, libc, nccl_net,
                                   pysocket, ray, shells, xid)
from boxagent.triage.vocab import (containers, gonet, gpuarch, langs, nonfinite, platforms,
                                   rayexc, secondhand, serving, shm)
from boxagent.triage.vocab import (cortex, dotnet, goexec, libcurl, megatron_log, nvcli_mount,
                                   ort_arena, runc, sbatch, skypilot, trt_memory, xla)
from boxagent.triage.vocab import (ascend, batchsys, c10dstore, cudarelay, extbuild, gaudi, gpuapis,
                                   llmstacks, media, mounts, mpi, nogpu, nvsystem, rocm, storage,
                                   transfer, tritonrt, xpu)
from boxagent.triage.vocab import bashmsg, fsspec_io, ggml_check
from boxagent.triage.vocab import (awsbatch, c10dsock, cudacheck, cuew, npwrite, openmm_nan, physx,
                                   ptxjit, ucxpy)
from boxagent.triage.vocab import winsock
from boxagent.triage.vocab.table import Row

# name -> module; the order is only the order rows are listed in
TABLES: Tuple[Tuple[str, ModuleType], ...] = (("cuda", cuda), ("nccl", nccl), ("errno", errno), ("frameworks", frameworks),
          ("files", files), ("http", http), ("install", install), ("sched", sched),
          ("cloud", cloud), ("kernel", kernel), ("cxx", cxx), ("torch", torch))
TABLES += (("allocators", allocators), ("ray", ray), ("nccl_net", nccl_net), ("jobs", jobs),
           ("shells", shells), ("h5py2", h5py2), ("cuda11", cuda11), ("libc", libc),
           ("pysocket", pysocket), ("xid", xid), ("launchers", launchers))
# read from the sources of the ecosystems a rented box also meets: Go tools, container
# runtimes, run-time kernel compilers, serving runtimes, CI/serverless platforms, Ray
TABLES += (("gonet", gonet), ("containers", containers), ("gpuarch", gpuarch),
           ("serving", serving), ("platforms", platforms), ("rayexc", rayexc),
           ("secondhand", secondhand), ("nonfinite", nonfinite), ("langs", langs), ("shm", shm))
# read from the sources that wave-4 field cases missed: XLA/LLVM's compilers, Go's os/exec,
# .NET's HttpClient (the CI runners), SkyPilot, runc, the NVIDIA hook's mount step, Cortex,
# ONNX Runtime's arena, TensorRT(-LLM)'s memory, Megatron's training log, sbatch, libcurl
TABLES += (("xla", xla), ("goexec", goexec), ("dotnet", dotnet), ("skypilot", skypilot),
           ("runc", runc), ("nvcli_mount", nvcli_mount), ("cortex", cortex),
           ("ort_arena", ort_arena), ("megatron_log", megatron_log), ("sbatch", sbatch),
           ("libcurl", libcurl), ("trt_memory", trt_memory))
# read from the sources of ecosystems the corpus holds no case of: other accelerators (ROCm,
# Intel XPU and Gaudi, Ascend, OpenCL/Vulkan), NVIDIA's system layer (DCGM, fabric manager),
# a job that sees no GPU, MPI and the fabrics, the c10d store, object stores and network
# mounts, rsync/ssh, HTCondor and SageMaker, CUDA extensions built at run time, CUDA's
# failures relayed by other libraries, Triton's run time, rendering and video, LLM stacks
TABLES += (("rocm", rocm), ("xpu", xpu), ("gaudi", gaudi), ("ascend", ascend),
           ("gpuapis", gpuapis), ("nvsystem", nvsystem), ("nogpu", nogpu), ("mpi", mpi),
           ("c10dstore", c10dstore), ("storage", storage), ("mounts", mounts),
           ("transfer", transfer), ("batchsys", batchsys), ("extbuild", extbuild),
           ("cudarelay", cudarelay), ("tritonrt", tritonrt), ("media", media),
           ("llmstacks", llmstacks))
# read from bash's own source: a script that is wrong in bash's words
TABLES += (("bashmsg", bashmsg),)
# read after the fifth wave's blind sets were scored: the misses' own libraries
TABLES += (("fsspec_io", fsspec_io), ("ggml_check", ggml_check))
# read after the sixth wave's blind set was scored: the families its misses belong to
TABLES += (("ptxjit", ptxjit), ("cudacheck", cudacheck), ("cuew", cuew), ("openmm_nan", openmm_nan),
           ("npwrite", npwrite), ("ucxpy", ucxpy), ("c10dsock", c10dsock), ("physx", physx),
           ("awsbatch", awsbatch))
# read after the sixth wave's second blind set (F) was scored
TABLES += (("winsock", winsock),)

# Field cases held out for this process (comma-separated paths under tests/triage/field/):
# set by the scorer's leave-one-ecosystem-out for the fold it scores; unset, every row is on.
HOLD_OUT_ENV = "RGT_TRIAGE_VOCAB_HOLD_OUT"


def held_out_cases() -> frozenset:
    return frozenset(c for c in os.environ.get(HOLD_OUT_ENV, "").split(",") if c)


def is_held_out(row: Row, cases: frozenset) -> bool:
    """True when every case that led to the row's source is held out (a row read from a
    source without any case never is)."""
    return bool(row.found_via) and set(row.found_via) <= cases


def rows() -> List[Row]:
    """Every row of every table, less the rows found only via held-out cases."""
    cases = held_out_cases()
    return [r for _, mod in TABLES for r in mod.ROWS if not is_held_out(r, cases)]


def table_of(row: Row) -> str:
    for name, mod in TABLES:
        if row in mod.ROWS:
            return name
    return ""


def _group(pattern: str) -> str:
    # plain groups: grep -E reads the same alternation (no (?:...) there)
    return "(%s)" % pattern if "|" in pattern else pattern


def rule_specs() -> List[Dict[str, Any]]:
    """One rule spec per (class, severity, remediation): the alternation of its rows."""
    groups: Dict[Tuple[str, str, Optional[str]], List[Row]] = {}
    for r in rows():
        groups.setdefault((r.cls, r.severity, r.fix), []).append(r)
    specs = []
    for (cls, severity, fix), members in groups.items():
        patterns: List[str] = []
        keywords: List[str] = []
        for r in members:
            if r.pattern not in patterns:
                patterns.append(r.pattern)
            keywords.extend(k for k in (r.keywords or ()) if k not in keywords)
        spec: Dict[str, Any] = {"class": cls, "severity": severity, "keywords": keywords,
                                "pattern": "|".join(_group(p) for p in patterns), "vocab": True}
        if fix:
            spec["remediation"] = fix
        specs.append(spec)
    return specs


_COMPILED: List[Tuple[Pattern[str], Row]] = []


def row_for(text: str, cls: Optional[str] = None) -> Optional[Row]:
    """The first row (of class `cls`, when given) whose pattern matches `text`."""
    if not _COMPILED:
        _COMPILED.extend((re.compile(r.pattern, re.M), r) for r in rows())
    for rx, r in _COMPILED:
        if (cls is None or r.cls == cls) and rx.search(text):
            return r
    return None
