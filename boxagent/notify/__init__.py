"""Notifications: routing, outbox, delivery, heartbeats and dead-man pings."""
from boxagent.notify.hub import NotifyHub  # noqa: F401
