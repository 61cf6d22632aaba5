"""What wakes the daemon's loop before its tick: signals (SIGCHLD when a shim it started exits,
SIGTERM...) through a self-pipe, and, when watchdog is importable, inotify on inbox/ and the
running stage's stages/ directory (a new request or exit file). Without watchdog the tick polls.

Signal handlers only set flags (STYLE 5); the byte in the pipe just ends the select() early.
"""
from __future__ import annotations

import os
import select
import signal
from typing import Any, Callable, Dict, Optional, Tuple


class Waker:
    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        for fd in (self.r, self.w):
            os.set_blocking(fd, False)
        self.flags: Dict[str, bool] = {}

    def wake(self) -> None:
        try:
            os.write(self.w, b"\0")
        except OSError:   # pipe full: a wakeup is already pending
            pass

    def install(self, handlers: Dict[int, str]) -> None:
        """signal -> flag name. Must run in the main thread."""
        signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)
        for sig, flag in handlers.items():
            signal.signal(sig, self._setter(flag))

    def _setter(self, flag: str) -> Callable[[int, Any], None]:
        def handler(_signum: int, _frame: Any) -> None:
            if flag:
                self.flags[flag] = True
        return handler

    def wait(self, timeout: float) -> None:
        try:
            ready, _, _ = select.select([self.r], [], [], max(0.0, timeout))
        except InterruptedError:   # pragma: no cover - PEP 475 retries select itself
            return
        if ready:
            try:
                while os.read(self.r, 4096):
                    pass
            except OSError:
                pass

    def close(self) -> None:
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass


class DirWatch:
    """inotify through watchdog when importable; `available` False means: poll."""

    def __init__(self, on_change: Callable[[], None], enabled: bool = True):
        self.on_change = on_change
        self.observer: Any = None
        self._handler: Any = None
        self.watches: Dict[str, Any] = {}
        made = _make_observer(on_change) if enabled else None
        if made is not None:
            self.observer, self._handler = made

    @property
    def available(self) -> bool:
        return self.observer is not None

    def watch(self, path: str) -> None:
        if self.observer is None or path in self.watches or not os.path.isdir(path):
            return
        try:
            self.watches[path] = self._schedule(path)
        except Exception:  # noqa: BLE001 - inotify limits reached: the tick still polls
            pass

    def _schedule(self, path: str) -> Any:
        # Only creations and renames: without the filter inotify also reports IN_OPEN/IN_CLOSE,
        # so the daemon's own listdir() of inbox/ would wake watchdog's threads every tick.
        try:
            from watchdog.events import FileCreatedEvent, FileMovedEvent
            return self.observer.schedule(self._handler, path, recursive=False,
                                          event_filter=[FileCreatedEvent, FileMovedEvent])
        except (ImportError, TypeError):   # watchdog < 4 has no event_filter
            return self.observer.schedule(self._handler, path, recursive=False)

    def unwatch(self, path: str) -> None:
        watch = self.watches.pop(path, None)
        if watch is not None and self.observer is not None:
            try:
                self.observer.unschedule(watch)
            except Exception:  # noqa: BLE001
                pass

    def keep_only(self, paths: set) -> None:
        for path in list(self.watches):
            if path not in paths:
                self.unwatch(path)
        for path in paths:
            self.watch(path)

    def stop(self) -> None:
        if self.observer is not None:
            try:
                self.observer.stop()
                self.observer.join(2.0)
            except Exception:  # noqa: BLE001
                pass
            self.observer = None


def _make_observer(on_change: Callable[[], None]) -> Optional[Tuple[Any, Any]]:
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        return None

    class Handler(FileSystemEventHandler):
        # Only new files matter (a request, an exit file); modifications of logs do not wake us.
        def on_created(self, event: Any) -> None:
            on_change()

        def on_moved(self, event: Any) -> None:
            on_change()

    try:
        # The dispatch thread wakes every `timeout` s when idle; a long one keeps an idle agent idle.
        observer = Observer(timeout=30)
        observer.daemon = True
        observer.start()
    except Exception:  # noqa: BLE001 - no inotify here (old kernel, limits): poll instead
        return None
    return observer, Handler()
