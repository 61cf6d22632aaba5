"""StageWatch: follows one stage attempt's log for the daemon (CONTRACT, docs/ARCHITECTURE.md).

The daemon creates one per attempt, calls poll(now) every fast tick (one bounded read; cost
proportional to the new bytes), stall_check() on sample ticks, finish(now) at the end, and
reads success_seen, fail_line, hits, progress, last_output_at, last_lines(n), status_block().
All times are wall-clock seconds (time.time()), the clock file mtimes use.
"""
from __future__ import annotations

import collections
import re
from typing import Any, Deque, Dict, List, Optional, Tuple

from boxagent.triage.hits import HitStore
from boxagent.triage.success import divergence_spec
from boxagent.triage.metrics import MetricsTracker, compile_metrics_pattern
from boxagent.triage.progress import ProgressTracker, compile_progress_pattern
from boxagent.triage.regexsafe import unsafe_reason
from boxagent.triage.anchors import Finder, candidate_lines
from boxagent.triage.rules import RuleSet, ScanState, build_rules, derive_keywords
from boxagent.triage.tailer import DEFAULT_CHUNK, Block, Tailer
from boxagent.triage.text import decode, last_segment, match_text, show, show_match, user_text
from boxagent.base.units import format_duration

KEEP_TAIL = 50            # lines kept for last_lines()
BUSY_CPU_FRACTION = 0.2   # CPU-seconds per second of silence (a fifth of a core): not stalled
PROGRESS_LOOKBACK = 2000  # lines searched backwards in a block for the latest progress


class LinePattern:
    """A user regex (success_pattern, fail_pattern) found in blocks of lines, prefiltered."""

    def __init__(self, pattern: str):
        self.rx = re.compile(pattern, re.M)
        kws = derive_keywords(pattern)
        self.finder = Finder(k.encode("utf-8") for k in kws) if kws else None

    def first(self, block: bytes, first_line_no: int) -> Optional[Tuple[int, str]]:
        for line_no, raw in candidate_lines(block, self.finder, first_line_no):
            text = user_text(match_text(raw))
            m = self.rx.search(text)
            if m:
                return line_no, show_match(text, m.start())
        return None


def _as_ruleset(rules: Any) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules
    if isinstance(rules, list):
        return build_rules(None, rules)
    return build_rules()


