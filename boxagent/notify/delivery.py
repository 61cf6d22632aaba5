"""Delivery: one thread per notifier, woken when the hub routes an event to it, sending its outbox FIFO in order.

Order matters to a reader ("started" before "failed"), so a notifier's head message blocks the
ones behind it while it waits out its backoff. Retries back off exponentially (seconds to
minutes); 4xx other than 408/425/429 is permanent; 429 waits for Retry-After; after `give_up_s`
(24 h) a message moves to outbox/failed/ and the failure is recorded. Latest-wins "slots"
(the ntfy dead-man, heartbeats, healthchecks pings) live beside the FIFO so a backlog never
delays re-arming the dead-man.
"""
from __future__ import annotations

import random
import threading
from collections import deque
from typing import Any, Callable, Dict, Optional

from boxagent.notify import ntfy
from boxagent.notify.books import Books
from boxagent.notify.messages import iso
from boxagent.notify.outbox import Outbox
from boxagent.notify.registry import deliver
from boxagent.notify.types import Item, Result

MAX_IDLE_WAIT_S = 5.0


class RetryPolicy:
    def __init__(self, base_s: float = 2.0, cap_s: float = 600.0, give_up_s: float = 86400.0,
                 jitter: float = 0.1):
        self.base_s = base_s
        self.cap_s = cap_s
        self.give_up_s = give_up_s
        self.jitter = jitter

    def delay(self, attempts: int) -> float:
        d = min(self.cap_s, self.base_s * (2 ** max(0, attempts - 1)))
        return d * random.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else d


class Lane:
    """All a delivery thread may use, by name, and nothing else of the hub: the outbox (its
    files), the books (counters), the clock, the retry policy, `render(record) -> Item`, an
    HTTP client factory, and the routing lock (held while the hub writes files and then saves
    the event-log cursor: a thread lists its files under it, so it never sends a message whose
    event the cursor has not passed yet, which a crash would then route again)."""

    def __init__(self, outbox: Outbox, books: Books, clock: Callable[[], float], retry: RetryPolicy,
                 render: Callable[[Dict[str, Any]], Item], new_http: Callable[[], Any], routing_lock: Any):
        self.outbox = outbox
        self.books = books
        self.clock = clock
        self.retry = retry
        self.render = render
        self.new_http = new_http
        self.routing_lock = routing_lock


class Slot:
    def __init__(self, item: Item, due: float):
        self.item = item
        self.due = due
        self.attempts = 0


