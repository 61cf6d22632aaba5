"""Phone-sized texts from events, and truncation that keeps the cause and the remediation.

A message is a headline plus parts (role, header, lines). Services have limits (ntfy 4096
bytes, Discord 2000 chars, Telegram 4096 chars); when a text is too long we drop, in order, the
oldest log lines, then evidence, then the notes, and only then shorten the remediation — the
reader must always learn what broke and what to do.
"""
from __future__ import annotations

import copy
import time
from typing import Any, Callable, Dict, List, Optional

from boxagent.base.units import format_bytes, format_duration

SEV_EMOJI = {"critical": "\U0001F6A8", "warning": "\u26A0\uFE0F", "info": "\u2139\uFE0F"}
SEV_TAG = {"critical": "rotating_light", "warning": "warning", "info": "information_source"}
# Money: the box burning it doing nothing, the budget, a platform clock about to stop the box.
COST_EMOJI = {"box_idle": ("\U0001F4B8", "money_with_wings"), "budget": ("\U0001F4B0", "moneybag"),
              "danger_clock": ("\u23F0", "alarm_clock")}
RUN_END = ("run_succeeded", "run_failed", "run_cancelled", "run_interrupted")
MAX_NEXT_LINES = 8
MAX_LINE = 240          # one log line on a phone; giant lines (tqdm, JSON dumps) are cut
MAX_LOG_LINES = 20
# Drop order under a limit: first the least needed role. "headline" and "remediation" go last.
DROP_ORDER = ("log", "evidence", "note", "footer", "summary")


class Part:
    def __init__(self, role: str, lines: List[str], header: Optional[str] = None):
        self.role = role
        self.lines = lines
        self.header = header

    def text(self) -> str:
        body = "\n".join(self.lines)
        return (self.header + "\n" + body) if self.header else body


class Message:
    def __init__(self, headline: str, severity: str = "info", emoji: str = "", tags: Optional[List[str]] = None,
                 parts: Optional[List[Part]] = None, title: Optional[str] = None):
        self.headline = headline          # without the emoji
        self.emoji = emoji
        self.severity = severity
        self.tags = tags or []
        self.parts = parts or []
        self.title = title or headline

    def first_line(self) -> str:
        return (self.emoji + " " + self.headline) if self.emoji else self.headline

    def body(self) -> str:
        """Everything below the headline."""
        return "\n\n".join(p.text() for p in self.parts if p.lines)

    def plain(self) -> str:
        rest = self.body()
        return self.first_line() + ("\n\n" + rest if rest else "")

    def fit(self, limit: int, unit: str = "chars", text: Optional[Callable[["Message"], str]] = None) -> "Message":
        """A copy whose text(…) fits `limit` (unit "chars" or "bytes"); `text` defaults to plain()."""
        render = text or Message.plain
        msg = copy.deepcopy(self)
        if measure(render(msg), unit) <= limit:
            return msg
        for role in DROP_ORDER:
            for part in [p for p in msg.parts if p.role == role]:
                while part.lines and measure(render(msg), unit) > limit:
                    part.lines.pop(0 if role == "log" else -1)   # log: keep the newest lines
                if not part.lines:
                    part.header = None
            if measure(render(msg), unit) <= limit:
                return msg
        for part in [p for p in msg.parts if p.role == "remediation"]:
            _shrink_part(msg, part, render, limit, unit)
        while measure(render(msg), unit) > limit and len(msg.headline) > 1:
            msg.headline = _cut(msg.headline, max(1, len(msg.headline) - (measure(render(msg), unit) - limit) - 1))
        return msg


def _shrink_part(msg: Message, part: Part, render: Callable[[Message], str], limit: int, unit: str) -> None:
    while part.lines and measure(render(msg), unit) > limit:
        over = measure(render(msg), unit) - limit
        last = part.lines[-1]
        if len(last) - over - 1 < 20:
            part.lines.pop()
        else:
            part.lines[-1] = _cut(last, len(last) - over - 1)


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def measure(text: str, unit: str) -> int:
    return len(text.encode("utf-8")) if unit == "bytes" else len(text)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:max(0, n - 1)].rstrip() + "\u2026"


def _line(text: Any) -> str:
    return _cut(" ".join(str(text).split("\n")).rstrip(), MAX_LINE)


def _where(event: Dict[str, Any]) -> str:
    run, stage = event.get("run"), event.get("stage")
    if run and stage:
        return "%s/%s" % (run, stage)
    return str(run or stage or "")


