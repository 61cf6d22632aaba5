"""The parts of the daemon on one bus: each call into a part goes through one guard here, so a bug
in a sampler or a notifier is logged once and costs that part's feature, never the chain.
"""
from __future__ import annotations

import functools
import traceback
from typing import Any, Callable, Dict, List, Set, Tuple

from boxagent.base.part import Part, PartContext
from boxagent.wire.status import RUN_FIELDS


class Bus:
    def __init__(self, parts: List[Part], log: Callable[[str], None]):
        self.parts = parts
        self.log = log
        self._reported: Set[Tuple[str, str, str]] = set()   # each broken call logged once, not every tick

    def guard(self, part: Part, what: str, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - see the module docstring
            key = (part.name, what, type(exc).__name__)
            if key not in self._reported:
                self._reported.add(key)
                self.log("error in %s.%s (the daemon goes on without it): %s: %s\n%s"
                         % (part.name, what, type(exc).__name__, exc, traceback.format_exc()))
            return default

    def start(self, ctx: PartContext) -> None:
        for p in self.parts:
            self.guard(p, "start", functools.partial(p.start, ctx), None)

    def publish(self, event: Dict[str, Any]) -> None:
        for p in self.parts:
            self.guard(p, "on_event", functools.partial(p.on_event, event), None)

    def annotate(self, spec: Dict[str, Any], now: float) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for p in self.parts:
            got = self.guard(p, "annotate", functools.partial(p.annotate, spec, now), None)
            if isinstance(got, dict):
                out.update(got)
        return out

    def tick(self, now: float) -> List[Dict[str, Any]]:
        return self._specs("tick", lambda p: p.tick(now))

    def sample(self, now: float) -> List[Dict[str, Any]]:
        return self._specs("sample", lambda p: p.sample(now))

    def _specs(self, what: str, call: Callable[[Part], Any]) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        for p in self.parts:
            got = self.guard(p, what, functools.partial(call, p), None) or []
            out.extend(s for s in got if isinstance(s, dict))
        return out

    def status_blocks(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        merged: Dict[str, Dict[str, Any]] = {}
        for p in self.parts:
            block = self.guard(p, "status_block", p.status_block, None)
            if isinstance(block, dict):
                fields = block.get(RUN_FIELDS)
                out.update(block)
                if isinstance(fields, dict):    # several parts add fields to runs[]: merge them
                    for run, extra in fields.items():
                        merged.setdefault(run, {}).update(extra if isinstance(extra, dict) else {})
        if merged:
            out[RUN_FIELDS] = merged
        return out

    def reload(self, config: Dict[str, Any], profile: Dict[str, Any]) -> None:
        for p in self.parts:
            self.guard(p, "reload", functools.partial(p.reload, config, profile), None)

    def stop(self, timeout: float) -> None:
        for p in self.parts:
            self.guard(p, "stop", functools.partial(p.stop, timeout), None)