class Worker(threading.Thread):
    """Delivers one notifier's outbox FIFO and its slots until stop()."""

    def __init__(self, lane: Lane, notifier: Any, after: Optional["Worker"] = None):
        super().__init__(name="rgt-notify-%s" % notifier.id, daemon=True)
        self.after = after              # a predecessor thread for the same id, to let finish first
        self.removed = False
        self.lane = lane
        self.n = notifier
        self.queue: deque = deque()
        self.records: Dict[str, Dict[str, Any]] = {}
        self.slots: Dict[str, Slot] = {}
        self.wake = threading.Event()
        self.lock = threading.Lock()
        self.stopping = False
        self.deadline = 0.0

    # -- called from the daemon thread ------------------------------------------------------
    def enqueue(self, name: str, record: Dict[str, Any]) -> None:
        with self.lock:
            if name not in self.records:       # adopt() may have found the file first
                self.queue.append(name)
                self.records[name] = record
        self.wake.set()

    def set_slot(self, key: str, item: Item, now: float) -> None:
        """Latest wins: a newer heartbeat/dead-man replaces one not yet sent (keeping its backoff)."""
        with self.lock:
            old = self.slots.get(key)
            slot = Slot(item, max(now, old.due) if old else now)
            if old:
                slot.attempts = old.attempts
            self.slots[key] = slot
        self.wake.set()

    def cancel_deadman(self) -> None:
        """Drop a dead-man re-arm not yet sent and DELETE the scheduled one, in this thread's
        order: after a re-arm in flight, never before it. A stopping thread does it last."""
        with self.lock:
            self.slots.pop("deadman", None)
            self.slots["cancel"] = Slot(Item("cancel", {"id": "cancel-deadman-%s" % self.n.id}, None), 0.0)
        self.wake.set()

    def merge(self, records: Dict[str, Dict[str, Any]]) -> None:
        """Add files found on disk; names sort in publish order, so the queue stays in order."""
        with self.lock:
            for name, rec in records.items():
                self.records.setdefault(name, rec)
            self.queue = deque(sorted(set(self.queue) | set(records)))
        self.wake.set()

    def stop(self, deadline: float, removed: bool = False) -> None:
        self.deadline = deadline
        self.removed = removed
        self.stopping = True
        self.wake.set()

    # -- the thread ---------------------------------------------------------------------------
    def run(self) -> None:
        if self.after is not None:
            self.after.join()
        self._adopt()
        http = self.lane.new_http()
        try:
            while True:
                self.wake.clear()
                now = self.lane.clock()
                if self.stopping and now >= self.deadline:
                    return
                if self._send_slot(http, now) or self._send_head(http, now):
                    continue
                nxt = self._next_due()
                if self.stopping and (nxt is None or nxt > self.deadline):
                    return
                wait = MAX_IDLE_WAIT_S if nxt is None else max(0.0, min(MAX_IDLE_WAIT_S, nxt - now))
                if self.stopping:
                    wait = min(wait, max(0.0, self.deadline - now))
                self.wake.wait(wait)
        finally:
            with self.lock:
                last = self.slots.pop("cancel", None)
            if last is not None:                 # stopped before it could: once, still bounded
                self._record_slot("cancel", last.item, deliver(self.n, last.item, http))
            http.close()
            if self.removed:
                self._drop_all("its notifier was removed by notify-set")

    def _adopt(self) -> None:
        """Before the first send: this notifier's files on disk join the queue, in order."""
        with self.lane.routing_lock:
            names = self.lane.outbox.pending().get(self.n.id, [])
        recs = {}
        for name in names:
            rec = self.lane.outbox.read(name)
            if rec is not None:
                recs[name] = rec
        self.merge(recs)

    def _drop_all(self, why: str) -> None:
        with self.lock:
            names, self.queue = list(self.queue), deque()
        for name in names:
            rec = self.records.pop(name, None) or self.lane.outbox.read(name)
            if rec is not None:
                self.lane.outbox.fail(name, rec, why)

    def _next_due(self) -> Optional[float]:
        with self.lock:
            dues = [s.due for s in self.slots.values()]
            if self.queue:
                rec = self.records.get(self.queue[0]) or {}
                dues.append(float(rec.get("next_at") or 0))
        return min(dues) if dues else None

    def _send_slot(self, http: Any, now: float) -> bool:
        with self.lock:
            due = [(k, s) for k, s in self.slots.items() if s.due <= now]
        if not due:
            return False
        key, slot = min(due, key=lambda kv: kv[1].due)
        res = deliver(self.n, slot.item, http)
        with self.lock:
            if self.slots.get(key) is slot:       # not replaced meanwhile
                if res.ok or res.permanent:
                    del self.slots[key]
                else:
                    slot.attempts += 1
                    slot.due = self.lane.clock() + self._delay(res, slot.attempts)
        self._record_slot(key, slot.item, res)
        return True

    def _record_slot(self, key: str, item: Item, res: Result) -> None:
        books = self.lane.books
        if key == "cancel":
            if res.ok:
                books.forget_deadman(self.n.id)
            else:
                books.error(self.n.id, self.n.target, "cancelling the dead-man: %s" % (res.error or "failed"))
            return
        deadman = None
        if key == "deadman" and res.ok:
            deadman = {"armed_at": iso(self.lane.clock()), "delay_s": item.delay_s, "confirmed": confirmed_deadman(res)}
        books.slot(self.n.id, key, res.ok, res.error, deadman)
        if not res.ok:
            books.error(self.n.id, self.n.target, res.error or "failed")

    def _send_head(self, http: Any, now: float) -> bool:
        with self.lock:
            if not self.queue:
                return False
            name = self.queue[0]
            rec = self.records.get(name)
        if rec is None:
            rec = self.lane.outbox.read(name)
            if rec is None:                        # vanished (removed by hand): skip it
                self._pop(name)
                return True
            with self.lock:
                self.records[name] = rec
        if float(rec.get("next_at") or 0) > now:
            return False
        res = deliver(self.n, self.lane.render(rec), http)
        self._settle(name, rec, res)
        return True

    def _settle(self, name: str, rec: Dict[str, Any], res: Result) -> None:
        now = self.lane.clock()
        books, outbox = self.lane.books, self.lane.outbox
        if res.ok:
            with books.lock:          # the file goes and the count grows as one step
                books.sent(self.n.id)
                outbox.remove(name)
            self._pop(name)
            return
        attempts = int(rec.get("attempts") or 0) + 1
        delay = self._delay(res, attempts)
        age = now - float(rec.get("created_at") or now)
        if res.permanent or age + delay > self.lane.retry.give_up_s:
            why = res.error if res.permanent else "gave up after %d attempts over %ds: %s" % (
                attempts, int(age), res.error)
            with books.lock:
                books.failed(self.n.id, self.n.target, why or "failed")
                outbox.fail(name, dict(rec, attempts=attempts), why or "failed")
            self._pop(name)
            return
        rec = dict(rec, attempts=attempts, next_at=now + delay, last_error=res.error)
        try:
            outbox.update(name, rec)
        except OSError:
            pass              # disk full: the retry still happens; only the backoff is not kept
        with self.lock:
            self.records[name] = rec
        books.error(self.n.id, self.n.target, res.error or "failed")

    def _delay(self, res: Result, attempts: int) -> float:
        if res.retry_after is not None:
            return res.retry_after
        return self.lane.retry.delay(attempts)

    def _pop(self, name: str) -> None:
        with self.lock:
            if self.queue and self.queue[0] == name:
                self.queue.popleft()
            self.records.pop(name, None)


def confirmed_deadman(res: Result) -> bool:
    return bool(res.ok and ntfy.confirms_sequence(res.body))
