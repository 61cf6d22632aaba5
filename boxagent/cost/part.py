"""CostPart: the daemon's part for paid hours (see the package docstring).

Facts it reads: config.json `cost` (price, currency, idle_alert_after_s, budget, stop deadline,
through boxagent.base.config.cost_settings), the profile's teardown verbs and danger clocks, and
ctx.last_status() (runs[] and health.gpus, as the daemon last wrote them). Runs are followed from
their events (run_started, the run-end events), so a run-end event can carry the run's cost
(annotate) and status shows `runs[].cost`; a run the daemon adopted after a restart is taken from
status. Facts it keeps: cost.json (ledger.py), saved every SAVE_EVERY_S, on each alert and at stop.
A write that fails (a full disk) is tried again at the next sample; the alerts still go out.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from boxagent.base import config as config_mod
from boxagent.base import numbers
from boxagent.base.fsutil import read_json
from boxagent.base.part import Part, PartContext, Spec
from boxagent.base.units import iso_utc, parse_iso_utc
from boxagent.cost import share, watch
from boxagent.cost.ledger import Ledger, box_up_since

SAVE_EVERY_S = 60.0
END_EVENTS = ("run_succeeded", "run_failed", "run_cancelled", "run_interrupted")


def _ts(text: Any) -> Optional[float]:
    try:
        return parse_iso_utc(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _at(event: Dict[str, Any], default: float) -> float:
    at = _ts(event.get("at"))
    return default if at is None else at


class CostPart(Part):
    name = "cost"

    def __init__(self, clock: Callable[[], float] = time.time,
                 up_since: Optional[Callable[[], Optional[float]]] = None,
                 mono: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.mono = mono                     # seam: the meters measure on it (wall steps change nothing)
        self._up_since = up_since            # seam: when the box came up (default: from /proc)
        self.ctx: Optional[PartContext] = None
        self.ledger = Ledger(clock())
        self.settings: Dict[str, Any] = config_mod.cost_settings({})
        self.host = ""
        self.profile: Dict[str, Any] = {}
        self._saved_at = float("-inf")
        self._dirty = True
        self._pending: List[Spec] = []

    # -- Part
    def start(self, ctx: PartContext) -> None:
        self.ctx = ctx
        self.reload(ctx.config, ctx.profile)
        now = self.clock()
        self.ledger = Ledger.load(ctx.home.cost, now)
        status = read_json(ctx.home.status) or {}
        self.ledger.box_gpus = watch.box_gpus(status)
        up_since = self._up_since() if self._up_since else box_up_since(ctx.roots.proc)
        if self.ledger.reopen(now, self.mono(), up_since):
            self.ledger.idle = {}            # the box was off: its idle clock starts over
        self._follow(status, now, adopt_ended=True)
        self._save(now)

    def reload(self, config: Dict[str, Any], profile: Dict[str, Any]) -> None:
        old = self.settings.get("idle_alert_after_s")
        self.settings = config_mod.cost_settings(config or {}, profile or {})
        self.host = config_mod.host_name(config or {})
        self.profile = profile if isinstance(profile, dict) else {}
        if self.settings["idle_alert_after_s"] != old and not self.ledger.idle.get("sent"):
            self.ledger.idle.pop("next_at", None)     # no reminder went out: the new delay applies

    def on_event(self, event: Dict[str, Any]) -> None:
        etype, run = event.get("type"), event.get("run")
        if not isinstance(run, str) or not run:
            return
        now = self.clock()
        if etype not in ("run_queued", "run_started") + END_EVENTS:
            return
        self.ledger.advance(now, self.mono())        # the time until now, shared by the runs until now
        if etype == "run_queued" and not event.get("resumed"):
            self.ledger.forget(run)                  # a new run under this name (submit --replace)
        elif etype == "run_started":
            self.ledger.run_started(run, _at(event, now), *self._wanted(run))
            self._end_idle(now, "run %s started" % run)
        elif etype in END_EVENTS:
            self.ledger.run_ended(run, _at(event, now))
        self._dirty = True

    def tick(self, now: float) -> List[Spec]:
        out, self._pending = self._pending, []
        return out

    def annotate(self, spec: Spec, now: float) -> Dict[str, Any]:
        if spec.get("type") not in END_EVENTS or not isinstance(spec.get("run"), str):
            return {}
        ent = self.ledger.runs.get(spec["run"])
        if ent is None:
            return {}
        self.ledger.advance(now, self.mono())
        return {"cost": self._cost(ent, with_price=True)}

    def sample(self, now: float) -> List[Spec]:
        status = self.ctx.last_status() if self.ctx is not None else {}
        status = status if isinstance(status, dict) else {}
        self._follow(status, now)
        gpus = watch.box_gpus(status)
        if gpus is not None:
            self.ledger.box_gpus = gpus
        self.ledger.advance(now, self.mono())
        specs: List[Spec] = []
        if isinstance(status.get("health"), dict):     # the health part has sampled: GPUs are known
            specs += self._idle(now, status)
        last = lambda: self._last_run(status)       # noqa: E731 - read only when an alert is due
        specs += watch.budget_specs(self.ledger, now, status, self.settings, self.host, self.profile, last)
        specs += watch.deadline_specs(self.ledger, now, self.settings, self.host, self.profile, last)
        if specs or self._dirty or now - self._saved_at >= SAVE_EVERY_S:
            self._save(now)
        return specs

    def status_block(self) -> Dict[str, Any]:
        now = self.clock()
        self.ledger.advance(now, self.mono())
        runs = {name: {"cost": self._cost(ent)} for name, ent in self.ledger.runs.items()}
        return {"cost": self._box_block(now), "run_fields": runs}

    def stop(self, timeout: float) -> None:
        self.ledger.advance(self.clock(), self.mono())
        self._save(self.clock())

    # -- helpers
    def _cost(self, ent: Dict[str, Any], with_price: bool = False) -> Dict[str, Any]:
        """A run's cost at full precision (a display rounds; a 2 s run is not 0.0): its wall hours,
        its share of the box's paid hours (share.py) and that share priced. A run on a cluster's
        nodes: its GPU hours, priced per GPU."""
        if ent["cluster"]:
            return self._cluster_cost(ent, with_price)
        price = self.settings["price_per_hour"]
        box_hours = ent["box_s"] / 3600.0
        out = {"hours": ent["run_s"] / 3600.0, "box_hours": box_hours, "gpus": ent["want"],
               "spent": box_hours * price if price is not None else None}
        if with_price:
            out.update(price_per_hour=price, currency=self.settings["currency"])
        return out

    def _cluster_cost(self, ent: Dict[str, Any], with_price: bool) -> Dict[str, Any]:
        """Ray places a run's attempts on any node of the cluster, so it holds no share of this
        box: 8 one-GPU cells on two 4-GPU boxes, shared out of this box's price, added up to one
        box's bill for two. Its GPU hours are priced per GPU: config `cost.price_per_gpu_hour`,
        else this box's price over its GPUs (the cluster's boxes taken to cost what this one does
        per GPU); unpriced where neither is known."""
        per_gpu, basis = self._per_gpu_price()
        gpu_hours = ent["gpu_s"] / 3600.0
        out = {"hours": ent["run_s"] / 3600.0, "box_hours": 0.0, "gpus": ent["want"], "gpu_hours": gpu_hours,
               "spent": gpu_hours * per_gpu if per_gpu is not None else None, "priced_by": basis}
        if with_price:
            out.update(price_per_gpu_hour=per_gpu, currency=self.settings["currency"])
        return out

    def _per_gpu_price(self) -> tuple:
        s = self.settings
        if s["price_per_gpu_hour"] is not None:
            return s["price_per_gpu_hour"], "price_per_gpu_hour"
        if s["price_per_hour"] is not None and self.ledger.box_gpus:
            return s["price_per_hour"] / self.ledger.box_gpus, "this box's price per GPU"
        return None, None

    def _box_block(self, now: float) -> Dict[str, Any]:
        s, led = self.settings, self.ledger
        price = s["price_per_hour"]
        priced = (lambda h: h * price) if price is not None else (lambda h: None)   # noqa: E731
        hours = led.hours()
        spent = priced(hours)
        idle = None
        if isinstance(led.idle.get("since"), (int, float)):
            nxt = led.idle.get("next_at")
            idle_s = max(0.0, led.meter_at - led.idle["since"])
            idle = {"since": iso_utc(led.wall(led.idle["since"])), "idle_s": idle_s,
                    "spent": priced(idle_s / 3600.0), "reminders_sent": int(led.idle.get("sent") or 0),
                    "next_reminder_at": iso_utc(led.wall(nxt)) if isinstance(nxt, (int, float))
                    and s["idle_alert_after_s"] else None}
        deadline = s["stop_deadline_at"]
        runs_h, idle_h = led.runs_box_s() / 3600.0, led.idle_box_s / 3600.0
        # Full precision (a display rounds): spent == runs_spent + idle_spent, to the float.
        return {"price_per_hour": price, "currency": s["currency"], "since": iso_utc(led.since),
                "hours": hours, "spent": spent, "runs_hours": runs_h, "runs_spent": priced(runs_h),
                "idle_hours": idle_h, "idle_spent": priced(idle_h), "runs_folded": int(led.folded["runs"]),
                "budget": s["budget"],
                "budget_used_pct": round(100.0 * spent / s["budget"], 1) if spent is not None and s["budget"] else None,
                "idle_alert_after_s": s["idle_alert_after_s"], "idle": idle,
                "stop_deadline_at": iso_utc(deadline),
                "stop_deadline_in_s": round(deadline - now, 1) if deadline is not None else None}

    def _idle(self, now: float, status: Dict[str, Any]) -> List[Spec]:
        reason = watch.busy_reason(status)
        if reason is not None:
            self._end_idle(now, reason)
            return self._flush_pending()
        meter = self.ledger.meter_at          # the idle clock runs on the meter: wall steps change nothing
        n = watch.idle_due(self.ledger, meter, self.settings["idle_alert_after_s"])
        if n is None:
            return []
        return [watch.idle_spec(n, self.ledger, meter, status, self.settings, self.host, self.profile,
                                self._last_run(status))]

    def _flush_pending(self) -> List[Spec]:
        out, self._pending = self._pending, []
        return out

    def _end_idle(self, now: float, reason: str) -> None:
        if not self.ledger.idle:
            return
        if self.ledger.idle.get("sent") and isinstance(self.ledger.idle.get("since"), (int, float)):
            self._pending.append(watch.busy_spec(self.ledger, self.ledger.meter_at, reason, self.settings))
        self.ledger.idle = {}
        self._dirty = True

    def _last_run(self, status: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The last ended run, with `manifest` and `pull_verified_at` (a verified pull of the
        manifest the box has now: `rgt-agent pull-verified`, called by the client's verify)."""
        run = watch.last_run(status)
        if run is None or self.ctx is None:
            return None
        art = got if isinstance(got := run.get("artifacts"), dict) else {}
        out = {"name": run.get("name"), "manifest": art.get("manifest"), "pull_verified_at": None}
        rec = read_json(self.ctx.home.pull_verified(str(run.get("name")))) or {}
        if isinstance(rec, dict) and art.get("sha256") and rec.get("manifest_sha256") == art.get("sha256"):
            out["pull_verified_at"] = rec.get("verified_at")
        return out

    def _follow(self, status: Dict[str, Any], now: float, adopt_ended: bool = False) -> None:
        """Runs the events did not show this daemon (it restarted under them) from status. Ended
        runs only at start: later, status may still show the old run a `submit --replace` just
        replaced, and its hours must not be added to the new run's."""
        runs = [r for r in status.get("runs") or [] if isinstance(r, dict) and isinstance(r.get("name"), str)]
        for run in runs:
            name, started, ended = run["name"], run.get("started_at"), run.get("ended_at")
            if not isinstance(started, str) or run.get("state") not in (("running",) + watch.ENDED):
                continue
            ent = self.ledger.runs.get(name)
            if ent is None and (adopt_ended or run.get("state") == "running"):
                self._adopt(name, _ts(started) or now, _ts(ended) if run.get("state") in watch.ENDED else None, now)
                ent = self.ledger.runs[name]
                self._dirty = True
            if ent is None or ent["end"] is not None or run.get("state") not in watch.ENDED:
                continue
            end = _ts(ended)
            if end is not None and end >= ent["start"]:   # not the end of an attempt before a resume
                self.ledger.run_ended(name, end)
                self._dirty = True

    def _adopt(self, name: str, start: float, end: Optional[float], now: float) -> None:
        """A run this daemon saw no event of: its time so far from the wall clock (all there is)."""
        want, cluster = self._wanted(name)
        self.ledger.run_started(name, start, want, cluster)
        ent = self.ledger.runs[name]
        ent["run_s"] = min(max(0.0, (end if end is not None else now) - start), numbers.DURATION_MAX_S)
        if cluster:
            ent["gpu_s"] = ent["run_s"] * share.gpus_held(want)
        else:
            ent["box_s"] = ent["run_s"] * share.of({name: want}, self.ledger.box_gpus)[name]

    def _wanted(self, run: str) -> tuple:
        """The run's `gpus` (its share of the box; "all", the default, otherwise) and whether its
        stages run on a cluster's nodes (`backend = "ray"`), from its spec."""
        spec = read_json(self.ctx.home.run_spec(run)) if self.ctx is not None else None
        spec = spec if isinstance(spec, dict) else {}
        want = spec.get("gpus", share.ALL)
        want = want if want == share.ALL or (isinstance(want, int) and not isinstance(want, bool)) else share.ALL
        return want, spec.get("backend") == "ray"

    def _save(self, now: float) -> None:
        if self.ctx is None:
            return
        try:
            self.ledger.save(self.ctx.home.cost)
        except OSError:
            return                   # a full disk: kept in memory, tried again at the next sample
        self._saved_at, self._dirty = now, False
