"""Human text for `status` (a separate function from the data: STYLE 9) and sparklines."""
from __future__ import annotations

from typing import Any, Iterable

from boxagent.base.units import format_bytes, format_duration

SPARKS = "▁▂▃▄▅▆▇█"
STATE_MARK = {"succeeded": "✓", "failed": "✗", "running": "▶", "pending": "·", "skipped": "↷",
              "cancelled": "⊘", "interrupted": "!", "queued": "·"}
STALE_AFTER_S = 120.0     # a heartbeat older than this means the daemon is not looking after the box


def sparkline(values: Iterable[Any], lo: float = 0.0, hi: float = 100.0, width: int = 30) -> str:
    """One character per point (last `width`); gaps (None) are spaces. Fixed 0-100 scale for
    percentages so two boxes' lines compare at a glance."""
    pts = list(values)[-width:]
    out = []
    span = (hi - lo) or 1.0
    for v in pts:
        if not isinstance(v, (int, float)):
            out.append(" ")
            continue
        frac = min(1.0, max(0.0, (float(v) - lo) / span))
        out.append(SPARKS[min(len(SPARKS) - 1, int(frac * len(SPARKS)))])
    return "".join(out)


def _pct(v: Any) -> str:
    return "-" if not isinstance(v, (int, float)) else "%.0f%%" % v


def heartbeat_state(status: dict[str, Any]) -> tuple[bool, str]:
    """(alive, words): alive only when the daemon runs AND its heartbeat is fresh."""
    agent = status.get("agent") or {}
    age = agent.get("heartbeat_age_s")
    age_s = "heartbeat %s ago" % format_duration(age) if isinstance(age, (int, float)) else "no heartbeat"
    if not agent.get("running"):
        return False, "agent NOT running (%s)" % age_s
    if isinstance(age, (int, float)) and age > STALE_AFTER_S:
        return False, "agent heartbeat stale (%s)" % age_s
    return True, "pid %s, %s" % (agent.get("pid"), age_s)


def render_status(status: dict[str, Any], client: dict[str, Any]) -> str:
    lines = _header(status, client)
    lines += _health(status.get("health") or {}, status.get("history") or {})
    for run in status.get("runs") or []:
        lines += _run(run, (status.get("metrics_history") or {}).get(run.get("name")))
    if not status.get("runs"):
        lines.append("  no runs yet: rgt-client run %s JOB.toml" % client.get("host"))
    lines += _alerts(status.get("alerts") or [])
    lines += _notifications(status.get("notifications"))
    if client.get("show_events"):
        lines += _events(status.get("events") or [])
    return "\n".join(lines)


def _events(events: list[dict[str, Any]]) -> list[str]:
    return ["events"] + ["  %s %-8s %-18s %s" % (e.get("at"), e.get("severity"), e.get("type"), e.get("summary") or "")
                         for e in events] if events else []


def _header(status: dict[str, Any], client: dict[str, Any]) -> list[str]:
    agent = status.get("agent") or {}
    host = client.get("host") or status.get("host")
    alive, words = heartbeat_state(status)
    lines = ["%s · profile %s · agent %s (%s)" % (host, status.get("profile") or "-",
                                                  agent.get("version") or "?", words)]
    if not alive:
        lines.append("  ! the daemon is not looking after this box; restart it (running stages are "
                     "re-adopted): rgt-client install %s" % host)
    if agent.get("machine_restarted"):
        lines.append("  ! the machine restarted since the daemon started (boot_id changed)")
    box, local = agent.get("build_sha256"), client.get("local_build_sha256")
    if box and local and box != local:
        lines.append("  ! the box runs agent build %s, this client builds %s: rgt-client install %s"
                     % (box[:12], local[:12], host))
    return lines


