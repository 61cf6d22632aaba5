"""The runtimes of tools a job launches besides Python: R, Julia, Go, Rust, Node/V8 and the JVM,
each in its own words for a crash and for running out of memory. A job that calls `Rscript`
or a Go binary fails in those words, not in a Python traceback."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

R_ERR = "R 4.4 src/main/errors.c (verrorcall_dflt: \"Error in %s : \", \"Execution halted\" in non-interactive R)"
R_MEM = ("R 4.4 src/main/memory.c (\"cannot allocate vector of size %0.1f Gb\", \"vector memory "
         "exhausted (limit reached?)\")")
R_PKG = "R 4.4 src/library/base/R/library.R (\"there is no package called %s\")"
JULIA = ("Julia 1.10 base/client.jl (\"ERROR: \" + showerror; LoadError wraps an include's error), "
         "base/boot.jl OutOfMemoryError")
CUDAJL = "CUDA.jl 5.4 src/pool.jl OutOfGPUMemoryError (\"Out of GPU memory trying to allocate %s\")"
GO_RT = ("Go 1.22 src/runtime/panic.go (\"panic: \", \"fatal error: \"), runtime/mem_linux.go / "
         "malloc.go (\"runtime: out of memory: cannot allocate %d-byte block\", throw(\"out of memory\"))")
RUST = ("Rust 1.79 library/std/src/panicking.rs (\"thread '%s' panicked at %s:\"), library/std/src/"
        "alloc.rs default_alloc_error_hook (\"memory allocation of %d bytes failed\")")
V8 = ("V8 12.4 src/heap/heap.cc / Node.js 20 src/node_errors.cc (\"FATAL ERROR: Reached heap limit "
      "Allocation failed - JavaScript heap out of memory\")")
JVM = "OpenJDK 21 java.lang.OutOfMemoryError (\"Java heap space\", \"GC overhead limit exceeded\")"

_HEAP = ("the runtime's own heap limit or the box's memory ran out: raise the limit (Node "
         "`--max-old-space-size`, the JVM's `-Xmx`) within the container's memory, or use less")

ROWS = (
    rx("code_error", r"^Error in .+ : ", "Error in library(data.table) : there is no package called "
       "'data.table'", R_ERR, ("Error in ",), "R"),
    lit("code_error", "Execution halted", "Execution halted", R_ERR, "R"),
    lit("code_error", "there is no package called", "Error in loadNamespace(x) : there is no "
        "package called 'ggplot2'", R_PKG, "R"),
    rx("cgroup_oom", r"cannot allocate vector of size [0-9.]+ [KMGT]?b|vector memory exhausted",
       "Error: cannot allocate vector of size 7.5 Gb", R_MEM,
       ("cannot allocate vector of size", "vector memory exhausted"), "R"),
    rx("code_error", r"^ERROR: (LoadError: )?[A-Z][A-Za-z0-9_.]*(Error|Exception)",
       "ERROR: LoadError: ArgumentError: Package CSV not found in current path.", JULIA,
       ("ERROR: ",), "julia"),
    rx("cgroup_oom", r"^ERROR: (LoadError: )?OutOfMemoryError\(\)", "ERROR: OutOfMemoryError()",
       JULIA, ("OutOfMemoryError()",), "julia"),
    lit("cuda_oom", "Out of GPU memory trying to allocate",
        "ERROR: LoadError: Out of GPU memory trying to allocate 2.000 GiB", CUDAJL, "julia"),
    rx("code_error", r"^panic: ", "panic: runtime error: invalid memory address or nil pointer "
       "dereference", GO_RT, ("panic: ",), "go"),
    rx("cgroup_oom", r"runtime: out of memory: cannot allocate|^fatal error: (runtime: )?out of memory",
       "fatal error: runtime: out of memory", GO_RT, ("runtime: out of memory", "fatal error: out of memory"),
       "go"),
    rx("code_error", r"thread '[^']*' panicked at ", "thread 'main' panicked at src/main.rs:14:5:",
       RUST, ("' panicked at ",), "rust"),
    rx("cgroup_oom", r"memory allocation of [0-9]+ bytes failed", "memory allocation of 8589934592 "
       "bytes failed", RUST, ("memory allocation of ",), "rust"),
    lit("cgroup_oom", "JavaScript heap out of memory", "FATAL ERROR: Reached heap limit Allocation "
        "failed - JavaScript heap out of memory", V8, "node")._replace(fix=_HEAP),
    rx("cgroup_oom", r"java\.lang\.OutOfMemoryError: (Java heap space|GC overhead limit exceeded)",
       "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space", JVM,
       ("java.lang.OutOfMemoryError: ",), "jvm")._replace(fix=_HEAP),
)
