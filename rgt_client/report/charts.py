"""The measures of a run's history as charts: one per measure, all on the run's time axis.

History points (boxagent/runlog/points.py) cover a span [t, t+s); a value is drawn at the
middle of its span, and a line breaks where points are missing (the daemon was down) so a
gap never looks like a flat line.
"""
from __future__ import annotations

from typing import Any, Callable

from rgt_client.report.svg import Chart, Series

GIB = float(1 << 30)
MIB_PER_GIB = 1024.0
DEFAULT_GPU_COLS = ("util_pct", "memory_used_mib", "temperature_c", "power_w", "sm_clock_mhz", "throttle_mask")
# Clock-event reasons that mean the GPU is slowed against the job's will (as the agent's alerts
# count them; sw_power_cap on a busy GPU is normal).
SLOWDOWN = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _points(hist: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in hist.get("points") or [] if isinstance(p, dict) and _num(p.get("t")) is not None]


def series_of(pts: list[dict[str, Any]], get: Callable[[dict[str, Any]], float | None]) -> list[tuple[float, float | None]]:
    """(middle of span, value) for every point, with None where the record has a hole."""
    out: list[tuple[float, float | None]] = []
    prev_end = None
    for p in pts:
        t, s = float(p["t"]), _num(p.get("s")) or 0.0
        if prev_end is not None and t - prev_end > max(s, 1.0) * 1.5:
            out.append((prev_end, None))
        out.append((t + s / 2, get(p)))
        prev_end = t + s
    return out


