"""NotifyHub: the daemon's one entry point into notifications.

publish() is cheap: route the event, coalesce repeating alerts, write one outbox file per
notifier that takes it, wake that notifier's thread. Delivery happens on the threads and never
blocks the chain. tick() schedules heartbeats, the ntfy dead-man re-arm and healthchecks pings,
and notices secrets.json changing (notify-set). Secrets come only from secrets.json and never
leave this process: files, status and errors name a notifier by its id and redacted target.
The hub also works one-shot without the daemon: send_test(), or start(), publish(), stop(timeout).
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Dict, List, Optional

from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.notify import messages, schedule
from boxagent.notify.messages import iso
from boxagent.notify.config import SEVERITY_RANK, Notifier, NotifyConfigError, parse_entry
from boxagent.notify.delivery import RetryPolicy, Worker, confirmed_deadman, deliver
from boxagent.notify.formats import Item, takes
from boxagent.notify.http import HttpClient, profile_proxies
from boxagent.notify.outbox import Outbox

# Not worth a phone buzz unless a notifier lists them in `events`: never, or only at severity info
# (a stage_succeeded with warnings, or a daemon_stopped by preemption, is a warning and goes out).
QUIET_EVENTS = frozenset(("heartbeat", "progress", "status", "notify_failed"))
QUIET_INFO_EVENTS = frozenset(("daemon_started", "daemon_stopped", "run_queued", "stage_started",
                               "stage_succeeded", "stage_skipped"))
ROUTED_KEEP = 5000
SECRETS_CHECK_S = 1.0
STATE_SAVE_S = 1.0


def load_entries(home: Home) -> Optional[List[Any]]:
    """The `notify` list from secrets.json; None when the file is missing or unreadable."""
    data = read_json(home.secrets, None)
    if not isinstance(data, dict):
        return None
    entries = data.get("notify")
    return entries if isinstance(entries, list) else []


class NotifyHub:
    def __init__(self, home: Home, config: Dict[str, Any], profile: Dict[str, Any], http: Any = None,
                 clock: Any = None, retry: Optional[RetryPolicy] = None):
        self.home = home
        self.config = config or {}
        self.profile = profile or {}
        self.clock = clock or time.time
        ncfg = self.config.get("notify") if isinstance(self.config.get("notify"), dict) else {}
        self.retry = retry or RetryPolicy(float(ncfg.get("retry_base_s", 2.0)), float(ncfg.get("retry_cap_s", 600.0)),
                                          float(ncfg.get("give_up_s", 86400.0)))
        self.host = str(self.config.get("host") or socket.gethostname())
        self.outbox = Outbox(home.outbox)
        self._http = http
        self._proxies: Optional[Dict[str, str]] = None
        self._proxy_lock = threading.Lock()
        self._lock = threading.RLock()
        self._workers: Dict[str, Worker] = {}
        self._started = False
        self._status: Dict[str, Any] = {}
        self._sched: Dict[str, Dict[str, float]] = {}
        self._last_secrets_check = None
        self._last_save = 0.0
        self._dirty = False
        self._mem_seq = 0
        self._last_stage_cause: Dict[Any, Any] = {}
        self._events: List[Dict[str, Any]] = []
        self.notifiers: List[Notifier] = []
        self.config_errors: List[str] = []
        self._state = self.outbox.load_state()
        self._routed = list(self._state.get("routed") or [])
        self._routed_set = set(self._routed)
        self._secrets_sig = self._secrets_signature()
        self._load_notifiers()

    # -- configuration --------------------------------------------------------------------------
    def _secrets_signature(self) -> Any:
        try:
            st = os.stat(self.home.secrets)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load_notifiers(self) -> Optional[List[Any]]:
        entries = load_entries(self.home)
        notifiers, errors = [], []
        for i, entry in enumerate(entries or []):
            try:
                notifiers.append(parse_entry(i, entry))
            except NotifyConfigError as exc:
                errors.append(exc.message)
        self.notifiers, self.config_errors = notifiers, errors
        return entries

    def _new_http(self) -> Any:
        if self._http is not None and hasattr(self._http, "send"):
            return self._http
        if callable(self._http):
            return self._http()
        # The profile's hook may take seconds: its own lock, never the one publish() takes.
        with self._proxy_lock:
            if self._proxies is None:
                self._proxies = profile_proxies(self.profile)
        return HttpClient(self._proxies)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start one delivery thread per notifier; each adopts what the outbox holds from before."""
        with self._lock:
            self.outbox.ensure()
            self._started = True
            self._spawn_workers(self.notifiers)
            self._fail_orphans()

    def _spawn_workers(self, notifiers: List[Notifier], after: Optional[Dict[str, Worker]] = None) -> None:
        for n in notifiers:
            w = Worker(self, n, self._new_http, after=(after or {}).get(n.id))
            self._workers[n.id] = w
            w.start()

    def adopt(self, w: Worker) -> None:
        """Called by a worker before its first send: its files on disk join its queue, in order."""
        names = self.outbox.pending().get(w.n.id, [])
        recs = {}
        for name in names:
            rec = self.outbox.read(name)
            if rec is not None:
                recs[name] = rec
        with self._lock:
            for rec in recs.values():
                eid = (rec.get("event") or {}).get("id")
                if eid:
                    self._remember(str(eid))
        w.merge(recs)

    def _fail_orphans(self) -> None:
        """Files of notifiers no longer configured go to failed/ (only with a readable config)."""
        if load_entries(self.home) is None or self.config_errors:
            return
        for nid, names in self.outbox.pending().items():
            if nid in self._workers:
                continue
            for name in names:
                rec = self.outbox.read(name)
                if rec is not None:
                    self.outbox.fail(name, rec, "notifier %s is no longer configured" % nid)

    def stop(self, timeout: float = 5.0) -> None:
        """Flush what can be sent within `timeout`, then stop the threads (the outbox keeps the rest)."""
        deadline = self.clock() + max(0.0, timeout)
        with self._lock:
            workers = list(self._workers.values())
            self._workers = {}
            self._started = False
        for w in workers:
            w.stop(deadline)
        for w in workers:
            w.join(max(0.0, deadline - self.clock()) + 0.5)
        self._save_state(force=True)

    def reload(self) -> None:
        """secrets.json changed (notify-set): re-read the notifiers, keep threads of unchanged ones."""
        with self._lock:
            old = {n.id: n for n in self.notifiers}
            self._load_notifiers()
            self._secrets_sig = self._secrets_signature()
            new = {n.id: n for n in self.notifiers}
            if not self._started:
                return
            stopped: Dict[str, Worker] = {}
            for nid, n in old.items():
                gone = nid not in new or new[nid].url != n.url
                if n.deadman_s and n.format == "ntfy" and (gone or not new[nid].deadman_s):
                    schedule.cancel_deadman(self, n)
                if gone:
                    w = self._workers.pop(nid, None)
                    if w:
                        # Removed: its unsent files go to failed/. Same id, new URL: the new thread
                        # takes them over once this one has finished its send in flight.
                        w.stop(self.clock(), removed=nid not in new)
                        stopped[nid] = w
                    self._sched.pop(nid, None)
            self._spawn_workers([n for nid, n in new.items() if nid not in self._workers], after=stopped)
            for nid, n in new.items():
                self._workers[nid].n = n

    # -- events ---------------------------------------------------------------------------------
    def _remember(self, eid: str) -> None:
        if eid in self._routed_set:
            return
        self._routed.append(eid)
        self._routed_set.add(eid)
        if len(self._routed) > ROUTED_KEEP:
            drop = self._routed[: len(self._routed) - ROUTED_KEEP]
            self._routed = self._routed[len(drop):]
            self._routed_set.difference_update(drop)

    def routes(self, n: Notifier, event: Dict[str, Any]) -> bool:
        """`events` listed: exactly those types. Otherwise severity >= min_severity, minus the quiet."""
        etype = event.get("type")
        if n.events is not None:
            return etype in n.events
        sev = SEVERITY_RANK.get(str(event.get("severity") or "info"), 0)
        if etype in QUIET_EVENTS or (etype in QUIET_INFO_EVENTS and sev == 0):
            return False
        if etype == "run_failed" and self._repeats_stage_failure(n, event):
            return False
        return sev >= SEVERITY_RANK.get(n.min_severity, 0)

    def _repeats_stage_failure(self, n: Notifier, event: Dict[str, Any]) -> bool:
        """run_failed right after this notifier got the stage_failed with the same cause: one buzz."""
        last = self._last_stage_cause.get((n.id, event.get("run")))
        cause = event.get("cause") if isinstance(event.get("cause"), dict) else {}
        return last is not None and last == (cause.get("class"), cause.get("summary"))

    def publish(self, event: Dict[str, Any]) -> None:
        """Route one event (already in events.jsonl) to the notifiers that take it."""
        if not isinstance(event, dict):
            return
        eid = event.get("id")
        with self._lock:
            if eid and eid in self._routed_set:
                return                               # the same event twice: deliver once
            if eid:
                self._remember(str(eid))
            self._dirty = True
            for n in self.notifiers:
                if self.routes(n, event) and takes(n, Item("event", event, None)):
                    self._enqueue(n, event)

    def _enqueue(self, n: Notifier, event: Dict[str, Any]) -> None:
        now = self.clock()
        repeated, since = 0, ""
        key = event.get("key")
        if key:
            table = self._state.setdefault("coalesce", {}).setdefault(n.id, {})
            ent = table.get(str(key))
            rank = SEVERITY_RANK.get(str(event.get("severity") or "info"), 0)
            if ent and now - float(ent.get("at", 0)) < n.repeat_after_s and rank <= int(ent.get("rank", 0)):
                ent["count"] = int(ent.get("count", 0)) + 1
                self._count(n, "coalesced")
                return
            if ent:
                repeated, since = int(ent.get("count", 0)), str(ent.get("since") or "")
            table[str(key)] = {"at": now, "rank": rank, "count": 0, "since": iso(now)}
        if event.get("type") == "stage_failed":
            cause = event.get("cause") if isinstance(event.get("cause"), dict) else {}
            self._last_stage_cause[(n.id, event.get("run"))] = (cause.get("class"), cause.get("summary"))
        rec = {"v": 1, "notifier": n.id, "kind": "event", "event": event, "repeated": repeated,
               "since": since, "created_at": now, "attempts": 0, "next_at": 0, "last_error": None}
        try:
            name = self.outbox.add(n.id, rec)
        except OSError as exc:
            # Disk full or read-only: keep it in memory rather than lose it or stop the chain.
            self.record_error(n, "outbox write failed (%s): kept in memory only" % exc.strerror)
            self._mem_seq += 1
            name = "mem-%d" % self._mem_seq
        w = self._workers.get(n.id)
        if w is not None:
            w.enqueue(name, rec)

    def item_for(self, rec: Dict[str, Any]) -> Item:
        event = rec.get("event") or {}
        host = str(event.get("host") or self.host)
        msg = messages.render_event(event, host, int(rec.get("repeated") or 0), str(rec.get("since") or ""))
        return Item("event", event, msg)

    # -- bookkeeping (called from the delivery threads) -------------------------------------------
    def _per(self, n: Notifier) -> Dict[str, Any]:
        return self._state.setdefault("per", {}).setdefault(n.id, {})

    def _count(self, n: Notifier, field: str) -> None:
        with self._lock:
            per = self._per(n)
            per[field] = int(per.get(field, 0)) + 1
            self._state[field] = int(self._state.get(field, 0)) + 1
            self._dirty = True

    def record_sent(self, n: Notifier, rec: Dict[str, Any]) -> None:
        self._count(n, "sent")
        with self._lock:
            self._per(n)["last_sent_at"] = iso(self.clock())

    def record_error(self, n: Notifier, error: str) -> None:
        with self._lock:
            self._per(n)["last_error"] = error
            self._state["last_error"] = "%s: %s" % (n.target, error)
            self._dirty = True

    def record_failed(self, n: Notifier, error: str) -> None:
        self._count(n, "failed")
        self.record_error(n, error)
        with self._lock:
            self._events.append({"type": "notify_failed", "severity": "warning", "run": None, "stage": None,
                                 "summary": "a notification to %s was dropped: %s" % (n.target, error),
                                 "evidence": [error], "notifier": n.id})

    def slot_result(self, n: Notifier, key: str, item: Item, res: Any) -> None:
        with self._lock:
            per = self._per(n)
            if key == "deadman":
                dm = per.setdefault("deadman", {})
                if res.ok:
                    dm.update(armed_at=iso(self.clock()), delay_s=item.delay_s, confirmed=confirmed_deadman(res))
                    dm.pop("error", None)
                else:
                    dm["error"] = res.error
            elif res.ok:
                per["last_%s_at" % key] = iso(self.clock())
            self._dirty = True
        if not res.ok:
            self.record_error(n, res.error or "failed")

    def drain_events(self) -> List[Dict[str, Any]]:
        """Event specs the daemon may emit (a dropped notification: `notify_failed`)."""
        with self._lock:
            out, self._events = self._events, []
        return out

    def _save_state(self, force: bool = False) -> None:
        with self._lock:
            if not self._dirty and not force:
                return
            self._state["routed"] = list(self._routed)
            self._dirty = False
            state = dict(self._state)
        try:
            self.outbox.save_state(state)
        except OSError:
            self._dirty = True

    # -- tick -------------------------------------------------------------------------------------
    def tick(self, now: float, status: Dict[str, Any]) -> None:
        """Heartbeats, dead-man re-arming, healthchecks pings; called every daemon tick."""
        self._status = status if isinstance(status, dict) else {}
        if self._last_secrets_check is None or now - self._last_secrets_check >= SECRETS_CHECK_S:
            self._last_secrets_check = now
            if self._secrets_signature() != self._secrets_sig:
                self.reload()
        with self._lock:
            for n in self.notifiers:
                w = self._workers.get(n.id)
                if w is not None:
                    schedule.due(self, n, w, now)
        if now - self._last_save >= STATE_SAVE_S:
            self._last_save = now
            self._save_state()

    # -- status -----------------------------------------------------------------------------------
    def summary(self) -> Dict[str, Any]:
        """status.json `notifications`: {sent, pending, failed, last_error} (+ redacted targets)."""
        with self._lock:
            pending_disk = None if self._started else self.outbox.pending()
            targets = []
            for n in self.notifiers:
                per = self._per(n)
                w = self._workers.get(n.id)
                pend = w.pending() if w else len((pending_disk or {}).get(n.id, []))
                t = n.public()
                t.update(sent=int(per.get("sent", 0)), pending=pend, failed=int(per.get("failed", 0)),
                         coalesced=int(per.get("coalesced", 0)), last_error=per.get("last_error"),
                         last_sent_at=per.get("last_sent_at"))
                if "deadman" in per:
                    t["deadman"] = dict(per["deadman"])
                targets.append(t)
            return {"sent": int(self._state.get("sent", 0)), "pending": sum(t["pending"] for t in targets),
                    "failed": int(self._state.get("failed", 0)), "last_error": self._state.get("last_error"),
                    "coalesced": int(self._state.get("coalesced", 0)), "targets": targets,
                    "config_errors": list(self.config_errors)}

    # -- one-shot ---------------------------------------------------------------------------------
    def send_test(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """Send a test message through every notifier now, synchronously; one result each."""
        http = self._new_http()
        out = []
        wall = self.clock()
        ev = {"id": "test-%d" % int(wall * 1000), "type": "notify_test", "severity": "info", "host": self.host,
              "at": iso(wall), "summary": "test from rgt"}
        item = Item("test", ev, messages.render_test(self.host, iso(wall)))
        for n in self.notifiers:
            if timeout:
                n.timeout_s = min(n.timeout_s, timeout)
            t0 = time.monotonic()
            res = deliver(n, item, http)
            out.append({"id": n.id, "format": n.format, "target": n.target, "ok": bool(res.ok),
                        "status": res.status, "error": res.error,
                        "elapsed_s": round(time.monotonic() - t0, 3)})
        return out

