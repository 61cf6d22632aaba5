"""Where the agent reads the machine from. Overridable so tests use temp roots (DESIGN: seams).

Environment overrides (tests and odd containers):
  RGT_PROC_ROOT     default /proc
  RGT_CGROUP_ROOT   default /sys/fs/cgroup
  RGT_BOOT_ID_PATH  default <proc>/sys/kernel/random/boot_id
  RGT_KMSG_PATH     default /dev/kmsg
"""
from __future__ import annotations

import os

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, List, Mapping, Optional


class Roots:
    def __init__(self, proc: str = "/proc", cgroup: str = "/sys/fs/cgroup",
                 boot_id_path: Optional[str] = None, kmsg: str = "/dev/kmsg"):
        self.proc = proc
        self.cgroup = cgroup
        self.boot_id_path = boot_id_path or os.path.join(proc, "sys/kernel/random/boot_id")
        self.kmsg = kmsg

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "Roots":
        env = os.environ if env is None else env
        return cls(proc=env.get("RGT_PROC_ROOT", "/proc"),
                   cgroup=env.get("RGT_CGROUP_ROOT", "/sys/fs/cgroup"),
                   boot_id_path=env.get("RGT_BOOT_ID_PATH") or None,
                   kmsg=env.get("RGT_KMSG_PATH", "/dev/kmsg"))

    def boot_id(self) -> Optional[str]:
        try:
            with open(self.boot_id_path) as fh:
                return fh.read().strip() or None
        except OSError:
            return None

    def pids(self) -> List[int]:
        """Every pid /proc lists now (none when it cannot be read)."""
        try:
            names = os.listdir(self.proc)
        except OSError:
            return []
        return [int(name) for name in names if name.isdigit()]

    def stat(self, pid: Any) -> Optional[List[str]]:
        """The fields of /proc/PID/stat after comm: [0] is the state letter, [2] the pgid,
        [19] the start time in clock ticks since boot. None when there is no such process."""
        try:
            with open(os.path.join(self.proc, str(pid), "stat"), "rb") as fh:
                data = fh.read().decode("ascii", "replace")
        except OSError:
            return None
        # comm (field 2) may hold spaces and parens: split after the LAST ')'.
        return data[data.rfind(")") + 2:].split()

    def process_start_ticks(self, pid: int) -> Optional[int]:
        """Field 22 of /proc/PID/stat. With the pid it identifies a process across pid reuse
        (never trust a pid alone)."""
        fields = self.stat(pid)
        try:
            return int(fields[19]) if fields else None
        except (IndexError, ValueError):
            return None
