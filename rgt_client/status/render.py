"""Human text for `status` (a separate function from the data: STYLE 9) and sparklines.
Every field the box sent goes through textsafe (its s()) before it reaches the terminal."""
from __future__ import annotations

import math
import shlex
from typing import Any, Iterable

from boxagent.api import NON_FINITE, format_bytes, format_duration
from rgt_client.cost.render import run_cost, status_lines
from rgt_client.status import statusdata
from rgt_client.errors import ClientError
from rgt_client.status.render_run import clip, pull_words, stage_lines, wrapped
from rgt_client.textsafe import s, safe, safe_line

SPARKS = "▁▂▃▄▅▆▇█"
WIDTH = 80                # what a phone's terminal shows: sparklines shrink to fit, never wrap


def sparkline(values: Iterable[Any], lo: float = 0.0, hi: float = 100.0, width: int = 30) -> str:
    """One character per point (last `width`); gaps (None) are spaces. Fixed 0-100 scale for
    percentages so two boxes' lines compare at a glance."""
    pts = list(values)[-width:] if width > 0 else []
    out = []
    span = (hi - lo) or 1.0
    for v in pts:
        if not isinstance(v, (int, float)):
            out.append(" ")
            continue
        frac = min(1.0, max(0.0, (float(v) - lo) / span))
        out.append(SPARKS[min(len(SPARKS) - 1, int(frac * len(SPARKS)))])
    return "".join(out)


def _spark(line: str, values: Any) -> str:
    """The line with its sparkline, as many points as fit in WIDTH (none when fewer than 8 do)."""
    room = WIDTH - len(line) - 2
    spark = sparkline(values or [], width=min(30, room)) if room >= 8 else ""
    return line + ("  " + spark if spark.strip() else "")


def _pct(v: Any) -> str:
    return "-" if not isinstance(v, (int, float)) else "%.0f%%" % v


def heartbeat_words(status: dict[str, Any]) -> str:
    """The agent's verdict on its daemon (statusdata.agent_state), in words."""
    agent = status.get("agent") or {}
    age = agent.get("heartbeat_age_s")
    age_s = "heartbeat %s ago" % format_duration(age) if isinstance(age, (int, float)) else "no heartbeat"
    state = statusdata.agent_state(status)
    if state == "stopped":
        return "agent NOT running (%s)" % age_s
    if state == "stale":
        return "agent heartbeat stale (%s)" % age_s
    return "pid %s, %s" % (s(agent.get("pid")), age_s)


def state_full_words(storage: dict[str, Any]) -> str:
    """What a full state dir means for the runs, from agent.storage."""
    pending = storage.get("pending_writes")
    kept = "; %s write%s kept in memory" % (pending, "" if pending == 1 else "s") if isinstance(pending, int) and pending else ""
    since = " since %s" % s(storage["since"]) if storage.get("since") else ""
    return "the agent's state dir is FULL%s: runs go on, no new stage starts%s" % (since, kept)


def state_full_room(storage: dict[str, Any]) -> str:
    """`it needs 2.1 MB free and has 0.4 MB`, when the agent says both."""
    need, free = storage.get("need_free_bytes"), storage.get("free_bytes")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (need, free)):
        return ""
    return "; it needs %s free and has %s" % (format_bytes(need), format_bytes(free))


def render_status(status: dict[str, Any], client: dict[str, Any]) -> str:
    host = client.get("host") or s(status.get("host"))
    lines = _header(status, client)
    lines += _health(status.get("health") or {}, status.get("history") or {})
    lines += status_lines(status.get("cost"))
    lines += _runs(status.get("runs") or [], host, bool(client.get("show_all")), statusdata.alive(status),
                   status.get("metrics_history") or {}, status.get("cost"), status.get("runs_summary"),
                   bool(statusdata.state_dir_full(status)))
    lines += _alerts(status.get("alerts") or [])
    lines += _notifications(status.get("notifications"))
    if client.get("show_events"):
        lines += _events(status.get("events") or [])
    return "\n".join(lines)


def _runs(runs: list[dict[str, Any]], host: str, show_all: bool, live: bool,
          metrics: dict[str, Any], cost: Any = None, summary: Any = None,
          full_state_dir: bool = False) -> list[str]:
    if not runs and not statusdata.not_in_answer(summary):
        return ["  no runs yet: rgt-client run %s JOB.toml" % shlex.quote(host)]
    shown, hidden = statusdata.runs_to_show(runs, show_all)
    hidden += statusdata.not_in_answer(summary)       # ended runs the box keeps out of status.json
    lines: list[str] = []
    for run in shown:
        lines += _run(run, live, metrics.get(str(run.get("name"))), cost, full_state_dir, host)
    if hidden:
        lines.append("… %d older ended run%s not shown: rgt-client status %s --all"
                     % (hidden, "" if hidden == 1 else "s", shlex.quote(host)))
    return lines


