"""What `install` prints about the box: from the agent's `probe --json` (health owns its shape;
this reads it defensively: a missing field is skipped, never an error)."""
from __future__ import annotations

from typing import Any

from boxagent.units import format_bytes


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def box_summary(up: dict[str, Any]) -> list[str]:
    probe = up.get("probe") or {}
    lines = ["  python   %s (%s)%s" % (up.get("python_version"), up.get("python"), _deps(probe))]
    mem = probe.get("memory") or _get(probe, "health", "memory") or {}
    if mem:
        limit = format_bytes(mem.get("max_bytes")) if mem.get("max_bytes") else "no limit"
        lines.append("  memory   cgroup %s, limit %s, host %s" % (mem.get("cgroup") or "none", limit,
                                                                   format_bytes(mem.get("host_total_bytes"))))
    cpu = probe.get("cpu") or {}
    if cpu:
        lines.append("  cpu      quota %s" % ("%s cores" % cpu["quota_cores"] if cpu.get("quota_cores")
                                              else "none (all host cores)"))
    lines += _gpus(probe)
    for d in probe.get("disks") or []:
        lines.append("  disk     %s (%s): %s of %s used, inodes %s" % (
            d.get("path"), d.get("role", "-"), _pct(d.get("bytes_used_pct")), format_bytes(d.get("bytes_total")),
            _pct(d.get("inodes_used_pct"))))
    if "kernel_log_readable" in probe:
        lines.append("  kernlog  %s" % ("readable (Xid fallback on)" if probe["kernel_log_readable"]
                                        else "not readable (NVML events only)"))
    if not probe:
        lines.append("  probe    unavailable: %s" % (up.get("probe_error") or "no answer"))
    return lines


def _pct(v: Any) -> str:
    return "%.0f%%" % v if isinstance(v, (int, float)) else "-"


def _deps(probe: dict[str, Any]) -> str:
    deps = probe.get("deps") or _get(probe, "python", "deps")
    if not isinstance(deps, dict):
        return ""
    return "; " + ", ".join("%s %s" % (k, "yes" if v else "no") for k, v in sorted(deps.items()))


def _gpus(probe: dict[str, Any]) -> list[str]:
    gpus = probe.get("gpus") or _get(probe, "health", "gpus") or []
    driver = probe.get("driver_version") or _get(probe, "gpu", "driver_version")
    cuda = probe.get("cuda_version") or _get(probe, "gpu", "cuda_version")
    if not gpus:
        reason = probe.get("gpu_unavailable_reason") or _get(probe, "gpu", "unavailable_reason")
        return ["  gpus     none%s" % (" (%s)" % reason if reason else "")] if probe else []
    names: dict[str, int] = {}
    for g in gpus:
        names[str(g.get("name"))] = names.get(str(g.get("name")), 0) + 1
    what = ", ".join("%d x %s" % (n, name) for name, n in names.items())
    return ["  gpus     %s (driver %s, CUDA %s)" % (what, driver or "?", cuda or "?")]
