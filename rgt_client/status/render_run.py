"""The one renderer of runs and stages, shared by `status`, `watch` and `patrol`: what state each
stage is in, where it is, why it failed, and its warnings.

A stage that exited 0 with warnings (the loss became NaN, the log ends in an NCCL error) once
showed as a plain `✓ train succeeded` everywhere, its warnings only in --json: here a warned stage
has its own mark and its warnings, and a one-line summary says so too.
Every field is box text: it goes through textsafe before it reaches the terminal.
"""
from __future__ import annotations

import shlex
from typing import Any, Mapping

from boxagent.api import format_duration
from rgt_client.status.statusdata import Stage, warnings_of
from rgt_client.textsafe import s, safe_line

STATE_MARK = {"succeeded": "✓", "failed": "✗", "running": "▶", "pending": "·", "skipped": "↷",
              "cancelled": "⊘", "interrupted": "!", "queued": "·"}
WARN_MARK = "⚠"
NOT_RUN_MARK = "–"
BAD = ("failed", "interrupted", "cancelled")
QUOTE_CLIP = 200   # a quoted log line (evidence) can be kilobytes: its start says enough
TEXT_CLIP = 1000   # a cause, fix or warning is a sentence: cut only when it is not one (a flood)
PROGRESS_AGE_SHOWN_S = 5.0   # a reading older than this says its age
SCREEN = 80        # what a phone's terminal shows: sentences wrap under themselves to fit


def clip(text: str, width: int = QUOTE_CLIP) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def wrapped(label: str, text: str, limit: int = TEXT_CLIP, width: int = SCREEN) -> list[str]:
    """`label` + text in lines of at most `width` columns, continued under the text's first
    column: on an 80-column phone terminal a fix reads as a paragraph, not as lines that restart
    at column 0 in the middle of the stage list."""
    import textwrap
    text = clip(text, limit)
    if len(label) + len(text) <= width:
        return [label + text]
    return textwrap.wrap(text, width=width, initial_indent=label, subsequent_indent=" " * len(label),
                         break_on_hyphens=False) or [label]


def progress_words(st: Stage, live: bool = True) -> str:
    """`45% (45/100) eta 5m05s`; the eta only while the stage runs (a failed stage has none) and
    the daemon looks after it (a dead daemon's last eta is a number nobody updates)."""
    prog = st.get("progress") or {}
    fraction = prog.get("fraction")
    if fraction is None:
        return ""
    out = "%.0f%%" % (100 * fraction)
    if prog.get("done") is not None and prog.get("total"):
        out += " (%s/%s)" % (_num(prog["done"]), _num(prog["total"]))
    if live and st.get("state") == "running" and prog.get("eta_s") is not None:
        out += " eta %s" % format_duration(prog["eta_s"])
    age = prog.get("age_s")
    if st.get("state") == "running" and isinstance(age, (int, float)) and age >= PROGRESS_AGE_SHOWN_S:
        # status.json is written every sample_every: `15% (3/20)` while the log was at 12/20
        out += " (as of %s ago)" % format_duration(age)
    return out


def _num(v: Any) -> str:
    return "%d" % v if float(v).is_integer() else "%g" % v


def stage_head(st: Stage, live: bool = True, run_state: Any = None) -> str:
    state = st.get("state") or "?"
    warned = bool(st.get("warnings"))
    mark = WARN_MARK if warned and state == "succeeded" else STATE_MARK.get(state, "?")
    shown = s(state)
    if state == "pending" and run_state in BAD:
        # a failed or cancelled run starts nothing more: "pending" promised a stage that will
        # not run (resume queues the run again, and its stages are pending then)
        mark, shown = NOT_RUN_MARK, "not run"
    parts = ["  %s %-10s %-11s" % (mark, s(st.get("name")), shown)]
    if st.get("attempt"):
        parts.append("attempt %s" % st["attempt"])
    if st.get("kind") == "wait":
        parts.append("(wait)")
    if st.get("duration_s") is not None:
        parts.append(format_duration(st["duration_s"]))
    parts.append(progress_words(st, live))
    if st.get("slurm_job_id"):
        # A Slurm stage: its job, and why it waits (the agent's words for Priority, Resources, ...).
        parts.append("slurm job %s %s" % (s(st["slurm_job_id"]), s(st.get("slurm_state") or "?")))
        waiting = block if isinstance(block := st.get("slurm_waiting"), dict) else {}
        if waiting.get("text"):
            parts.append("(%s%s)" % (s(waiting["text"]), ", blocked" if waiting.get("blocked") is True else ""))
    where = st.get("placement") or {}
    if isinstance(where, dict) and where.get("state"):
        # A Ray stage: where Ray placed it and the GPUs it gave (CUDA_VISIBLE_DEVICES).
        node = where.get("ssh_host") or where.get("host") or where.get("node")
        parts.append("ray %s%s%s" % (s(where["state"]), " on %s" % s(node) if node else "",
                                      " GPU %s" % s(where["gpus"]) if where.get("gpus") else ""))
    if warned:
        n = len(st.get("warnings") or [])
        parts.append("%d warning%s" % (n, "" if n == 1 else "s"))
    return " ".join(p for p in parts if p).rstrip()


