"""The report page: one self-contained HTML file (inline SVG and CSS; no script, nothing fetched).

render(doc) takes `rgt-agent report-data`'s document. Everything in it came from the box and
is escaped (svg.esc) before it reaches the page.
"""
from __future__ import annotations

from typing import Any

from boxagent.api import format_bytes, format_duration
from rgt_client import __version__
from rgt_client.report import charts as charts_mod
from rgt_client.report import timeline
from rgt_client.report import data
from rgt_client.report.data import normalise
from rgt_client.report.style import CSS
from rgt_client.report.svg import Chart, TimeAxis, epoch, esc, fmt_num, lanes, line_chart, utc

MAX_EVENT_ROWS = 2000
# Belt and braces: even if a later change let a URL into the page, the browser fetches nothing and
# runs nothing (inline CSS is all the page needs).
CSP = ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
       'img-src data:; form-action \'none\'; base-uri \'none\'">')
GANTT_STATES = ("succeeded", "failed", "running", "interrupted", "cancelled")


def render(doc: dict[str, Any], verified: dict[str, Any] | None = None) -> str:
    """The whole page. `verified`: a PULL_VERIFIED.json from this laptop (rgt-client verify)."""
    doc = normalise(doc)
    run = doc["run"]
    events = timeline.events_of(doc)
    attempts = timeline.attempts_of(doc, events)
    axis = timeline.axis_for(doc, events, attempts)
    measures = charts_mod.Measures(doc.get("history") or {}, timeline.marks_of(events))
    title = "rgt report: run %s on %s" % (run.get("name") or "?", doc.get("host") or "?")
    start = timeline.run_start(doc, events, attempts)
    body = [_header(doc, run, axis, start, timeline.resumes(events)),
            _facts(doc, run, measures, data.verified(verified) or doc["pull_verified"]),
            _timeline(doc, attempts, events, axis), _health(doc, measures, axis), _metrics(run, measures, axis),
            _events_table(events, start if start is not None else axis.t0), _footer(doc)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<meta name=\"color-scheme\" content=\"light dark\">%s<title>%s</title><style>%s</style></head>"
            "<body><main>%s</main></body></html>\n" % (CSP, esc(title), CSS, "".join(b for b in body if b)))


def _header(doc: dict[str, Any], run: dict[str, Any], axis: TimeAxis, t0: float | None, again: list[float]) -> str:
    state = str(run.get("state") or "unknown")
    out = ['<h1>Run %s <span class="badge st-%s">%s</span></h1>' % (esc(run.get("name")), esc(state), esc(state))]
    out.append('<p class="sub">on %s · profile %s · report made %s</p>' % (
        esc(doc.get("host") or "?"), esc(doc.get("profile") or "-"), esc(_when(doc.get("generated_at")))))
    t1 = epoch(run.get("ended_at"))
    if t0 is not None:
        line = "Started %s" % utc(t0)
        if again:
            line += ", started again %s (%s)" % (
                "%d times" % len(again) if len(again) > 1 else "once", ", ".join(utc(t) for t in again[-3:]))
        if t1 is not None:
            line += ", ended %s after %s." % (utc(t1), format_duration(t1 - t0))
        else:
            line += ", %s so far." % format_duration(axis.t1 - t0)
        out.append("<p>%s %s</p>" % (esc(line), esc(_stage_counts(run))))
    agent = doc.get("agent") or {}
    if not agent.get("running") and state in ("running", "queued"):
        out.append('<p class="cause">The agent on this box is not running (last heartbeat %s): this report shows '
                   "what its files recorded until then; what happened after is unknown.</p>"
                   % esc(agent.get("heartbeat_at") or "never"))
    out.append(_cause(run))
    return "".join(out)


def _when(iso: Any) -> str:
    t = epoch(iso)
    return utc(t) if t is not None else "?"


def _stage_counts(run: dict[str, Any]) -> str:
    stages = [s for s in run.get("stages") or [] if isinstance(s, dict)]
    counts: dict[str, int] = {}
    for st in stages:
        counts[str(st.get("state"))] = counts.get(str(st.get("state")), 0) + 1
    return "%d stage%s: %s." % (len(stages), "" if len(stages) == 1 else "s",
                                ", ".join("%d %s" % (n, s) for s, n in counts.items()) or "none")


def _cause(run: dict[str, Any]) -> str:
    bad = next((s for s in run.get("stages") or [] if isinstance(s, dict)
                and s.get("state") in ("failed", "interrupted") and s.get("cause")), None)
    cause = (bad or {}).get("cause") or (run.get("cause") if run.get("state") in ("failed", "interrupted") else None)
    if not isinstance(cause, dict):
        return ""
    where = " in stage %s (attempt %s)" % (bad.get("name"), bad.get("attempt")) if bad else ""
    out = ['<div class="cause"><p><b>%s</b>%s: %s</p>' % (esc(cause.get("class")), esc(where), esc(cause.get("summary") or ""))]
    if cause.get("remediation"):
        out.append("<p>Fix: %s</p>" % esc(cause["remediation"]))
    evidence = [e for e in cause.get("evidence") or []][:6]
    if evidence:
        out.append("<ul>%s</ul>" % "".join("<li>%s</li>" % esc(e) for e in evidence))
    out.append("</div>")
    return "".join(out)


