"""Real HTTP receivers on 127.0.0.1 for the notification tests (http.server in a thread).

`Receiver` records every request and answers from a script of responses (default 200); it can
go down (connection refused) and come back on the same port. `NtfyReceiver` also implements
the part of ntfy the dead-man uses: `In:` schedules a message, a publish with the same
X-Sequence-ID replaces a pending scheduled one, DELETE /<topic>/<sid> cancels it.
"""
from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional


class Request:
    def __init__(self, method: str, path: str, headers: Any, body: bytes):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.at = time.monotonic()

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def text(self) -> str:
        return self.body.decode("utf-8")


class Receiver:
    def __init__(self) -> None:
        self.requests: List[Request] = []
        self.responses: List[tuple] = []        # (status, headers, body) consumed in order
        self.default = (200, {}, b'{"ok":true}')
        self.lock = threading.Lock()
        self.port = 0
        self.server: Optional[ThreadingHTTPServer] = None
        self.handler_hook: Optional[Callable[[Request], Optional[tuple]]] = None
        self.delay_s = 0.0                      # hold each answer this long (a slow server)
        self.answered = 0                       # answers fully written back
        self.up()

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                # http.server's headers object: case-insensitive, like HTTP (urllib sends "X-sequence-id")
                req = Request(self.command, self.path, self.headers, body)
                status, headers, out = receiver._answer(req)
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                self.wfile.flush()
                with receiver.lock:
                    receiver.answered += 1

            do_POST = do_PUT = do_GET = do_DELETE = _any

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def down(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def _answer(self, req: Request) -> tuple:
        with self.lock:
            self.requests.append(req)
            if self.handler_hook:
                hooked = self.handler_hook(req)
                if hooked:
                    return hooked
            if self.responses:
                return self.responses.pop(0)
            return self.default

    def wait_for(self, n: int, timeout: float = 10.0, pred: Optional[Callable[[Request], bool]] = None) -> List[Request]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.matching(pred)
            if len(got) >= n:
                return got
            time.sleep(0.01)
        raise AssertionError("expected %d requests, got %d: %r" % (
            n, len(self.matching(pred)), [(r.method, r.path) for r in self.requests]))

    def matching(self, pred: Optional[Callable[[Request], bool]] = None) -> List[Request]:
        with self.lock:
            return [r for r in self.requests if pred is None or pred(r)]


class NtfyReceiver(Receiver):
    """Honours `In:` (seconds as "Ns"), replaces scheduled messages by X-Sequence-ID, fires them."""

    def __init__(self) -> None:
        self.scheduled: Dict[str, Dict[str, Any]] = {}   # sid -> {"due", "body", "headers"}
        self.fired: List[Dict[str, Any]] = []
        self.published: List[Request] = []
        super().__init__()
        self.handler_hook = self._ntfy

    def _ntfy(self, req: Request) -> tuple:
        self._fire_due()
        parts = [p for p in req.path.split("/") if p]
        if req.method == "DELETE" and len(parts) == 2:
            self.scheduled.pop(parts[1], None)
            return (200, {}, b'{"deleted":true}')
        sid = req.headers.get("X-Sequence-ID")
        delay = req.headers.get("In") or req.headers.get("X-Delay")
        if delay:
            secs = float(delay.rstrip("s"))
            self.scheduled[sid or "id%d" % len(self.requests)] = {
                "due": time.monotonic() + secs, "body": req.text(), "headers": req.headers}
        else:
            self.published.append(req)
        return (200, {}, json.dumps({"id": "m%d" % len(self.requests), "event": "message",
                                     "sequence_id": sid}).encode())

    def _fire_due(self) -> None:
        now = time.monotonic()
        for sid, msg in list(self.scheduled.items()):
            if msg["due"] <= now:
                self.fired.append(dict(msg, sid=sid))
                del self.scheduled[sid]

    def poll(self) -> None:
        with self.lock:
            self._fire_due()


def write_secrets(home: Path, entries: list) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "secrets.json"
    path.write_text(json.dumps({"notify": entries}))
    os.chmod(path, 0o600)


def event(eid: str, etype: str = "stage_failed", severity: str = "critical", **extra) -> dict:
    ev = {"id": eid, "type": etype, "severity": severity, "run": "resnet-a3", "stage": "train",
          "summary": "cgroup OOM kill", "evidence": ["memory.max 32 GB reached"], "host": "box1",
          "at": "2025-01-01T00:00:00Z"}
    ev.update(extra)
    return ev


class HostileServer:
    """A raw-socket HTTP server on 127.0.0.1 that misbehaves on purpose, one mode per attack:
    `huge_body` answers 200 with a 1 GB body (streamed, never held in memory), `drip_headers`
    sends its status line and then one header byte every `interval` seconds, `drip_body` sends
    whole headers and then one body byte every `interval` seconds."""

    def __init__(self, mode: str, interval: float = 2.0, body_bytes: int = 1 << 30):
        import socket
        self.mode = mode
        self.interval = interval
        self.body_bytes = body_bytes
        self.sent_bytes = 0
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read_request(self, conn: Any) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            rest += chunk

    def _serve(self, conn: Any) -> None:
        try:
            self._read_request(conn)
            {"huge_body": self._huge_body, "drip_headers": self._drip_headers,
             "drip_body": self._drip_body}[self.mode](conn)
        except OSError:
            pass              # the client hung up: what a bounded client does
        finally:
            conn.close()

    def _count(self, n: int) -> None:
        with self.lock:
            self.sent_bytes += n

    def _huge_body(self, conn: Any) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: %d\r\n\r\n" % self.body_bytes)
        block = b"\0" * (1 << 20)
        left = self.body_bytes
        while left > 0 and not self.closed.is_set():
            n = min(len(block), left)
            conn.sendall(block[:n])
            self._count(n)
            left -= n

    def _drip(self, conn: Any, head: bytes, drip: bytes) -> None:
        conn.sendall(head)
        while not self.closed.is_set():
            conn.sendall(drip)
            self._count(1)
            if self.closed.wait(self.interval):
                return

    def _drip_headers(self, conn: Any) -> None:
        self._drip(conn, b"HTTP/1.1 200 OK\r\nX-Slow: ", b"x")

    def _drip_body(self, conn: Any) -> None:
        self._drip(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"x")

    def down(self) -> None:
        self.closed.set()
        self.sock.close()