def stage_lines(st: Stage, live: bool = True, run_state: Any = None) -> list[str]:
    """The stage's line, then its cause (failed/interrupted/cancelled) and its warnings.
    live: the daemon is running (else what the box's files last said: no eta). run_state: the
    run's, so a stage that will not run is not shown as pending."""
    lines = [stage_head(st, live, run_state)]
    cause = st.get("cause") or {}
    if cause and st.get("state") in BAD:
        # a fix is never cut short: half a remediation (`expandable_segments:Tru…`) misleads
        lines += wrapped("      cause: ", "%s: %s" % (s(cause.get("class")), s(cause.get("summary") or "")))
        if cause.get("confidence"):
            lines += wrapped("      confidence: ", confidence_line(cause))
        if cause.get("remediation"):
            lines += wrapped("      fix:   ", s(cause["remediation"]))
        evidence = [s(ev) for ev in (cause.get("evidence") or [])[:3]]
        decided = s(cause["decided_by"]) if cause.get("decided_by") else None
        if decided and decided not in evidence:       # said once: it is often the first evidence line
            lines += wrapped("      decided by: ", decided, QUOTE_CLIP)
        for ev in evidence:
            lines += wrapped("      evidence: ", ev, QUOTE_CLIP)
        near = cause.get("similar") or []
        if near:                    # the nearest known failure: a hint, not a verdict
            n = near[0]
            lines += wrapped("      like:  ", "%s (%s, similarity %.2f): %s" % (
                s(n.get("source")), s(n.get("class")), n.get("score") or 0.0, s(n.get("why"))), QUOTE_CLIP)
        over = cause.get("overruled") or []
        for note in over[:2]:
            lines += wrapped("      overruled: ", s(note), QUOTE_CLIP)
        if len(over) > 2:
            lines.append("      overruled: … %d more (rgt-client status --json)" % (len(over) - 2))
    for w in st.get("warnings") or []:
        lines += wrapped("      warning: ", s(w))
    return lines


def confidence_line(cause: Mapping[str, Any]) -> str:
    """"low: maybe cgroup_oom instead; check …" (the box's text, made safe)."""
    level = s(cause.get("confidence"))
    if level == "high" or not cause.get("runner_up"):
        return level
    out = "%s: maybe %s instead" % (level, s(cause["runner_up"]))
    return out + ("; %s" % s(cause["tell_apart"]) if cause.get("tell_apart") else "")


def run_line(run: dict[str, Any], live: bool = True) -> str:
    """One line for watch/patrol: the run's state, where it is, and its warnings."""
    stages = run.get("stages") or []
    name, state = s(run.get("name")), s(run.get("state"))
    cur = next((st for st in stages if st.get("state") == "running"), None)
    if run.get("state") in BAD:
        bad = next((st for st in stages if st.get("state") in BAD), None) or {}
        cause = bad.get("cause") or {}
        line = "%s %s at stage %s: %s" % (name, state, s(bad.get("name")),
                                          s(cause.get("class")) if cause.get("class") else "no cause recorded")
        if cause.get("confidence") == "low":        # a guess is never shown as a fact
            line += " (a guess%s)" % (", maybe %s" % s(cause["runner_up"]) if cause.get("runner_up") else "")
    elif cur is None:
        done = sum(1 for st in stages if st.get("state") in ("succeeded", "skipped"))
        line = "%s %s (%d/%d stages done)" % (name, state, done, len(stages))
    else:
        prog = progress_words(cur, live)
        line = "%s running stage %s (%d/%d)%s" % (name, s(cur.get("name")), stages.index(cur) + 1,
                                                  len(stages), " " + prog if prog else "")
    return line + warnings_brief(run)


def warnings_brief(run: dict[str, Any]) -> str:
    """`; ⚠ train: loss became NaN (+1 more)`, or nothing."""
    warned = warnings_of(run)
    if not warned:
        return ""
    stage, first = warned[0]
    more = " (+%d more)" % (len(warned) - 1) if len(warned) > 1 else ""
    return "; %s %s: %s%s" % (WARN_MARK, s(stage), clip(s(first), 100), more)


def pull_words(run: dict, host: str) -> str:
    """What the box recorded of a verified pull of a succeeded run (runs[].pull_verified), or
    the pull to do next. patrol said "pull next" after a verified pull the box had recorded."""
    again = "rgt-client pull %s %s" % (shlex.quote(host), s(shlex.quote(str(run.get("name")))))
    pv = run.get("pull_verified")
    if not isinstance(pv, dict) or not pv.get("verified_at"):
        return "pull next: " + again
    where = " into %s" % s(pv["dest"]) if pv.get("dest") else ""
    files = " (%s files)" % s(pv["files"]) if pv.get("files") is not None else ""
    if pv.get("current"):
        return "pulled and verified at %s%s%s: its results are safe off the box" % (s(pv["verified_at"]), where, files)
    return ("a pull was verified at %s%s, but the box's files changed since: pull again: %s"
            % (s(pv["verified_at"]), where, again))
