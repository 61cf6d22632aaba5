"""The one interface every part of the daemon implements (health, notify, the run log, ...).

The daemon owns the loop and the event log; a part owns one concern and talks to the rest only
through this interface: it sees every event after it reached events.jsonl (`on_event`), may add
facts to an event before it is written (`annotate`), gets a
cheap call every loop pass (`tick`) and one every `sample_every` (`sample`), contributes its
blocks to status.json (`status_block`), takes new config (`reload`) and stops within a bound.
Parts never emit events themselves: `tick` and `sample` return event *specs* and the daemon emits
them. The daemon calls every method through one guard (boxagent.daemon.bus), so a bug in one part
costs that part's feature, never the chain.

A part that has nothing to do in a method simply inherits the no-op below.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

Spec = Dict[str, Any]


class PartContext:
    """What the daemon lends a part: where things are and a few read-only views of its state."""

    def __init__(self, home: Any, roots: Any, config: Dict[str, Any], profile: Dict[str, Any], host: str,
                 wake: Callable[[], None], last_status: Callable[[], Dict[str, Any]]):
        self.home = home                  # boxagent.base.home.Home
        self.roots = roots                # boxagent.base.roots.Roots
        self.config = config              # config.json as loaded (the daemon's live dict)
        self.profile = profile            # the platform profile dict
        self.host = host
        self.wake = wake                  # end the loop's current wait (a worker thread finished)
        self.last_status = last_status    # the status.json dict last written ({} before the first)


class Part:
    name = "part"

    def start(self, ctx: PartContext) -> None:
        """Called once, before the first event."""

    def on_event(self, event: Dict[str, Any]) -> None:
        """Every event, in order, after it is in events.jsonl. Must be cheap (no network I/O)."""

    def annotate(self, spec: Spec, now: float) -> Dict[str, Any]:
        """Facts this part adds to an event before it is written (the cost part: a run's cost on
        its run-end event, so the message carries it). The spec's own fields win. Must be cheap."""
        return {}

    def tick(self, now: float) -> List[Spec]:
        """Every loop pass (seconds apart when idle, more often when busy). Must be cheap."""
        return []

    def sample(self, now: float) -> List[Spec]:
        """Every `sample_every` seconds."""
        return []

    def status_block(self) -> Dict[str, Any]:
        """Top-level status.json keys this part owns, e.g. {"notifications": {...}}."""
        return {}

    def reload(self, config: Dict[str, Any], profile: Dict[str, Any]) -> None:
        """config.json (or secrets.json, for notify) changed."""

    def stop(self, timeout: float) -> None:
        """The daemon is exiting: flush what can be flushed within `timeout` seconds."""

