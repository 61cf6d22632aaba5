"""The status contract trimmed for a model: each run's state and stages, its cause with evidence,
remediation and confidence, alerts, cost, and what to do next as the exact rgt-client command.

A model pays for every byte it reads: the health history, metric series and every path are
left out (get_status has them at `rgt-client status HOST --json`). Every string from the box goes
through safety.line.
"""
from __future__ import annotations

import shlex
from typing import Any

from rgt_client.mcp.safety import Policy, line, lines

ENDED_BAD = ("failed", "cancelled", "interrupted")
ACTIVE = ("running", "queued", "retrying")
RUNS_SHOWN = 6


def q(word: str) -> str:
    return shlex.quote(word)


def cause(c: Any, policy: Policy) -> dict[str, Any] | None:
    """The cause with what decided it; the fields other parts add later are read when present."""
    if not isinstance(c, dict):
        return None
    out = {"class": line(c.get("class"), policy, 80), "summary": line(c.get("summary"), policy),
           "remediation": line(c.get("remediation"), policy, 800),
           "retryable": c.get("retryable") if isinstance(c.get("retryable"), bool) else None,
           "confidence": line(c.get("confidence"), policy, 40),
           "decided_by": line(c.get("decided_by"), policy),
           "decided_by_fact": line(c.get("decided_by_fact"), policy),
           "overruled": lines(c.get("overruled"), policy, 5),
           "evidence": lines(c.get("evidence"), policy, 5)}
    runner = c.get("runner_up")
    if runner is not None:
        out["runner_up"] = (line(runner.get("class"), policy, 80) if isinstance(runner, dict)
                            else line(runner, policy))
    if c.get("tell_apart") is not None:
        out["tell_apart"] = line(c.get("tell_apart"), policy)
    return {k: v for k, v in out.items() if v not in (None, [])}


def _progress(p: Any) -> dict[str, Any] | None:
    if not isinstance(p, dict):
        return None
    return {k: p.get(k) for k in ("done", "total", "fraction", "eta_s") if isinstance(p.get(k), (int, float))} or None


def stage(s: dict[str, Any], policy: Policy) -> dict[str, Any]:
    out: dict[str, Any] = {"name": line(s.get("name"), policy, 80), "state": line(s.get("state"), policy, 20),
                           "attempt": s.get("attempt"), "exit_code": s.get("exit_code"),
                           "duration_s": s.get("duration_s")}
    prog = _progress(s.get("progress"))
    if prog:
        out["progress"] = prog
    if isinstance(s.get("cause"), dict):
        out["cause_class"] = line(s["cause"].get("class"), policy, 80)
    if s.get("warnings"):
        out["warnings"] = lines(s.get("warnings"), policy, 3, 200)
    return {k: v for k, v in out.items() if v is not None}


def run(r: dict[str, Any], host: str, policy: Policy) -> dict[str, Any]:
    name = str(r.get("name") or "")
    out: dict[str, Any] = {"name": line(name, policy, 80), "state": line(r.get("state"), policy, 20),
                           "current_stage": line(r.get("current_stage"), policy, 80),
                           "failed_stage": line(r.get("failed_stage"), policy, 80),
                           "started_at": line(r.get("started_at"), policy, 40),
                           "ended_at": line(r.get("ended_at"), policy, 40),
                           "stages": [stage(s, policy) for s in (r.get("stages") or []) if isinstance(s, dict)],
                           "cause": cause(r.get("cause"), policy)}
    arts = r.get("artifacts")
    if isinstance(arts, dict):
        out["artifacts"] = {k: arts.get(k) for k in ("files", "bytes") if isinstance(arts.get(k), (int, float))}
    cost = r.get("cost")
    if isinstance(cost, dict):
        out["cost"] = {k: cost.get(k) for k in ("hours", "spent") if isinstance(cost.get(k), (int, float))}
    out["next"] = next_step(host, r)
    return {k: v for k, v in out.items() if v not in (None, {}, [])}


