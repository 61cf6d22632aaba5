"""RunLog: the part that writes each run's history (runs/<run>/history.jsonl, see store.py).

Events: every event of a run goes into its history, and box-wide alerts (no run, or an alert
key) into the history of every run live then. run_started makes a run live; run_succeeded,
run_failed, run_cancelled and run_interrupted end it (its last, partial minute is written then).
Points: sample(now) reads the status the daemon last wrote (ctx.last_status(): its `health`
block and `runs[]`) and folds each sample into the current step of every live run; a point is
appended when its step is over. The step is the sampling interval (10 s unless `sample_every`
says otherwise): a 39 s training on an H100 drew each chart as a single dot at one point a
minute. The file thins old points as it grows (store.py), so the resolution falls with age.
Metrics: every value a stage's log prints for its metrics_pattern (metricfeed.py), read at each
sample and at each stage's end, before a run that ended is closed (its last value is the chart's
last point). At the default 10 s sampling a 6-second stage that printed 30 losses left none: it
started and ended between two samples. Its log is known from its stage_started event.
A run that status shows running but no run_started reached (the daemon restarted under it) is
adopted from status; one that status shows ended is closed the same way.
A failing write (disk full) costs this part's history, never the chain: the daemon's part
guard catches it, and the next sample tries again.
"""
from __future__ import annotations

import collections
import os
import time
from typing import Any, Dict, List, Mapping, Optional

from boxagent.base.config import interval
from boxagent.base.part import Part, PartContext, Spec
from boxagent.runlog import points
from boxagent.runlog.metricfeed import MetricFeed
from boxagent.runlog.store import HistoryFile

DEFAULT_STEP_S = 60.0
MIN_STEP_S = 0.2
STEP_ENV = "RGT_HISTORY_EVERY"      # tests and the demo: seconds per point
END_EVENTS = ("run_succeeded", "run_failed", "run_cancelled", "run_interrupted")
STAGE_END_EVENTS = ("stage_succeeded", "stage_failed", "stage_cancelled", "stage_interrupted", "stage_retry")
SPARK_POINTS = 60        # status.json metrics_history: the last hour of a run's first metric
SPARK_RUNS = 16          # ... for this many runs (the live ones and the latest ended)


def step_from(config: Dict[str, Any], env: Optional[Mapping[str, str]] = None) -> Optional[float]:
    """$RGT_HISTORY_EVERY, else config.json `history_every` (seconds per point), else None: the
    sampling interval."""
    environ: Mapping[str, str] = os.environ if env is None else env
    for raw in (environ.get(STEP_ENV), (config or {}).get("history_every")):
        if raw is None or raw == "" or isinstance(raw, bool):
            continue
        try:
            step = float(raw)
        except (TypeError, ValueError):
            continue
        if step == step and step != float("inf"):       # nan and inf are not a step
            return max(MIN_STEP_S, step)
    return None


def is_box_alert(event: Dict[str, Any]) -> bool:
    """An event about the box, not one run, that belongs in the story of every live run: an
    alert (it has a key; health names the running stage in it, but the box is what it is about),
    or a warning without a run."""
    if event.get("key"):
        return True
    return not event.get("run") and event.get("severity") in ("warning", "critical")


class _Live:
    """One live run: its file and the step being filled."""

    def __init__(self, hist: HistoryFile):
        self.hist = hist
        self.bucket: Optional[int] = None
        self.acc: Optional[Dict[str, Any]] = None
        self.last_at: Optional[float] = None
        self.info_written: Optional[Dict[str, Any]] = None
        self.feed = MetricFeed()
        self.patterns: Optional[Dict[str, str]] = None
        self.stage_logs: Dict[str, Dict[str, Any]] = {}     # stage -> {name, log}, from stage_started


