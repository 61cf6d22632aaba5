"""report-data from the box, made safe to draw: every field the page reads gets the type it
expects or is dropped. The box is untrusted (a broken or hostile agent, a half-written file), and
the drawing code then needs no check of its own.
"""
from __future__ import annotations

from typing import Any

from boxagent.api import NON_FINITE, numbers
from rgt_client.report.svg import epoch

_TEXT_LIMIT = 4000


def _num(v: Any) -> float | None:
    """A finite number a chart can scale (boxagent.base.numbers, shared with the agent): 1e999 or
    Infinity in a history line once stopped the report with an OverflowError."""
    return numbers.number("metric", v)


def _time(v: Any) -> float | None:
    return numbers.number("epoch_s", v)     # `"t": 1e308` is no time gmtime can draw


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v)
    return s if len(s) <= _TEXT_LIMIT else s[:_TEXT_LIMIT - 1] + "…"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _row(v: Any) -> list[float | None] | None:
    return [_num(x) for x in v] if isinstance(v, list) else None


def point(p: Any) -> dict[str, Any] | None:
    if not isinstance(p, dict) or _time(p.get("t")) is None:
        return None
    out: dict[str, Any] = {"t": _time(p["t"]), "s": min(max(_num(p.get("s")) or 0.0, 0.0), 1e9)}
    for key in ("m", "d", "p"):
        row = _row(p.get(key))
        if row is not None:
            out[key] = row
    gpus = {str(k): _row(v) for k, v in _dict(p.get("g")).items() if isinstance(v, list)}
    if gpus:
        out["g"] = gpus
    metrics = {str(k): _num(v) for k, v in _dict(p.get("x")).items() if _num(v) is not None}
    if metrics:
        out["x"] = metrics
        out["st"] = _text(p.get("st")) or ""
    return out


def reading(r: Any) -> dict[str, Any] | None:
    """One logged metric reading (an `m` record): its time, stage, log line and numbers."""
    if not isinstance(r, dict) or _num(r.get("t")) is None:
        return None
    values = {str(k): _num(v) for k, v in _dict(r.get("x")).items() if _num(v) is not None}
    if not values:
        return None
    return {"t": _num(r["t"]), "st": _text(r.get("st")) or "", "l": _num(r.get("l")), "x": values}


def event(ev: Any) -> dict[str, Any] | None:
    if not isinstance(ev, dict):
        return None
    out: dict[str, Any] = {k: _text(ev.get(k)) for k in ("id", "at", "type", "severity", "run", "stage", "summary", "key")}
    out["severity"] = out["severity"] if out["severity"] in ("info", "warning", "critical") else "info"
    out["type"] = out["type"] or "event"
    ts = _time(ev.get("ts"))
    out["ts"] = ts if ts is not None else _time(epoch(ev.get("at")))
    if out["ts"] is None:
        return None
    out["resolved"] = ev.get("resolved") is True
    out["attempt"] = int(_num(ev.get("attempt")) or 1)
    out["evidence"] = [t for t in (_text(e) for e in _list(ev.get("evidence"))) if t]
    out["cause"] = cause(ev.get("cause"))
    out["class"] = _text(ev.get("class"))
    return out


def cause(c: Any) -> dict[str, Any] | None:
    if not isinstance(c, dict):
        return None
    out: dict[str, Any] = {k: _text(c.get(k)) for k in ("class", "summary", "remediation")}
    out["evidence"] = [t for t in (_text(e) for e in _list(c.get("evidence"))) if t]
    return out


def stage(st: Any) -> dict[str, Any] | None:
    if not isinstance(st, dict) or _text(st.get("name")) is None:
        return None
    out: dict[str, Any] = {k: _text(st.get(k)) for k in ("name", "state", "started_at", "ended_at")}
    out["attempt"] = int(_num(st.get("attempt")) or 0)
    out["cause"] = cause(st.get("cause"))
    out["metrics"] = {str(k): _num(v) if _num(v) is not None else v for k, v in _dict(st.get("metrics")).items()
                      if _num(v) is not None or v in NON_FINITE}
    return out


def info(rec: Any) -> dict[str, Any] | None:
    if not isinstance(rec, dict):
        return None
    gpus = {str(k): {"name": _text(_dict(g).get("name")), "memory_total_mib": _num(_dict(g).get("memory_total_mib")),
                     "sm_clock_max_mhz": _num(_dict(g).get("sm_clock_max_mhz"))}
            for k, g in _dict(rec.get("gpus")).items() if isinstance(g, dict)}
    return {"gpus": gpus, "workdir_disk": _text(rec.get("workdir_disk")), "cgroup": _text(rec.get("cgroup"))}


def _fields(v: Any, nums: tuple, texts: tuple) -> dict[str, Any] | None:
    if not isinstance(v, dict):
        return None
    out: dict[str, Any] = {k: _num(v.get(k)) for k in nums}
    out.update({k: _text(v.get(k)) for k in texts})
    return out


def cost(v: Any) -> dict[str, Any] | None:
    return _fields(v, ("price_per_hour", "hours", "spent"), ("currency", "since"))


def verified(v: Any) -> dict[str, Any] | None:
    """A verified pull: the box's runs/<run>/pull_verified.json, or this laptop's
    PULL_VERIFIED.json (--pulled DIR), which also counts the files and bytes."""
    out = _fields(v, ("files", "bytes"), ("run", "verified_at", "manifest_sha256"))
    if out is not None:
        match = v.get("matches_box_manifest")
        out["matches_box_manifest"] = match if isinstance(match, bool) else None
    return out


def normalise(doc: Any) -> dict[str, Any]:
    doc = _dict(doc)
    hist, run = _dict(doc.get("history")), _dict(doc.get("run"))
    pts = [q for q in (point(p) for p in _list(hist.get("points"))) if q]
    pts.sort(key=lambda p: p["t"])
    bits = {str(k): int(v) for k, v in _dict(hist.get("throttle_bits")).items() if isinstance(v, int)}
    cols = [str(c) for c in _list(hist.get("gpu_cols"))] or None
    return {
        "generated_at": _text(doc.get("generated_at")), "host": _text(doc.get("host")),
        "profile": _text(doc.get("profile")),
        "agent": {k: _dict(doc.get("agent")).get(k) if k == "running" else _text(_dict(doc.get("agent")).get(k))
                  for k in ("version", "running", "state", "heartbeat_at")},
        "run": {"name": _text(run.get("name")) or "?", "state": _text(run.get("state")) or "unknown",
                "workdir": _text(run.get("workdir")), "started_at": _text(run.get("started_at")),
                "ended_at": _text(run.get("ended_at")), "cause": cause(run.get("cause")),
                "stages": [s for s in (stage(x) for x in _list(run.get("stages"))) if s],
                "artifacts": _fields(run.get("artifacts"), ("files", "bytes"), ()) or {}, "cost": cost(run.get("cost"))},
        "spec": _dict(doc.get("spec")),
        "history": {"source": _text(hist.get("source")), "points": pts, "step_s": _num(hist.get("step_s")),
                    "metrics": sorted((r for r in (reading(x) for x in _list(hist.get("metrics"))) if r),
                                      key=lambda r: (r["t"], r["l"] or 0)),
                    "events": [e for e in (event(x) for x in _list(hist.get("events"))) if e],
                    "info": [i for i in (info(x) for x in _list(hist.get("info"))) if i],
                    "gpu_cols": cols, "throttle_bits": bits,
                    "dropped_events": int(_num(hist.get("dropped_events")) or 0)},
        "cost": cost(doc.get("cost")),
        "pull_verified": verified(doc.get("pull_verified")),
    }
