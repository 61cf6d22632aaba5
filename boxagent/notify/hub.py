"""NotifyHub: the daemon's one entry point into notifications. CONTRACT stub (issue 6 fills it).

publish() must be cheap (a file write into outbox/); delivery happens on a thread and never
blocks the chain. Secrets come only from secrets.json and never leave it.
"""
from __future__ import annotations

from typing import Any, Dict

from boxagent.home import Home


class NotifyHub:
    def __init__(self, home: Home, config: Dict[str, Any], profile: Dict[str, Any], http: Any = None):
        self.home = home
        self.config = config
        self.profile = profile

    def start(self) -> None:
        """Start the delivery thread."""

    def publish(self, event: Dict[str, Any]) -> None:
        """Route one event (already in events.jsonl) to the notifiers that take it."""

    def tick(self, now: float, status: Dict[str, Any]) -> None:
        """Heartbeats, dead-man re-arming, healthchecks pings; called every daemon tick."""

    def summary(self) -> Dict[str, Any]:
        """status.json `notifications`: {sent, pending, failed, last_error} (+ redacted targets)."""
        return {"sent": 0, "pending": 0, "failed": 0, "last_error": None}

    def stop(self, timeout: float = 5.0) -> None:
        """Flush what can be sent within `timeout`, then stop the thread (the outbox keeps the rest)."""

    def reload(self) -> None:
        """secrets.json changed (notify-set): re-read the notifiers."""


