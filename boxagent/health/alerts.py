"""Thresholds -> alerts with hysteresis, and the event specs of their transitions.

No flapping: a level alert enters at its threshold and leaves only `clear_margin_pct` below it
(memory at 90 % warns; it clears under 87 %, not at 89.9 %). Boolean conditions (throttling)
must hold for `*_enter_samples` samples to enter and be gone for `*_leave_samples` to leave.
One-shot facts (an oom_kill, an Xid, an ECC increase) raise a latched alert that expires
`latch_s` after the last occurrence; a hardware Xid stays until the agent restarts (the box
is broken; the alert is the advice to re-rent).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from boxagent.health import attribution
from boxagent.base.units import format_bytes, iso_utc

DEFAULTS: Dict[str, Any] = {
    "memory_warn_pct": 90, "memory_crit_pct": 97,
    "disk_warn_pct": 90, "disk_crit_pct": 97,
    "inodes_warn_pct": 90, "inodes_crit_pct": 97,
    "clear_margin_pct": 3,
    "throttle_temp_c": 83, "throttle_clock_ratio": 0.7,
    "throttle_enter_samples": 2, "throttle_leave_samples": 3,
    "latch_s": 900,
    # An OOM kill while a stage runs is held this long before it becomes an alert of its own: a
    # stage that dies of it reports it as its cause (one message), one that survives it (a killed
    # DataLoader worker) gets the alert at the next sample after this.
    "oom_defer_s": 5,
    # Memory crossing a level while a stage runs must stay there this long before it is an
    # alert: a process racing to the limit is OOM-killed within a second, and its stage's
    # failure (cause cgroup_oom) is the one message; a slow climb still warns in time.
    "memory_hold_s": 5,
}
# Clock-event reasons that mean the GPU is being slowed against the job's will (sw_power_cap
# is excluded: a busy GPU at its power limit is normal, not a fault).
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")
_FOREVER = float("inf")


def _klass(name: str) -> Dict[str, Any]:
    """The alert's "class" for _raise's **extra ("class" is a keyword, so it cannot be
    passed by name); typed Any so the checker does not match it against `latch`."""
    return {"class": name}


def merge_thresholds(*layers: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """DEFAULTS, then each layer (profile, then config); unknown keys and non-numbers ignored."""
    out = dict(DEFAULTS)
    for layer in layers:
        for k, v in (layer or {}).items():
            if k in DEFAULTS and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = v
    return out


def _attribution(running: List[Tuple[str, str]]) -> Dict[str, Any]:
    """An alert belongs to the running stage (the first, with the rest listed)."""
    run, stage = running[0] if running else (None, None)
    return {"run": run, "stage": stage, "running": [list(r) for r in running]}


def _gpu_holder(holders: Optional[Dict[int, Tuple[str, Optional[str]]]], gpu: Any,
                who: Dict[str, Any]) -> Dict[str, Any]:
    """A GPU's alert belongs to the run holding that GPU; with runs on their own GPUs, a GPU no
    run holds belongs to none (the others are not blamed)."""
    if not holders:
        return who
    if gpu in holders:
        run, stage = holders[gpu]
        return {"run": run, "stage": stage, "running": [[run, stage]]}
    return {"run": None, "stage": None, "running": []}


class AlertBook:
    """Active alerts by key, plus the counters the hysteresis needs."""

    def __init__(self, thresholds: Optional[Dict[str, Any]] = None):
        self.t = merge_thresholds(thresholds)
        self.active: Dict[str, Dict[str, Any]] = {}
        self._flags: Dict[str, List[int]] = {}  # key -> [consecutive on, consecutive off]
        self._last_oom: Optional[int] = None       # the counter the last alert (or baseline) covered
        self._claimed_oom: Optional[int] = None    # kills up to this count are some stage's cause
        self._oom_seen_at: Optional[float] = None  # when unclaimed kills were first seen
        self._memory_rise_at: Optional[float] = None  # when memory first stood above the alert's level

    def claim_oom(self, count: int) -> None:
        """A stage that ended reports the kills up to `count` as its own cause: no alert for them."""
        self._claimed_oom = count if self._claimed_oom is None else max(self._claimed_oom, count)

    # -- public ------------------------------------------------------------------------------
    def evaluate(self, health: Dict[str, Any], faults: List[Dict[str, Any]],
                 running: List[Tuple[str, str]], now: float,
                 holders: Optional[Dict[int, Tuple[str, Optional[str]]]] = None) -> List[Dict[str, Any]]:
        who = _attribution(running)
        self._expire(now)
        specs = self._memory(health.get("memory") or {}, now, who)
        specs += self._disks(health.get("disks") or [], now, who)
        for gpu in health.get("gpus") or []:
            specs += self._gpu(gpu, now, _gpu_holder(holders, gpu.get("index"), who))
        for fault in faults:
            specs += self._fault(fault, now, _gpu_holder(holders, fault.get("gpu"), who))
        return specs

    def alerts(self) -> List[Dict[str, Any]]:
        keep = ("key", "type", "severity", "since", "summary", "evidence", "count", "class")
        return [{k: a[k] for k in keep if k in a} for a in sorted(self.active.values(), key=lambda a: a["since_ts"])]

    # -- building blocks ---------------------------------------------------------------------
    def _spec(self, key: str, typ: str, severity: str, summary: str, evidence: List[str],
              who: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
        spec = {"type": typ, "severity": severity, "summary": summary, "evidence": evidence, "key": key}
        spec.update(who)
        spec.update(extra)
        return spec

    def _raise(self, key: str, typ: str, severity: str, now: float, summary: str,
               evidence: List[str], who: Dict[str, Any], latch: Optional[float] = None,
               **extra: Any) -> List[Dict[str, Any]]:
        """Raise or update alert `key`; an event only when it is new or its severity rises/falls."""
        cur = self.active.get(key)
        alert = {"key": key, "type": typ, "severity": severity, "summary": summary,
                 "evidence": evidence, "since": iso_utc(now), "since_ts": now,
                 "expires": now + latch if latch is not None else None,
                 "count": 1}
        alert.update({k: v for k, v in extra.items() if k == "class"})
        if cur is not None:
            alert.update(since=cur["since"], since_ts=cur["since_ts"], count=cur["count"] + 1)
        self.active[key] = alert
        if cur is not None and cur["severity"] == severity:
            return []
        return [self._spec(key, typ, severity, summary, evidence, who, **extra)]

    def _clear(self, key: str, now: float, summary: str, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        cur = self.active.pop(key, None)
        if cur is None:
            return []
        return [self._spec(key, cur["type"], "info", summary, [], who, resolved=True)]

    def _level(self, key: str, typ: str, value: Optional[float], warn: float, crit: float,
               now: float, summary: str, evidence: List[str], who: Dict[str, Any]) -> List[Dict[str, Any]]:
        if value is None:
            return []
        cur = (self.active.get(key) or {}).get("severity")
        m = self.t["clear_margin_pct"]
        if value >= crit or (cur == "critical" and value >= crit - m):
            new: Optional[str] = "critical"
        elif value >= warn or (cur is not None and value >= warn - m):
            new = "warning"
        else:
            new = None
        if new is None:
            return self._clear(key, now, "%s: back to %.0f%%" % (key, value), who)
        return self._raise(key, typ, new, now, summary, evidence, who)

    def _flag(self, key: str, on: bool, enter: int, leave: int) -> Optional[bool]:
        """Counting hysteresis: True = enter now, False = leave now, None = no change."""
        counts = self._flags.setdefault(key, [0, 0])
        counts[0], counts[1] = (counts[0] + 1, 0) if on else (0, counts[1] + 1)
        active = key in self.active
        if not active and on and counts[0] >= enter:
            return True
        if active and not on and counts[1] >= leave:
            return False
        return None

    def _expire(self, now: float) -> None:
        for key in [k for k, a in self.active.items() if a.get("expires") is not None and a["expires"] <= now]:
            del self.active[key]  # latched alerts just lapse: no "resolved" noise for a past fact

    # -- the rules ---------------------------------------------------------------------------
    def _memory(self, mem: Dict[str, Any], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        specs: List[Dict[str, Any]] = []
        pct = mem.get("used_pct")
        if pct is not None:
            summary = "cgroup memory at %.0f%% of its %s limit" % (pct, format_bytes(mem.get("max_bytes")))
            evidence = ["cgroup %s current=%s max=%s" % (mem.get("cgroup"), mem.get("current_bytes"), mem.get("max_bytes"))]
            if not self._memory_held(pct, now, who):
                specs += self._level("memory", "memory_high", pct, self.t["memory_warn_pct"],
                                     self.t["memory_crit_pct"], now, summary, evidence, who)
        oom = mem.get("oom_kill")
        if isinstance(oom, int):
            specs += self._oom(oom, mem, now, who)
        return specs

    def _memory_held(self, pct: float, now: float, who: Dict[str, Any]) -> bool:
        """True while a rise to a higher level is still within memory_hold_s (a stage runs)."""
        cur = (self.active.get("memory") or {}).get("severity")
        rising = pct >= self.t["memory_crit_pct"] if cur == "warning" else (cur is None and pct >= self.t["memory_warn_pct"])
        if not rising or not who["run"]:
            self._memory_rise_at = None
            return False
        self._memory_rise_at = self._memory_rise_at if self._memory_rise_at is not None else now
        if now - self._memory_rise_at < self.t["memory_hold_s"]:
            return True
        self._memory_rise_at = None
        return False

    def _oom(self, oom: int, mem: Dict[str, Any], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        if self._last_oom is None:
            self._last_oom = oom                   # the baseline: kills before the agent are history
        base = max(self._last_oom, self._claimed_oom if self._claimed_oom is not None else self._last_oom)
        if oom <= base:
            self._last_oom, self._oom_seen_at = max(self._last_oom, oom), None
            return []
        if who["run"]:
            self._oom_seen_at = self._oom_seen_at if self._oom_seen_at is not None else now
            if now - self._oom_seen_at < self.t["oom_defer_s"]:
                return []                          # the stage may be dying of it: let it say so
        self._last_oom, self._oom_seen_at = oom, None
        where = " while %s/%s ran" % (who["run"], who["stage"]) if who["run"] else ""
        summary = "cgroup OOM kill (+%d)%s: the kernel killed a process at the memory limit" % (oom - base, where)
        evidence = ["oom_kill %d -> %d (cgroup %s)" % (base, oom, mem.get("cgroup"))]
        if mem.get("max_bytes"):
            evidence.append("memory limit %s, peak %s" % (format_bytes(mem["max_bytes"]), format_bytes(mem.get("peak_bytes"))))
        self.active.pop("oom_kill", None)  # every new kill is news
        return self._raise("oom_kill", "oom_kill", "critical", now, summary, evidence, who,
                           latch=self.t["latch_s"], oom_kill_delta=oom - base, **_klass("cgroup_oom"))

    def _disks(self, disks: List[Dict[str, Any]], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        specs: List[Dict[str, Any]] = []
        seen_dev = set()
        for d in disks:
            dev = d.get("dev")
            if dev is not None and dev in seen_dev:
                continue  # one filesystem, one alert (state dir and workdir often share it)
            seen_dev.add(dev)
            path = d["path"]
            specs += self._unresponsive(d, now, who)
            summary = "disk %s (%s) %.0f%% full, %s free" % (path, d.get("role"), d.get("bytes_used_pct") or 0,
                                                           format_bytes(d.get("bytes_free")))
            specs += self._level("disk_low:" + path, "disk_low", d.get("bytes_used_pct"), self.t["disk_warn_pct"],
                                 self.t["disk_crit_pct"], now, summary,
                                 ["statvfs %s: %s of %s bytes free" % (path, d.get("bytes_free"), d.get("bytes_total"))], who)
            cap = " (cap %d)" % d["inodes_cap"] if d.get("inodes_cap") else ""
            summary = "inodes on %s (%s) %.0f%% used, %s left%s" % (path, d.get("role"), d.get("inodes_used_pct") or 0,
                                                                   d.get("inodes_free"), cap)
            specs += self._level("inodes_low:" + path, "inodes_low", d.get("inodes_used_pct"), self.t["inodes_warn_pct"],
                                 self.t["inodes_crit_pct"], now, summary,
                                 ["statvfs %s: %s of %s inodes free%s" % (path, d.get("inodes_free"), d.get("inodes_total"), cap)], who)
        return specs

    def _unresponsive(self, d: Dict[str, Any], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        """A network mount whose statvfs hangs: writes there (checkpoints!) will hang too."""
        key = "disk_unresponsive:" + d["path"]
        flip = self._flag(key, bool(d.get("timed_out")), 1, 2)
        if flip:
            return self._raise(key, "disk_unresponsive", "warning", now,
                               "%s (%s, %s) does not answer: writes there will hang" % (d["path"], d.get("role"), d.get("fstype")),
                               [str(d.get("error"))], who)
        if flip is False:
            return self._clear(key, now, "%s answers again" % d["path"], who)
        return []

    def _gpu(self, g: Dict[str, Any], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        i = g.get("index")
        specs: List[Dict[str, Any]] = []
        key = "gpu_lost:%s" % i
        if g.get("lost"):
            specs += self._raise(key, "gpu_lost", "critical", now,
                                 "GPU %s (%s) is lost (NVML GPU_IS_LOST): stop and re-rent another box" % (i, g.get("name")),
                                 ["NVML GPU_IS_LOST on GPU %s %s" % (i, g.get("pci_bus_id") or "")], who,
                                 gpu=i, **_klass("gpu_hardware"))
        else:
            specs += self._clear(key, now, "GPU %s answers again" % i, who)
        pending = g.get("remapped_rows_pending")
        flip = self._flag("gpu_remap:%s" % i, bool(pending), 1, 1)
        if flip:
            specs += self._raise("gpu_remap:%s" % i, "gpu_ecc", "warning", now,
                                 "GPU %s has row remapping pending: reset the GPU (or re-rent) before long runs" % i,
                                 ["remapped_rows_pending=%s" % pending], who, gpu=i)
        elif flip is False:
            specs += self._clear("gpu_remap:%s" % i, now, "GPU %s row remapping no longer pending" % i, who)
        return specs + self._throttle(g, now, who)

    def _throttle(self, g: Dict[str, Any], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        i, key = g.get("index"), "gpu_throttle:%s" % g.get("index")
        reasons = [r for r in (g.get("throttle_reasons") or []) if r in THROTTLE_REASONS]
        temp, clk, mx = g.get("temperature_c"), g.get("sm_clock_mhz"), g.get("sm_clock_max_mhz")
        hot_slow = (temp is not None and clk is not None and mx and temp >= self.t["throttle_temp_c"]
                    and clk < self.t["throttle_clock_ratio"] * mx)
        flip = self._flag(key, bool(reasons) or bool(hot_slow),
                          int(self.t["throttle_enter_samples"]), int(self.t["throttle_leave_samples"]))
        if flip:
            evidence = ["clock-event reasons: %s" % ", ".join(reasons)] if reasons else []
            why = ", ".join(reasons)
            if clk is not None and mx:
                evidence.append("SM clock %s of %s MHz at %s C" % (clk, mx, temp))
                # no named reason: the flag entered on hot_slow, which needs clk and mx
                why = why or "SM clock %d%% of max at %s C" % (100 * clk // mx, temp)
            return self._raise(key, "gpu_throttle", "warning", now,
                               "GPU %s is throttled (%s): not a model regression; re-rent if it persists" % (i, why),
                               evidence, who, gpu=i, **_klass("gpu_throttle"))
        if flip is False:
            return self._clear(key, now, "GPU %s no longer throttled" % i, who)
        return []

    def _fault(self, f: Dict[str, Any], now: float, who: Dict[str, Any]) -> List[Dict[str, Any]]:
        """Xid and ECC faults found by the sampler (GPU lost is a level, above)."""
        if f["type"] == "gpu_xid":
            holder = (who["run"], who["stage"]) if who.get("run") else None
            view = attribution.alert_for(f, holder)
            if view is None:
                return []       # an application's own Xid: its stage's evidence, not the GPU's health
            key = "gpu_xid:%s:%s%s" % (f.get("gpu"), f.get("code"), view.get("key_suffix", ""))
            critical = view["severity"] == "critical"
            extra = {"class": view["class"]} if view.get("class") else {}
            if view.get("key_suffix"):
                who = {"run": None, "stage": None, "running": who.get("running") or []}
            return self._raise(key, "gpu_xid", view["severity"], now, view["summary"], f.get("evidence") or [],
                               who, latch=_FOREVER if critical else self.t["latch_s"], gpu=f.get("gpu"),
                               code=f.get("code"), source=f.get("source"), pid=f.get("pid"), **extra)
        if f["type"] == "gpu_ecc":
            key = "gpu_ecc:%s" % f.get("gpu")
            self.active.pop(key, None)
            return self._raise(key, "gpu_ecc", "critical", now, f["summary"], f.get("evidence") or [], who,
                               latch=self.t["latch_s"], gpu=f.get("gpu"), **_klass("gpu_hardware"))
        return []
