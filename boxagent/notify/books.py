"""The books: what was sent, failed and coalesced, per notifier and in total, the coalescing
table, recently routed event ids, and the `notify_failed` specs waiting for the daemon.

The delivery threads and the schedule write here through these few named methods and nothing
else of the hub. Everything is kept in outbox/.state.json: saved at most once a second while
the daemon ticks, and at once when the hub is not ticking any more (stop() and after), so a
send that finishes after stop() still reaches the file and the next status.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base import redact
from boxagent.notify.messages import iso

ROUTED_KEEP = 5000
SAVE_EVERY_S = 1.0


class Books:
    def __init__(self, load: Callable[[], Dict[str, Any]], save: Callable[[Dict[str, Any]], None],
                 clock: Callable[[], float]):
        self._save_fn = save
        self.clock = clock
        # Public: a delivery thread moves a message's file and counts it under this lock, and
        # the summary reads both under it, so a status never shows a message both or neither.
        self.lock = threading.RLock()
        self._lock = self.lock
        self._state = load()
        self._routed: List[str] = [str(x) for x in (self._state.get("routed") or [])]
        self._routed_set = set(self._routed)
        self._specs: List[Dict[str, Any]] = []
        self._dirty = False
        self._last_save = 0.0
        self.live = False           # the hub ticks: saving can wait for the next tick

    # -- routed event ids -------------------------------------------------------------------------
    def seen(self, eid: str) -> bool:
        with self._lock:
            return eid in self._routed_set

    def remember(self, eid: str) -> None:
        with self._lock:
            if eid in self._routed_set:
                return
            self._routed.append(eid)
            self._routed_set.add(eid)
            if len(self._routed) > ROUTED_KEEP:
                drop = self._routed[: len(self._routed) - ROUTED_KEEP]
                self._routed = self._routed[len(drop):]
                self._routed_set.difference_update(drop)
            self._dirty = True

    # -- coalescing -------------------------------------------------------------------------------
    def coalesce(self, nid: str, key: str, rank: int, repeat_after_s: float, now: float) -> Optional[Tuple[int, str]]:
        """None: fold this alert into the last one sent (same key, within repeat_after, no higher
        severity). Otherwise (repeated count, since) to print on the message that goes out."""
        with self._lock:
            table = self._state.setdefault("coalesce", {}).setdefault(nid, {})
            ent = table.get(key)
            if ent and now - float(ent.get("at", 0)) < repeat_after_s and rank <= int(ent.get("rank", 0)):
                ent["count"] = int(ent.get("count", 0)) + 1
                self._bump(nid, "coalesced")
                return None
            out = (int(ent.get("count", 0)), str(ent.get("since") or "")) if ent else (0, "")
            table[key] = {"at": now, "rank": rank, "count": 0, "since": iso(now)}
            self._dirty = True
            return out

    # -- what the delivery threads and the schedule report ----------------------------------------
    def _per(self, nid: str) -> Dict[str, Any]:
        return self._state.setdefault("per", {}).setdefault(nid, {})

    def _bump(self, nid: str, field: str) -> None:
        per = self._per(nid)
        per[field] = int(per.get(field, 0)) + 1
        self._state[field] = int(self._state.get(field, 0)) + 1
        self._dirty = True

    def sent(self, nid: str) -> None:
        with self._lock:
            self._bump(nid, "sent")
            self._per(nid)["last_sent_at"] = iso(self.clock())
        self._save_unless_live()

    def error(self, nid: str, target: str, error: str) -> None:
        error = redact.scrub(error)        # whatever path it came by, no known secret is kept
        with self._lock:
            self._per(nid)["last_error"] = error
            self._state["last_error"] = "%s: %s" % (target, error)
            self._dirty = True
        self._save_unless_live()

    def failed(self, nid: str, target: str, error: str) -> None:
        """A message given up on: counted, recorded, and a `notify_failed` spec for the daemon."""
        with self._lock:
            self._bump(nid, "failed")
            self._specs.append({"type": "notify_failed", "severity": "warning", "run": None, "stage": None,
                                "summary": "a notification to %s was dropped: %s" % (target, error),
                                "evidence": [error], "notifier": nid})
        self.error(nid, target, error)

    def slot(self, nid: str, key: str, ok: bool, error: Optional[str], deadman: Optional[Dict[str, Any]]) -> None:
        """A latest-wins send (dead-man, ping, heartbeat) finished."""
        with self._lock:
            per = self._per(nid)
            if key == "deadman":
                dm = per.setdefault("deadman", {})
                if ok:
                    dm.update(deadman or {})
                    dm.pop("error", None)
                else:
                    dm["error"] = error
            elif ok:
                per["last_%s_at" % key] = iso(self.clock())
            self._dirty = True
        self._save_unless_live()

    def forget_deadman(self, nid: str) -> None:
        with self._lock:
            self._per(nid).pop("deadman", None)
            self._dirty = True

    def drain_specs(self) -> List[Dict[str, Any]]:
        with self._lock:
            out, self._specs = self._specs, []
        return out

    # -- reading ----------------------------------------------------------------------------------
    def per(self, nid: str) -> Dict[str, Any]:
        with self._lock:
            per = self._state.get("per", {}).get(nid, {})
            out = dict(per)
            if "deadman" in per:
                out["deadman"] = dict(per["deadman"])
            return out

    def totals(self) -> Dict[str, Any]:
        with self._lock:
            return {"sent": int(self._state.get("sent", 0)), "failed": int(self._state.get("failed", 0)),
                    "coalesced": int(self._state.get("coalesced", 0)), "last_error": redact.scrub(self._state.get("last_error"))}

    # -- saving -----------------------------------------------------------------------------------
    def maybe_save(self, now: float) -> None:
        if now - self._last_save >= SAVE_EVERY_S:
            self._last_save = now
            self.save()

    def _save_unless_live(self) -> None:
        if not self.live:
            self.save(force=True)

    def save(self, force: bool = False) -> None:
        with self._lock:
            if not self._dirty and not force:
                return
            self._state["routed"] = list(self._routed)
            self._dirty = False
            state = dict(self._state)
            try:
                self._save_fn(state)
            except OSError:
                self._dirty = True
