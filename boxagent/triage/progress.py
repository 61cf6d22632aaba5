"""Progress from log lines: tqdm / Lightning / Keras bars, `[n/total]`, `step n/N`,
`epoch e/E`, `step n` - or a job's progress_pattern (named groups done, total) instead.

progress {done, total, fraction, eta_s, last_line, seen_at}: seen_at is when the agent read that
line (epoch seconds; `rgt-agent status` adds its age, age_s: status.json is written every
sample_every, so a reading can trail the log by that much). eta_s is tqdm's own remaining time when
the bar prints one, else (1 - fraction) / rate, the rate measured over the last samples.
A fraction that goes down (a new epoch's bar) restarts the rate.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from boxagent.triage.regexsafe import unsafe_reason
from boxagent.triage.text import clip, user_text

# tqdm: " 45%|####5     | 4500/10000 [01:23<01:40, 54.2it/s]"; Keras: "450/1000 [====>...]"
_BAR = re.compile(r"(?P<done>\d+)/(?P<total>\d+) \[(?:(?P<elapsed>\d+(?::\d+)+)<"
                  r"(?P<remaining>\d+(?::\d+)+))?")
_EPOCH = re.compile(r"\b[Ee]poch\W{0,3}(?P<done>\d+)\s*(?:/|of)\s*(?P<total>\d+)")
_BRACKET = re.compile(r"\[\s*(?P<done>\d+)\s*/\s*(?P<total>\d+)\s*\]")
_STEP = re.compile(r"\b(?:global_step|[Ss]tep|[Ii]ter(?:ation)?|[Bb]atch)\W{0,3}(?P<done>\d+)"
                   r"\s*(?:/|of)\s*(?P<total>\d+)")
_STEP_ONLY = re.compile(r"\b(?:global_step|[Ss]tep|[Ii]ter(?:ation)?)\b\W{0,3}(?P<done>\d+)\b")
# Cheap test before the regexes: every built-in form has one of these.
_HINTS = ("/", "tep", "ter", "poch")


def compile_progress_pattern(pattern: Optional[str]) -> Optional["re.Pattern[str]"]:
    """A job's progress_pattern; ValueError with a sentence a person can act on."""
    if not pattern:
        return None
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError("progress_pattern is not a valid regular expression: %s" % exc)
    why = unsafe_reason(pattern)
    if why is not None:
        raise ValueError("progress_pattern %s" % why)
    if "done" not in rx.groupindex:
        raise ValueError("progress_pattern needs a named group `done` (and optionally `total`),"
                         " e.g. 'step (?P<done>\\d+)/(?P<total>\\d+)'")
    return rx


def _hms(text: Optional[str]) -> Optional[float]:
    if not text:
        return None
    s = 0.0
    for part in text.split(":"):
        s = s * 60 + float(part)
    return s


def parse(text: str, custom: Optional["re.Pattern[str]"] = None,
          epoch_base: int = 1) -> Optional[Dict[str, Any]]:
    """One line's progress (done, total, fraction, remaining_s) or None. epoch_base: the
    number of a log's first epoch (1, or 0 once the tracker saw an `Epoch 0/N`)."""
    if custom is not None:
        m = custom.search(user_text(text))
        if not m:
            return None
        gd = m.groupdict()
        return _make(gd.get("done"), gd.get("total"), None)
    if not any(h in text for h in _HINTS):
        return None
    m = _BAR.search(text)
    if m:
        p = _make(m.group("done"), m.group("total"), _hms(m.group("remaining")))
        e = _EPOCH.search(text)
        if e and p is not None:
            p = _with_epoch(p, e, epoch_base)
        return p
    for rx in (_BRACKET, _STEP, _EPOCH):
        m = rx.search(text)
        if m:
            return _make(m.group("done"), m.group("total"), None)
    m = _STEP_ONLY.search(text)
    if m:
        return _make(m.group("done"), None, None)
    return None


def _num(text: Optional[str]) -> Optional[float]:
    try:
        v = float(text) if text is not None else None
    except ValueError:
        return None
    if v is None:
        return None
    return int(v) if v == int(v) else v


