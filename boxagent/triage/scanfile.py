"""Triage of a whole log file (`rgt-agent triage LOG`, `rgt-client triage LOG`).

Two engines give the same hits (tests hold them to it):
- python: the tailer reads the file in 8 MB blocks; each block is searched for the rules'
  literals (anchors.Finder: about ten C-speed regex passes), and only the lines holding one
  are matched;
- grep: `grep -F -f ANCHORS` (every image has grep) finds the candidate lines of a big file,
  and the same rule matching runs on those lines only; meanwhile this process counts the
  lines. The generic exception line's literals ("Error", "Exception") are not given to grep:
  they count only in the 1000 lines after a traceback header, so those windows are read back
  and scanned here. Used for files over GREP_MIN_BYTES when every rule has anchors.
The end of the file (last lines, latest progress) is read separately: only its tail matters.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Set, Tuple

from boxagent.triage.hits import HitStore
from boxagent.triage.progress import ProgressTracker, compile_progress_pattern
from boxagent.triage.rules import RuleSet, ScanState, build_rules
from boxagent.triage.tailer import Block, Tailer
from boxagent.triage.text import CappedLine, decode, last_segment, show
from boxagent.triage.windows import line_range, merge_headers

GREP_MIN_BYTES = 16 << 20
TAIL_BYTES = 256 << 10
COUNT_CHUNK = 8 << 20
WINDOW_CHUNK = 256 << 10   # a traceback's window is read back in these (1000 lines, usually less)


class ScanError(Exception):
    pass


def scan_file(path: str, rules: Optional[RuleSet] = None, engine: str = "auto",
              progress_pattern: Optional[str] = None) -> Dict[str, Any]:
    """{log, bytes, lines, engine, hits[], classes{}, progress, progress_line_no, last_lines}."""
    rs = rules if rules is not None else build_rules()
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise ScanError("cannot read %s: %s" % (path, exc.strerror or exc))
    grep = shutil.which("grep") if engine in ("auto", "grep") else None
    use_grep = (engine == "grep" or (engine == "auto" and size >= GREP_MIN_BYTES)) \
        and grep is not None and rs.anchored
    store = HitStore()
    lines = None
    if use_grep and grep is not None:
        lines = _scan_grep(grep, path, rs, store)
    if lines is None:
        use_grep = False
        store = HitStore()
        lines = _scan_python(path, rs, store)
    tracker = ProgressTracker(compile_progress_pattern(progress_pattern))
    last = _tail(path, size, lines, tracker)
    return {"log": path, "bytes": size, "lines": lines, "engine": "grep" if use_grep else "python",
            "hits": store.listing(tracker.line_no), "classes": store.classes,
            "progress": tracker.block(), "progress_line_no": tracker.line_no, "last_lines": last}


def _scan_python(path: str, rs: RuleSet, store: HitStore) -> int:
    state = ScanState()
    t = Tailer(path, chunk=COUNT_CHUNK)
    try:
        for block in _blocks(t):
            for h in rs.scan(block.data, block.first_line_no, state):
                store.add(h)
    finally:
        t.close()
    return t.next_line_no - 1


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _scan_grep(grep: str, path: str, rs: RuleSet, store: HitStore) -> Optional[int]:
    """Candidate lines from grep -F; None when grep failed (the caller uses python)."""
    with tempfile.NamedTemporaryFile(prefix="rgt-anchors-") as anchors, \
            tempfile.TemporaryFile(prefix="rgt-grep-") as out:
        anchors.write(b"\n".join(rs.finder.cuts) + b"\n")
        anchors.flush()
        env = dict(os.environ, LC_ALL="C")
        try:
            proc = subprocess.Popen([grep, "-a", "-n", "-b", "-F", "-f", anchors.name, "--", path],
                                    stdout=out, stderr=subprocess.PIPE, env=env)
        except OSError:
            return None
        lines = _count_lines_wc(path, env)   # on another core while grep runs
        _, err = proc.communicate()
        if proc.returncode not in (0, 1):
            return None
        out.seek(0)
        state, hits, headers, seen = ScanState(), [], [], set()
        for line_no, offset, raw in _grep_records(out):
            seen.add(line_no)
            before = state.traceback_line
            h = rs.match_line(raw, line_no, state)
            if h is not None:
                hits.append(h)
            if state.traceback_line != before:
                headers.append((line_no, offset))
    if headers and rs.window_finder:
        hits = sorted(hits + _window_hits(path, rs, headers, seen), key=lambda h: h["line_no"])
    for h in hits:
        store.add(h)
    return lines


def _window_hits(path: str, rs: RuleSet, headers: List[Tuple[int, int]],
                 seen: Set[int]) -> List[Dict[str, Any]]:
    """The hits grep could not see: lines within a traceback's window holding only a window
    literal ("Error", "Exception"). Each run of overlapping windows is read from its first
    header and searched for those literals only; lines grep returned are skipped."""
    hits: List[Dict[str, Any]] = []
    for first, offset, last in merge_headers(headers):
        t = Tailer(path, chunk=WINDOW_CHUNK, start_offset=offset)
        t.next_line_no = first
        try:
            for block in _blocks(t):
                rng = line_range(block.data, block.first_line_no, first + 1, last)
                if rng is not None:
                    hits += rs.window_hits(block.data, rng[0], rng[1], rng[2], seen)
                if block.first_line_no + block.lines > last:
                    break
        finally:
            t.close()
    return hits


def _blocks(t: Tailer) -> Iterator[Block]:
    """The tailer's blocks to the end of the file as it was (a log still being written stops
    there), its last line without a newline included."""
    end = _size(t.path)
    while t.offset < end:
        before = t.offset
        block = t.read()
        if block is not None:
            yield block
        elif t.offset == before:
            break                          # None after reading: a chunk inside one long line
    last = t.flush()
    if last is not None:
        yield last


def _grep_records(fh: BinaryIO) -> Iterator[Tuple[int, int, bytes]]:
    """`N:OFFSET:line` records of grep -n -b, each line capped as the tailer caps it."""
    while True:
        rec = fh.readline(1 << 16)
        if not rec:
            return
        colon = rec.find(b":")
        second = rec.find(b":", colon + 1)
        line_no, offset = int(rec[:colon]), int(rec[colon + 1:second])
        line = CappedLine()
        done = rec.endswith(b"\n")
        line.extend(rec[second + 1:-1] if done else rec[second + 1:])
        while not done:
            more = fh.readline(1 << 20)
            if not more:
                break
            done = more.endswith(b"\n")
            line.extend(more[:-1] if done else more)
        yield line_no, offset, line.take()


def _count_lines_wc(path: str, env: Dict[str, str]) -> int:
    """count_lines() by `wc -l` (3x less CPU than bytes.count here), python without it."""
    wc = shutil.which("wc")
    try:
        out = subprocess.run([wc, "-l", "--", path], capture_output=True, env=env).stdout if wc else b""
        n = int(out.split()[0])
    except (OSError, ValueError, IndexError):
        return count_lines(path)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        last = os.pread(fh.fileno(), 1, size - 1) if size else b"\n"
    return n + (0 if last == b"\n" else 1)


def count_lines(path: str) -> int:
    """Lines as an editor numbers them: newlines, plus a last line without one."""
    n, last = 0, b"\n"
    buf = bytearray(COUNT_CHUNK)
    with open(path, "rb", buffering=0) as fh:
        while True:
            k = fh.readinto(buf)
            if not k:
                break
            view = buf if k == len(buf) else buf[:k]
            n += view.count(b"\n")
            last = bytes(view[-1:])
    return n + (0 if last == b"\n" else 1)


def _tail(path: str, size: int, lines: int, tracker: ProgressTracker) -> List[str]:
    """The last lines (for people) and the latest progress line (with its number)."""
    start = max(0, size - TAIL_BYTES)
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(TAIL_BYTES)
    if start > 0:
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    raws = data.split(b"\n")
    if raws and not raws[-1]:
        raws.pop()
    first = lines - len(raws) + 1
    for i in range(len(raws) - 1, -1, -1):
        seg = last_segment(raws[i])
        if seg and tracker.update(decode(seg), first + i, None):
            break
    return [show(r, 500, keep_indent=True) for r in raws[-20:]]
