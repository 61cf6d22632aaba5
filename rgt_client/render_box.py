"""What `install` prints about the box, from the agent's `probe --json` (`rgt.probe/1`, owned by
health). Read defensively: a missing field is skipped, never an error."""
from __future__ import annotations

from typing import Any

from boxagent.base.units import format_bytes


def box_summary(up: dict[str, Any]) -> list[str]:
    probe = up.get("probe") or {}
    if not probe:
        return ["  python   %s (%s)" % (up.get("python_version"), up.get("python")),
                "  probe    unavailable: %s" % (up.get("probe_error") or "no answer")]
    lines = ["  python   %s (%s)%s" % (up.get("python_version"), up.get("python"), _deps(probe))]
    lines += _memory(probe) + _cpu(probe) + _gpus(probe) + _disks(probe) + _slurm(probe)
    klog = probe.get("kernel_log") or {}
    if klog:
        faults = klog.get("hard_faults_since_boot") or []
        lines.append("  kernlog  %s%s" % ("readable (second Xid source)" if klog.get("readable")
                                          else "not readable (NVML events only)",
                                          "; %d hard GPU fault(s) since boot!" % len(faults) if faults else ""))
    for w in probe.get("warnings") or []:
        lines.append("  note     %s" % w)
    return lines


def _pct(v: Any) -> str:
    return "%.0f%%" % v if isinstance(v, (int, float)) else "-"


def _deps(probe: dict[str, Any]) -> str:
    deps = probe.get("deps")
    if not isinstance(deps, dict):
        return ""
    return "; " + ", ".join("%s %s" % (k, "yes" if v else "no") for k, v in sorted(deps.items()))


def _memory(probe: dict[str, Any]) -> list[str]:
    cg, system = probe.get("cgroup") or {}, probe.get("system") or {}
    if not cg and not system:
        return []
    limit = format_bytes(cg.get("max_bytes")) if cg.get("max_bytes") else "none"
    return ["  memory   cgroup %s, limit %s, host %s" % (cg.get("version") or "none", limit,
                                                          format_bytes(system.get("memory_total_bytes")))]


def _cpu(probe: dict[str, Any]) -> list[str]:
    cpu = probe.get("cpu") or {}
    if not cpu:
        return []
    quota = "%s cores" % cpu["quota_cores"] if cpu.get("quota_cores") else "none"
    return ["  cpu      quota %s, %s host cores" % (quota, cpu.get("host_cores", "?"))]


def _gpus(probe: dict[str, Any]) -> list[str]:
    gpu = probe.get("gpu") or {}
    gpus = gpu.get("gpus") or []
    if not gpus:
        reason = gpu.get("unavailable_reason")
        return ["  gpus     none%s" % (" (%s)" % reason if reason else "")]
    names: dict[str, int] = {}
    for g in gpus:
        names[str(g.get("name"))] = names.get(str(g.get("name")), 0) + 1
    what = ", ".join("%d x %s" % (n, name) for name, n in names.items())
    return ["  gpus     %s (driver %s, CUDA %s)" % (what, gpu.get("driver_version") or "?",
                                                    gpu.get("cuda_version") or "?")]


def _disks(probe: dict[str, Any]) -> list[str]:
    return ["  disk     %s (%s): %s of %s used, inodes %s" % (
        d.get("path"), d.get("role", "-"), _pct(d.get("bytes_used_pct")), format_bytes(d.get("bytes_total")),
        _pct(d.get("inodes_used_pct"))) for d in probe.get("disks") or []]


def _slurm(probe: dict[str, Any]) -> list[str]:
    """A login node: the cluster, its partitions, and whether the four commands rgt runs are
    there. A plain box (none of them on PATH) gets no line."""
    sl = probe.get("slurm") or {}
    commands = sl.get("commands") or {}
    needed = ("sbatch", "squeue", "scontrol", "scancel")
    found = [c for c in needed if commands.get(c)]
    if not found:
        return []
    if not sl.get("available"):
        missing = [c for c in needed if not commands.get(c)]
        why = "not on PATH: %s" % ", ".join(missing) if missing else "; ".join(sl.get("errors") or []) or "not configured"
        return ["  slurm    not usable for backend = \"slurm\" (%s)" % why]
    parts = ", ".join(str(p.get("name")) + ("*" if p.get("default") else "") for p in sl.get("partitions") or [])
    return ["  slurm    cluster %s (Slurm %s), partitions %s; %s found" % (
        sl.get("cluster_name") or "?", sl.get("version") or "?", parts or "none seen", " ".join(found))]