def _make(done: Optional[str], total: Optional[str], remaining: Optional[float]) -> Optional[Dict[str, Any]]:
    d, t = _num(done), _num(total)
    if d is None:
        return None
    frac = None
    if t:
        if d > t:
            return None                   # "2024/10 [..." is a date, not progress
        frac = round(float(d) / float(t), 4)
    return {"done": d, "total": t, "fraction": frac, "remaining_s": remaining}


def _with_epoch(bar: Dict[str, Any], e: "re.Match[str]", base: int) -> Dict[str, Any]:
    """`Epoch 3/10: 50%|... 450/1000 [..`: the whole run's fraction. The bar is epoch 3's own
    while it runs: 2 epochs are done (2.5/10), 3 only once its bar is full. (Counting epoch 3
    as done while it ran showed `0% (1/3)` at the start and `83% (6/6)` in the last epoch.)"""
    ep, total = int(e.group("done")), int(e.group("total"))
    if not total or ep > total or bar["fraction"] is None:
        return bar
    if ep < base:                          # `Epoch 0/3` read as 1-based: the tracker learns
        return dict(bar, epoch=ep)
    finished = ep - base                   # epochs before this one
    done = finished + (1 if bar["fraction"] >= 1.0 else 0)
    frac = (finished + bar["fraction"]) / total
    return {"done": done, "total": total, "fraction": round(min(frac, 1.0), 4),
            "remaining_s": None, "epoch": ep}


class ProgressTracker:
    """The latest progress of one log and its rate."""

    def __init__(self, custom: Optional["re.Pattern[str]"] = None, keep: int = 32,
                 min_gap_s: float = 2.0):
        self.custom = custom
        self.latest: Optional[Dict[str, Any]] = None
        self.line_no: Optional[int] = None       # the line the latest progress came from
        self.epoch_base = 1                      # 0 once an `Epoch 0/N` bar was seen
        self._samples: List[Tuple[float, float]] = []
        self._keep, self._gap = keep, min_gap_s

    def update(self, text: str, line_no: Optional[int], now: Optional[float]) -> bool:
        p = parse(text, self.custom, self.epoch_base)
        if p is None:
            return False
        if p.pop("epoch", None) == 0 and self.epoch_base == 1:
            self.epoch_base = 0                # `Epoch 0/3`: this log counts epochs from 0
            p = parse(text, self.custom, 0)
            assert p is not None, text         # it parsed with the other base: the text is the same
            p.pop("epoch", None)
        p["last_line"] = clip(text.strip(), 200)
        p["seen_at"] = round(now, 3) if now is not None else None
        self.latest, self.line_no = p, line_no
        if now is not None and p["fraction"] is not None:
            self._sample(now, p["fraction"])
        return True

    def _sample(self, now: float, frac: float) -> None:
        s = self._samples
        if s and frac < s[-1][1]:
            del s[:]                           # a new bar (next epoch): rate starts over
        if len(s) >= 2 and now - s[-1][0] < self._gap:
            s[-1] = (now, frac)               # keep the window's span, refresh its end
            return
        s.append((now, frac))
        if len(s) > self._keep:
            del s[0]

    def rate_per_s(self) -> Optional[float]:
        s = self._samples
        if len(s) < 2 or s[-1][0] <= s[0][0] or s[-1][1] <= s[0][1]:
            return None
        return (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0])

    def block(self) -> Optional[Dict[str, Any]]:
        """status.json's progress {done, total, fraction, eta_s, last_line, seen_at}."""
        p = self.latest
        if p is None:
            return None
        eta = p.get("remaining_s")
        if eta is None and p["fraction"] is not None:
            rate = self.rate_per_s()
            if rate:
                eta = (1.0 - p["fraction"]) / rate
        return {"done": p["done"], "total": p["total"], "fraction": p["fraction"],
                "eta_s": round(eta, 1) if eta is not None else None, "last_line": p["last_line"],
                "seen_at": p.get("seen_at")}
