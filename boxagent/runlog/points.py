"""One history point of one run, taken from the status the daemon last wrote, and how two
points merge (the samples of one minute into its point; two old minutes into one when thinning).

A point (short keys: a week of them on 8 GPUs must fit in 3 MB):
  t   start of the span (epoch seconds)      s   its length (seconds)
  m   [cgroup memory current_bytes, max_bytes]
  d   [bytes_used_pct, inodes_used_pct] of the filesystem holding the run's workdir
  p   [done, total, fraction] of the running stage's progress
  g   {"<nvml index>": GPU_COLS} for the GPUs the run uses
  x   {metric: value} of the running stage (the last value seen in the span)   st  that stage

Merging keeps what a person looks for: utilisation, power and clock are averaged (weighted by
span), levels that kill a job (memory, disk, temperature) keep their maximum so a spike is not
averaged away, throttle reasons are OR-ed, progress and metrics keep the later value.
"""
from __future__ import annotations

import calendar
import os
import time
from typing import Any, Dict, List, Optional, Tuple

GPU_COLS = ("util_pct", "memory_used_mib", "temperature_c", "power_w", "sm_clock_mhz", "throttle_mask")
_MEAN, _MAX, _OR = "mean", "max", "or"
_GPU_MODES = (_MEAN, _MAX, _MAX, _MEAN, _MEAN, _OR)
# NVML clock-event reason names (as health reports them) <-> bits of throttle_mask; the file's
# header carries this table, so a reader decodes a file with the table it was written with.
THROTTLE_BITS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"), (0x8000, "other"),
)
_BIT_OF = {name: bit for bit, name in THROTTLE_BITS}
MIB = 1 << 20


def parse_iso(text: Any) -> Optional[float]:
    """Epoch seconds of the agent's ISO 8601 UTC times ('2024-05-01T12:00:00Z', '.123Z' too)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str) or len(text) < 19:
        return None
    try:
        base = calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    frac = text[19:].rstrip("Z")
    if frac.startswith("."):
        try:
            return base + float(frac.split("+")[0])
        except ValueError:
            return float(base)
    return float(base)


def throttle_mask(reasons: Any) -> Optional[int]:
    if not isinstance(reasons, list):
        return None
    mask = 0
    for name in reasons:
        mask |= _BIT_OF.get(str(name), _BIT_OF["other"])
    return mask


def _n(v: Any, digits: int = 0) -> Optional[float]:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return int(round(v)) if digits == 0 else round(float(v), digits)


def run_gpus(health: Dict[str, Any], run: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The GPUs the run holds: runs[].gpus (NVML indices) once GPU slots exist, else every GPU."""
    gpus = [g for g in health.get("gpus") or [] if isinstance(g, dict)]
    held = run.get("gpus")
    if isinstance(held, list):
        wanted = {str(i) for i in held}
        return [g for g in gpus if str(g.get("index")) in wanted]
    return gpus


def gpu_row(g: Dict[str, Any]) -> List[Any]:
    used = g.get("memory_used_bytes")
    return [_n(g.get("util_pct")), _n(used / MIB) if isinstance(used, (int, float)) else None,
            _n(g.get("temperature_c")), _n(g.get("power_w")), _n(g.get("sm_clock_mhz")),
            throttle_mask(g.get("throttle_reasons"))]


def workdir_disk(health: Dict[str, Any], workdir: Optional[str]) -> Optional[Dict[str, Any]]:
    """The disks[] entry of the filesystem holding workdir: its own entry, else the longest
    watched path above it (health lists realpaths, so both sides are resolved)."""
    if not workdir:
        return None
    want = os.path.realpath(workdir)
    best, best_len = None, -1
    for d in health.get("disks") or []:
        path = d.get("path") if isinstance(d, dict) else None
        if not isinstance(path, str):
            continue
        real = os.path.realpath(path)
        if real == want:
            return d
        if want.startswith(real.rstrip("/") + "/") and len(real) > best_len:
            best, best_len = d, len(real)
    return best


