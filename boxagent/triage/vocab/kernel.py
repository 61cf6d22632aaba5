"""The kernel's words when it kills for memory, and when PCIe or NVLink fails under a GPU
(dmesg lines a job may print, or the agent's kernel log reader passes on). NVIDIA's Xid
catalog has its own table (a separate vocabulary)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

OOM = "Linux 6.6 mm/oom_kill.c (dump_header, __oom_kill_process, oom_reaper)"
MEMCG = "Linux 6.6 mm/memcontrol.c (mem_cgroup_out_of_memory: \"Memory cgroup out of memory\")"
AER = "Linux 6.6 drivers/pci/pcie/aer.c (aer_print_error, aer_isr_one_error)"
NVRM = "NVIDIA open-gpu-kernel-modules 550 src/nvidia/src/kernel/gpu/nvlink (Xid 74 text: \"NVLink: fatal error detected on link\")"

_S = False

ROWS = (
    lit("cgroup_oom", "Out of memory: Killed process",
        "[81544.192] Out of memory: Killed process 4182 (python) total-vm:82030412kB, "
        "anon-rss:61442112kB", OOM, "kernel"),
    lit("cgroup_oom", "Memory cgroup out of memory: Killed process",
        "[12345.6] Memory cgroup out of memory: Killed process 4182 (python)", MEMCG, "kernel"),
    rx("cgroup_oom", r"oom-kill:constraint=CONSTRAINT_[A-Z]+",
       "[81544.190] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-1.scope,"
       "mems_allowed=0,oom_memcg=/docker/1,task=python,pid=4182,uid=0", OOM, ("oom-kill:constraint=",),
       "kernel"),
    lit("cgroup_oom", "invoked oom-killer: gfp_mask=",
        "[81544.101] python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        OOM, "kernel"),
    lit("cgroup_oom", "oom_reaper: reaped process",
        "[81544.301] oom_reaper: reaped process 4182 (python), now anon-rss:0kB", OOM, "kernel"),
    lit("gpu_hardware", "AER: Uncorrected (Fatal) error received",
        "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0", AER, "kernel",
        _S),
    lit("gpu_hardware", "PCIe Bus Error: severity=Uncorrected (Fatal)",
        "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
        "(Receiver ID)", AER, "kernel", _S),
    lit("gpu_hardware", "PCIe Bus Error: severity=Uncorrected (Non-Fatal)",
        "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction "
        "Layer, (Requester ID)", AER, "kernel", _S, "warning"),
    lit("gpu_hardware", "NVLink: fatal error detected on link",
        "NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error "
        "detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)", NVRM, "nvidia"),
)
