"""Preflight gate. CONTRACT: check() returns the failures; [] means go.

A job's `[preflight]` (`gpus = 1`, `min_free_disk = "50G"`, `min_free_inodes = 100000`,
`max_gpu_temp_c = 80`, `max_gpu_memory_taken_pct = 10`) is checked against a fresh sample before the first stage, together with
hard GPU faults already present (Xid 48/79/... since boot, a lost GPU): a broken box fails the
run at once, before any GPU-hour is spent on it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.base.units import format_bytes, parse_size
from boxagent.health import tenants

RE_RENT = "re-rent another box (this one's GPUs are not fit for the job)"
FREE_DISK = "free or grow the disk (df -h / df -i; delete *.tmp and old checkpoints), or re-rent a bigger box"
# Disk checks apply to where the job writes; the state dir only when nothing else is watched.
_DISK_ROLES = ("workdir", "data")


def _failure(kind: str, summary: str, evidence: List[str], remediation: str) -> Dict[str, Any]:
    return {"kind": kind, "summary": summary, "evidence": evidence, "remediation": remediation}


def _disks(sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    disks = [d for d in sample.get("disks") or [] if d.get("bytes_total") is not None]
    job = [d for d in disks if d.get("role") in _DISK_ROLES]
    return job or disks


def _num_option(preflight: Dict[str, Any], key: str, whole: bool = True) -> Optional[float]:
    v = preflight.get(key)
    if v is None:
        return None
    kinds = (int,) if whole else (int, float)
    if isinstance(v, bool) or not isinstance(v, kinds) or v < 0:
        raise ValueError("%s must be a non-negative %s, got %r" % (key, "whole number" if whole else "number", v))
    return v


def _check_gpus(want: float, sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    gpus = sample.get("gpus") or []
    ok = [g for g in gpus if not g.get("lost")]
    if len(ok) >= want:
        return []
    evidence = ["NVML sees %d GPU(s), %d usable" % (len(gpus), len(ok))]
    if sample.get("gpu_unavailable_reason"):
        evidence.append(sample["gpu_unavailable_reason"])
    return [_failure("gpus", "the job needs %d GPU(s); this box has %d usable" % (int(want), len(ok)), evidence, RE_RENT)]


def _check_disk(min_free: int, sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = []
    for d in _disks(sample):
        if d.get("bytes_free") is not None and d["bytes_free"] < min_free:
            out.append(_failure("disk", "only %s free on %s (%s); the job asks for %s" % (
                format_bytes(d["bytes_free"]), d["path"], d.get("role"), format_bytes(min_free)),
                ["statvfs %s: %d bytes free of %d" % (d["path"], d["bytes_free"], d["bytes_total"])], FREE_DISK))
    return out


def _check_inodes(min_free: float, sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = []
    for d in _disks(sample):
        if d.get("inodes_free") is not None and d["inodes_free"] < min_free:
            cap = " (platform cap %d)" % d["inodes_cap"] if d.get("inodes_cap") else ""
            out.append(_failure("inodes", "only %d inodes free on %s (%s)%s; the job asks for %d" % (
                d["inodes_free"], d["path"], d.get("role"), cap, min_free),
                ["statvfs %s: %d inodes free of %d%s" % (d["path"], d["inodes_free"], d["inodes_total"], cap)],
                FREE_DISK.replace("df -h / df -i", "df -i; tar up small files")))
    return out


def _check_temp(max_c: float, sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    hot = [g for g in sample.get("gpus") or [] if isinstance(g.get("temperature_c"), int) and g["temperature_c"] > max_c]
    return [_failure("gpu_temp", "GPU %s is at %d C before the job starts (limit %g C)" % (g["index"], g["temperature_c"], max_c),
                     ["NVML temperature GPU %s: %d C" % (g["index"], g["temperature_c"])], RE_RENT) for g in hot]


def _check_taken(want: Optional[float], limit_pct: float, sample: Dict[str, Any]) -> List[Dict[str, Any]]:
    """GPU memory already held by processes rgt did not start (gotcha U11: an "empty" GPU
    whose memory another tenant holds; the job's CUDA OOM then looks like its own)."""
    gpus = [g for g in sample.get("gpus") or [] if not g.get("lost")]
    taken = []
    for g in gpus:
        others = tenants.foreign(g)
        held = sum(p.get("used_memory_bytes") or 0 for p in others)
        total = g.get("memory_total_bytes")
        if others and total and 100.0 * held / total > limit_pct:
            taken.append((g, others, 100.0 * held / total))
    need = int(want) if want else len(gpus)
    if not taken or len(gpus) - len(taken) >= need:
        return []
    evidence = ["GPU %s: %.0f%% of its memory held by %s" % (g.get("index"), pct, "; ".join(tenants.describe(p) for p in o[:3]))
                for g, o, pct in taken]
    return [_failure("gpu_memory_taken", "GPU memory is already taken by processes rgt did not start: %d of %d GPU(s) "
                     "over %g%%, the job needs %d" % (len(taken), len(gpus), limit_pct, need), evidence,
                     "stop those processes (nvidia-smi lists them; one in another container shows no command), "
                     "or re-rent; [preflight] max_gpu_memory_taken_pct raises the limit")]


def _check_hard_faults(sample: Dict[str, Any], monitor: Any) -> List[Dict[str, Any]]:
    out = []
    for g in sample.get("gpus") or []:
        if g.get("lost"):
            out.append(_failure("gpu_lost", "GPU %s is lost (NVML GPU_IS_LOST)" % g.get("index"),
                                ["NVML GPU_IS_LOST on GPU %s %s" % (g.get("index"), g.get("pci_bus_id") or "")], RE_RENT))
    seen = set()
    for f in monitor.hard_faults_present():
        if f.get("type") != "gpu_xid" or (f.get("gpu"), f.get("code")) in seen:
            continue
        seen.add((f.get("gpu"), f.get("code")))
        out.append(_failure("gpu_xid", f.get("summary") or "Xid %s" % f.get("code"), list(f.get("evidence") or []), RE_RENT))
    return out


def check(preflight: Dict[str, Any], sample: Dict[str, Any], monitor: Any) -> List[Dict[str, Any]]:
    """Each failure: {summary, evidence: [str], remediation} (+ kind). Hard GPU faults are
    checked for every job with a [preflight] table or GPUs; a bad value is itself a failure."""
    preflight = preflight or {}
    sample = sample or {}
    failures: List[Dict[str, Any]] = []
    try:
        gpus = _num_option(preflight, "gpus")
        inodes = _num_option(preflight, "min_free_inodes")
        max_temp = _num_option(preflight, "max_gpu_temp_c", whole=False)
        taken_pct = _num_option(preflight, "max_gpu_memory_taken_pct", whole=False)
        disk = parse_size(preflight["min_free_disk"]) if preflight.get("min_free_disk") is not None else None
    except (ValueError, TypeError) as exc:
        return [_failure("invalid", "the job's [preflight] is invalid: %s" % exc, [repr(preflight)[:300]],
                         "fix the job's [preflight] table (gpus = 1, min_free_disk = \"50G\", "
                         "min_free_inodes = 100000, max_gpu_temp_c = 80)")]
    if gpus:
        failures += _check_gpus(gpus, sample)
    if disk is not None:
        failures += _check_disk(disk, sample)
    if inodes is not None:
        failures += _check_inodes(inodes, sample)
    if max_temp is not None:
        failures += _check_temp(max_temp, sample)
    if gpus or taken_pct is not None:
        failures += _check_taken(gpus, tenants.SHARED_PCT if taken_pct is None else taken_pct, sample)
    failures += _check_hard_faults(sample, monitor)
    return failures
