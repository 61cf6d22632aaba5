"""NotifyHub: notifications as one part of the daemon (boxagent.base.part.Part).

start(ctx) routes what the event log holds past the hub's saved cursor (feed.py) and starts one
delivery thread per notifier; on_event() catches up with the log: route each new event, write
one outbox file per notifier that takes it, save the cursor, then wake the threads. Delivery
happens on the threads and never blocks the chain. tick(now) schedules heartbeats, the ntfy
dead-man re-arm and healthchecks pings, notices secrets.json changing (notify-set), and returns
the `notify_failed` specs of messages given up on. Secrets come only from secrets.json and never
leave this process: files, status and errors name a notifier by its id and redacted target.

One-shot use without the daemon: send_test() (`rgt-agent notify-test`), or on_event() on a hub
never started (outbox files only; the next started hub sends them).
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Tuple

from boxagent.base import redact
from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.base.part import Part, PartContext
from boxagent.notify import messages, routing
from boxagent.notify.books import Books
from boxagent.notify.config import Notifier, NotifyConfigError, parse_entry
from boxagent.notify.delivery import Lane, RetryPolicy, Worker
from boxagent.notify.feed import EventFeed
from boxagent.notify.messages import iso
from boxagent.notify.outbox import Outbox
from boxagent.notify.registry import deliver, service, takes
from boxagent.notify.schedule import Schedule
from boxagent.notify.types import Item

SECRETS_CHECK_S = 1.0
CURSOR_SAVE_S = 1.0       # events that made no outbox file move the saved cursor this lazily
Queued = Tuple[str, str, Dict[str, Any]]          # (notifier id, outbox name, record)


def load_entries(home: Home) -> Optional[List[Any]]:
    """The `notify` list from secrets.json; None when the file is missing or unreadable."""
    data = read_json(home.secrets, None)
    if not isinstance(data, dict):
        return None
    entries = data.get("notify")
    return entries if isinstance(entries, list) else []


def retry_policy(config: Dict[str, Any]) -> RetryPolicy:
    ncfg = got if isinstance(got := config.get("notify"), dict) else {}
    return RetryPolicy(float(ncfg.get("retry_base_s", 2.0)), float(ncfg.get("retry_cap_s", 600.0)),
                       float(ncfg.get("give_up_s", 86400.0)))


class NotifyHub(Part):
    name = "notify"

    def __init__(self, home: Home, config: Dict[str, Any], profile: Dict[str, Any],
                 http: Optional[Callable[[], Any]] = None, clock: Optional[Callable[[], float]] = None,
                 retry: Optional[RetryPolicy] = None):
        """`http`: a factory of HTTP clients (the seam tests use); default HttpClient with the
        profile's proxies. `clock`: wall time for backoff and coalescing (tests drive it)."""
        self.home = home
        self.config = config or {}
        self.profile = profile or {}
        self.clock = clock or time.time
        self.retry = retry or retry_policy(self.config)
        self.host = str(self.config.get("host") or socket.gethostname())
        self.outbox = Outbox(home.outbox)
        self.books = Books(self.outbox.load_state, self.outbox.save_state, self.clock)
        self.feed = EventFeed(home.events, os.path.join(home.outbox, ".feed.json"))
        self.schedule = Schedule(self.books, self.clock)
        self._http_factory = http
        self._proxies: Optional[Dict[str, str]] = None
        self._proxy_lock = threading.Lock()
        # The routing lock: routing writes files, then saves the cursor, then wakes the threads.
        self._lock = threading.RLock()
        self._lane = Lane(self.outbox, self.books, self.clock, self.retry, self.item_for, self._new_http,
                          self._lock)
        self._workers: Dict[str, Worker] = {}
        self._ctx: Optional[PartContext] = None
        self._status: Dict[str, Any] = {}          # today's daemon passes its status to tick()
        self._started = False
        self._feeding = False
        self._cursor_dirty = False
        self._last_cursor_save = 0.0
        self._last_secrets_check: Optional[float] = None
        self._last_stage_cause: Dict[Tuple[str, Any], routing.CauseKey] = {}
        self.notifiers: List[Notifier] = []
        self.config_errors: List[str] = []
        self._secrets_sig = self._secrets_signature()
        self._load_notifiers()

    # -- configuration --------------------------------------------------------------------------
    def _secrets_signature(self) -> Any:
        try:
            st = os.stat(self.home.secrets)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load_notifiers(self) -> None:
        notifiers, errors = [], []
        for i, entry in enumerate(load_entries(self.home) or []):
            try:
                notifiers.append(parse_entry(i, entry))
            except NotifyConfigError as exc:
                errors.append(exc.message)
        self.notifiers, self.config_errors = notifiers, errors

    def _new_http(self) -> Any:
        if self._http_factory is not None:
            return self._http_factory()
        # Here, not at the top: an idle daemon with no notifier never loads urllib.request,
        # http.client and email (a few MB of its resident memory).
        from boxagent.notify.http import HttpClient, profile_proxies
        # The profile's hook may take seconds: its own lock, never the routing lock.
        with self._proxy_lock:
            if self._proxies is None:
                self._proxies = profile_proxies(self.profile)
            return HttpClient(self._proxies)

    def _last_status(self) -> Dict[str, Any]:
        status = self._ctx.last_status() if self._ctx is not None else self._status
        return status if isinstance(status, dict) else {}

    # -- Part: lifecycle ------------------------------------------------------------------------
    def start(self, ctx: Optional[PartContext] = None) -> None:
        """Route what the log holds past the cursor, then one delivery thread per notifier.
        `ctx` None: today's daemon (it passes its status to tick()) and tests."""
        self._ctx = ctx
        if ctx is not None:
            self.host = ctx.host
        with self._lock:
            self.outbox.ensure()
            pending = self._pending_pairs()
            self._feeding = True
            queued = self._route(self.feed.open(), skip=pending)
            self._commit_cursor(queued)
            self._started = True
            self.books.live = True
            self._spawn_workers(self.notifiers)
            self._fail_orphans()

    def _pending_pairs(self) -> set:
        """(notifier id, event id) of every message on disk: routed before a crash that came
        before the cursor was saved; routing the event again must not add a second file."""
        pairs = set()
        for nid, names in self.outbox.pending().items():
            for name in names:
                rec = self.outbox.read(name) or {}
                pairs.add((nid, (rec.get("event") or {}).get("id")))
        return pairs

    def _spawn_workers(self, notifiers: List[Notifier], after: Optional[Dict[str, Worker]] = None) -> None:
        for n in notifiers:
            w = Worker(self._lane, n, after=(after or {}).get(n.id))
            self._workers[n.id] = w
            w.start()

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
        """Flush what can be sent within `timeout`, then stop the threads (the outbox keeps the
        rest). From here on the books save each late result at once: a send still finishing
        after this returns reaches .state.json, not only memory."""
        deadline = self.clock() + max(0.0, timeout)
        with self._lock:
            workers = list(self._workers.values())
            self._workers = {}
            self._started = False
            self.books.live = False
        for w in workers:
            w.stop(deadline)
        for w in workers:
            w.join(max(0.0, deadline - self.clock()) + 0.5)
        with self._lock:
            self.books.save(force=True)
            self._save_cursor_if_dirty(force=True)

    def reload(self, config: Optional[Dict[str, Any]] = None, profile: Optional[Dict[str, Any]] = None) -> None:
        """secrets.json (notify-set) or config.json changed: re-read the notifiers, keep the
        threads of unchanged ones. Today's daemon calls it without arguments."""
        with self._lock:
            if config is not None:
                self.config = config
            if profile is not None:
                self.profile = profile
                with self._proxy_lock:
                    self._proxies = None       # the next client runs the profile's hook again
            old = {n.id: n for n in self.notifiers}
            self._load_notifiers()
            self._secrets_sig = self._secrets_signature()
            if self._started:
                self._swap_workers(old, {n.id: n for n in self.notifiers})

    def _swap_workers(self, old: Dict[str, Notifier], new: Dict[str, Notifier]) -> None:
        stopped: Dict[str, Worker] = {}
        for nid, n in old.items():
            gone = nid not in new or new[nid].url != n.url
            if n.deadman_s and service(n.format).deadman == "message" and (gone or not new[nid].deadman_s):
                # A dead-man the user took away must not fire later: its own thread DELETEs it,
                # after any re-arm it has in flight (a separate thread once raced that re-arm).
                self.schedule.forget_deadman(nid)
                if nid in self._workers:
                    self._workers[nid].cancel_deadman()
            if gone:
                w = self._workers.pop(nid, None)
                if w:
                    # Removed: its unsent files go to failed/. Same id, new URL: the new thread
                    # takes them over once this one has finished its send in flight.
                    w.stop(self.clock(), removed=nid not in new)
                    stopped[nid] = w
                self.schedule.forget(nid)
        self._spawn_workers([n for nid, n in new.items() if nid not in self._workers], after=stopped)
        for nid, n in new.items():
            self._workers[nid].n = n

    # -- Part: events ---------------------------------------------------------------------------
    def on_event(self, event: Dict[str, Any]) -> None:
        """The log grew: route every event past the cursor (`event` is normally among them; one
        that is not in the log, as in one-shot use, is routed as given). Cheap: no network."""
        with self._lock:
            events: List[Dict[str, Any]] = []
            if self._feeding:
                events, cursor = self.feed.read_new()
                self.feed.advance(cursor)
            if isinstance(event, dict) and event.get("id") not in {e.get("id") for e in events}:
                events.append(event)
            queued = self._route(events)
            if self._feeding:
                self._commit_cursor(queued)
            for nid, name, rec in queued:
                w = self._workers.get(nid)
                if w is not None:
                    w.enqueue(name, rec)

    def _commit_cursor(self, queued: List[Queued]) -> None:
        """Files were written: the cursor passes their events now, before any thread sends one.
        Events that made no file move the cursor lazily (tick): routing them again is harmless."""
        if queued:
            self._save_cursor_if_dirty(force=True)
        else:
            self._cursor_dirty = True

    def _save_cursor_if_dirty(self, force: bool = False) -> None:
        if not self._feeding or not (self._cursor_dirty or force):
            return
        try:
            self.feed.save()
            self._cursor_dirty = False
        except OSError:
            self._cursor_dirty = True          # disk full: the next tick tries again

    def _route(self, events: List[Dict[str, Any]], skip: AbstractSet[Any] = frozenset()) -> List[Queued]:
        queued: List[Queued] = []
        for event in events:
            if not isinstance(event, dict):
                continue
            eid = event.get("id")
            if eid:
                if self.books.seen(str(eid)):
                    continue                    # the same event twice: deliver once
                self.books.remember(str(eid))
            for n in self.notifiers:
                if (n.id, eid) in skip:
                    continue
                last = self._last_stage_cause.get((n.id, event.get("run")))
                if routing.routes(n, event, last) and takes(n, Item("event", event, None)):
                    got = self._enqueue(n, event)
                    if got is not None:
                        queued.append(got)
        return queued

    def _enqueue(self, n: Notifier, event: Dict[str, Any]) -> Optional[Queued]:
        now = self.clock()
        repeated, since = 0, ""
        if event.get("key"):
            got = self.books.coalesce(n.id, str(event["key"]), routing.rank(event), n.repeat_after_s, now)
            if got is None:
                return None
            repeated, since = got
        if event.get("type") == "stage_failed":
            self._last_stage_cause[(n.id, event.get("run"))] = routing.cause_key(event)
        elif event.get("type") == "stage_cancelled":
            self._last_stage_cause[(n.id, event.get("run"))] = routing.CANCELLED_KEY
        rec = {"v": 1, "notifier": n.id, "kind": "event", "event": event, "repeated": repeated,
               "since": since, "created_at": now, "attempts": 0, "next_at": 0, "last_error": None}
        name, error = self.outbox.add(n.id, rec)
        if error:
            self.books.error(n.id, n.target, error)
        return (n.id, name, rec)

    def item_for(self, rec: Dict[str, Any]) -> Item:
        event = rec.get("event") or {}
        host = str(event.get("host") or self.host)
        msg = messages.render_event(event, host, int(rec.get("repeated") or 0), str(rec.get("since") or ""))
        return Item("event", event, msg)

    # -- Part: tick -----------------------------------------------------------------------------
    def tick(self, now: float, status: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
        """Heartbeats, dead-man re-arming, healthchecks pings; returns the `notify_failed` specs.
        Today's daemon passes its `status` and collects the specs with drain_events(): then
        nothing is returned here."""
        if status is not None:
            self._status = status
        if self._last_secrets_check is None or now - self._last_secrets_check >= SECRETS_CHECK_S:
            self._last_secrets_check = now
            if self._secrets_signature() != self._secrets_sig:
                self.reload()
        with self._lock:
            for n in self.notifiers:
                w = self._workers.get(n.id)
                if w is not None:
                    self.schedule.due(n, w, now, self.host, self._last_status())
            if now - self._last_cursor_save >= CURSOR_SAVE_S:
                self._last_cursor_save = now
                self._save_cursor_if_dirty()
        self.books.maybe_save(now)
        return [] if status is not None else self.books.drain_specs()

    # -- Part: status ---------------------------------------------------------------------------
    def status_block(self) -> Dict[str, Any]:
        return {"notifications": self.summary()}

    def summary(self) -> Dict[str, Any]:
        """status.json `notifications`: {sent, pending, failed, last_error} (+ redacted targets).
        pending counts the outbox's messages, whether or not a thread is running for them."""
        with self.books.lock:
            counts = self.outbox.counts()
            pers = {n.id: self.books.per(n.id) for n in self.notifiers}
            totals = self.books.totals()
        targets = []
        for n in list(self.notifiers):
            per = pers.get(n.id) or {}
            t = n.public()
            t.update(sent=int(per.get("sent", 0)), pending=counts.get(n.id, 0), failed=int(per.get("failed", 0)),
                     coalesced=int(per.get("coalesced", 0)), last_error=redact.scrub(per.get("last_error")),
                     last_sent_at=per.get("last_sent_at"))
            if "deadman" in per:
                t["deadman"] = per["deadman"]
            targets.append(t)
        return dict(totals, pending=sum(t["pending"] for t in targets), targets=targets,
                    config_errors=list(self.config_errors))

    # -- today's daemon (boxagent/daemon/services.py): go when it calls the Part methods ----------
    def publish(self, event: Dict[str, Any]) -> None:
        self.on_event(event)

    def drain_events(self) -> List[Dict[str, Any]]:
        return self.books.drain_specs()

    # -- one-shot ---------------------------------------------------------------------------------
    def send_test(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """Send a test message through every notifier now, all at once; one result each. Each
        request has a total deadline of `timeout` (or the notifier's own), so this returns
        within about that long however many notifiers hang."""
        wall = self.clock()
        ev = {"id": "test-%d" % int(wall * 1000), "type": "notify_test", "severity": "info", "host": self.host,
              "at": iso(wall), "summary": "test from rgt"}
        item = Item("test", ev, messages.render_test(self.host, iso(wall)))
        results: List[Dict[str, Any]] = [{} for _ in self.notifiers]

        def one(i: int, n: Notifier) -> None:
            if timeout:
                n.timeout_s = min(n.timeout_s, timeout)
            http = self._new_http()
            t0 = time.monotonic()
            try:
                res = deliver(n, item, http)
            finally:
                http.close()
            results[i] = {"id": n.id, "format": n.format, "target": n.target, "ok": bool(res.ok),
                          "status": res.status, "error": res.error, "elapsed_s": round(time.monotonic() - t0, 3)}
        threads = [threading.Thread(target=one, args=(i, n), name="rgt-notify-test-%s" % n.id, daemon=True)
                   for i, n in enumerate(self.notifiers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
