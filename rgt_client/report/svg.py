"""Static SVG for the report: a UTC time axis shared by every chart, line charts, the stage
timeline (Gantt) and the events lane. Our own ~300 lines rather than a plotting library: the
output must be inline SVG with no script and no font or stylesheet from the network, styled by
the page's CSS (so prefers-color-scheme switches it), and byte-for-byte deterministic.

Every piece of text goes through esc() (the box is untrusted). Colours are CSS classes (`c0`..
`c7`: the Okabe-Ito palette; `st-<state>`, `sev-<severity>`), never inline values, so light and
dark mode are one stylesheet's business.
"""
from __future__ import annotations

import calendar
import html
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

WIDTH = 960          # the viewBox width of every figure: one pixel grid shared by all of them
LEFT = 118           # room for y labels / row names; the same for every figure, so x lines up
RIGHT = 14
PLOT_W = WIDTH - LEFT - RIGHT
AXIS_H = 22          # x tick labels under a plot
MAX_DRAW_POINTS = 700

_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
               86400, 172800, 604800)


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def fmt_num(v: float) -> str:
    """A tick or value label: short, no float noise (0.30000000000000004 -> 0.3)."""
    a = abs(v)
    if a >= 1e9:
        return "%.3gG" % (v / 1e9)
    if a >= 1e6:
        return "%.3gM" % (v / 1e6)
    if a >= 1e4:
        return "%.3gk" % (v / 1e3)
    if a >= 100 or v == int(v):
        return "%d" % round(v)
    return "%.3g" % v


def utc(t: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return time.strftime(fmt, time.gmtime(t)) + (" UTC" if fmt.endswith("%S") else "")


@dataclass
class TimeAxis:
    t0: float
    t1: float

    def __post_init__(self) -> None:
        if self.t1 <= self.t0:
            self.t1 = self.t0 + 60.0

    def x(self, t: float) -> float:
        return LEFT + (t - self.t0) / (self.t1 - self.t0) * PLOT_W

    def ticks(self, target: int = 8) -> list[tuple[float, str]]:
        span = self.t1 - self.t0
        step = next((s for s in _TIME_STEPS if span / s <= target), _TIME_STEPS[-1] * math.ceil(span / target / 604800))
        first = math.ceil(self.t0 / step) * step
        out, last_day = [], None
        t = first
        while t <= self.t1 + 1e-9:
            day = time.strftime("%m-%d", time.gmtime(t))
            fmt = "%H:%M:%S" if step < 60 else "%H:%M"
            label = time.strftime(fmt, time.gmtime(t))
            if step >= 86400:
                label = day
            elif day != last_day and (span >= 86400 or last_day is not None):
                label = "%s %s" % (day, label)
            last_day = day
            out.append((float(t), label))
            t += step
        return out


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / target
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 0.0
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 0.0)
    if not step > 0 or not math.isfinite(step):
        # a span of subnormal numbers (2.49e-320) underflows every step: the two ends are the ticks
        return [lo, hi]
    first = math.floor(lo / step) * step
    ticks, v = [], first
    while v <= hi + step * 1e-6:
        ticks.append(round(v, 10))
        v += step
    return ticks


@dataclass
class Series:
    label: str
    points: list[tuple[float, float | None]]   # (time, value); None breaks the line
    color: int = 0                              # palette index 0..7
    dashed: bool = False
    step: bool = False                          # a level that holds (a limit): drawn as steps


@dataclass
class Chart:
    title: str
    unit: str
    series: list[Series]
    y_min: float | None = 0.0
    y_max: float | None = None
    bands: list[tuple[float, float, str]] = field(default_factory=list)    # shaded spans + tooltip
    marks: list[tuple[float, str]] = field(default_factory=list)           # vertical lines (t, severity)
    height: int = 130
    fmt: str = "%s"                                                         # value -> label
    note: str = ""                                                          # its resolution, in words


def _y_range(chart: Chart) -> tuple[float, float]:
    vals = [v for s in chart.series for _t, v in s.points if v is not None]
    lo = chart.y_min if chart.y_min is not None else (min(vals) if vals else 0.0)
    hi = chart.y_max if chart.y_max is not None else (max(vals) if vals else 1.0)
    if chart.y_max is None and vals:
        hi = max(hi, max(vals))
    if chart.y_min is None and vals:
        lo = min(lo, min(vals))
        pad = (hi - lo) * 0.05 or abs(hi) * 0.1 or 1.0
        lo, hi = (max(lo - pad, 0.0) if lo >= 0 else lo - pad), hi + pad
    if hi <= lo:
        hi = lo + 1.0
    return lo, hi