def _cause_parts(cause: Dict[str, Any]) -> List[Part]:
    parts = []
    level = cause.get("confidence")
    if level and level != "high":
        sure = "Confidence: %s" % level
        if cause.get("runner_up"):
            sure += " (maybe %s instead%s)" % (cause["runner_up"], ": %s" % _cut(
                str(cause["tell_apart"]), 300) if cause.get("tell_apart") else "")
        parts.append(Part("remediation", [sure]))
    elif level:
        parts.append(Part("note", ["Confidence: high"]))
    if cause.get("remediation"):
        parts.append(Part("remediation", [_cut(str(cause["remediation"]), 1500)], "What to do:"))
    ev = [("\u2022 " + _line(e)) for e in (cause.get("evidence") or [])[:8]]
    if ev:
        parts.append(Part("evidence", ev, "Evidence:"))
    like = similar_line(cause)
    if like:
        parts.append(Part("note", [like]))
    return parts


def similar_line(cause: Dict[str, Any]) -> Optional[str]:
    """"Like: pytorch/pytorch#123 (cuda_oom, similarity 0.62): why" - the nearest known case."""
    near = cause.get("similar")
    first = near[0] if isinstance(near, list) and near and isinstance(near[0], dict) else None
    if first is None:
        return None
    score = first.get("score")
    sim = ", similarity %.2f" % score if isinstance(score, (int, float)) and 0 <= score <= 1 else ""
    return _line("Like: %s (%s%s): %s" % (first.get("source"), first.get("class"), sim, first.get("why")))


