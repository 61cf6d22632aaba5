"""Hostile logs: the tailer must never crash, never lose a line, never hold a giant line."""
from __future__ import annotations

import os
import random

from boxagent.triage import StageWatch, diagnose
from boxagent.triage.tailer import Tailer
from boxagent.triage.text import MAX_LINE, match_text
from tests.triage.conftest import CORPUS, watch_file


def _lines(t: Tailer):
    out = []
    while True:
        b = t.read()
        if b is None:
            break
        out += b.data.split(b"\n")[:-1]
    return out


def test_partial_last_line_waits_for_its_newline(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"one\ntw")
    t = Tailer(str(p))
    assert _lines(t) == [b"one"]
    with open(p, "ab") as fh:
        fh.write(b"o\nthree")
    assert _lines(t) == [b"two"]
    last = t.finish()
    assert last.data == b"three\n" and last.first_line_no == 3


def test_incremental_feeding_matches_the_whole_file(tmp_path):
    """Any split of the bytes into appends gives the same hits, progress and tail."""
    rnd = random.Random(5)
    for name in ("cuda_oom__torch2.log", "crlf_script.log", "nccl__watchdog.log", "divergence.log"):
        data = (CORPUS / name).read_bytes()
        whole = watch_file(CORPUS / name)
        p = tmp_path / name
        p.write_bytes(b"")
        w = StageWatch(str(p))
        pos, now = 0, 0.0
        while pos < len(data):
            n = rnd.randint(1, 97)
            with open(p, "ab") as fh:
                fh.write(data[pos:pos + n])
            pos += n
            now += 1
            w.poll(now)
        w.finish(now + 1)
        assert w.hits == whole.hits, name
        assert w.last_lines(20) == whole.last_lines(20)
        assert w.progress["done"] == whole.progress["done"] if whole.progress else w.progress is None


def test_truncation_restarts_at_zero(tmp_path):
    p = tmp_path / "t.log"
    p.write_bytes(b"a\nb\nc\n")
    t = Tailer(str(p))
    assert _lines(t) == [b"a", b"b", b"c"]
    p.write_bytes(b"x\n")                   # `> log` / copytruncate
    b = t.read()
    assert b.data == b"x\n" and b.reset and b.first_line_no == 1
    assert t.truncations == 1


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path):
    p = tmp_path / "r.log"
    p.write_bytes(b"old1\n")
    t = Tailer(str(p))
    assert _lines(t) == [b"old1"]
    with open(p, "ab") as fh:
        fh.write(b"old2\nold-partial")
    os.rename(p, tmp_path / "r.log.1")        # logrotate: move, then a new file at the path
    p.write_bytes(b"new1\n")
    got = _lines(t)
    assert got == [b"old2", b"old-partial", b"new1"]
    assert t.rotations == 1


def test_invalid_utf8_and_nul_bytes_are_safe(tmp_path):
    p = tmp_path / "bin.log"
    p.write_bytes(b"\xff\xfe garbage \xc3\x28\n\x00\x00\x00RuntimeError: CUDA out of \x00memory\n"
                  b"torch.OutOfMemoryError: CUDA out of memory \xe2\x82\n" + b"\x00" * 5000)
    w = watch_file(p)
    # line 2's NUL splits "out of memory" (no OOM literal in its bytes): only its exception
    # name is read there; line 3 is the OOM, and it decides
    assert [(h["line_no"], h["class"]) for h in w.hits] == [(2, "code_error"), (3, "cuda_oom")]
    assert diagnose(dict(w.facts(), exit_code=1))["class"] == "cuda_oom"
    assert "\x00" not in "".join(w.last_lines(5))


def test_a_5mb_line_is_kept_bounded_and_its_last_segment_seen(tmp_path):
    """tqdm redraws one line with \\r for hours; a crash lands at its end."""
    p = tmp_path / "big.log"
    bar = b"\r 42%|####2     | 4200/10000 [00:42<00:58, 100.0it/s]"
    with open(p, "wb") as fh:
        fh.write(b"step 1/10\n")
        for _ in range(5 * (1 << 20) // len(bar)):
            fh.write(bar)
        fh.write(b"\rTraceback (most recent call last):\n  File \"x.py\"\nKeyError: 'x'\n")
    w = StageWatch(str(p), chunk=64 << 10)
    sizes = []
    for i in range(200):
        w.poll(float(i))
        sizes.append(len(w.tailer.partial()))
    w.finish(300.0)
    assert max(sizes) <= 2 * MAX_LINE + 1          # never the whole 5 MB line in memory
    assert [h["class"] for h in w.hits] == ["code_error", "code_error"]
    assert w.hits[0]["line_no"] == 2 and w.hits[1]["line"] == "KeyError: 'x'"


def test_a_giant_line_without_newline_is_bounded_while_it_grows(tmp_path):
    p = tmp_path / "g.log"
    t = Tailer(str(p), chunk=1 << 20)
    p.write_bytes(b"")
    for _ in range(8):
        with open(p, "ab") as fh:
            fh.write(b"x" * (1 << 20))
        assert t.read() is None
        assert len(t.partial()) <= MAX_LINE
    with open(p, "ab") as fh:
        fh.write(b"\nnext\n")
    b = t.read()
    assert b.data.split(b"\n")[1] == b"next" and len(b.data) <= MAX_LINE + 16


def test_crlf_lines_and_bare_cr_segments_match_per_segment():
    assert match_text(b"abc\r") == "abc"
    assert match_text(b"10%\r20%\rKilled") == "10%\n20%\nKilled"
    big = b"a" * (MAX_LINE + 10) + b"\rtail"
    assert match_text(big).endswith("\ntail") and len(match_text(big)) == MAX_LINE + 5


def test_missing_file_is_waited_for(tmp_path):
    p = tmp_path / "later.log"
    w = StageWatch(str(p))
    assert w.poll(1.0) == [] and w.last_output_at is None
    p.write_bytes(b"hello\n")
    w.poll(2.0)
    assert w.last_output_at == 2.0 and w.last_lines(1) == ["hello"]


def test_poll_cost_is_bounded_by_the_chunk(tmp_path):
    """One poll reads at most `chunk` bytes however far behind the watch is."""
    p = tmp_path / "behind.log"
    p.write_bytes(b"step 1/9 loss 1\n" * 200000)        # 3.2 MB
    w = StageWatch(str(p), chunk=256 << 10)
    w.poll(1.0)
    assert w.tailer.offset == 256 << 10
    w2 = StageWatch(str(p), start_offset=-1)           # attach at the end of a huge log
    w2.poll(1.0)
    assert w2.tailer.offset == p.stat().st_size