def _facts(doc: dict[str, Any], run: dict[str, Any], m: charts_mod.Measures, verified: Any) -> str:
    rows = []
    gpus = m.info.get("gpus") or {}
    if gpus:
        names: dict[str, list[str]] = {}
        for idx, g in sorted(gpus.items(), key=lambda kv: charts_mod._gpu_key(kv[0])):
            names.setdefault(str((g or {}).get("name") or "GPU"), []).append(idx)
        rows.append(("GPUs", "; ".join("%s × %d (index %s)" % (n, len(ix), ", ".join(ix)) for n, ix in names.items())))
    rows.append(("workdir", run.get("workdir") or (doc.get("spec") or {}).get("workdir") or "-"))
    art = run.get("artifacts") or {}
    if art.get("files"):
        rows.append(("artifacts", "%s files, %s" % (_count(art.get("files")), format_bytes(art.get("bytes")))))
    rows.append(("history", _resolution(doc, m)))
    cost = _cost(doc, run)
    if cost:
        rows.append(("cost", cost))
    rows.append(("verified pull", _verified(verified, run)))
    agent = doc.get("agent") or {}
    rows.append(("agent", "%s, version %s, last heartbeat %s" % (agent.get("state") or ("running" if agent.get("running") else "stopped"),
                                                                 agent.get("version") or "?", agent.get("heartbeat_at") or "never")))
    return '<dl class="facts">%s</dl>' % "".join("<dt>%s</dt><dd>%s</dd>" % (esc(k), esc(v)) for k, v in rows)


def _resolution(doc: dict[str, Any], m: charts_mod.Measures) -> str:
    hist = doc.get("history") or {}
    if hist.get("source") == "events.jsonl":
        return "no history file for this run (recorded before the run log existed): events only"
    if not m.pts:
        return "no samples recorded yet"
    spans = sorted(float(p.get("s") or 0) for p in m.pts)
    text = "%d points, one per %s" % (len(m.pts), _span(spans[0]))
    if spans[-1] > spans[0] * 1.5:
        text += " (older ones merged up to %s each to keep the file small)" % _span(spans[-1])
    n_ev = len(hist.get("events") or [])
    text += "; %d events" % n_ev
    if hist.get("dropped_events"):
        text += " (+%d routine events counted, not kept)" % hist["dropped_events"]
    return text


def _span(s: float) -> str:
    return "%gs" % round(s, 2) if s < 10 else format_duration(s)


def _cost(doc: dict[str, Any], run: dict[str, Any]) -> str:
    box = block if isinstance(block := doc.get("cost"), dict) else {}
    mine = run.get("cost")
    if not isinstance(mine, dict) and not box:
        return ""
    cur = box.get("currency") or ""
    parts = []
    if isinstance(mine, dict) and mine.get("spent") is not None:
        parts.append("this run %s %s over %s h" % (_money(mine.get("spent")), cur, fmt_num(float(mine.get("hours") or 0))))
    if box.get("price_per_hour") is not None:
        parts.append("box price %s %s/h" % (_money(box.get("price_per_hour")), cur))
    if box.get("spent") is not None:
        parts.append("box total %s %s since %s" % (_money(box.get("spent")), cur, box.get("since") or "?"))
    return "; ".join(parts)


def _count(v: Any) -> str:
    return "%d" % v if isinstance(v, (int, float)) else "?"


def _money(v: Any) -> str:
    return "%.2f" % v if isinstance(v, (int, float)) and not isinstance(v, bool) else "?"


def _verified(v: Any, run: dict[str, Any]) -> str:
    if not isinstance(v, dict):
        return "none recorded (rgt-client pull, then pass --pulled DIR to include it)"
    parts = []
    if v.get("files") is not None or v.get("bytes") is not None:
        parts.append("%s files, %s" % (_count(v.get("files")), format_bytes(v.get("bytes"))))
    parts.append("verified %s" % (v.get("verified_at") or "?"))
    text = ", ".join(parts)
    if v.get("matches_box_manifest") is False:
        text += " — WARNING: the box's manifest has changed since (the run wrote more after the pull)"
    if v.get("run") not in (None, run.get("name")):
        text += " — WARNING: this verification is of run %s, not this run" % v.get("run")
    if v.get("manifest_sha256"):
        text += "; manifest sha256 %s…" % str(v["manifest_sha256"])[:16]
    return text


