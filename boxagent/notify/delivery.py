"""Delivery: one thread per notifier, woken by publish, sending its outbox FIFO in order.

Order matters to a reader ("started" before "failed"), so a notifier's head message blocks the
ones behind it while it waits out its backoff. Retries back off exponentially (seconds to
minutes); 4xx other than 408/425/429 is permanent; 429 waits for Retry-After; after `give_up_s`
(24 h) a message moves to outbox/failed/ and the failure is recorded. Latest-wins "slots"
(the ntfy dead-man, heartbeats, healthchecks pings) live beside the FIFO so a backlog never
delays re-arming the dead-man.
"""
from __future__ import annotations

import json
import random
import threading
import time
from collections import deque
from typing import Any, Callable, Dict, Optional

from boxagent.notify import formats, ntfy
from boxagent.notify.formats import Item, Result

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


def deliver(n: Any, item: Item, http: Any) -> Result:
    """Send one item through notifier `n`; errors come back scrubbed of the notifier's secrets."""
    svc = formats.service(n.format)
    try:
        ep = formats.endpoint(n)
        if hasattr(svc, "deliver"):
            res = svc.deliver(n, ep, item)
        else:
            res = http.send(svc.request(n, ep, item), n.timeout_s)
    except Exception as exc:  # noqa: BLE001 - a formatting bug must cost one message, not the thread
        res = Result(False, error="internal error: %s: %s" % (type(exc).__name__, exc))
    if not res.ok and res.status == 429 and res.retry_after is None and n.format == "telegram":
        res.retry_after = _telegram_retry_after(res.body)
    if res.error:
        res.error = n.scrub(res.error)
    return res


def _telegram_retry_after(body: bytes) -> Optional[float]:
    try:
        data = json.loads(body.decode("utf-8"))
        return float(data["parameters"]["retry_after"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


class Slot:
    def __init__(self, item: Item, due: float):
        self.item = item
        self.due = due
        self.attempts = 0


class Worker(threading.Thread):
    """Delivers one notifier's outbox FIFO and its slots until stop()."""

    def __init__(self, hub: Any, notifier: Any, http_factory: Callable[[], Any], after: Any = None):
        super().__init__(name="rgt-notify-%s" % notifier.id, daemon=True)
        self.after = after              # a predecessor thread for the same id, to let finish first
        self.removed = False
        self.hub = hub
        self.n = notifier
        self.http_factory = http_factory
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

    def pending(self) -> int:
        with self.lock:
            return len(self.queue)

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
        self.hub.adopt(self)
        http = self.http_factory()
        try:
            while True:
                self.wake.clear()
                now = self.hub.clock()
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
            close = getattr(http, "close", None)
            if close:
                close()
            if self.removed:
                self._drop_all("its notifier was removed by notify-set")

    def _drop_all(self, why: str) -> None:
        with self.lock:
            names, self.queue = list(self.queue), deque()
        for name in names:
            rec = self.records.pop(name, None) or self.hub.outbox.read(name)
            if rec is not None:
                self.hub.outbox.fail(name, rec, why)

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
                    slot.due = self.hub.clock() + self._delay(res, slot.attempts)
        self.hub.slot_result(self.n, key, slot.item, res)
        return True

    def _send_head(self, http: Any, now: float) -> bool:
        with self.lock:
            if not self.queue:
                return False
            name = self.queue[0]
            rec = self.records.get(name)
        if rec is None:
            rec = self.hub.outbox.read(name)
            if rec is None:                        # vanished (removed by hand): skip it
                self._pop(name)
                return True
            with self.lock:
                self.records[name] = rec
        if float(rec.get("next_at") or 0) > now:
            return False
        res = deliver(self.n, self.hub.item_for(rec), http)
        self._settle(name, rec, res)
        return True

    def _settle(self, name: str, rec: Dict[str, Any], res: Result) -> None:
        now = self.hub.clock()
        if res.ok:
            self.hub.outbox.remove(name)
            self._pop(name)
            self.hub.record_sent(self.n, rec)
            return
        attempts = int(rec.get("attempts") or 0) + 1
        delay = self._delay(res, attempts)
        age = now - float(rec.get("created_at") or now)
        if res.permanent or age + delay > self.hub.retry.give_up_s:
            why = res.error if res.permanent else "gave up after %d attempts over %ds: %s" % (
                attempts, int(age), res.error)
            self.hub.outbox.fail(name, dict(rec, attempts=attempts), why or "failed")
            self._pop(name)
            self.hub.record_failed(self.n, why or "failed")
            return
        rec = dict(rec, attempts=attempts, next_at=now + delay, last_error=res.error)
        self.hub.outbox.update(name, rec)
        with self.lock:
            self.records[name] = rec
        self.hub.record_error(self.n, res.error or "failed")

    def _delay(self, res: Result, attempts: int) -> float:
        if res.retry_after is not None:
            return res.retry_after
        return self.hub.retry.delay(attempts)

    def _pop(self, name: str) -> None:
        with self.lock:
            if self.queue and self.queue[0] == name:
                self.queue.popleft()
            self.records.pop(name, None)


def confirmed_deadman(res: Result) -> bool:
    return bool(res.ok and ntfy.confirms_sequence(res.body))