def line_chart(axis: TimeAxis, chart: Chart) -> str:
    h = chart.height
    lo, hi = _y_range(chart)
    ticks = nice_ticks(lo, hi)
    if ticks[-1] < hi - 1e-9:      # room above the highest line: it must not sit on the frame
        ticks.append(ticks[-1] + (ticks[1] - ticks[0] if len(ticks) > 1 else 1.0))
    ticks = [v for v in ticks if v >= lo - 1e-9] or [lo, hi]
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])

    def y(v: float) -> float:
        # Clamped: a value off a fixed scale (a GPU answering 4294967295 % busy) stays on the chart.
        v = min(max(v, lo), hi)
        return 6 + (1 - (v - lo) / (hi - lo)) * (h - 6)

    out = [_open(h + AXIS_H, "%s, %s" % (chart.title, chart.unit))]
    for t0, t1, tip in chart.bands:
        x0, x1 = axis.x(max(t0, axis.t0)), axis.x(min(t1, axis.t1))
        out.append('<rect class="band" x="%.1f" y="6" width="%.1f" height="%d"><title>%s</title></rect>'
                   % (x0, max(x1 - x0, 1.5), h - 6, esc(tip)))
    for v in ticks:
        out.append('<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>' % (LEFT, LEFT + PLOT_W, y(v), y(v)))
        out.append('<text class="yl" x="%d" y="%.1f">%s</text>' % (LEFT - 6, y(v) + 4, esc(fmt_num(v))))
    out += _x_axis(axis, h)
    for t, sev in chart.marks:
        if axis.t0 <= t <= axis.t1:
            out.append('<line class="mark sev-%s" x1="%.1f" x2="%.1f" y1="6" y2="%d"/>' % (esc(sev), axis.x(t), axis.x(t), h))
    for s in chart.series:
        out += _series_path(axis, s, y)
    out.append("</svg>")
    return "".join(out)


def _series_path(axis: TimeAxis, s: Series, y) -> list[str]:
    pts = thin_points(s.points, MAX_DRAW_POINTS)
    segs: list[list[tuple[float, float]]] = [[]]
    for t, v in pts:
        if v is None:
            if segs[-1]:
                segs.append([])
            continue
        if s.step and segs[-1]:
            segs[-1].append((axis.x(t), segs[-1][-1][1]))
        segs[-1].append((axis.x(t), y(v)))
    out = []
    cls = "ln c%d%s" % (s.color % 8, " dash" if s.dashed else "")
    for seg in segs:
        if len(seg) == 1:
            out.append('<circle class="dot c%d" cx="%.1f" cy="%.1f" r="2.2"><title>%s</title></circle>'
                       % (s.color % 8, seg[0][0], seg[0][1], esc(s.label)))
        elif seg:
            d = "M" + " L".join("%.1f %.1f" % p for p in seg)
            out.append('<path class="%s" d="%s"><title>%s</title></path>' % (cls, d, esc(s.label)))
    return out


def thin_points(pts: Sequence[tuple[float, float | None]], limit: int) -> list[tuple[float, float | None]]:
    """At most ~limit points to draw: consecutive points averaged in groups (gaps kept)."""
    if len(pts) <= limit:
        return list(pts)
    size = math.ceil(len(pts) / limit)
    out: list[tuple[float, float | None]] = []
    for i in range(0, len(pts), size):
        group = pts[i:i + size]
        vals = [v for _t, v in group if v is not None]
        if len(vals) < len(group) and out and out[-1][1] is not None:
            out.append((group[0][0], None))        # a gap inside the group stays a gap
        if vals:
            out.append((sum(t for t, _v in group) / len(group), sum(vals) / len(vals)))
    if pts[-1][1] is not None and out and out[-1] != pts[-1]:
        out.append(pts[-1])       # the curve ends at the last value, not at its group's mean
    return out


def _open(height: int, label: str) -> str:
    return ('<svg class="fig" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s">' % (WIDTH, height, esc(label)))


def _x_axis(axis: TimeAxis, h: int) -> list[str]:
    out = ['<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>' % (LEFT, LEFT + PLOT_W, h, h),
           '<text class="yl utc" x="%d" y="%d">UTC</text>' % (LEFT - 8, h + 16)]
    ticks = axis.ticks()
    for i, (t, label) in enumerate(ticks):
        x = axis.x(t)
        out.append('<line class="tick" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>' % (x, x, h, h + 4))
        anchor = "end" if x > LEFT + PLOT_W - 30 else ("start" if x < LEFT + 30 else "middle")
        out.append('<text class="xl" x="%.1f" y="%d" text-anchor="%s">%s</text>' % (x, h + 16, anchor, esc(label)))
    return out


