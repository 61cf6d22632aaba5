"""The Journal on disk: a transition and its events form one unit.

commit(run, specs): the events get their ids, the run's state.json is written carrying them
(`pending_events`), then they are appended to events.jsonl and handed to the parts. A crash
after the state write and before the append loses nothing: on the next start, repair() finds the
events still pending in state.json and not in the log, and appends them (same ids, so a notifier
that saw one already drops it). A crash before the state write loses the transition itself, and
the scheduler makes it again from what the box says (the exit file is still there).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from boxagent.engine.records import Run
from boxagent.engine.store import RunStore
from boxagent.wire.events import EventLog

Event = Dict[str, Any]


class FileJournal:
    def __init__(self, store: RunStore, events: EventLog, publish: Callable[[Event], None],
                 log: Callable[[str], None]):
        self.store, self.events, self.publish, self.log = store, events, publish, log

    def commit(self, run: Run, specs: List[Dict[str, Any]], now: float) -> List[Event]:
        made = [self.events.make(spec, now) for spec in specs]
        run.pending_events = made
        self.store.save(run)
        for event in made:
            self._out(event)
        run.pending_events = []      # on disk until the run's next save; repair() reads them there
        return made

    def emit(self, spec: Dict[str, Any], now: float) -> Event:
        event = self.events.make(spec, now)
        self._out(event)
        return event

    def repair(self, run: Run) -> None:
        missing = self.events.missing(run.pending_events)
        for event in missing:
            self._out(event)
        if missing:
            self.log("run %s: appended %d event(s) a crash had kept out of events.jsonl: %s"
                     % (run.name, len(missing), ", ".join(str(e.get("type")) for e in missing)))
        run.pending_events = []

    def _out(self, event: Event) -> None:
        self.events.append(event)
        self.publish(event)
