"""The run's time axis, its stage attempts (the Gantt) and its events lane, from report-data.

Attempts come from the events (stage_started ... stage_succeeded|failed|retry|...), so retries
show as separate bars; a run without recorded events falls back to each stage's last attempt in
status. Alerts become spans (raised -> resolved, or to the end); one-shot facts are dots.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boxagent.api import format_duration
from rgt_client.report.svg import Bar, Row, TimeAxis, epoch

STAGE_ENDS = {"stage_succeeded": "succeeded", "stage_failed": "failed", "stage_cancelled": "cancelled",
              "stage_interrupted": "interrupted", "stage_retry": "failed"}
LIFECYCLE = ("run_", "stage_")
MAX_LANE_ROWS = 8


@dataclass
class Attempt:
    stage: str
    attempt: int
    t0: float
    t1: float | None
    state: str
    cause: dict[str, Any] | None
    retried: bool = False


def events_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ev in (doc.get("history") or {}).get("events") or []:
        if isinstance(ev, dict):
            ts = epoch(ev.get("ts")) if ev.get("ts") is not None else epoch(ev.get("at"))
            if ts is not None:
                out.append(dict(ev, ts=ts))
    out.sort(key=lambda e: e["ts"])
    return out


def run_start(doc: dict[str, Any], events: list[dict[str, Any]], attempts: list[Attempt]) -> float | None:
    """When the run first started, over all its attempts: status's started_at is the latest
    resume's, and a resumed run's header said "after 6s" while its first events read "-1m30s"."""
    run = doc.get("run") or {}
    starts = [t for t in [epoch(run.get("started_at"))] + [a.t0 for a in attempts] if t is not None]
    starts += [e["ts"] for e in events if e.get("type") == "run_started"]
    return min(starts) if starts else None


def resumes(events: list[dict[str, Any]]) -> list[float]:
    """When the run started again after its first start (a resume, a restart)."""
    return [e["ts"] for e in events if e.get("type") == "run_started"][1:]


def axis_for(doc: dict[str, Any], events: list[dict[str, Any]], attempts: list[Attempt]) -> TimeAxis:
    """From the run's start to its end; for a live run to now; for a run whose agent stopped,
    to the last thing recorded (the rest is unknown, and would only be empty space)."""
    run = doc.get("run") or {}
    pts = (doc.get("history") or {}).get("points") or []
    starts = [t for t in [epoch(run.get("started_at"))] + [a.t0 for a in attempts] if t is not None]
    if pts:
        starts.append(float(pts[0]["t"]))
    if not starts:
        starts = [e["ts"] for e in events[:1]] or [epoch(doc.get("generated_at")) or 0.0]
    t0 = min(starts)
    ends = [t for t in [epoch(run.get("ended_at"))] + [a.t1 for a in attempts] + [e["ts"] for e in events[-1:]]
            if t is not None]
    if pts:
        ends.append(float(pts[-1]["t"]) + float(pts[-1].get("s") or 0))
    if run.get("state") in ("running", "queued") and (doc.get("agent") or {}).get("running"):
        ends.append(epoch(doc.get("generated_at")) or t0)
    t1 = max(ends) if ends else t0 + 60
    pad = (t1 - t0) * 0.01
    return TimeAxis(t0 - pad, t1 + pad)


def attempts_of(doc: dict[str, Any], events: list[dict[str, Any]]) -> list[Attempt]:
    out: list[Attempt] = []
    open_: dict[str, Attempt] = {}
    for ev in events:
        stage, etype = ev.get("stage"), ev.get("type")
        if not isinstance(stage, str):
            continue
        if etype == "stage_started":
            a = Attempt(stage, int(ev.get("attempt") or 1), ev["ts"], None, "running", None)
            open_[stage] = a
            out.append(a)
        elif etype in STAGE_ENDS and stage in open_:
            a = open_.pop(stage)
            a.t1, a.state, a.cause = ev["ts"], STAGE_ENDS[etype], ev.get("cause") or _cause_from(ev)
            a.retried = etype == "stage_retry"
    if not out:
        out = _from_status(doc)
    _close_open(doc, out)
    return out


def _cause_from(ev: dict[str, Any]) -> dict[str, Any] | None:
    if ev.get("type") == "stage_retry":
        return {"class": ev.get("class") or "retry", "summary": ev.get("summary")}
    return None


def _from_status(doc: dict[str, Any]) -> list[Attempt]:
    out = []
    for st in (doc.get("run") or {}).get("stages") or []:
        t0 = epoch(st.get("started_at"))
        if t0 is None or not isinstance(st, dict):
            continue
        out.append(Attempt(str(st.get("name")), int(st.get("attempt") or 1), t0, epoch(st.get("ended_at")),
                           str(st.get("state") or "unknown"), st.get("cause")))
    return out


def _close_open(doc: dict[str, Any], attempts: list[Attempt]) -> None:
    """An attempt still open: running to now, or (agent stopped) to the last record, marked so."""
    stages = {st.get("name"): st for st in (doc.get("run") or {}).get("stages") or [] if isinstance(st, dict)}
    alive = bool((doc.get("agent") or {}).get("running"))
    now = epoch(doc.get("generated_at"))
    for a in attempts:
        if a.t1 is not None:
            continue
        st = stages.get(a.stage) or {}
        if st.get("state") not in (None, "running") and epoch(st.get("ended_at")):
            a.t1, a.state, a.cause = epoch(st.get("ended_at")), str(st["state"]), st.get("cause")
        elif alive and now is not None:
            a.t1 = now
        else:
            a.state = "running" if alive else "unknown"


def gantt_rows(doc: dict[str, Any], attempts: list[Attempt], axis: TimeAxis) -> list[Row]:
    names = [str(s.get("name")) for s in (doc.get("run") or {}).get("stages") or [] if isinstance(s, dict)]
    names += [a.stage for a in attempts if a.stage not in names]
    rows = []
    for name in names:
        state = next((str(s.get("state")) for s in (doc.get("run") or {}).get("stages") or []
                      if isinstance(s, dict) and s.get("name") == name), "")
        row = Row(name, note={"pending": "not started", "skipped": "skipped: done in an earlier run (marker)"}.get(state, state))
        for a in (x for x in attempts if x.stage == name):
            t1 = a.t1 if a.t1 is not None else axis.t1
            row.bars.append(Bar(a.t0, t1, "st-%s" % a.state, _bar_text(a, t1), _bar_tip(a, t1), _bar_short(a)))
        rows.append(row)
    return rows


def _bar_text(a: Attempt, t1: float) -> str:
    what = "retried" if a.retried else a.state
    text = "%s%s %s" % ("#%d " % a.attempt if a.attempt > 1 or a.retried else "", what, format_duration(t1 - a.t0))
    if a.cause and a.state not in ("succeeded", "running"):
        text += " · %s" % (a.cause.get("class") or "?")
    return text


def _bar_short(a: Attempt) -> str:
    what = (a.cause or {}).get("class") if a.state not in ("succeeded", "running") else None
    return "#%d %s" % (a.attempt, what or a.state) if a.attempt > 1 or a.retried else ""


def _bar_tip(a: Attempt, t1: float) -> str:
    lines = ["stage %s attempt %d: %s after %s" % (a.stage, a.attempt, "retried" if a.retried else a.state,
                                                  format_duration(t1 - a.t0))]
    if a.cause:
        lines.append("cause: %s: %s" % (a.cause.get("class"), a.cause.get("summary") or ""))
        if a.cause.get("remediation"):
            lines.append("fix: %s" % a.cause["remediation"])
    return "\n".join(lines)


def lane_rows(events: list[dict[str, Any]], axis: TimeAxis) -> list[Row]:
    """Events that are not stage/run lifecycle, one row per type: alert spans and dots."""
    rows: dict[str, Row] = {}
    raised: dict[str, dict[str, Any]] = {}
    for ev in events:
        etype = str(ev.get("type") or "event")
        if etype.startswith(LIFECYCLE) or etype in ("heartbeat",):
            continue
        row = rows.setdefault(etype, Row(etype))
        key = ev.get("key")
        if key and ev.get("resolved"):
            start = raised.pop(str(key), None)
            if start is not None:
                row.bars.append(_span(start, ev["ts"], ev))
            row.dots.append((ev["ts"], "info", _tip(ev)))
            continue
        if key and ev.get("severity") in ("warning", "critical") and etype not in ("oom_kill", "gpu_xid", "gpu_ecc"):
            raised.setdefault(str(key), ev)
        row.dots.append((ev["ts"], str(ev.get("severity") or "info"), _tip(ev)))
    for start in raised.values():
        rows[str(start.get("type"))].bars.append(_span(start, axis.t1, None))
    ordered = sorted(rows.values(), key=lambda r: -_worst(r))
    if len(ordered) > MAX_LANE_ROWS:
        rest = Row("other")
        for r in ordered[MAX_LANE_ROWS - 1:]:
            rest.bars += r.bars
            rest.dots += r.dots
        ordered = ordered[:MAX_LANE_ROWS - 1] + [rest]
    return ordered


def _span(start: dict[str, Any], t1: float, end: dict[str, Any] | None) -> Bar:
    sev = str(start.get("severity") or "warning")
    tip = "%s\n%s" % (_tip(start), ("until " + _tip(end)) if end else "still active at the end of the record")
    return Bar(start["ts"], t1, "sev-%s span" % sev, "", tip)


def _worst(row: Row) -> int:
    rank = {"info": 0, "warning": 1, "critical": 2}
    return max([rank.get(sev, 0) for _t, sev, _tip in row.dots] or [0])


def _tip(ev: dict[str, Any]) -> str:
    from rgt_client.report.svg import utc
    text = "%s  %s [%s] %s" % (utc(ev["ts"]), ev.get("type"), ev.get("severity"), ev.get("summary") or "")
    ev_list = ev.get("evidence") or []
    if isinstance(ev_list, list) and ev_list:
        text += "\n" + "\n".join("· %s" % e for e in ev_list[:4])
    return text


def marks_of(events: list[dict[str, Any]]) -> list[tuple[float, str]]:
    """Vertical lines across the charts: failures and the faults that explain them."""
    out = []
    for ev in events:
        etype, sev = str(ev.get("type")), ev.get("severity")
        if etype in ("stage_failed", "stage_retry", "oom_kill", "gpu_xid", "gpu_lost", "machine_restart",
                     "preempted", "stalled") and sev in ("warning", "critical"):
            out.append((ev["ts"], str(sev)))
    return out
