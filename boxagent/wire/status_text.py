"""status.json as text for a person (`rgt-agent status` without --json): the agent, the box's
health and cost, each run with its stages and causes, the alerts. It reads the status `read()`
returns (status.py) and decides nothing.
"""
from __future__ import annotations

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

from boxagent.base.units import format_bytes, format_duration


def render_text(status: Dict[str, Any]) -> str:
    agent = status.get("agent") or {}
    lines = []
    if agent.get("running"):
        lines.append("agent: running (pid %s, heartbeat %s ago)" % (agent.get("pid"),
                                                                    format_duration(agent.get("heartbeat_age_s"))))
    else:
        age = agent.get("heartbeat_age_s")
        lines.append("agent: NOT RUNNING (last heartbeat %s)" % ("%s ago" % format_duration(age) if age is not None
                                                              else "never"))
    if agent.get("machine_restarted"):
        lines.append("machine: RESTARTED (boot_id changed)")
    lines += _health_lines(status.get("health"))
    lines += _cost_lines(status.get("cost"))
    runs = status.get("runs") or []
    if not runs:
        lines.append("runs: none")
    for run in runs:
        lines += _run_lines(run)
    for alert in status.get("alerts") or []:
        lines.append("alert [%s] %s" % (alert.get("severity"), alert.get("summary")))
    return "\n".join(lines) + "\n"


def _health_lines(health: Optional[Dict[str, Any]]) -> List[str]:
    if not health:
        return []
    mem = health.get("memory") or {}
    out = []
    if mem.get("current_bytes") is not None:
        out.append("memory: %s of %s (%s)" % (format_bytes(mem.get("current_bytes")), format_bytes(mem.get("max_bytes")),
                                             mem.get("cgroup")))
    for g in health.get("gpus") or []:
        out.append("gpu%s: %s util %s%% mem %s/%s %s°C" % (g.get("index"), g.get("name"), g.get("util_pct"),
                                                        format_bytes(g.get("memory_used_bytes")),
                                                        format_bytes(g.get("memory_total_bytes")), g.get("temperature_c")))
    return out


def _cost_lines(cost: Any) -> List[str]:
    if not isinstance(cost, dict) or not isinstance(cost.get("hours"), (int, float)):
        return []
    line = "cost: %.2f paid hours since %s" % (cost["hours"], cost.get("since"))
    if isinstance(cost.get("spent"), (int, float)):
        line += ", %.2f %s at %s %s/h" % (cost["spent"], cost.get("currency"), cost.get("price_per_hour"),
                                          cost.get("currency"))
    idle = cost.get("idle")
    if isinstance(idle, dict) and isinstance(idle.get("idle_s"), (int, float)):
        line += "; IDLE for %s" % format_duration(idle["idle_s"])
    return [line]


def _run_lines(run: Dict[str, Any]) -> List[str]:
    head = "run %s: %s" % (run["name"], run["state"].upper())
    if run.get("pending_pickup"):
        head += " (waiting for the daemon to pick it up)"
    out = [head]
    for st in run.get("stages") or []:
        line = "  %-12s %-11s" % (st["name"], st["state"])
        if st.get("attempt"):
            line += " attempt %d" % st["attempt"]
        if st.get("duration_s") is not None:
            line += " %s" % format_duration(st["duration_s"])
        prog = st.get("progress") or {}
        if prog.get("fraction") is not None:
            line += " %d%%" % round(100 * prog["fraction"])
        if st.get("slurm_job_id"):
            line += " slurm job %s %s" % (st["slurm_job_id"], st.get("slurm_state") or "?")
            if st.get("slurm_waiting"):
                line += " (%s: %s)" % (st.get("slurm_reason"), st["slurm_waiting"]["text"])
        out.append(line)
        cause = st.get("cause")
        if cause and st["state"] not in ("succeeded", "skipped"):
            out.append("    cause: %s: %s" % (cause.get("class"), cause.get("summary")))
            if cause.get("remediation"):
                out.append("    fix:   %s" % cause["remediation"])
    if run.get("cause") and run.get("failed_stage") is None and run["state"] == "failed":
        out.append("  cause: %s: %s" % (run["cause"].get("class"), run["cause"].get("summary")))
    return out

