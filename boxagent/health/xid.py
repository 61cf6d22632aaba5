"""Xid errors from two sources: an NVML event-set thread and the kernel log.

Xid 79 ("GPU has fallen off the bus"), 48 (double-bit ECC), 74/92/94/95 mean broken hardware:
the remedy is another box, not debugging code. NVML delivers them as events; the kernel log
(`/dev/kmsg`, readable as root and in many containers) is the second source, where lines read
`NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.`

Gotcha this guards against: shell monitors grep `Xid.*\\(PCI:[0-9:]*\\)`, which misses every bus
id with a hex letter (3b, af, d8...). Our regex takes whatever sits inside the parentheses.
"""
from __future__ import annotations

import errno
import os
import re
import threading
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from boxagent.health import xidcatalog

_XID_LINE = re.compile(r"NVRM: Xid \(([^)]*)\):\s*(\d+)(.*)")
# The faulting process, where the driver names it: "31, pid=2931, name=python3, Ch 00000008".
_PID = re.compile(r"\bpid=(\d+)")
_NAME = re.compile(r"\bname=([^,\s]+)")


def normalize_bus_id(bus: Optional[str]) -> Optional[str]:
    """'PCI:0000:3b:00' / '00000000:3B:00.0' / '0000:3b:00.0' -> '0000:3b:00'."""
    if not bus:
        return None
    text = bus.strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    parts = text.split(".")[0].split(":")
    try:
        nums = [int(x, 16) for x in parts]
    except ValueError:
        return text
    if len(nums) == 2:
        nums = [0] + nums
    if len(nums) != 3:
        return text
    return "%04x:%02x:%02x" % tuple(nums)


def parse_xid_line(line: str) -> Optional[Dict[str, Any]]:
    """{code, pci_bus_id, detail} from a kernel-log line, or None."""
    m = _XID_LINE.search(line)
    if not m:
        return None
    detail = m.group(3).lstrip(", ").strip()
    pid, name = _PID.search(detail), _NAME.search(detail)
    return {"code": int(m.group(2)), "pci_bus_id": normalize_bus_id(m.group(1)),
            "bus_raw": m.group(1), "detail": detail[:200],
            "pid": int(pid.group(1)) if pid else None, "process_name": name.group(1)[:64] if name else None}


def is_hardware(code: Optional[int]) -> bool:
    return xidcatalog.is_hardware(code)


def describe(code: int) -> str:
    meaning = xidcatalog.meaning(code)
    return "Xid %d (%s)" % (code, meaning) if meaning else "Xid %d" % code


class KmsgReader:
    """Incremental, non-blocking reader of /dev/kmsg (one record per read) or of a plain file
    (tests, `dmesg` captures): new lines only, cost proportional to what is new."""

    def __init__(self, path: str, history_limit: int = 20000):
        self.path = path
        self.fd: Optional[int] = None
        self.error: Optional[str] = None
        self.history_limit = history_limit
        self._partial = b""

    def open(self) -> List[Tuple[Optional[float], str]]:
        """Open and return the lines already in the log (since boot, for preflight); later
        reads return only newer lines. [] with `error` set when the log is not readable."""
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            self.fd, self.error = None, "%s: %s" % (self.path, exc.strerror or exc)
            return []
        history = self.read_new(self.history_limit)
        try:
            # a huge ring buffer may hold more than history_limit records: whatever we did not
            # read is history too, never "new" (it would raise alerts for old faults)
            os.lseek(self.fd, 0, os.SEEK_END)
            self._partial = b""
        except OSError:
            pass
        return history

    @property
    def readable(self) -> bool:
        return self.fd is not None

    def read_new(self, limit: int = 5000) -> List[Tuple[Optional[float], str]]:
        """[(seconds since boot or None, message)] appended since the last call."""
        lines: List[Tuple[Optional[float], str]] = []
        for _ in range(limit):
            try:
                chunk = os.read(self.fd, 8192) if self.fd is not None else b""
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records were overwritten before we read them: skip ahead
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINVAL):
                    self.error = "%s: %s" % (self.path, exc.strerror or exc)
                break
            if not chunk:
                break
            lines.extend(self._split(chunk))
        return lines

    def _split(self, chunk: bytes) -> List[Tuple[Optional[float], str]]:
        data = self._partial + chunk
        parts = data.split(b"\n")
        self._partial = parts.pop()  # kmsg records end in \n; a plain file may end mid-line
        out: List[Tuple[Optional[float], str]] = []
        for raw in parts:
            if raw[:1] == b" ":
                continue  # kmsg continuation lines ("  SUBSYSTEM=pci") carry no message
            text = raw.decode("utf-8", "replace")
            # kmsg: "prio,seq,usec,flags;message" - keep the message only
            head, sep, msg = text.partition(";")
            fields = head.split(",")
            if sep and len(fields) >= 3:
                try:
                    out.append((int(fields[2]) / 1e6, msg))
                    continue
                except ValueError:
                    pass
            out.append((None, text))
        return out

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


class XidEventThread:
    """Waits on an NVML event set in bounded slices so `stop()` returns within one slice.
    Events land in a deque the sampler drains; the thread never touches monitor state."""

    def __init__(self, nvml: Any, wait_ms: int = 500, max_queue: int = 1000):
        self.nvml = nvml
        self.wait_ms = wait_ms
        self.events: Deque[Tuple[Optional[int], int, float]] = deque(maxlen=max_queue)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._es: Any = None
        self.registered: List[int] = []
        self.error: Optional[str] = None

    def start(self) -> bool:
        self._es, self.registered = self.nvml.event_set()
        if self._es is None:
            self.error = "Xid events not supported by this driver/GPU"
            return False
        self._thread = threading.Thread(target=self._run, name="rgt-xid-events", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        import time
        failures = 0
        while not self._stop.is_set():
            event, code = self.nvml.wait_event(self._es, self.wait_ms)
            if event is not None:
                self.events.append((event[0], event[1], time.time()))
                failures = 0
            elif code is not None:
                # a persistent error (GPU lost under us): back off, stay stoppable
                failures += 1
                self.error = "nvmlEventSetWait failed (NVML error %d)" % code
                self._stop.wait(min(5.0, 0.1 * failures))

    def drain(self) -> List[Tuple[Optional[int], int, float]]:
        out = []
        while self.events:
            out.append(self.events.popleft())
        return out

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return  # still inside a wait: leave the set alone rather than free it under it
        self.nvml.free_event_set(self._es)
        self._es = None
