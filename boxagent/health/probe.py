"""`rgt-agent probe`: the one-shot box audit `install` prints (Python, deps, cgroup limits, CPU
quota, GPUs/driver/CUDA, disks with inode use, kernel log readable or not) plus the warnings a
user should read before spending GPU-hours here."""
from __future__ import annotations

import os
import platform
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base.optional import deps
from boxagent.base.units import format_bytes
from boxagent.health import tenants
from boxagent.slurm.probe import probe as slurm_probe

def _existing(path: str) -> str:
    """The path, or its nearest existing parent (the state dir may not exist before install)."""
    path = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def probe(monitor: Any, home_root: str, extra: List[str]) -> Dict[str, Any]:
    """Sample once through `monitor` and shape the audit (rgt.probe/1)."""
    from boxagent import __version__
    watched: List[Tuple[str, str]] = [(_existing(home_root), "state")] + [(p, "extra") for p in extra]
    h = monitor.sample(time.time(), watched)
    mem, cpu = h["memory"], h["cpu"]
    cg = monitor.cg.paths.as_dict() if monitor.cg is not None else {"version": "none"}
    report = {
        "schema": "rgt.probe/1", "agent_version": __version__, "host": socket.gethostname(),
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "implementation": platform.python_implementation()},
        "deps": deps(),
        "system": {"kernel": platform.release(), "boot_id": h.get("boot_id"), "uptime_s": h.get("uptime_s"),
                   "memory_total_bytes": mem.get("host_total_bytes"),
                   "memory_available_bytes": mem.get("host_available_bytes"), "cores": cpu.get("host_cores")},
        "cgroup": dict(cg, max_bytes=mem.get("max_bytes"), current_bytes=mem.get("current_bytes"),
                       peak_bytes=mem.get("peak_bytes"), oom_kill=mem.get("oom_kill")),
        "cpu": {"quota_cores": cpu.get("quota_cores"), "affinity_cores": cpu.get("affinity_cores"),
                "host_cores": cpu.get("host_cores"), "effective_cores": monitor.cpu_quota_cores()},
        "gpu": {"source": h["gpu_source"], "unavailable_reason": h["gpu_unavailable_reason"],
                "driver_version": h.get("driver_version"), "cuda_version": h.get("cuda_version"),
                "count": len(h["gpus"]), "gpus": h["gpus"]},
        "disks": h["disks"],
        "kernel_log": {"path": monitor.roots.kmsg, "readable": h["xid_sources"]["kernel_log"],
                       "error": h["xid_sources"]["kernel_log_error"],
                       "hard_faults_since_boot": monitor.hard_faults_present()},
    }
    report["platform_facts"] = _platform_facts()
    report["slurm"] = _slurm()
    report["warnings"] = warnings(report)
    return report


def _platform_facts() -> Dict[str, Any]:
    """Which platform markers this box has (paths, env NAMES only): the client's profile detection."""
    try:
        from boxagent.base.profile import detect_facts
        return detect_facts()
    except Exception as exc:  # noqa: BLE001 - detection is advice; never lose the audit for it
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def _slurm() -> Dict[str, Any]:
    """The Slurm submit host's facts (boxagent.slurm.probe); commands bounded by timeouts."""
    try:
        return slurm_probe()
    except Exception as exc:  # noqa: BLE001 - an audit of the box must not be lost for its Slurm part
        return {"available": False, "errors": ["%s: %s" % (type(exc).__name__, exc)]}