class RunLog(Part):
    name = "runlog"

    def __init__(self, step_s: Optional[float] = None):
        self.fixed_step = step_s
        self.step_s = step_s or DEFAULT_STEP_S
        self.ctx: Optional[PartContext] = None
        self.live: Dict[str, _Live] = {}
        self._seen_status: Any = None
        self.sample_every = 10.0
        self.sparks: Dict[str, Dict[str, Any]] = {}

    # -- Part
    def start(self, ctx: PartContext) -> None:
        self.ctx = ctx
        self.reload(ctx.config, ctx.profile)

    def reload(self, config: Dict[str, Any], profile: Dict[str, Any]) -> None:
        self.sample_every = interval(config or {}, "sample_every") or 10.0
        self.step_s = self.fixed_step or step_from(config) or max(MIN_STEP_S, self.sample_every)

    def on_event(self, event: Dict[str, Any]) -> None:
        run, etype = event.get("run"), event.get("type")
        if isinstance(run, str) and run:
            if etype == "run_started":
                self._open(run)
            self._follow_stage(run, event)
            hist = self.live[run].hist if run in self.live else self._file(run)
            if hist is not None:
                hist.add_event(event)
            if etype in END_EVENTS:
                self._last_readings(run, event)
                self._close(run)
            if not is_box_alert(event):
                return
        elif not is_box_alert(event):
            return
        for name, live in self.live.items():
            if name != run:
                live.hist.add_event(event)

    def sample(self, now: float) -> List[Spec]:
        status = self.ctx.last_status() if self.ctx is not None else {}
        if not isinstance(status, dict) or status is self._seen_status:
            return []
        self._seen_status = status
        block = status.get("health")
        health = block if isinstance(block, dict) else {}
        runs = {r.get("name"): r for r in status.get("runs") or [] if isinstance(r, dict)}
        for name, live in self.live.items():      # before a run that ended is closed
            if name in runs:
                self._read_metrics(live, runs[name], now)
        self._follow_states(runs, now)
        for name, live in self.live.items():
            run = runs.get(name)
            if run is not None:
                self._add_sample(live, health, run, now)
        return []

    def status_block(self) -> Dict[str, Any]:
        """metrics_history {run: {stage, metric, step_s, values[]}}: the first metric of each
        run's latest stage with metrics, one value per point, for the sparkline in `status`."""
        return {"metrics_history": {run: dict(sp, values=list(sp["values"])) for run, sp in self.sparks.items()}}

    def stop(self, timeout: float) -> None:
        for live in self.live.values():
            self._flush(live)

    # -- helpers
    def _follow_stage(self, run: str, event: Dict[str, Any]) -> None:
        """A stage's log from its start; its last readings at its end (and the run's), before the
        end event: a stage shorter than the sampling interval is never seen by a sample."""
        live, etype, stage = self.live.get(run), event.get("type"), event.get("stage")
        if live is None:
            return
        at = event.get("at") if isinstance(event.get("at"), str) else None
        if etype == "stage_started" and isinstance(stage, str) and isinstance(event.get("log"), str):
            live.stage_logs[stage] = {"name": stage, "log": event["log"], "started_at": at}
        elif etype in STAGE_END_EVENTS or etype in END_EVENTS:
            if etype in STAGE_END_EVENTS and isinstance(stage, str) and stage in live.stage_logs:
                # the readings were printed before the end: they keep the attempt's own clock
                live.stage_logs[stage] = dict(live.stage_logs[stage], ended_at=at)
            ended = points.parse_iso(at)
            self._read_metrics(live, {"stages": list(live.stage_logs.values())},
                               ended if ended is not None else time.time())

    def _file(self, run: str) -> Optional[HistoryFile]:
        if self.ctx is None:
            return None
        run_dir = self.ctx.home.run_dir(run)
        if not os.path.isdir(run_dir):
            return None         # an event about a run that has no directory (a refused submit)
        return HistoryFile(run_dir, run, self.step_s)

    def _open(self, run: str) -> Optional[_Live]:
        if run not in self.live:
            hist = self._file(run)
            if hist is None:
                return None
            self.live[run] = _Live(hist)
            if run not in self.sparks and hist.size:
                self._seed_spark(run, hist.path)     # the daemon restarted under a live run
        return self.live[run]

    def _close(self, run: str) -> None:
        live = self.live.pop(run, None)
        if live is not None:
            self._flush(live)

    def _last_readings(self, run: str, event: Dict[str, Any]) -> None:
        """The lines a run's last stage printed after the last sample: the run ends before the
        next sample reads them, and a plain run's chart lacked the stage's last logged value."""
        live = self.live.get(run)
        status = self.ctx.last_status() if self.ctx is not None else None
        if live is None or not isinstance(status, dict):
            return
        block = next((r for r in status.get("runs") or [] if isinstance(r, dict) and r.get("name") == run), None)
        at = points.parse_iso(event.get("at"))
        if block is not None:
            self._read_metrics(live, block, at if at is not None else (live.last_at or 0.0))

    def _follow_states(self, runs: Dict[Any, Dict[str, Any]], now: float) -> None:
        for name, run in runs.items():
            if run.get("state") == "running" and isinstance(name, str):
                self._open(name)
        for name in [n for n in self.live if n in runs and runs[n].get("state") != "running"]:
            self._close(name)

    def _add_sample(self, live: _Live, health: Dict[str, Any], run: Dict[str, Any], now: float) -> None:
        # A sample stands for the time since the one before; the first for one sampling interval.
        span = min(now - live.last_at if live.last_at is not None else self.sample_every, self.step_s)
        live.last_at = now
        bucket = int(now // self.step_s)
        if live.bucket is not None and bucket != live.bucket:
            self._flush(live)
        if live.acc is None:
            live.bucket = bucket
        self._info(live, health, run, now)
        raw = points.from_status(health, run, bucket * self.step_s, max(span, 1e-3))
        live.acc = raw if live.acc is None else points.merge(live.acc, raw)

    def _read_metrics(self, live: _Live, run: Dict[str, Any], now: float) -> None:
        if live.patterns is None:
            live.patterns = self._metric_patterns(live.hist.run)
        if live.patterns:
            stages = [st for st in run.get("stages") or [] if isinstance(st, dict)]
            live.hist.add_metrics(live.feed.read(stages, live.patterns, now))

    def _metric_patterns(self, run: str) -> Dict[str, str]:
        """{stage: metrics_pattern} from the run's spec.json."""
        from boxagent.base.fsutil import read_json
        spec = read_json(self.ctx.home.run_spec(run), None) if self.ctx is not None else None
        stages = spec.get("stage") if isinstance(spec, dict) else None
        return {st["name"]: st["metrics_pattern"] for st in stages or []
                if isinstance(st, dict) and isinstance(st.get("name"), str)
                and isinstance(st.get("metrics_pattern"), str)}

    def _info(self, live: _Live, health: Dict[str, Any], run: Dict[str, Any], now: float) -> None:
        info = points.gpu_info(health, run)
        if info != live.info_written:
            live.hist.add_info(dict(info, t=round(now, 3)))
            live.info_written = info

    def _flush(self, live: _Live) -> None:
        if live.acc is None:
            return
        point = dict(live.acc)
        point["t"] = round(live.bucket * self.step_s, 3) if live.bucket is not None else point["t"]
        point["s"] = self.step_s
        live.acc, live.bucket = None, None
        live.hist.add_point(point)
        live.hist.note_dropped(point["t"])
        self._spark(live.hist.run, point)

    def _spark(self, run: str, point: Dict[str, Any]) -> None:
        x = point.get("x")
        if not isinstance(x, dict) or not x:
            return
        name = next(iter(x))
        sp = self.sparks.pop(run, None)
        if sp is None or (sp["stage"], sp["metric"]) != (point.get("st"), name):
            sp = {"stage": point.get("st"), "metric": name, "step_s": self.step_s,
                  "values": collections.deque(maxlen=SPARK_POINTS)}
        sp["values"].append(x[name])
        self.sparks[run] = sp                      # most recent last
        while len(self.sparks) > SPARK_RUNS:
            self.sparks.pop(next(iter(self.sparks)))

    def _seed_spark(self, run: str, path: str) -> None:
        from boxagent.base.fsutil import read_tail
        from boxagent.runlog.store import parse_line
        try:
            data = read_tail(path, 4 * SPARK_POINTS)
        except OSError:
            return
        for raw in data.split(b"\n")[1:]:          # the first line of the window may be torn
            rec = parse_line(raw)
            if rec is not None and rec.get("k") == "p":
                self._spark(run, rec)
