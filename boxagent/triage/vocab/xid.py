"""Xid 45 (ROBUST_CHANNEL_PREEMPTIVE_REMOVAL: the driver killing channels) is fallout, never a
cause; since the 550 drivers its line names the Xid that caused it. When that earlier Xid is
one of the hardware Xids (the built-in Xid rule's list: double-bit ECC, row remapping, NVLink,
fallen off the bus, GSP) or an NVLink error of the 144-150 range, the GPU failed, even where
the log holds only the Xid 45 lines."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

RC = ("NVIDIA open-gpu-kernel-modules 550 src/nvidia/src/kernel/gpu/rc/kernel_rc.c krcReportXid "
      "(\"NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s%s\" with \" caused by previous "
      "Xid %d\" on ROBUST_CHANNEL_PREEMPTIVE_REMOVAL); NVIDIA Xid catalog (docs.nvidia.com/deploy/"
      "xid-errors, 2025: Xid 144-150 NVLink errors)")

ROWS = found_via(
    ("cases/gpu_hardware/open-gpu-1150-xid45-after-xid149.log",),
    rx("gpu_hardware",
       r"caused by previous Xid (48|6[34]|74|79|9[245]|119|120|14[4-9]|150)([^0-9]|$)",
       "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous "
       "Xid 149", RC, ("caused by previous Xid",), "nvrm"),
)