def warnings(r: Dict[str, Any]) -> List[str]:
    out = []
    if r["cgroup"].get("version") == "none":
        out.append("no cgroup found: OOM kills cannot be told from other deaths")
    elif r["cgroup"].get("max_bytes") is None:
        out.append("no cgroup memory limit: the host's memory is the limit (host OOM kills are not counted)")
    if r["gpu"]["source"] == "none":
        out.append("no GPU visible: %s" % r["gpu"]["unavailable_reason"])
    for g in r["gpu"]["gpus"]:
        if g.get("lost"):
            out.append("GPU %s is LOST: re-rent another box" % g["index"])
        others = tenants.foreign(g)
        if others:
            out.append("GPU %s: %d process(es) rgt did not start hold %s of VRAM: %s" % (
                g["index"], len(others), format_bytes(sum(p.get("used_memory_bytes") or 0 for p in others)),
                "; ".join(tenants.describe(p) for p in others[:3])))
    for f in r["kernel_log"]["hard_faults_since_boot"]:
        out.append("hardware fault since boot: %s" % f.get("summary"))
    for d in r["disks"]:
        if (d.get("inodes_used_pct") or 0) >= 80 or (d.get("bytes_used_pct") or 0) >= 90:
            out.append("disk %s is %s%% full, inodes %s%% used" % (d["path"], d.get("bytes_used_pct"), d.get("inodes_used_pct")))
    for e in (r.get("slurm") or {}).get("errors") or []:
        out.append("slurm: %s" % e)
    if not r["kernel_log"]["readable"]:
        out.append("kernel log not readable (%s): Xid errors come from NVML events only" % r["kernel_log"]["error"])
    return out


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else "%.0f%%" % v


def render(r: Dict[str, Any]) -> str:
    """Human text: sections in a fixed order (the JSON is the same data)."""
    cg, cpu, gpu = r["cgroup"], r["cpu"], r["gpu"]
    lines = ["rgt-agent %s on %s" % (r["agent_version"], r["host"]),
             "python:  %s (%s)" % (r["python"]["version"], r["python"]["executable"]),
             "deps:    " + "  ".join("%s %s" % (k, "yes" if v else "no") for k, v in r["deps"].items()),
             "kernel:  %s, up %ss, boot_id %s" % (r["system"]["kernel"], int(r["system"]["uptime_s"] or 0), r["system"]["boot_id"]),
             "memory:  cgroup %s limit %s, using %s, peak %s, oom_kill %s (host %s total, %s available)" % (
                 cg.get("version"), format_bytes(cg.get("max_bytes")) if cg.get("max_bytes") else "none",
                 format_bytes(cg.get("current_bytes")), format_bytes(cg.get("peak_bytes")), cg.get("oom_kill"),
                 format_bytes(r["system"]["memory_total_bytes"]), format_bytes(r["system"]["memory_available_bytes"])),
             "cpu:     quota %s, affinity %s of %s cores" % (cpu["quota_cores"] or "none", cpu["affinity_cores"], cpu["host_cores"])]
    if gpu["source"] == "none":
        lines.append("gpus:    none (%s)" % gpu["unavailable_reason"])
    else:
        lines.append("gpus:    %d, driver %s, CUDA %s" % (gpu["count"], gpu["driver_version"], gpu["cuda_version"]))
        for g in gpu["gpus"]:
            lines.append("  gpu%s %s %s  %s  util %s  %s C  %s/%s" % (
                g["index"], g.get("name") or "-", g.get("pci_bus_id") or "-", "LOST" if g.get("lost") else "ok",
                _pct(g.get("util_pct")), "-" if g.get("temperature_c") is None else g["temperature_c"], format_bytes(g.get("memory_used_bytes")),
                format_bytes(g.get("memory_total_bytes"))))
    lines.append("disks:")
    for d in r["disks"]:
        if d.get("error"):
            lines.append("  %-28s %-8s %s" % (d["path"], d["role"], d["error"]))
            continue
        lines.append("  %-28s %-8s %s free of %s (%s used), inodes %s used%s" % (
            d["path"], d["role"], format_bytes(d.get("bytes_free")), format_bytes(d.get("bytes_total")),
            _pct(d.get("bytes_used_pct")), _pct(d.get("inodes_used_pct")),
            " (cap %d)" % d["inodes_cap"] if d.get("inodes_cap") else ""))
    sl = r.get("slurm") or {}
    if sl.get("available"):
        lines.append("slurm:   cluster %s (Slurm %s), partitions %s, ended jobs via %s" % (
            sl.get("cluster_name") or "-", sl.get("version") or "-",
            ", ".join(p["name"] + ("*" if p["default"] else "") for p in sl.get("partitions") or []) or "-",
            "sacct --completion" if sl.get("sacct") == "completion" else "sacct" if sl.get("sacct") else "squeue only"))
    kl = r["kernel_log"]
    lines.append("kernel log: %s" % ("readable (%s)" % kl["path"] if kl["readable"] else "not readable: %s" % kl["error"]))
    for w in r["warnings"]:
        lines.append("warning: " + w)
    return "\n".join(lines) + "\n"
