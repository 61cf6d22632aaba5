"""What `watch` and `patrol` print: one line per tick, one line per host (render_run's run line,
so a warned run reads the same in status, watch and patrol)."""
from __future__ import annotations

import shlex
import time

from boxagent.api import format_duration
from rgt_client.status import statusdata
from rgt_client.errors import BoxTooSlow
from rgt_client.status.poll import Verdict, WatchEvent
from rgt_client.status.render import heartbeat_words, occupancy, state_full_words
from rgt_client.cost.render import patrol_brief
from rgt_client.status.render_run import pull_words, run_line
from rgt_client.textsafe import s, safe_line


def _ts() -> str:
    return time.strftime("%H:%M:%S")


def watch_lines(ev: WatchEvent, host: str, run: str) -> list[str]:
    word, name = shlex.quote(host), shlex.quote(run)
    if ev.kind == "no_answer":
        why = "no answer in time" if isinstance(ev.error, BoxTooSlow) else "ssh failed"
        return ["%s %s (the run is not affected): %s" % (_ts(), why, safe_line(ev.error.message if ev.error else ""))]
    if ev.kind == "progress":
        return [progress_line(ev)[0]]
    if ev.kind == "run":
        live = statusdata.alive(ev.status)
        return ["%s %s%s" % (_ts(), run_line(ev.run, live), "" if live else "; " + heartbeat_words(ev.status))]
    if ev.kind == "ended":
        return ["%s run %s %s: rgt-client status %s --run %s" % (_ts(), s(run), s(ev.run.get("state")), word, name)]
    if ev.kind in ("event", "link_lost", "link_back"):
        return [_stream_line(ev)]
    if ev.kind == "agent_down":
        return ["%s the agent on %s stayed down for %d checks; restart it: rgt-client install %s"
                % (_ts(), host, ev.dead, word)]
    return ["%s gave up after %s: %s" % (_ts(), format_duration(ev.waited_s), _last_seen(ev, host, run))]


def progress_line(ev: WatchEvent) -> tuple[str, str]:
    """(the line, what it says apart from the clock and ages): the running stage, its progress,
    ETA and the progress's age. Piped, a line is printed only when the second part changes."""
    stages = ev.run.get("stages") or []
    cur = next((st for st in stages if isinstance(st, dict) and st.get("state") == "running"), None)
    if cur is None:
        what = "%s %s" % (s(ev.run.get("name")), s(ev.run.get("state")))
        return "%s %s" % (_ts(), what), what
    prog = cur.get("progress") or {}
    fraction = prog.get("fraction")
    what = "stage %s (%d/%d)" % (s(cur.get("name")), stages.index(cur) + 1, len(stages))
    if isinstance(fraction, (int, float)):
        what += ": %.0f%%" % (100 * fraction)
        if prog.get("done") is not None and prog.get("total"):
            what += " (%s/%s)" % (s(prog["done"]), s(prog["total"]))
        if isinstance(prog.get("eta_s"), (int, float)):
            what += " eta %s" % format_duration(prog["eta_s"])
    else:
        what += ": running, no progress in its log yet"
    age = prog.get("age_s")
    aged = ", as of %s ago" % format_duration(age) if isinstance(age, (int, float)) and fraction is not None else ""
    live = "" if statusdata.alive(ev.status) else "; " + heartbeat_words(ev.status)
    return "%s %s%s%s" % (_ts(), what, aged, live), what


def _stream_line(ev: WatchEvent) -> str:
    """A streamed watch's own lines: an event from the box's feed as it landed, and the link."""
    if ev.kind == "event":
        e = ev.event
        what = e.get("summary") or " ".join(str(e.get(k)) for k in ("type", "stage") if e.get(k))
        sev = e.get("severity")
        return "%s %s%s" % (_ts(), "" if sev in (None, "info") else s(sev) + ": ", safe_line(str(what))[:300])
    since = time.strftime("%H:%M:%S", time.localtime(ev.unknown_since or time.time()))
    if ev.kind == "link_back":
        return "%s link back (lost since %s); going on from the last event shown" % (_ts(), since)
    why = safe_line(ev.error.message if ev.error else "")
    if not ev.run:      # never reached yet: no link to lose
        return "%s ssh failed (the run is not affected): %s; trying again in %s" % (_ts(), why, format_duration(ev.waited_s))
    return "%s link lost at %s, reconnecting in %s (the run is not affected): %s" % (
        _ts(), since, format_duration(ev.waited_s), why)