def next_step(host: str, r: dict[str, Any]) -> str:
    """What to do next about this run, as the exact command (the MCP tool is named beside it)."""
    name, state = str(r.get("name") or ""), r.get("state")
    h, n = q(host), q(name)
    if state in ACTIVE:
        return "rgt-client watch %s %s   (MCP: wait_for_change)" % (h, n)
    if state in ENDED_BAD:
        c = r.get("cause")
        if isinstance(c, dict) and c.get("retryable"):
            return "rgt-client resume %s %s   (MCP: resume_run; the cause is transient)" % (h, n)
        return ("fix the cause (diagnose), then: rgt-client resume %s %s   (MCP: diagnose, then resume_run)"
                % (h, n))
    if state == "succeeded":
        pv = r.get("pull_verified")
        if isinstance(pv, dict) and pv.get("current") is True:    # the box records a verified pull of these files
            return ("nothing to pull: a verified pull of these files is recorded; the report: rgt-client report "
                    "%s %s   (MCP: make_report)" % (h, n))
        return "rgt-client pull %s %s   (MCP: pull_artifacts; verify before any teardown)" % (h, n)
    return "rgt-client status %s --run %s" % (h, n)


def agent(a: Any, policy: Policy) -> dict[str, Any]:
    a = a if isinstance(a, dict) else {}
    return {k: v for k, v in {"running": a.get("running"), "state": line(a.get("state"), policy, 20),
                              "heartbeat_age_s": a.get("heartbeat_age_s"),
                              "version": line(a.get("version"), policy, 40)}.items() if v is not None}


def alerts(items: Any, policy: Policy, n: int = 5) -> list[dict[str, Any]]:
    out = []
    for a in (items if isinstance(items, list) else [])[:n]:
        if isinstance(a, dict):
            out.append({"severity": line(a.get("severity"), policy, 20), "type": line(a.get("type"), policy, 60),
                        "summary": line(a.get("summary"), policy)})
    return out


def box_cost(c: Any) -> dict[str, Any] | None:
    if not isinstance(c, dict):
        return None
    keep = ("price_per_hour", "currency", "hours", "spent", "budget", "budget_used_pct", "stop_deadline_at")
    out = {k: c.get(k) for k in keep if c.get(k) is not None}
    idle = c.get("idle")
    if isinstance(idle, dict) and isinstance(idle.get("idle_s"), (int, float)):
        out["idle_s"] = idle["idle_s"]
    return out or None


def status(doc: dict[str, Any], host: str, policy: Policy, run_name: str | None = None) -> dict[str, Any]:
    """get_status's answer: the box, its runs (active ones and the last ended), next steps."""
    runs = [r for r in (doc.get("runs") or []) if isinstance(r, dict)]
    if run_name is None:
        active = [r for r in runs if r.get("state") in ACTIVE]
        ended = [r for r in runs if r.get("state") not in ACTIVE]
        runs = active + ended[-max(1, RUNS_SHOWN - len(active)):]
    out: dict[str, Any] = {"host": host, "observed_at": line(doc.get("observed_at"), policy, 40),
                           "profile": line(doc.get("profile"), policy, 60), "agent": agent(doc.get("agent"), policy),
                           "runs": [run(r, host, policy) for r in runs], "alerts": alerts(doc.get("alerts"), policy),
                           "cost": box_cost(doc.get("cost")), "cursor": last_event_id(doc)}
    if not (doc.get("agent") or {}).get("running"):
        out["next"] = "rgt-client install %s   (MCP: install_agent; the agent is not running)" % q(host)
    elif not out["runs"]:
        out["next"] = "rgt-client run %s JOB.toml   (MCP: submit_job)" % q(host)
    else:
        out["next"] = out["runs"][0]["next"]
    return {k: v for k, v in out.items() if v is not None}


def last_event_id(doc: dict[str, Any]) -> str | None:
    events = doc.get("events")
    if isinstance(events, list) and events and isinstance(events[-1], dict):
        eid = events[-1].get("id")
        return eid if isinstance(eid, str) and len(eid) <= 64 else None
    return None


BRIEF_STAGE = ("name", "state", "progress")


def brief(full: dict[str, Any]) -> dict[str, Any]:
    """A status answer cut to what moves while nothing happens: states, the running stage's
    progress, the agent's heartbeat, alerts and cost (a timed-out wait sends this)."""
    runs = [{"name": r.get("name"), "state": r.get("state"), "current_stage": r.get("current_stage"),
             "stages": [{k: s[k] for k in BRIEF_STAGE if k in s} for s in r.get("stages") or []
                        if s.get("state") == "running"]} for r in full.get("runs") or []]
    out = {"host": full.get("host"), "observed_at": full.get("observed_at"), "agent": full.get("agent"),
           "runs": [{k: v for k, v in r.items() if v not in (None, [])} for r in runs],
           "alerts": full.get("alerts"), "cost": full.get("cost")}
    return {k: v for k, v in out.items() if v not in (None, [])}
