"""A real child memory cgroup (v1 or v2) for OOM tests; root only. Cleaned up by the caller's
finally (`destroy`), which kills what is left inside and removes the directory."""
from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path
from typing import Optional, Tuple

V1_MEM = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def usable() -> Tuple[Optional[str], str]:
    """("v1"|"v2", "") when a child memory cgroup can be made here, else (None, why not)."""
    if os.geteuid() != 0:
        return None, "needs root to create a memory cgroup"
    if (V1_MEM / "memory.limit_in_bytes").exists() and os.access(V1_MEM, os.W_OK):
        return "v1", ""
    ctrl = V2_ROOT / "cgroup.controllers"
    if ctrl.exists() and "memory" in ctrl.read_text().split():
        return "v2", ""
    return None, "no writable cgroup memory controller (v1 or v2) on this machine"


class ChildCgroup:
    def __init__(self, version: str, limit_bytes: int):
        self.version = version
        name = "rgt-test-%s" % secrets.token_hex(4)
        self.dir = (V1_MEM if version == "v1" else V2_ROOT) / name
        self.path = "/" + name          # as /proc/self/cgroup would name it
        self.dir.mkdir()
        if version == "v1":
            (self.dir / "memory.limit_in_bytes").write_text(str(limit_bytes))
            sw = self.dir / "memory.memsw.limit_in_bytes"
            if sw.exists():  # with swap accounting, cap swap too or the job swaps instead of dying
                sw.write_text(str(limit_bytes))
        else:
            sub = V2_ROOT / "cgroup.subtree_control"
            if "memory" not in sub.read_text().split():
                sub.write_text("+memory")
            (self.dir / "memory.max").write_text(str(limit_bytes))
            swap = self.dir / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")

    @property
    def procs_file(self) -> Path:
        return self.dir / "cgroup.procs"

    def proc_tree(self, base: Path) -> Path:
        """A fixture /proc whose self/cgroup names this child; everything else is the real one,
        so the monitor finds the child through its normal discovery."""
        proc = base / "proc"
        (proc / "self").mkdir(parents=True)
        if self.version == "v1":
            (proc / "self" / "cgroup").write_text("5:memory:%s\n4:cpu,cpuacct:/\n0::/\n" % self.path)
        else:
            (proc / "self" / "cgroup").write_text("0::%s\n" % self.path)
        (proc / "self" / "mountinfo").write_text(Path("/proc/self/mountinfo").read_text())
        for name in ("meminfo", "uptime", "loadavg", "sys"):
            os.symlink("/proc/" + name, str(proc / name))
        return proc

    def destroy(self) -> None:
        for _ in range(50):
            try:
                pids = [int(p) for p in self.procs_file.read_text().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.dir.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
