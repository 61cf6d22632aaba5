"""Go's os/exec reporting how a child process ended: `signal: killed` is Go's spelling of a
SIGKILL (bash prints "Killed", Python "<Signals.SIGKILL: 9>"). `go build` reports its compiler
that way when the OOM killer took it (`.../pkg/tool/linux_amd64/compile: signal: killed`), as do
docker and every Go tool that runs a child. Like bash's "Killed", the words do not name the
sender: diagnose() checks the cgroup counter before it blames memory."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

GO_EXEC = ("Go 1.22 src/os/exec_posix.go (*ProcessState).String (\"signal: \" + "
           "Signal.String()) and src/syscall/zerrors_linux_amd64.go signal table (SIGKILL: "
           "\"killed\"); src/os/exec/exec.go ExitError")

ROWS = found_via(
    ("wave4/cases/cgroup_oom/surf-66-arm64-vm-go-compile-signal-killed.log",
     "wave4/cases/cgroup_oom/wetalk-32-docker-desktop-traefik-compile-killed.log"),
    rx("cgroup_oom", r"(: |^)signal: killed$", "exec: \"python\": child exited: signal: killed",
       GO_EXEC, ("signal: killed",), "go", False),
)