def running_stage(run: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    for st in run.get("stages") or []:
        if isinstance(st, dict) and st.get("state") == "running":
            return st
    return None


def from_status(health: Dict[str, Any], run: Dict[str, Any], t: float, span: float) -> Dict[str, Any]:
    """One raw point (a single sample) of `run` from status.json's health block and run block."""
    point: Dict[str, Any] = {"t": round(t, 3), "s": round(span, 3)}
    mem = health.get("memory") or {}
    if mem.get("current_bytes") is not None:
        point["m"] = [_n(mem.get("current_bytes")), _n(mem.get("max_bytes"))]
    disk = workdir_disk(health, run.get("workdir"))
    if disk is not None:
        point["d"] = [_n(disk.get("bytes_used_pct"), 2), _n(disk.get("inodes_used_pct"), 2)]
    gpus = {str(g.get("index")): gpu_row(g) for g in run_gpus(health, run) if not g.get("lost")}
    if gpus:
        point["g"] = gpus
    st = running_stage(run)
    if st is not None:
        prog = st.get("progress") or {}
        if prog.get("done") is not None or prog.get("fraction") is not None:
            point["p"] = [prog.get("done"), prog.get("total"), prog.get("fraction")]
        metrics = st.get("metrics")
        numbers = {str(k): v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)} \
            if isinstance(metrics, dict) else {}
        if numbers:                      # a "nan" last value is status's news; a chart plots numbers
            point["x"] = numbers
            point["st"] = st.get("name")
    return point


def gpu_info(health: Dict[str, Any], run: Dict[str, Any]) -> Dict[str, Any]:
    """What does not change minute to minute: GPU names and sizes, the disk, the cgroup."""
    gpus = {}
    for g in run_gpus(health, run):
        total = g.get("memory_total_bytes")
        gpus[str(g.get("index"))] = {"name": g.get("name"), "uuid": g.get("uuid"),
                                     "memory_total_mib": _n(total / MIB) if isinstance(total, (int, float)) else None,
                                     "sm_clock_max_mhz": _n(g.get("sm_clock_max_mhz"))}
    disk = workdir_disk(health, run.get("workdir")) or {}
    return {"gpus": gpus, "workdir_disk": disk.get("path"), "disk_bytes_total": disk.get("bytes_total"),
            "cgroup": (health.get("memory") or {}).get("cgroup")}


def merge(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """Points a then b (b later) as one point spanning both."""
    wa, wb = max(float(a.get("s") or 0), 0.0), max(float(b.get("s") or 0), 0.0)
    out: Dict[str, Any] = {"t": a.get("t"), "s": round(wa + wb, 3)}
    if "m" in a or "m" in b:
        out["m"] = _cols(a.get("m"), b.get("m"), (_MAX, "last"), wa, wb)
    if "d" in a or "d" in b:
        out["d"] = _cols(a.get("d"), b.get("d"), (_MAX, _MAX), wa, wb)
    if "g" in a or "g" in b:
        ga, gb = a.get("g") or {}, b.get("g") or {}
        out["g"] = {k: _cols(ga.get(k), gb.get(k), _GPU_MODES, wa, wb) for k in _keys(ga, gb)}
    for key in ("p", "x", "st"):
        if key in b or key in a:
            out[key] = b[key] if key in b else a[key]
    return out


def _keys(a: Dict[str, Any], b: Dict[str, Any]) -> List[str]:
    return list(a) + [k for k in b if k not in a]


def _cols(a: Any, b: Any, modes: Tuple[str, ...], wa: float, wb: float) -> List[Any]:
    a = a if isinstance(a, list) else []
    b = b if isinstance(b, list) else []
    out = []
    for i, mode in enumerate(modes):
        va = a[i] if i < len(a) else None
        vb = b[i] if i < len(b) else None
        out.append(_combine(va, vb, mode, wa, wb))
    return out


def _combine(va: Any, vb: Any, mode: str, wa: float, wb: float) -> Any:
    if va is None:
        return vb
    if vb is None:
        return va
    if mode == _MAX:
        return max(va, vb)
    if mode == _OR:
        return int(va) | int(vb)
    if mode == "last":
        return vb
    if wa + wb <= 0:
        return vb
    value = (va * wa + vb * wb) / (wa + wb)
    return int(round(value)) if isinstance(va, int) and isinstance(vb, int) else round(value, 2)