def _events(events: list[dict[str, Any]]) -> list[str]:
    return ["events"] + [clip("  %s %-8s %-18s %s" % (s(e.get("at")), s(e.get("severity")), s(e.get("type")),
                                                       s(e.get("summary") or "")))
                         for e in events] if events else []


def _header(status: dict[str, Any], client: dict[str, Any]) -> list[str]:
    agent = status.get("agent") or {}
    host = client.get("host") or s(status.get("host"))
    word = shlex.quote(host)
    lines = ["%s · profile %s · agent %s (%s)" % (host, s(status.get("profile")), s(agent.get("version") or "?"),
                                                  heartbeat_words(status))]
    if not statusdata.alive(status):
        lines.append("  ! the daemon is not looking after this box; restart it (running stages are "
                     "re-adopted): rgt-client install %s" % word)
    full = statusdata.state_dir_full(status)
    if full:
        lines += wrapped("  ! ", state_full_words(full) + state_full_room(full) + ": free space there (df -h; df -i)")
    if agent.get("machine_restarted"):
        lines.append("  ! the machine restarted since the daemon started (boot_id changed)")
    box, local = agent.get("build_sha256"), client.get("local_build_sha256")
    if box and local and box != local:
        lines.append("  ! the box runs agent build %s, this client builds %s: rgt-client install %s"
                     % (s(box[:12]), local[:12], word))
    return lines


def _health(h: dict[str, Any], hist: dict[str, Any]) -> list[str]:
    lines = []
    mem = h.get("memory") or {}
    if mem:
        oom = mem.get("oom_kill") if mem.get("oom_kill") is not None else "-"
        if mem.get("max_bytes"):
            lines.append(_spark("  memory  %s of %s (cgroup %s, peak %s, oom_kill %s)" % (
                _pct(mem.get("used_pct")), format_bytes(mem.get("max_bytes")), s(mem.get("cgroup") or "none"),
                format_bytes(mem.get("peak_bytes")), oom), hist.get("mem_used_pct")))
        else:  # no cgroup limit: the host's numbers are context, never blamed on the job
            lines.append(_spark("  memory  %s, no cgroup limit, host %s (peak %s, oom_kill %s)" % (
                format_bytes(mem.get("current_bytes")), format_bytes(mem.get("host_total_bytes")),
                format_bytes(mem.get("peak_bytes")), oom), hist.get("mem_used_pct")))
    cpu = h.get("cpu") or {}
    if cpu.get("quota_cores"):
        lines.append("  cpu     quota %s cores" % cpu["quota_cores"])
    disk_hist = hist.get("disk_used_pct") or {}
    for d, more in _filesystems(h.get("disks") or []):
        roles = ", ".join(dict.fromkeys(s(x.get("role")) for x in [d] + more))
        also = "; also %s" % ", ".join(s(x.get("path")) for x in more[:2]) if more else ""
        also += " +%d more" % (len(more) - 2) if len(more) > 2 else ""
        lines.append(_spark("  disk    %s (%s%s) %s of %s, inodes %s" % (
            s(d.get("path")), roles, also, _pct(d.get("bytes_used_pct")), format_bytes(d.get("bytes_total")),
            _pct(d.get("inodes_used_pct"))), disk_hist.get(d.get("path"))))
    return lines + _gpus(h, hist)