def _timeline(doc: dict[str, Any], attempts: list[timeline.Attempt], events: list[dict[str, Any]],
              axis: TimeAxis) -> str:
    out = ["<h2>Timeline</h2>"]
    rows = timeline.gantt_rows(doc, attempts, axis)
    if rows:
        out.append("<h3>Stages</h3>" + lanes(axis, rows, label="stage timeline"))
        out.append(_legend([(_box("st-" + s), s) for s in GANTT_STATES]))
    lane = timeline.lane_rows(events, axis)
    if lane:
        out.append("<h3>Events and alerts</h3>" + lanes(axis, lane, row_h=22, label="events"))
        out.append(_legend([(_box("sev-critical"), "critical ◆"), (_box("sev-warning"), "warning ▲"),
                            (_box("sev-info"), "info ●"), (_box("sev-warning span"), "alert active")]))
    else:
        out.append('<p class="note">No alerts, faults or stalls were recorded while this run ran.</p>')
    return "".join(out)


def _health(doc: dict[str, Any], m: charts_mod.Measures, axis: TimeAxis) -> str:
    charts = m.charts()
    out = ["<h2>Box health over the run</h2>"]
    if not charts:
        out.append('<p class="note">No samples to draw: %s.</p>' % esc(_resolution(doc, m)))
        return "".join(out)
    out.append('<p class="note">Times are UTC. Dotted lines mark failures and faults (see the timeline)%s.</p>'
               % (", shaded spans GPU throttling" if any(c.bands for c in charts) else ""))
    for chart in charts:
        out.append(_figure(axis, chart))
    return "".join(out)


def _metrics(run: dict[str, Any], m: charts_mod.Measures, axis: TimeAxis) -> str:
    last = [(st.get("name"), k, v) for st in run.get("stages") or [] if isinstance(st, dict)
            for k, v in (st.get("metrics") or {}).items()] or m.last_metrics()
    charts = m.metric_charts()
    if not charts and not last:
        return ""
    out = ["<h2>Metrics</h2>"]
    if last:
        out.append("<table class=\"narrow\"><tr><th>stage</th><th>metric</th><th>last value</th></tr>%s</table>" % "".join(
            '<tr><td>%s</td><td>%s</td><td class="num">%s</td></tr>' % (esc(s), esc(k), esc(v)) for s, k, v in last))
    for chart in charts:
        out.append(_figure(axis, chart))
    return "".join(out)


def _figure(axis: TimeAxis, chart: Chart) -> str:
    items = [('<span class="sw c%d%s"></span>' % (s.color % 8, " dash" if s.dashed else ""), s.label)
             for s in chart.series]
    if chart.bands:
        items.append(('<span class="sw box band"></span>', "throttled"))
    unit = "%s · %s" % (chart.unit, chart.note) if chart.note else chart.unit
    return "<h3>%s <span class=\"note\">(%s)</span></h3>%s%s" % (
        esc(chart.title), esc(unit), _legend(items) if len(items) > 1 or chart.bands else "", line_chart(axis, chart))


def _box(css: str) -> str:
    return '<span class="sw box %s"></span>' % esc(css)


def _legend(items: list[tuple[str, str]]) -> str:
    return '<div class="legend">%s</div>' % "".join("<span>%s%s</span>" % (sw, esc(label)) for sw, label in items)


def _events_table(events: list[dict[str, Any]], start: float) -> str:
    if not events:
        return "<h2>Events</h2><p class=\"note\">No events recorded.</p>"
    rows = []
    for ev in events[-MAX_EVENT_ROWS:]:
        sev = str(ev.get("severity") or "info")
        rows.append('<tr><td class="t">%s</td><td class="t">%s</td><td class="sev %s">%s</td><td>%s</td>'
                    "<td>%s</td><td>%s</td></tr>" % (
                        esc(utc(ev["ts"], "%m-%d %H:%M:%S")), esc(_since(ev["ts"] - start)),
                        esc(sev), esc(sev), esc(ev.get("type")), esc(ev.get("stage") or ""), esc(ev.get("summary") or "")))
    note = ('<p class="note">The first %d of %d events are left out.</p>' % (len(events) - MAX_EVENT_ROWS, len(events))
            if len(events) > MAX_EVENT_ROWS else "")
    return ("<h2>Events</h2>%s<table><tr><th>time (UTC)</th><th>since start</th><th>severity</th><th>type</th>"
            "<th>stage</th><th>summary</th></tr>%s</table>" % (note, "".join(rows)))


def _since(dt: float) -> str:
    return ("+" if dt >= 0 else "-") + format_duration(abs(dt))


def _footer(doc: dict[str, Any]) -> str:
    return ("<footer>Made by rgt-client %s from <code>rgt-agent report-data</code> (agent %s). One file, no "
            "script, nothing loaded from the network: it opens offline and as a mail attachment.</footer>"
            % (esc(__version__), esc((doc.get("agent") or {}).get("version") or "?")))
