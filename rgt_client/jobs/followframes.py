"""The frames of `logs --follow` (remote_scripts.FOLLOW): a JSON head line, then its `n` bytes.

A head says what its bytes are (`p`, `o`: a log path and the offset they start at; `h`: a
`==> stage (attempt n) <==` header; neither: only where the follow stands) and `st`, where the
follow stands after them: each log's offset, the log shown last, whether anything was shown. Log
bytes go to the view as they arrive; a header only when whole. `resume` is the `st` cut to the
last byte that arrived, which the next connection starts from after a broken link: nothing is
shown twice and nothing is lost. The box is untrusted: heads are checked and bounded.
"""
from __future__ import annotations

from typing import Any, Callable

from boxagent.api import box_json
from rgt_client.errors import ClientError
from rgt_client.jobs.logview import FollowView

HEAD_MAX = 1 << 20          # offsets of every stage log of a chain, with room to spare
DATA_MAX = (1 << 20) + 65536   # a pump reads at most 1 MiB; a header line is short


class Frames:
    def __init__(self, view: FollowView, host: str) -> None:
        self.view, self.host = view, host
        self.buf = b""
        self.head: dict[str, Any] | None = None
        self.left = 0
        self.resume: dict[str, Any] | None = None
        self.connected = False
        self.on_back: Callable[[], None] | None = None     # after a lost link: called at the first frame

    def feed(self, chunk: bytes) -> None:
        if self.on_back is not None and chunk:
            back, self.on_back = self.on_back, None
            back()
        self.buf += chunk
        while self.buf or (self.head is not None and self.left == 0):
            if self.head is None and not self._read_head():
                return
            head = self.head
            assert head is not None
            if "h" in head:                   # a header: shown whole or not at all
                if len(self.buf) < self.left:
                    return
                self.view.feed(self.buf[:self.left])
                self.buf, self.left = self.buf[self.left:], 0
            elif "p" in head and self.left:
                data, self.buf = self.buf[:self.left], self.buf[self.left:]
                self.left -= len(data)
                self.view.feed(data)
            if self.left == 0:
                self.resume, self.head = head["st"], None
            else:                             # a log frame cut short: resume after its last byte
                got = head["n"] - self.left
                self.resume = dict(head["st"], offsets=dict(head["st"]["offsets"], **{head["p"]: head["o"] + got}))
                return

    def _read_head(self) -> bool:
        nl = self.buf.find(b"\n")
        if nl < 0:
            if len(self.buf) > HEAD_MAX:
                raise self._bad("a frame head over %d bytes" % HEAD_MAX)
            return False
        try:
            head = box_json(self.buf[:nl])
        except ValueError:
            raise self._bad("a frame head that is not JSON") from None
        if not _valid(head):
            raise self._bad("a malformed frame head")
        self.buf, self.head, self.left = self.buf[nl + 1:], head, head["n"]
        return True

    def _bad(self, what: str) -> ClientError:
        return ClientError("logs --follow on %s sent %s" % (self.host, what),
                           "reinstall the client and the agent: rgt-client install %s" % self.host)


def _valid(head: Any) -> bool:
    if not isinstance(head, dict) or not _count(head.get("n"), DATA_MAX):
        return False
    st = head.get("st")
    if not isinstance(st, dict) or not isinstance(st.get("offsets"), dict) or not isinstance(st.get("printed"), bool):
        return False
    if not all(isinstance(k, str) and _count(v, 1 << 62) for k, v in st["offsets"].items()):
        return False
    if not (st.get("current") is None or isinstance(st.get("current"), str)):
        return False
    if "p" in head:
        return isinstance(head["p"], str) and _count(head.get("o"), 1 << 62)
    return "h" in head or head["n"] == 0


def _count(v: Any, top: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= top