@dataclass
class Bar:
    t0: float
    t1: float
    css: str            # st-<state> or sev-<severity>
    text: str           # drawn inside (or next to) the bar when it fits
    tip: str            # hover text
    short: str = ""     # the label when `text` does not fit


@dataclass
class Row:
    label: str
    bars: list[Bar] = field(default_factory=list)
    dots: list[tuple[float, str, str]] = field(default_factory=list)     # (t, severity, tip)
    note: str = ""                                                       # shown when the row is empty


def lanes(axis: TimeAxis, rows: list[Row], row_h: int = 26, label: str = "timeline") -> str:
    """Rows of bars on the time axis: the stage Gantt, and the events lane (spans + dots)."""
    h = max(len(rows), 1) * row_h + 4
    out = [_open(h + AXIS_H, label)]
    for i, row in enumerate(rows):
        top = 2 + i * row_h
        if i % 2:
            out.append('<rect class="zebra" x="%d" y="%d" width="%d" height="%d"/>' % (LEFT, top, PLOT_W, row_h))
        out.append('<text class="rl" x="%d" y="%d">%s</text>' % (LEFT - 8, top + row_h / 2 + 4, esc(_short(row.label, 16))))
        bars = sorted(row.bars, key=lambda b: b.t0)
        for i, bar in enumerate(bars):
            left = axis.x(bars[i - 1].t1) if i else LEFT
            right = axis.x(bars[i + 1].t0) if i + 1 < len(bars) else LEFT + PLOT_W
            out += _bar(axis, bar, top + 4, row_h - 8, left, right)
        for t, sev, tip in row.dots:
            out.append(_dot(axis.x(t), top + row_h / 2, sev, tip))
        if not row.bars and not row.dots and row.note:
            out.append('<text class="bt" x="%d" y="%.1f">%s</text>' % (LEFT + 6, top + row_h / 2 + 4, esc(row.note)))
    out += _x_axis(axis, h)
    out.append("</svg>")
    return "".join(out)


def _bar(axis: TimeAxis, bar: Bar, y: float, h: float, left: float, right: float) -> list[str]:
    """A bar and its label: inside when it fits, else in the free space after it, else before
    it (up to the neighbouring bars), else the short label, else none (the tooltip has it)."""
    x0, x1 = axis.x(max(bar.t0, axis.t0)), axis.x(min(bar.t1, axis.t1))
    w = max(x1 - x0, 2.0)
    out = ['<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2"><title>%s</title></rect>'
           % (esc(bar.css), x0, y, w, h, esc(bar.tip))]
    ty = y + h / 2 + 4
    for text in (t for t in (bar.text, bar.short) if t):
        need = len(text) * 7.2 + 8          # bold 11px inside a bar; plain outside needs less
        if need < w:
            out.append('<text class="bt in" x="%.1f" y="%.1f">%s</text>' % (x0 + 4, ty, esc(text)))
        elif need - 4 < right - (x0 + w):
            out.append('<text class="bt" x="%.1f" y="%.1f">%s</text>' % (x0 + w + 4, ty, esc(text)))
        elif need - 4 < x0 - left:
            out.append('<text class="bt" x="%.1f" y="%.1f" text-anchor="end">%s</text>' % (x0 - 4, ty, esc(text)))
        else:
            continue
        break
    return out


def _dot(x: float, y: float, sev: str, tip: str) -> str:
    """Severity is told by shape as well as colour: circle info, triangle warning, diamond critical."""
    if sev == "critical":
        shape = '<path class="dot sev-critical" d="M%.1f %.1f l6 6 l-6 6 l-6 -6 z"' % (x, y - 6)
    elif sev == "warning":
        shape = '<path class="dot sev-warning" d="M%.1f %.1f l6 10 l-12 0 z"' % (x, y - 6)
    else:
        shape = '<circle class="dot sev-info" cx="%.1f" cy="%.1f" r="4"' % (x, y)
    return shape + "><title>%s</title>%s" % (esc(tip), "</circle>" if sev not in ("critical", "warning") else "</path>")


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def epoch(iso: object) -> float | None:
    """The agent's ISO 8601 UTC time as epoch seconds (None for anything else)."""
    if isinstance(iso, (int, float)) and not isinstance(iso, bool):
        return float(iso)
    if not isinstance(iso, str) or len(iso) < 19:
        return None
    try:
        base = calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    rest = iso[19:].rstrip("Z")
    if rest.startswith("."):
        try:
            return base + float("0" + rest.split("+")[0])
        except ValueError:
            pass
    return float(base)
