"""When the cost part speaks: the idle clock and its reminders, the budget, the stop deadline.

Decisions over facts the daemon already has (status.json as last written: runs[] and
health.gpus) and the ledger; each returns event specs or nothing. Times are passed in.
  box_idle      no run running or queued and every GPU under 5 % (or no GPU) for
                idle_alert_after; again after 30 min, 1 h, 2 h, then every 4 h; a run or a busy
                GPU ends it (box_busy, info, when a reminder had gone out)
  budget        80 % of the budget spent (warning), 100 % (critical), and a running stage whose
                ETA alone would take the spend past the budget (warning, once per attempt)
  danger_clock  24 h and 2 h before the stop deadline the user declared (warning)
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base.units import format_duration, iso_utc
from boxagent.cost import texts
from boxagent.cost.ledger import Ledger

BUSY_GPU_PCT = 5.0
REPEAT_S = (1800.0, 3600.0, 7200.0, 14400.0)     # after the first reminder: 30 min, 1 h, 2 h, then 4 h
DEADLINE_WARN = (("2h", 7200.0), ("24h", 86400.0))
BUDGET_STEPS = (("100", 100.0, "critical"), ("80", 80.0, "warning"))
LIVE = ("running", "queued")
ENDED = ("succeeded", "failed", "cancelled", "interrupted")
LastRun = Callable[[], Optional[Dict[str, Any]]]     # the last ended run, read only when an alert is due


def _runs(status: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [r for r in status.get("runs") or [] if isinstance(r, dict)]


def _gpus(status: Dict[str, Any]) -> List[Dict[str, Any]]:
    health = got if isinstance(got := status.get("health"), dict) else {}
    return [g for g in health.get("gpus") or [] if isinstance(g, dict)]


def box_gpus(status: Dict[str, Any]) -> Optional[int]:
    """The box's usable GPUs as the health part last saw them; None before it sampled."""
    health = status.get("health") if isinstance(status.get("health"), dict) else None
    if health is None or "gpus" not in health:
        return None
    return len([g for g in _gpus(status) if not g.get("lost")])


def busy_reason(status: Dict[str, Any]) -> Optional[str]:
    """Why the box is not idle, or None: a run running or queued, or a GPU at >= 5 %."""
    for run in _runs(status):
        if run.get("state") in LIVE:
            return "run %s is %s" % (run.get("name"), run.get("state"))
    for g in _gpus(status):
        util = g.get("util_pct")
        if isinstance(util, (int, float)) and util >= BUSY_GPU_PCT:
            return "GPU %s at %d %%" % (g.get("index"), round(util))
    return None


def idle_evidence(status: Dict[str, Any]) -> List[str]:
    gpus = _gpus(status)
    out = ["no run running or queued"]
    if gpus:
        out.append(", ".join("GPU %s %s %%" % (g.get("index"), "?" if g.get("util_pct") is None
                                                else round(g["util_pct"])) for g in gpus[:8]))
    else:
        health = got if isinstance(got := status.get("health"), dict) else {}
        out.append("no GPU seen (%s)" % (health.get("gpu_unavailable_reason") or "none on this box"))
    return out


def repeat_after(sent: int) -> float:
    return REPEAT_S[min(max(sent, 1), len(REPEAT_S)) - 1]


def idle_due(ledger: Ledger, now: float, after: Optional[float]) -> Optional[int]:
    """The box is idle now: start the clock if it is not running; the reminder number due now, or
    None. `after` None: alerts off (the clock still runs, status shows it)."""
    idle = ledger.idle
    if not isinstance(idle.get("since"), (int, float)):
        idle.clear()
        idle.update(since=now, sent=0)
    if after is None:
        return None
    if not isinstance(idle.get("next_at"), (int, float)):
        idle["next_at"] = idle["since"] + after
    if now < idle["next_at"]:
        return None
    idle["sent"] = int(idle.get("sent") or 0) + 1
    idle["next_at"] = now + repeat_after(idle["sent"])
    return idle["sent"]