def _sub(obj: Any, key: str) -> Dict[str, Any]:
    """obj[key] where both are JSON objects, else {} (events and status.json are read as given)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _headline(event: Dict[str, Any], host: str) -> tuple:
    """(emoji, headline, tags) for an event; the generic case uses the severity."""
    etype = str(event.get("type") or "event")
    where = _where(event)
    cause = _sub(event, "cause")
    summary = str(cause.get("summary") or event.get("summary") or etype.replace("_", " "))
    pre = "%s \u00b7 " % host
    if etype == "run_succeeded":
        return "\u2705", pre + "%s done \u2014 %s" % (event.get("run"), _run_facts(event)), ["white_check_mark"]
    if etype == "run_failed":
        at = " at %s" % event["failed_stage"] if event.get("failed_stage") else ""
        return "\u274C", pre + "%s failed%s: %s" % (event.get("run"), at, summary), ["x"]
    if etype == "stage_failed":
        att = " (attempt %s)" % event["attempt"] if (event.get("attempt") or 1) > 1 else ""
        return "\u274C", pre + "%s failed%s: %s" % (where, att, summary), ["x"]
    if etype == "run_started":
        return "\U0001F680", pre + "%s started" % event.get("run"), ["rocket"]
    if etype == "stage_succeeded":
        dur = " in %s" % format_duration(event["duration_s"]) if event.get("duration_s") is not None else ""
        return "\u2714\uFE0F", pre + "%s done%s" % (where, dur), ["heavy_check_mark"]
    sev = str(event.get("severity") or "info")
    text = summary if not where or where in summary else "%s: %s" % (where, summary)
    if etype in COST_EMOJI:
        return COST_EMOJI[etype][0], pre + text, [COST_EMOJI[etype][1]]
    return SEV_EMOJI.get(sev, ""), pre + text, [SEV_TAG.get(sev, "information_source")]


def _run_facts(event: Dict[str, Any]) -> str:
    facts = []
    if event.get("stages") is not None:
        facts.append("%s stage%s" % (event["stages"], "" if event["stages"] == 1 else "s"))
    if event.get("duration_s") is not None:
        facts.append(format_duration(event["duration_s"]))
    art = _sub(event, "artifacts")
    if art.get("files"):
        facts.append("%s files (%s)" % (art["files"], format_bytes(art.get("bytes"))))
    return ", ".join(facts) or "succeeded"


def render_event(event: Dict[str, Any], host: str, repeated: int = 0, since: str = "") -> Message:
    """The message for one event. `repeated`: how many same-key alerts were coalesced into it."""
    emoji, headline, tags = _headline(event, host)
    sev = str(event.get("severity") or "info")
    cause = _sub(event, "cause")
    parts = _cost_parts(event)
    if cause:
        parts += _cause_parts(cause)
    elif event.get("evidence"):
        parts.append(Part("evidence", [("\u2022 " + _line(e)) for e in event["evidence"][:8]], "Evidence:"))
    for w in (event.get("warnings") or [])[:5]:
        parts.append(Part("note", ["\u26A0 " + _line(w)]))
    lines = [_line(x) for x in (event.get("last_lines") or [])[-MAX_LOG_LINES:]]
    if lines:
        parts.append(Part("log", lines, "Last lines:"))
    if repeated:
        parts.append(Part("note", ["(repeated %d\u00d7 since %s)" % (repeated, since or "the last message")]))
    if sev != "info" or event.get("type") in ("run_succeeded", "run_failed"):
        parts.append(Part("footer", ["\u2192 rgt-client status %s" % host]))
    return Message(headline, sev, emoji, tags, parts)


def _cost_parts(event: Dict[str, Any]) -> List[Part]:
    """A run-end event's cost (the cost part puts it there), and the next steps an event names
    (`next`: box_idle, budget, danger_clock say what to pull and what each stop verb destroys)."""
    parts = []
    cost = _sub(event, "cost")
    hours = cost.get("hours")
    if event.get("type") in RUN_END and isinstance(hours, (int, float)):
        line = "Cost: %s" % format_duration(hours * 3600.0)
        if isinstance(cost.get("spent"), (int, float)) and isinstance(cost.get("gpu_hours"), (int, float)):
            # A run on a cluster's nodes: its GPU hours, priced per GPU (cost/part.py).
            line += ", %.2f %s for %.2f GPU hours at %s %s/GPU-h" % (
                cost["spent"], cost.get("currency") or "", cost["gpu_hours"], cost.get("price_per_gpu_hour"),
                cost.get("currency") or "")
        elif isinstance(cost.get("spent"), (int, float)):
            line += ", %.2f %s at %s %s/h" % (cost["spent"], cost.get("currency") or "",
                                              cost.get("price_per_hour"), cost.get("currency") or "")
        else:
            line += " paid (no price set)"
        parts.append(Part("summary", [line]))
    steps = event.get("next")
    if isinstance(steps, list) and steps:
        parts.append(Part("remediation", [_line(x) for x in steps[:MAX_NEXT_LINES]], "What to do:"))
    return parts


def render_test(host: str, at: str) -> Message:
    return Message("%s \u00b7 test from rgt \u2014 this notifier works" % host, "info", "\U0001F514", ["bell"],
                   [Part("summary", ["Sent by the box at %s through its own network route." % at])])


def render_heartbeat(host: str, status: Dict[str, Any]) -> Message:
    return Message("%s \u00b7 alive \u2014 %s" % (host, status_line(status)), "info", "\U0001F49A",
                   ["green_heart"])


def render_deadman(host: str, silent_for_s: float, status: Dict[str, Any], armed_at: str) -> Message:
    head = "%s silent for %s \u2014 the agent stopped or the box died" % (host, format_duration(silent_for_s))
    parts = [Part("summary", ["Last heard at %s: %s" % (armed_at, status_line(status))]),
             Part("remediation", ["Check the box in the platform console (stopped? preempted? out of credit?), "
                                  "then: rgt-client status %s" % host], "What to do:")]
    return Message(head, "critical", "\U0001F480", ["skull"], parts)


def status_line(status: Dict[str, Any]) -> str:
    """One line about the box: running runs with stage and progress, else idle; GPU and memory."""
    bits = []
    for run in (status.get("runs") or []) if isinstance(status, dict) else []:
        if not isinstance(run, dict) or run.get("state") not in ("running", "queued"):
            continue
        bit = str(run.get("name"))
        stage = _current_stage(run)
        if stage:
            bit += "/%s" % stage.get("name")
            prog = _sub(stage, "progress")
            if prog.get("fraction") is not None:
                bit += " %d%%" % round(100 * float(prog["fraction"]))
            if prog.get("eta_s") is not None:
                bit += " (eta %s)" % format_duration(prog["eta_s"])
        bits.append(bit)
    text = ", ".join(bits[:3]) if bits else "no run running"
    health = _sub(status, "health")
    gpus = [g["util_pct"] for g in (health.get("gpus") or []) if isinstance(g, dict) and g.get("util_pct") is not None]
    if gpus:
        text += " \u00b7 GPU %d%%" % round(sum(gpus) / len(gpus))
    mem = _sub(health, "memory")
    if mem.get("used_pct") is not None:
        text += " \u00b7 mem %d%%" % round(mem["used_pct"])
    cost = _sub(status, "cost")
    if isinstance(cost.get("spent"), (int, float)):
        text += " \u00b7 %.2f %s spent" % (cost["spent"], cost.get("currency") or "")
    return text


def _current_stage(run: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    for st in run.get("stages") or []:
        if isinstance(st, dict) and st.get("name") == run.get("current_stage"):
            return st
    return None
