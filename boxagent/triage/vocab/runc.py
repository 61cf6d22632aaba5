"""runc (under docker, containerd, podman) starting a container's first process, and the
kernel's ENOEXEC under it: a binary built for another CPU architecture (an amd64 image on an
arm64 or armv7 host) cannot be executed. glibc spells ENOEXEC "Exec format error", Go (runc,
docker) "exec format error"."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

RUNC = ("runc 1.0 libcontainer/standard_init_linux.go (\"exec user process caused: %w\"), runc 1.1 "
        "(\"exec %s: %w\"); Linux include/uapi/asm-generic/errno-base.h ENOEXEC, glibc 2.39 "
        "sysdeps/gnu/errlist.h (\"Exec format error\"), Go 1.22 syscall zerrors_linux (\"exec "
        "format error\")")

_FIX = ("the program was built for another CPU architecture (an amd64 image on an arm64/armv7 "
        "host, or the reverse): pull or build the image for this platform (`docker run "
        "--platform`, a multi-arch build); a script without its #! line fails the same way")

ROWS = found_via(
    ("wave4/cases/code_error/docker-autocompose-27-amd64-image-on-armv7-exec-format.log",),
    rx("code_error", r"[Ee]xec format error",
       "standard_init_linux.go:228: exec user process caused: exec format error", RUNC,
       ("xec format error",), "runc")._replace(fix=_FIX),
)