def last_run(status: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    ended = [r for r in _runs(status) if r.get("state") in ENDED and isinstance(r.get("ended_at"), str)]
    return max(ended, key=lambda r: r["ended_at"]) if ended else None


def idle_spec(n: int, ledger: Ledger, now: float, status: Dict[str, Any], settings: Dict[str, Any],
              host: str, profile: Dict[str, Any], last: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    price, cur = settings["price_per_hour"], settings["currency"]
    idle_s = now - float(ledger.idle["since"])
    nxt = ledger.idle.get("next_at")
    lines = [texts.pull_line(host, last)] + texts.meter_stop_lines(profile)
    spec = {"type": "box_idle", "severity": "warning", "summary": texts.idle_summary(idle_s, price, cur),
            "evidence": idle_evidence(status), "next": lines, "reminder": n,
            "idle_since": iso_utc(ledger.wall(float(ledger.idle["since"]))), "idle_s": idle_s,
            "idle_spent": idle_s / 3600.0 * price if price is not None else None,
            "price_per_hour": price, "currency": cur, "hours": ledger.hours(),
            "spent": ledger.hours() * price if price is not None else None,
            "last_run": (last or {}).get("name"), "pull_verified": bool((last or {}).get("pull_verified_at")),
            "next_reminder_at": iso_utc(ledger.wall(nxt)) if isinstance(nxt, (int, float)) else None}
    if isinstance(nxt, (int, float)):
        spec["evidence"].append("next reminder in %s while it stays idle" % format_duration(nxt - now))
    return spec


def busy_spec(ledger: Ledger, now: float, reason: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    idle_s = now - float(ledger.idle["since"])
    return {"type": "box_busy", "severity": "info",
            "summary": "busy again (%s) after idle %s" % (reason, texts.cost_of(idle_s, settings["price_per_hour"],
                                                                               settings["currency"])),
            "idle_s": round(idle_s, 1)}


def budget_specs(ledger: Ledger, now: float, status: Dict[str, Any], settings: Dict[str, Any],
                 host: str, profile: Dict[str, Any], last: LastRun) -> List[Dict[str, Any]]:
    price, budget, cur = settings["price_per_hour"], settings["budget"], settings["currency"]
    if price is None or budget is None:
        return []
    spent = ledger.hours() * price
    pct = 100.0 * spent / budget
    out: List[Dict[str, Any]] = []
    for key, step, severity in BUDGET_STEPS:
        if pct < step:
            if key in ledger.budget_sent:
                ledger.budget_sent.remove(key)    # the budget (or the price) changed: arm it again
        elif key not in ledger.budget_sent:
            ledger.budget_sent.extend(k for k, s, _ in BUDGET_STEPS if s <= step and k not in ledger.budget_sent)
            out.append({"type": "budget", "severity": severity, "threshold_pct": step,
                        "summary": "spent %s of the %s budget (%d %%)" % (texts.money(spent, cur),
                                                                           texts.money(budget, cur), pct),
                        "evidence": ["%.2f paid hours at %s" % (spent / price, texts.rate(price, cur))],
                        "next": [texts.pull_line(host, last())] + texts.meter_stop_lines(profile),
                        "budget": budget, "spent": round(spent, 2),
                        "used_pct": round(pct, 1), "currency": cur})
    return out + eta_specs(ledger, spent, status, settings)


def _running_stages(status: Dict[str, Any]) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    out = []
    for run in _runs(status):
        if run.get("state") != "running":
            continue
        for st in run.get("stages") or []:
            if isinstance(st, dict) and st.get("state") == "running":
                out.append((run, st))
    return out


def eta_specs(ledger: Ledger, spent: float, status: Dict[str, Any], settings: Dict[str, Any]) -> List[Dict[str, Any]]:
    price, budget, cur = settings["price_per_hour"], settings["budget"], settings["currency"]
    out: List[Dict[str, Any]] = []
    for run, st in _running_stages(status):
        prog = got if isinstance(got := st.get("progress"), dict) else {}
        eta = prog.get("eta_s")
        if not isinstance(eta, (int, float)) or isinstance(eta, bool) or eta <= 0 or spent >= budget:
            continue
        projected = spent + eta / 3600.0 * price
        key = "%s/%s/%s" % (run.get("name"), st.get("name"), st.get("attempt"))
        if projected <= budget or key in ledger.eta_sent:
            continue
        ledger.eta_sent.append(key)
        out.append({"type": "budget", "severity": "warning", "run": run.get("name"), "stage": st.get("name"),
                    "summary": "at its ETA (%s more) the spend reaches %s, past the %s budget" % (
                        format_duration(eta), texts.money(projected, cur), texts.money(budget, cur)),
                    "evidence": ["spent %s so far; this stage alone needs ~%s more at %s" % (
                        texts.money(spent, cur), texts.money(eta / 3600.0 * price, cur), texts.rate(price, cur))],
                    "budget": budget, "spent": round(spent, 2), "projected": round(projected, 2),
                    "eta_s": eta, "currency": cur})
    return out


def deadline_specs(ledger: Ledger, now: float, settings: Dict[str, Any], host: str,
                   profile: Dict[str, Any], last: LastRun) -> List[Dict[str, Any]]:
    at = settings["stop_deadline_at"]
    if at is None:
        ledger.deadline = {}
        return []
    if ledger.deadline.get("at") != at:
        ledger.deadline = {"at": at, "sent": []}
    left = at - now
    sent = ledger.deadline.setdefault("sent", [])
    due = [key for key, before in DEADLINE_WARN if 0 < left <= before and key not in sent]
    if not due:
        return []
    sent.extend(k for k, before in DEADLINE_WARN if left <= before and k not in sent)
    verbs = [t for t in profile.get("teardown") or [] if isinstance(t, dict) and t.get("stops_billing")]
    stop = next((t for t in verbs if not t.get("irreversible")), verbs[0] if verbs else None)
    what = texts.verb_text(stop) if stop else "nothing is known about what it destroys"
    lines = [texts.pull_line(host, last()), "At the deadline %s stops this box: %s." % (texts.platform(profile), what)]
    lines += texts.danger_lines(profile)
    return [{"type": "danger_clock", "severity": "warning", "deadline_at": iso_utc(at), "left_s": round(left, 1),
             "summary": "%s stops this box in %s (at %s)" % (texts.platform(profile), format_duration(left),
                                                            texts.utc(at)),
             "evidence": ["stop deadline declared at install: %s" % texts.utc(at)], "next": lines}]