class StageWatch:
    def __init__(self, log_path: str, rules: Any = None, success_pattern: Optional[str] = None,
                 fail_pattern: Optional[str] = None, progress_pattern: Optional[str] = None,
                 started_at: Optional[float] = None, chunk: int = DEFAULT_CHUNK,
                 start_offset: Optional[int] = None, metrics_pattern: Optional[str] = None):
        self.log_path = log_path
        self.rules = _as_ruleset(rules)
        self.started_at = started_at
        self.tailer = Tailer(log_path, chunk, start_offset)
        self.pattern_errors: List[str] = []      # patterns refused here (written before the check)
        self.success = self._line_pattern("success_pattern", success_pattern)
        self.fail = self._line_pattern("fail_pattern", fail_pattern)
        self.progress_error: Optional[str] = None
        try:
            custom = compile_progress_pattern(progress_pattern)
        except ValueError as exc:         # degrade to the built-in forms, never lose the watch
            custom, self.progress_error = None, str(exc)
        self.tracker = ProgressTracker(custom)
        self.metrics: Optional[MetricsTracker] = None
        self.metrics_error: Optional[str] = None
        try:
            metrics_rx = compile_metrics_pattern(metrics_pattern)
        except ValueError as exc:         # validated at submit; a bad one here costs only the metrics
            metrics_rx, self.metrics_error = None, str(exc)
        if metrics_rx is not None:
            self.metrics = MetricsTracker(metrics_rx)
        self.success_seen = False
        self.success_line_no: Optional[int] = None
        self.fail_line: Optional[str] = None       # first line that matched fail_pattern
        self.fail_line_no: Optional[int] = None
        self.last_output_at: Optional[float] = None
        self.finished = False
        self._scan = ScanState()
        self.store = HitStore()
        self._tail: Deque[str] = collections.deque(maxlen=KEEP_TAIL)
        self._stall_since: Optional[float] = None
        self._diverged: Optional[Dict[str, Any]] = None     # the first NaN/inf loss line
        self._diverged_told = False
        self._silent_since: Optional[float] = None

    def _line_pattern(self, key: str, pattern: Optional[str]) -> Optional[LinePattern]:
        """A success/fail pattern, or None. A spec on disk from before the submit-time check
        may hold a catastrophic one: it is never run (it would freeze the daemon's loop)."""
        if not pattern:
            return None
        why = unsafe_reason(pattern)
        if why is not None:
            self.pattern_errors.append("%s %s" % (key, why))
            return None
        return LinePattern(pattern)

    # -- reading
    def behind(self) -> bool:
        """The log holds more than one poll read: poll again soon (a daemon catching up on a
        long log reads it in bounded slices, between which it keeps its heartbeat)."""
        return not self.finished and self.tailer.behind()

    def poll(self, now: float) -> List[Dict[str, Any]]:
        """Read the new bytes (one bounded read); update patterns, hits, progress.
        Returns event specs: `divergence` once, at the first NaN/inf loss line (stalls come
        from stall_check)."""
        if self.finished:
            return []
        before = (self.tailer.offset, self.tailer.rotations, self.tailer.truncations)
        block = self.tailer.read()
        if (self.tailer.offset, self.tailer.rotations, self.tailer.truncations) != before:
            self.last_output_at = now
        if block is not None:
            self._process(block, now)
        if self.tailer.offset != before[0]:
            self._partial_progress(now)
            caught_up = self.tailer.offset - before[0] < self.tailer.chunk
            if self.metrics is not None and caught_up:
                # tqdm's set_postfix(loss=...) sits on the redrawn line; a read that stopped at the
                # chunk limit leaves a fragment of an old line there, whose numbers may be cut short
                self.metrics.feed_partial(self.tailer.partial(), now)
        if self._diverged is not None and not self._diverged_told:
            self._diverged_told = True
            return [divergence_spec(self._diverged)]
        return []

    def finish(self, now: float) -> None:
        """The stage ended: read what is left, including a last line without a newline."""
        if self.finished:
            return
        before = self.tailer.offset
        block = self.tailer.finish()
        if block is not None:
            if self.tailer.offset != before:
                self.last_output_at = now
            self._process(block, now)
        self.finished = True

    def close(self) -> None:
        self.tailer.close()

    def _process(self, block: Block, now: float) -> None:
        data, first = block.data, block.first_line_no
        for h in self.rules.scan(data, first, self._scan):
            self.store.add(h)
            if h["class"] == "divergence" and self._diverged is None:
                self._diverged = h
        if self.success is not None and not self.success_seen:
            found = self.success.first(data, first)
            if found:
                self.success_seen, self.success_line_no = True, found[0]
        if self.fail is not None and self.fail_line is None:
            found = self.fail.first(data, first)
            if found:
                self.fail_line_no, self.fail_line = found
        self._block_progress(data, first + block.lines - 1, now)
        if self.metrics is not None:
            self.metrics.feed_block(data, first, now)
        for raw in data.rsplit(b"\n", KEEP_TAIL + 1)[-KEEP_TAIL - 1:-1]:
            self._tail.append(show(raw, 500, keep_indent=True))

    def _block_progress(self, data: bytes, last_line_no: int, now: float) -> None:
        end, line_no = len(data) - 1, last_line_no
        for _ in range(PROGRESS_LOOKBACK):
            if end < 0:
                return
            s = data.rfind(b"\n", 0, end) + 1
            seg = last_segment(data[s:end])
            if seg and self.tracker.update(decode(seg), line_no, now):
                return
            end, line_no = s - 1, line_no - 1

    def _partial_progress(self, now: float) -> None:
        """tqdm redraws one line with \\r for hours: its last segments are the progress."""
        part = self.tailer.partial()
        if b"\r" not in part and b"/" not in part:
            return
        segs = part.rstrip(b"\r").rsplit(b"\r", 2)[-2:]
        for seg in reversed(segs):
            if seg and self.tracker.update(decode(seg), self.tailer.next_line_no, now):
                return

    # -- what the daemon reads
    @property
    def hits(self) -> List[Dict[str, Any]]:
        """Hits in log order (bounded: see hits.py), each marked `after_progress`."""
        return self.store.listing(self.tracker.line_no)

    @property
    def progress(self) -> Optional[Dict[str, Any]]:
        return self.tracker.block()

    @property
    def progress_line_no(self) -> Optional[int]:
        return self.tracker.line_no

    def last_lines(self, n: int = 20) -> List[str]:
        lines = list(self._tail)
        part = self.tailer.partial() if not self.finished else b""
        if part.strip():
            lines.append(show(part, 500, keep_indent=True))
        return lines[-n:] if n > 0 else []

    def status_block(self) -> Dict[str, Any]:
        block: Dict[str, Any] = {"progress": self.progress}
        if self.metrics is not None:
            block["metrics"] = self.metrics.block()
        return block

    def facts(self) -> Dict[str, Any]:
        """The triage facts for diagnose() this watch knows (the daemon may merge them)."""
        return {"success_seen": self.success_seen, "fail_line": self.fail_line,
                "hits": self.hits, "last_lines": self.last_lines(20),
                "progress_line_no": self.progress_line_no,
                "last_traceback_line_no": self._scan.traceback_line,
                "log_lines": self.tailer.next_line_no - 1}

    # -- stall
    def stall_check(self, now: float, stall_after: float, artifacts_mtime: Optional[float],
                    gpu_busy: Optional[bool], cpu_s: Optional[float] = None) -> List[Dict[str, Any]]:
        """Event specs: `stalled` when the log, the artifacts, the GPU and the CPU all stood still
        for stall_after (never a kill); `log_silent` when only the log is silent while artifacts
        advance or the stage burns CPU (buffered stdout?); `stall_cleared` when output comes
        back. Once per episode. cpu_s: the CPU seconds (user + system) the stage's process
        group used over the last stall_after seconds, None when unknown."""
        if not stall_after or self.finished:
            return []
        last_log = self.last_output_at if self.last_output_at is not None else self.started_at
        if last_log is None:
            return []
        idle = now - last_log
        if idle < stall_after:
            return self._cleared(now)
        art_busy = artifacts_mtime is not None and now - artifacts_mtime < stall_after
        cpu_busy = cpu_s is not None and cpu_s >= BUSY_CPU_FRACTION * stall_after
        if art_busy or (cpu_busy and not gpu_busy):
            if self._silent_since is not None:
                return []
            self._silent_since = now
            if art_busy and artifacts_mtime is not None:
                return [self._silent_spec(idle, now - artifacts_mtime)]
            return [self._busy_spec(idle, cpu_s or 0.0, stall_after, gpu_busy)]
        if gpu_busy or self._stall_since is not None:
            return []
        self._stall_since = last_log
        spec = self._stall_spec(idle, artifacts_mtime, gpu_busy, now)
        if cpu_s is not None:
            spec["evidence"].insert(3, "the stage used %.0f CPU-seconds in the last %s" % (
                cpu_s, format_duration(stall_after)))
        return [spec]

    def _cleared(self, now: float) -> List[Dict[str, Any]]:
        since, self._stall_since, self._silent_since = self._stall_since, None, None
        if since is None:
            return []
        return [{"type": "stall_cleared", "severity": "info",
                 "summary": "log output resumed after %s of silence" % format_duration(now - since),
                 "evidence": ["log %s grew again" % self.log_path]}]

    def _silent_spec(self, idle: float, art_age: float) -> Dict[str, Any]:
        return {"type": "log_silent", "severity": "info",
                "summary": "log silent, artifacts advancing — buffered stdout? (%s without "
                           "output)" % format_duration(idle),
                "evidence": ["no new log bytes for %s" % format_duration(idle),
                             "an artifact changed %s ago" % format_duration(art_age)],
                "remediation": "run python with -u or PYTHONUNBUFFERED=1 (rgt sets it for its "
                               "stages); flush prints; tqdm writes to stderr"}

    def _busy_spec(self, idle: float, cpu_s: float, window: float,
                   gpu_busy: Optional[bool]) -> Dict[str, Any]:
        """Silent but busy on CPU: a box without a GPU (or a CPU phase) with block-buffered
        stdout looked stalled until the process's own CPU time was asked."""
        return {"type": "log_silent", "severity": "info",
                "summary": "log silent, the process busy on CPU — buffered stdout? (%s without "
                           "output)" % format_duration(idle),
                "evidence": ["no new log bytes for %s" % format_duration(idle),
                             "the stage used %.0f CPU-seconds in the last %s" % (cpu_s, format_duration(window)),
                             "GPU idle" if gpu_busy is False else "no GPU activity known (no NVML)"],
                "cpu_s": round(cpu_s, 1),
                "remediation": "run python with -u or PYTHONUNBUFFERED=1 (rgt sets it for its "
                               "stages; a program it starts may buffer anyway); flush prints; if "
                               "it should print and does not, py-spy dump --pid PID shows where it is"}

    def _stall_spec(self, idle: float, artifacts_mtime: Optional[float], gpu_busy: Optional[bool],
                    now: float) -> Dict[str, Any]:
        ev = ["no new log bytes for %s" % format_duration(idle)]
        ev.append("artifacts unchanged for %s" % format_duration(now - artifacts_mtime)
                  if artifacts_mtime is not None else "no artifact written yet")
        ev.append("GPU idle" if gpu_busy is False else "GPU activity unknown (no NVML)")
        last = self.last_lines(1)
        if last:
            ev.append("last line: %s" % last[-1])
        return {"type": "stalled", "severity": "warning",
                "summary": "stalled: no log output, no artifact change%s for %s" % (
                    ", GPU idle" if gpu_busy is False else "", format_duration(idle)),
                "evidence": ev, "idle_s": round(idle, 1),
                "remediation": "look at it (py-spy dump --pid PID, nvidia-smi); a dataloader "
                               "deadlock or an NCCL hang looks like this; rgt never kills it"}
