"""Incremental, bounded reading of a growing log: byte offsets, never the whole file.

Each read() returns one Block: the complete lines that arrived since the last call (as bytes,
each ending in \\n) plus the line number of the first one. Cost is proportional to the new
bytes (one fstat + one stat + one bounded read per call).

Safe against what real logs do:
- truncation (`> log`, copytruncate): size < offset -> start again at 0;
- rotation (`mv log log.1`, a new file at the path): the old file is read to its end, then
  the new one from 0 (the inode at the path changed);
- a partial last line is kept until its newline arrives (finish() flushes it);
- a multi-megabyte line without a newline keeps only its head and its last \\r segment
  (text.MAX_LINE each): memory stays bounded;
- invalid UTF-8 and NUL bytes are bytes here; decoding happens only for lines looked at.
"""
from __future__ import annotations

import os
from typing import Optional

from boxagent.triage.text import CappedLine

DEFAULT_CHUNK = 1 << 20


class Block:
    __slots__ = ("data", "first_line_no", "lines", "reset")

    def __init__(self, data: bytes, first_line_no: int, reset: bool = False):
        self.data = data                  # complete lines, each ending in b"\n"
        self.first_line_no = first_line_no
        self.lines = data.count(b"\n")
        self.reset = reset                # the file was truncated/rotated before this block


class Tailer:
    def __init__(self, path: str, chunk: int = DEFAULT_CHUNK, start_offset: Optional[int] = None):
        self.path = path
        self.chunk = max(4096, int(chunk))
        self.offset = 0
        self.next_line_no = 1             # the number the next complete line gets
        self.truncations = 0
        self.rotations = 0
        self._fd: Optional[int] = None
        self._ino: Optional[tuple] = None
        self._start = start_offset        # "start at the end" for attaching to a huge log
        self._line = CappedLine()         # the current unfinished line, bounded
        self._reset_pending = False

    # -- file handling
    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False
        st = os.fstat(fd)
        self._fd, self._ino = fd, (st.st_dev, st.st_ino)
        if self._start is not None:
            self.offset = min(max(0, self._start), st.st_size) if self._start >= 0 else st.st_size
            self._start = None
        return True

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _rotated(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False                  # gone: keep reading the open file (it may come back)
        return (st.st_dev, st.st_ino) != self._ino

    def _restart(self) -> None:
        self.offset = 0
        self.next_line_no = 1
        self._line = CappedLine()
        self._reset_pending = True

    # -- reading
    def behind(self) -> bool:
        """More bytes wait to be read (one fstat)."""
        if self._fd is None:
            return False
        try:
            return os.fstat(self._fd).st_size > self.offset
        except OSError:
            return False

    def read(self) -> Optional[Block]:
        """The complete lines that arrived (at most `chunk` new bytes), or None."""
        if self._fd is None and not self._open():
            return None
        fd = self._fd
        if fd is None:
            return None
        size = os.fstat(fd).st_size
        if size < self.offset:            # truncated in place
            self.truncations += 1
            self._restart()
        if size == self.offset:
            if not self._rotated():
                return None
            return self._switch()
        data = os.pread(fd, min(self.chunk, size - self.offset), self.offset)
        if not data:
            return None
        self.offset += len(data)
        return self._feed(data)

    def _switch(self) -> Optional[Block]:
        """The old file is read to its end: its unfinished last line is final. Go on with
        the new file at the path from byte 0."""
        last = self.flush()
        self.close()
        self.rotations += 1
        self._restart()                   # the new file's first block says reset
        if last is not None:
            return last                   # the next read() opens the new file
        return self.read()

    def flush(self) -> Optional[Block]:
        """The unfinished last line as a complete one (the writer is done)."""
        if not self._line:
            return None
        return self._block(self._line.take() + b"\n")

    def finish(self) -> Optional[Block]:
        """Read what is left (bounded) and the last line without a newline; then close."""
        blocks = []
        for _ in range(64):                 # at most 64 chunks: finish() must stay bounded
            b = self.read()
            if b is None:
                break
            blocks.append(b)
        last = self.flush()
        if last is not None:
            blocks.append(last)
        self.close()
        if not blocks:
            return None
        return Block(b"".join(b.data for b in blocks), blocks[0].first_line_no,
                     any(b.reset for b in blocks))

    def _feed(self, data: bytes) -> Optional[Block]:
        i = data.find(b"\n")
        if i < 0:
            self._line.extend(data)
            return None
        j = data.rfind(b"\n")
        self._line.extend(data[:i])
        block = self._line.take() + b"\n" + data[i + 1:j + 1]
        self._line.extend(data[j + 1:])
        return self._block(block)

    def _block(self, data: bytes) -> Block:
        b = Block(data, self.next_line_no, self._reset_pending)
        self._reset_pending = False
        self.next_line_no += b.lines
        return b

    def partial(self) -> bytes:
        """The unfinished line so far (head, and last segment when over): tqdm draws here."""
        return self._line.value()