class Measures:
    """The charts of one report-data `history`."""

    def __init__(self, hist: dict[str, Any], marks: list[tuple[float, str]]):
        self.hist = hist
        self.pts = _points(hist)
        self.marks = marks
        cols = hist.get("gpu_cols") or DEFAULT_GPU_COLS
        self.col = {name: i for i, name in enumerate(cols)}
        bits = hist.get("throttle_bits")
        self.bits = {str(k): int(v) for k, v in bits.items() if isinstance(v, int)} if isinstance(bits, dict) else {}
        self.info = self._info()
        self.gpus = sorted({k for p in self.pts for k in (p.get("g") or {})}, key=_gpu_key)

    def _info(self) -> dict[str, Any]:
        merged: dict[str, Any] = {"gpus": {}}
        for rec in self.hist.get("info") or []:
            if isinstance(rec, dict):
                merged["gpus"].update(rec.get("gpus") or {})
                for k in ("workdir_disk", "cgroup", "disk_bytes_total"):
                    if rec.get(k) is not None:
                        merged[k] = rec[k]
        return merged

    def gpu_value(self, p: dict[str, Any], gpu: str, col: str) -> float | None:
        row = (p.get("g") or {}).get(gpu)
        i = self.col.get(col)
        if not isinstance(row, list) or i is None or i >= len(row):
            return None
        return _num(row[i])

    def charts(self) -> list[Chart]:
        out = []
        if self.gpus:
            out += self.gpu_charts()
        for make in (self.memory_chart, self.disk_chart, self.progress_chart):
            chart = make()
            if chart is not None:
                out.append(chart)
        note = self.resolution()
        for chart in out:
            chart.note = note
        return out

    def resolution(self) -> str:
        """`a point every 10 s`, and how coarse the thinned older points are."""
        spans = sorted(_num(p.get("s")) or 0.0 for p in self.pts if (_num(p.get("s")) or 0.0) > 0)
        if not spans:
            return ""
        fine, coarse = spans[0], spans[-1]
        text = "a point every %s" % _secs(fine)
        return text + (" (older points thinned to %s)" % _secs(coarse) if coarse > fine * 1.5 else "")

    # -- GPUs
    def _gpu_series(self, col: str, scale: float = 1.0) -> list[Series]:
        out = []
        for gpu in self.gpus:
            pts = series_of(self.pts, lambda p: _scaled(self.gpu_value(p, gpu, col), scale))   # called here
            if any(v is not None for _t, v in pts):
                out.append(Series("GPU %s" % gpu, pts, color=_gpu_key(gpu)[0]))
        return out

    def gpu_charts(self) -> list[Chart]:
        mem_total = max([_num((i or {}).get("memory_total_mib")) or 0.0 for i in self.info["gpus"].values()] or [0.0])
        clock_max = max([_num((i or {}).get("sm_clock_max_mhz")) or 0.0 for i in self.info["gpus"].values()] or [0.0])
        charts = [
            Chart("GPU utilisation", "%", self._gpu_series("util_pct"), 0, 100, marks=self.marks),
            Chart("GPU memory used", "GiB", self._gpu_series("memory_used_mib", 1 / MIB_PER_GIB), 0,
                  mem_total / MIB_PER_GIB or None, marks=self.marks),
            Chart("GPU temperature", "°C", self._gpu_series("temperature_c"), None, None, marks=self.marks),
            Chart("GPU power", "W", self._gpu_series("power_w"), 0, None, marks=self.marks),
            Chart("SM clock", "MHz", self._gpu_series("sm_clock_mhz"), 0, clock_max or None,
                  bands=self.throttle_bands(), marks=self.marks),
        ]
        return [c for c in charts if c.series]

    def throttle_bands(self) -> list[tuple[float, float, str]]:
        """Spans where a GPU of the run was slowed (thermal, hardware, power brake)."""
        bad = 0
        for name, bit in self.bits.items():
            if name in SLOWDOWN:
                bad |= bit
        bands: list[tuple[float, float, str]] = []
        for p in self.pts:
            reasons: list[str] = []
            for gpu in self.gpus:
                mask = int(self.gpu_value(p, gpu, "throttle_mask") or 0)
                if mask & bad:
                    reasons.append("GPU %s: %s" % (gpu, ", ".join(self._names(mask & bad))))
            if not reasons:
                continue
            t0, t1 = float(p["t"]), float(p["t"]) + (_num(p.get("s")) or 0.0)
            tip = "throttled — " + "; ".join(reasons)
            if bands and abs(bands[-1][1] - t0) < 1e-6 and bands[-1][2] == tip:
                bands[-1] = (bands[-1][0], t1, tip)
            else:
                bands.append((t0, t1, tip))
        return bands

    def _names(self, mask: int) -> list[str]:
        return [name for name, bit in self.bits.items() if mask & bit]

    # -- the box
    def memory_chart(self) -> Chart | None:
        used = series_of(self.pts, lambda p: _scaled(_col(p, "m", 0), 1 / GIB))
        if not any(v is not None for _t, v in used):
            return None
        limit = series_of(self.pts, lambda p: _scaled(_col(p, "m", 1), 1 / GIB))
        series = [Series("used", used, color=0)]
        if any(v is not None for _t, v in limit):
            series.append(Series("limit (memory.max)", limit, color=3, dashed=True, step=True))
        return Chart("Memory of the cgroup", "GiB", series, 0, None, marks=self.marks)

    def disk_chart(self) -> Chart | None:
        used = series_of(self.pts, lambda p: _col(p, "d", 0))
        inodes = series_of(self.pts, lambda p: _col(p, "d", 1))
        series = [s for s in (Series("bytes used", used, color=0), Series("inodes used", inodes, color=1, dashed=True))
                  if any(v is not None for _t, v in s.points)]
        if not series:
            return None
        where = self.info.get("workdir_disk")
        return Chart("Disk of the workdir" + (" (%s)" % where if where else ""), "%", series, 0, 100, marks=self.marks)

    def progress_chart(self) -> Chart | None:
        frac = series_of(self.pts, lambda p: _scaled(_col(p, "p", 2), 100.0))
        if any(v is not None for _t, v in frac):
            return Chart("Progress of the running stage", "%", [Series("progress", frac, color=2)], 0, 100,
                         marks=self.marks)
        done = series_of(self.pts, lambda p: _col(p, "p", 0))
        if any(v is not None for _t, v in done):
            return Chart("Progress of the running stage", "steps", [Series("done", done, color=2)], 0, None,
                         marks=self.marks)
        return None

    # -- metrics: every logged reading (`m` records) where the history has them, else the
    # last value of each point (a history written before readings were kept)
    def _metric_records(self) -> list[dict[str, Any]]:
        readings = [r for r in self.hist.get("metrics") or [] if isinstance(r, dict)]
        return readings or self.pts

    def metric_names(self) -> list[tuple[str, str]]:
        """(stage, metric) in order of first appearance."""
        seen: dict[tuple[str, str], None] = {}
        for p in self._metric_records():
            for name in p.get("x") or {}:
                seen.setdefault((str(p.get("st") or ""), str(name)), None)
        return list(seen)

    def last_metrics(self) -> list[tuple[str, str, float]]:
        """(stage, metric, value) of the last record holding each: the table when status has none."""
        last: dict[tuple[str, str], float] = {}
        for p in self._metric_records():
            for name, v in (p.get("x") or {}).items():
                if _num(v) is not None:
                    last[(str(p.get("st") or ""), str(name))] = v
        return [(st, name, v) for (st, name), v in last.items()]

    def metric_charts(self) -> list[Chart]:
        readings = [r for r in self.hist.get("metrics") or [] if isinstance(r, dict)]
        out = []
        for i, (stage, name) in enumerate(self.metric_names()):
            if readings:
                pts = [(float(r["t"]), _num((r.get("x") or {}).get(name))) for r in readings
                       if str(r.get("st") or "") == stage and _num((r.get("x") or {}).get(name)) is not None]
                note = "every logged value (%d)" % len(pts)
            else:
                pts = series_of(self.pts, lambda p: _num((p.get("x") or {}).get(name))     # called here
                                if str(p.get("st") or "") == stage else None)
                note = "the last logged value of each point"
            title = "%s (stage %s)" % (name, stage) if stage else name
            out.append(Chart(title, "as logged", [Series(name, pts, color=i)], None, None, marks=self.marks,
                             note=note))
        return out


def _secs(v: float) -> str:
    if v < 90:
        return "%g s" % round(v, 1)
    if v < 5400:
        return "%g min" % round(v / 60, 1)
    return "%g h" % round(v / 3600, 1)


def _col(p: dict[str, Any], key: str, i: int) -> float | None:
    row = p.get(key)
    return _num(row[i]) if isinstance(row, list) and i < len(row) else None


def _scaled(v: float | None, k: float) -> float | None:
    return None if v is None else v * k


def _gpu_key(k: str) -> tuple[int, str]:
    try:
        return (int(k), k)
    except ValueError:
        return (99, k)