def _filesystems(disks: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """One entry per filesystem (the box's st_dev, else the path) with the other paths on it: the
    workdir of every run shown is on the state dir's disk on most boxes, and `status` printed six
    identical lines for one filesystem."""
    groups: dict[Any, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for d in disks:
        if not isinstance(d, dict):
            continue
        dev = d.get("dev")
        key = ("dev", dev) if isinstance(dev, int) and not isinstance(dev, bool) and not d.get("error") \
            else ("path", d.get("path"))
        if key in groups:
            groups[key][1].append(d)
        else:
            groups[key] = (d, [])
    return list(groups.values())


def _gpus(h: dict[str, Any], hist: dict[str, Any]) -> list[str]:
    gpus = h.get("gpus") or []
    if not gpus:
        reason = h.get("gpu_unavailable_reason")
        return wrapped("  gpus    ", "none%s" % (" (%s)" % s(reason) if reason else "")) if h else []
    util_hist = hist.get("gpu_util_pct") or {}
    lines = occupancy_lines(gpus)
    for g in gpus:
        idx = s(g.get("index"))
        if g.get("lost"):
            lines.append("  gpu%s    %s LOST (fell off the bus): re-rent another box" % (idx, s(g.get("name"))))
            continue
        mem = "%s/%s" % (format_bytes(g.get("memory_used_bytes")), format_bytes(g.get("memory_total_bytes")))
        extra = ""
        if g.get("throttle_reasons"):
            extra += " throttled: %s" % ",".join(s(r) for r in g["throttle_reasons"])
        if (g.get("xid_last") or {}).get("code") is not None:
            extra += " Xid %s" % g["xid_last"]["code"]
        if g.get("run"):
            extra += " · run %s" % s(g["run"])
        lines.append(_spark("  gpu%s    %s util %s mem %s %s°C %sW%s" % (
            idx, s(g.get("name")), _pct(g.get("util_pct")), mem, _int(g.get("temperature_c")),
            _int(g.get("power_w")), extra), util_hist.get(str(g.get("index")))))
        lines += _tenants(g)
    return lines


def _tenants(g: dict[str, Any]) -> list[str]:
    """The GPU's processes rgt did not start (the VRAM an "empty" GPU lacks: gotcha U11)."""
    out = []
    for p in [p for p in g.get("processes") or [] if isinstance(p, dict) and p.get("rgt") is False][:4]:
        who = s(p.get("command")) if p.get("command") else (
            "not visible from this container" if p.get("visible") is False else "command unreadable")
        out.append("          other tenant: pid %s (%s) holds %s" % (
            s(p.get("pid")), who, format_bytes(p.get("used_memory_bytes"))))
    return out


def occupancy(gpus: list[dict[str, Any]]) -> str:
    """`3/8 GPUs busy` (GPUs held by a run of their own), or "" when no run holds one."""
    held = [g for g in gpus if isinstance(g, dict) and g.get("run")]
    return "%d/%d GPUs busy" % (len(held), len(gpus)) if held else ""


def occupancy_lines(gpus: list[dict[str, Any]]) -> list[str]:
    words = occupancy(gpus)
    if not words:
        return []
    held = ", ".join("%s %s" % (s(g.get("index")), s(g.get("run"))) for g in gpus if g.get("run"))
    return [clip("  gpus    %s: %s" % (words, held))]


def _int(v: Any) -> str:
    return "-" if not isinstance(v, (int, float)) else "%.0f" % v


def _run(run: dict[str, Any], live: bool, spark: dict[str, Any] | None = None, cost: Any = None,
         full_state_dir: bool = False, host: str = "HOST") -> list[str]:
    lines = ["run %s  %s%s" % (s(run.get("name")), s(run.get("state")),
                               "  workdir %s" % s(run["workdir"]) if run.get("workdir") else "")]
    if run.get("pending_pickup"):
        lines.append("  (submitted; the daemon has not picked it up yet)")
    if run.get("state") == "queued" and full_state_dir:
        lines.append("  (waits for room in the agent's state dir: no new stage starts while it is full)")
    for st in run.get("stages") or []:
        lines += stage_lines(st, live, run.get("state"))
        lines += _metrics(st, spark if spark and spark.get("stage") == st.get("name") else None)
    art = run.get("artifacts") or {}
    if art.get("files"):
        lines.append("  artifacts %s files, %s" % (art.get("files"), format_bytes(art.get("bytes"))))
    if run.get("state") == "succeeded" and (art.get("files") or run.get("pull_verified")):
        lines.append("  pull      %s" % pull_words(run, host))
    paid = run_cost(run, cost)
    if paid:
        lines.append("  cost      %s" % paid)
    return lines


def _metrics(st: dict[str, Any], spark: dict[str, Any] | None) -> list[str]:
    """`metrics loss 0.2315, acc 0.91  loss ▇▆▅▃▂▁`: the last values, and the first metric's last
    hour as a sparkline (its own scale: a metric has no fixed range). A NaN is shown as `nan`."""
    metrics = st.get("metrics") or {}
    values = [v for v in (spark or {}).get("values") or [] if isinstance(v, (int, float)) and math.isfinite(v)]
    if not metrics and not values:
        return []
    name = s((spark or {}).get("metric"))
    shown = ", ".join("%s %s" % (s(k), _metric(v)) for k, v in list(metrics.items())[:4])
    line = "      metrics %s" % (shown or "%s %s" % (name, _metric(values[-1])))
    if len(values) > 1:
        line += "  %s " % name
        line += sparkline(values, min(values), max(values), width=max(8, min(30, WIDTH - len(line))))
    return [line]


def _metric(v: Any) -> str:
    if isinstance(v, str) and v in NON_FINITE:
        return v
    return "%.4g" % v if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _alerts(alerts: list[dict[str, Any]]) -> list[str]:
    if not alerts:
        return []
    return ["alerts"] + [clip("  %-8s %-14s %s" % (s(a.get("severity")), s(a.get("type")), s(a.get("summary") or "")))
                         for a in alerts]


def _notifications(n: Any) -> list[str]:
    if not isinstance(n, dict):
        return []
    line = "notifications sent %s, pending %s, failed %s" % (n.get("sent") or 0, n.get("pending") or 0,
                                                              n.get("failed") or 0)
    if n.get("last_error"):
        line += " (last error: %s)" % s(n["last_error"])
    return [clip(line)]


def error_lines(host: str, error: ClientError) -> list[str]:
    """A host's error for stderr: `HOST · Error: ...` and its hint (box text sanitised)."""
    first, *more = error.message.split("\n")       # ssh's own lines stay lines, each sanitised
    lines = ["%s · Error: %s" % (host, safe_line(first))] + ["    %s" % safe_line(m.strip()) for m in more[:8]]
    if error.hint:
        lines.append("  Hint: %s" % safe(error.hint))
    return lines
