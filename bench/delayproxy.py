"""A userspace TCP delay proxy: a far box on loopback (this kernel has no netem).

Every chunk is forwarded `one_way_s` after it arrived, in order, in both directions, so a
round trip costs 2 x one_way_s whatever else happens, and nothing more (no Nagle of its own).
It counts connections and bytes. It can also stall: while stalled it accepts nothing new and
forwards nothing (a link that drops and comes back, with the TCP connections left hanging), which
is how the watch test cuts a link; and cut: every live connection reset at once (a NAT that
forgot the flow: ssh ends with 255).
"""
from __future__ import annotations

import socket
import threading
import time
from collections import deque


class DelayProxy:
    def __init__(self, upstream_port: int, one_way_s: float = 0.075, host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.delay = one_way_s
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.bytes = 0
        self.stalled = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._live: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def counters(self) -> tuple[int, int]:
        with self._lock:
            return self.connections, self.bytes

    def stall(self, on: bool) -> None:
        (self.stalled.set if on else self.stalled.clear)()

    def cut(self) -> None:
        """Reset every live connection (both ends see the link break); new ones are accepted."""
        with self._lock:
            live, self._live = self._live, []
        for sock in live:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.shutdown(socket.SHUT_RDWR)     # wakes the pipe threads blocked on it
                sock.close()
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            while self.stalled.is_set() and not self._stop.is_set():
                time.sleep(0.05)       # a dead link: the SYN is not answered until it is back
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            # A router forwards each packet as it comes; this proxy re-sends each chunk with a write
            # of its own, and with Nagle on its sockets a small chunk waited behind the previous one
            # for the far end's delayed ACK (40 ms here). No real link adds that: over one open
            # master `ssh far 'head -c 5000 /dev/zero'` cost 40 ms more than `ssh far true`, and
            # `sleep 0.02` the 20 ms it should. The endpoints (ssh, sshd) keep their own Nagle.
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._live += [client, server]
            for a, b in ((client, server), (server, client)):
                _Pipe(self, a, b).start()


class _Pipe:
    """One direction: a reader that timestamps chunks, a writer that sends each when it is due."""

    def __init__(self, proxy: DelayProxy, src: socket.socket, dst: socket.socket):
        self.proxy, self.src, self.dst = proxy, src, dst
        self.queue: deque = deque()
        self.cv = threading.Condition()
        self.eof = False

    def start(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.src.recv(65536)
            except OSError:
                data = b""
            with self.cv:
                if data:
                    self.queue.append((time.monotonic() + self.proxy.delay, data))
                else:
                    self.eof = True
                self.cv.notify()
            if not data:
                return

    def _write(self) -> None:
        while True:
            with self.cv:
                while not self.queue and not self.eof:
                    self.cv.wait()
                if not self.queue:
                    break
                due, data = self.queue[0]
            while self.proxy.stalled.is_set():
                time.sleep(0.02)
            left = due - time.monotonic()
            if left > 0:
                time.sleep(left)
            with self.cv:
                self.queue.popleft()
            try:
                self.dst.sendall(data)
            except OSError:
                break
            with self.proxy._lock:
                self.proxy.bytes += len(data)
        try:
            self.dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