def _health(h: dict[str, Any], hist: dict[str, Any]) -> list[str]:
    lines = []
    mem = h.get("memory") or {}
    if mem:
        if mem.get("max_bytes"):
            used = "%s of %s" % (_pct(mem.get("used_pct")), format_bytes(mem.get("max_bytes")))
        else:  # no cgroup limit: the host's numbers are context, never blamed on the job
            used = "%s used, no cgroup limit, host %s" % (format_bytes(mem.get("current_bytes")),
                                                          format_bytes(mem.get("host_total_bytes")))
        lines.append("  memory  %s (cgroup %s, peak %s, oom_kill %s)  %s" % (
            used, mem.get("cgroup") or "none", format_bytes(mem.get("peak_bytes")),
            mem.get("oom_kill") if mem.get("oom_kill") is not None else "-",
            sparkline(hist.get("mem_used_pct") or [])))
    cpu = h.get("cpu") or {}
    if cpu.get("quota_cores"):
        lines.append("  cpu     quota %s cores" % cpu["quota_cores"])
    disk_hist = hist.get("disk_used_pct") or {}
    for d in h.get("disks") or []:
        lines.append("  disk    %s (%s) %s of %s, inodes %s  %s" % (
            d.get("path"), d.get("role"), _pct(d.get("bytes_used_pct")), format_bytes(d.get("bytes_total")),
            _pct(d.get("inodes_used_pct")), sparkline(disk_hist.get(d.get("path")) or [])))
    lines += _gpus(h, hist)
    return lines


def _gpus(h: dict[str, Any], hist: dict[str, Any]) -> list[str]:
    gpus = h.get("gpus") or []
    if not gpus:
        reason = h.get("gpu_unavailable_reason")
        return ["  gpus    none%s" % (" (%s)" % reason if reason else "")] if h else []
    util_hist = hist.get("gpu_util_pct") or {}
    lines = []
    for g in gpus:
        idx = g.get("index")
        if g.get("lost"):
            lines.append("  gpu%s    %s LOST (fell off the bus): re-rent another box" % (idx, g.get("name")))
            continue
        mem = "%s/%s" % (format_bytes(g.get("memory_used_bytes")), format_bytes(g.get("memory_total_bytes")))
        extra = ""
        if g.get("throttle_reasons"):
            extra += " throttled: %s" % ",".join(g["throttle_reasons"])
        if (g.get("xid_last") or {}).get("code") is not None:
            extra += " Xid %s" % g["xid_last"]["code"]
        lines.append("  gpu%s    %s util %s mem %s %s°C %sW%s  %s" % (
            idx, g.get("name"), _pct(g.get("util_pct")), mem, g.get("temperature_c", "-"),
            g.get("power_w", "-"), extra, sparkline(util_hist.get(str(idx)) or [])))
    return lines


def _run(run: dict[str, Any], spark: dict[str, Any] | None = None) -> list[str]:
    lines = ["run %s  %s%s" % (run.get("name"), run.get("state"),
                               "  workdir %s" % run["workdir"] if run.get("workdir") else "")]
    for st in run.get("stages") or []:
        lines += _stage(st)
        lines += _metrics(st, spark if isinstance(spark, dict) and spark.get("stage") == st.get("name") else None)
    art = run.get("artifacts") or {}
    if art.get("files"):
        lines.append("  artifacts %s files, %s" % (art.get("files"), format_bytes(art.get("bytes"))))
    return lines