def _last_seen(ev: WatchEvent, host: str, run: str) -> str:
    """Only what was observed, with its age: a box unreachable for the whole wait tells nothing
    about the run (it may have succeeded minutes ago)."""
    again = "rgt-client status %s --run %s" % (shlex.quote(host), shlex.quote(run))
    if ev.seen_age_s is None:
        return ("never reached %s during the wait: the state of run %s is unknown (it goes on on the box "
                "either way); ask again: %s" % (host, s(run), again))
    last = "last seen %s ago: %s" % (format_duration(ev.seen_age_s), run_line(ev.run, True))
    if ev.unknown_since is not None:
        since = time.strftime("%H:%M:%S", time.localtime(ev.unknown_since))
        return ("no answer from %s since %s: the state of run %s is unknown; %s; ask again: %s"
                % (host, since, s(run), last, again))
    if ev.dead:     # the last answer said the agent was down: nothing moves the chain on
        return ("run %s was not finished when %s; the agent on %s was down then: no next stage starts while it "
                "is down (a stage already running may still end); restart it: rgt-client install %s"
                % (s(run), last, host, shlex.quote(host)))
    return "run %s was not finished when %s (it keeps going on the box)" % (s(run), last)


def patrol_detail(v: Verdict, host: str) -> str:
    """The rest of the host's one line (always exactly one line, whatever the box sent)."""
    if v.error is not None:
        return safe_line(v.error.message)
    runs = v.status.get("runs") or []
    if v.word == "AGENT-DOWN":
        brief = ", ".join("%s %s" % (s(r.get("name")), s(r.get("state"))) for r in runs[-5:]) or "none"
        return "%s; %d run(s): %s" % (heartbeat_words(v.status), len(runs), brief)
    paid = patrol_brief(v.status)
    if v.word == "STATE-FULL":
        return state_full_words(statusdata.state_dir_full(v.status) or {}) + "; " + _runs_brief(v.runs, True) + paid
    if v.word in ("RUN-FAILED", "WARNED", "HEALTHY"):
        busy = occupancy((v.status.get("health") or {}).get("gpus") or [])
        return _runs_brief(v.runs, statusdata.alive(v.status)) + (" · %s" % busy if busy else "") \
            + paid + _alerts(v.status)
    if v.word == "DONE":
        name = v.runs[0].get("name")
        return "run %s succeeded; %s%s" % (s(name), pull_words(v.runs[0], host), paid)
    return "no active runs" + paid + _alerts(v.status)


PATROL_RUNS = 3


def _runs_brief(runs: list, alive: bool) -> str:
    """The first few runs by name, the rest as counts: with 200 queued, patrol's "one line" was
    6.3 KB because it named every one."""
    text = "; ".join(run_line(r, alive) for r in runs[:PATROL_RUNS])
    rest = runs[PATROL_RUNS:]
    if rest:
        counts: dict[str, int] = {}
        for r in rest:
            key = s(r.get("state")) if isinstance(r, dict) else "?"
            counts[key] = counts.get(key, 0) + 1
        text += "; +%d more (%s)" % (len(rest), ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())))
    return text


def _alerts(status: dict) -> str:
    alerts = status.get("alerts") or []
    if not alerts:
        return ""
    text = ", ".join("%s %s" % (s(a.get("severity")), s(a.get("type"))) for a in alerts[:PATROL_RUNS])
    return " · alerts: " + text + (" +%d more" % (len(alerts) - PATROL_RUNS) if len(alerts) > PATROL_RUNS else "")


class WatchPrinter:
    """watch's output: every line as it comes; a progress line redrawn in place on a terminal
    (the next line takes its place), and on a pipe printed only when what it says changes."""

    def __init__(self, host: str, run: str, tty: bool) -> None:
        self.host, self.run, self.tty = host, run, tty
        self.drawn = False              # a progress line is on the terminal's last row
        self.said: str | None = None

    def __call__(self, ev: WatchEvent) -> None:
        import click
        if ev.kind == "progress":
            line, what = progress_line(ev)
            if self.tty:
                click.echo("\r\x1b[K" + line, nl=False)
                self.drawn = True
            elif what != self.said:
                click.echo(line)
            self.said = what
            return
        if self.drawn:
            click.echo("\r\x1b[K", nl=False)
            self.drawn = False
        if ev.kind == "run":
            self.said = None
        for line in watch_lines(ev, self.host, self.run):
            click.echo(line)
