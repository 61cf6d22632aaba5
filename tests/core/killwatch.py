"""SIGKILL a daemon the instant a given state lands: an inotify watch (through libc, no package)
on a run's folder sees state.json replaced, reads it, and kills when a predicate holds. Used by
the crash tests to hit the moment between a state reaching disk and its events."""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import select
import signal
import struct
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Optional

IN_MOVED_TO = 0x00000080
IN_CLOSE_WRITE = 0x00000008
_EVENT = struct.Struct("iIII")


class KillWatch:
    def __init__(self, folder: Path, pid: int, when: Callable[[Dict[str, Any]], bool]):
        self.folder, self.pid, self.when = folder, pid, when
        self.killed_at: Optional[Dict[str, Any]] = None    # the state that triggered the kill
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        folder.mkdir(parents=True, exist_ok=True)
        if libc.inotify_add_watch(self.fd, str(folder).encode(), IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch")
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.killed_at is None:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            data = os.read(self.fd, 65536)
            i = 0
            while i < len(data):
                _wd, _mask, _cookie, size = _EVENT.unpack_from(data, i)
                name = data[i + _EVENT.size:i + _EVENT.size + size].rstrip(b"\0").decode()
                i += _EVENT.size + size
                if name == "state.json" and self._check():
                    return

    def _check(self) -> bool:
        try:
            state = json.loads((self.folder / "state.json").read_text())
        except (OSError, ValueError):
            return False
        if not self.when(state):
            return False
        os.kill(self.pid, signal.SIGKILL)
        self.killed_at = state
        return True

    def close(self) -> None:
        self._stop.set()
        self.thread.join(2)
        os.close(self.fd)