def _stage(st: dict[str, Any]) -> list[str]:
    state = st.get("state") or "?"
    parts = ["  %s %-10s %-11s" % (STATE_MARK.get(state, "?"), st.get("name"), state)]
    if st.get("attempt"):
        parts.append("attempt %s" % st["attempt"])
    if st.get("kind") == "wait":
        parts.append("(wait)")
    if st.get("duration_s") is not None:
        parts.append(format_duration(st["duration_s"]))
    prog = st.get("progress") or {}
    if prog.get("fraction") is not None:
        p = "%.0f%%" % (100 * prog["fraction"])
        if prog.get("done") is not None and prog.get("total"):
            p += " (%s/%s)" % (prog["done"], prog["total"])
        if prog.get("eta_s") is not None:
            p += " eta %s" % format_duration(prog["eta_s"])
        parts.append(p)
    if st.get("slurm_job_id"):
        # A Slurm stage: its job, and why it waits (words from the agent: Priority, Resources, ...).
        parts.append("slurm job %s %s" % (st["slurm_job_id"], st.get("slurm_state") or "?"))
        waiting = st.get("slurm_waiting") or {}
        if waiting.get("text"):
            parts.append("(%s%s)" % (waiting["text"], ", blocked" if waiting.get("blocked") else ""))
    lines = [" ".join(parts)]
    cause = st.get("cause") or {}
    if cause and state in ("failed", "interrupted", "cancelled"):
        lines.append("      cause: %s: %s" % (cause.get("class"), cause.get("summary") or ""))
        if cause.get("remediation"):
            lines.append("      fix:   %s" % cause["remediation"])
        for ev in (cause.get("evidence") or [])[:3]:
            lines.append("      evidence: %s" % ev)
    return lines


def _metrics(st: dict[str, Any], spark: dict[str, Any] | None) -> list[str]:
    """`metrics loss 0.2315, acc 0.91  loss ▇▆▅▃▂▁`: the last values, and the first metric's last hour as a sparkline (its own scale:
    a metric has no fixed range)."""
    metrics = st.get("metrics") if isinstance(st.get("metrics"), dict) else {}
    values = [v for v in (spark or {}).get("values") or [] if isinstance(v, (int, float))]
    if not metrics and not values:
        return []
    shown = ", ".join("%s %s" % (k, _metric(v)) for k, v in list(metrics.items())[:4])
    line = "      metrics %s" % (shown or "%s %s" % (spark.get("metric"), _metric(values[-1])))
    if len(values) > 1:
        line += "  %s %s" % ((spark or {}).get("metric"), sparkline(values, min(values), max(values)))
    return [line]


def _metric(v: Any) -> str:
    return "%.4g" % v if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _alerts(alerts: list[dict[str, Any]]) -> list[str]:
    if not alerts:
        return []
    return ["alerts"] + ["  %-8s %-14s %s" % (a.get("severity"), a.get("type"), a.get("summary") or "")
                         for a in alerts]


def _notifications(n: Any) -> list[str]:
    if not isinstance(n, dict):
        return []
    line = "notifications sent %s, pending %s, failed %s" % (n.get("sent", 0), n.get("pending", 0),
                                                              n.get("failed", 0))
    if n.get("last_error"):
        line += " (last error: %s)" % n["last_error"]
    return [line]


def run_line(run: dict[str, Any]) -> str:
    """One line for watch/patrol: the run's state and where it is."""
    stages = run.get("stages") or []
    cur = next((s for s in stages if s.get("state") == "running"), None)
    if run.get("state") in ("failed", "interrupted"):
        bad = next((s for s in stages if s.get("state") in ("failed", "interrupted")), None) or {}
        cause = bad.get("cause") or {}
        return "%s %s at stage %s: %s" % (run.get("name"), run.get("state"), bad.get("name"),
                                          cause.get("class") or "no cause recorded")
    if cur is None:
        done = sum(1 for s in stages if s.get("state") in ("succeeded", "skipped"))
        return "%s %s (%d/%d stages done)" % (run.get("name"), run.get("state"), done, len(stages))
    idx = stages.index(cur) + 1
    prog = cur.get("progress") or {}
    extra = ""
    if prog.get("fraction") is not None:
        extra = " %.0f%%" % (100 * prog["fraction"])
        if prog.get("eta_s") is not None:
            extra += " eta %s" % format_duration(prog["eta_s"])
    return "%s running stage %s (%d/%d)%s" % (run.get("name"), cur.get("name"), idx, len(stages), extra)
