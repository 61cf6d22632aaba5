"""What a rule reads of a line: logging prefixes and tqdm bars do not hide an exception line
from a rule anchored at ^, and the evidence still shows the line as the log has it."""
from __future__ import annotations

import re

import pytest

from boxagent.triage.rules import ScanState, build_rules
from boxagent.triage.text import match_text, show_match, strip_prefixes

PREFIXED = [
    # (line as logged, the program's own text)
    ("[rank1]: KeyError: 'lr'", "KeyError: 'lr'"),
    ("[default0]:12:13:46    INFO Starting training step 0", "Starting training step 0"),
    ("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught",
     "Watchdog caught"),
    ("2022-12-28 16:13:02 [ERROR]  RuntimeError: CUDA error", "RuntimeError: CUDA error"),
    ("[2024-02-22 19:20:17,149][datasets.builder][WARNING] - Found cached dataset",
     "Found cached dataset"),
    ("2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c] OSError: [Errno 28] x",
     "OSError: [Errno 28] x"),
    ("E0325 20:57:27.620000 2606 torch/distributed/elastic/multiprocessing/api.py:869] failed",
     "failed"),
    ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2919043 closing",
     "Sending process 2919043 closing"),
    ("[INFO|modeling_utils.py:3991] 2024-03-13 17:16:17,605 >> Some weights", "Some weights"),
    ("2023-01-01 12:00:00.000 | ERROR    | __main__:main:12 - ValueError: x", "ValueError: x"),
    ("(RayTrainWorker pid=123, ip=10.0.0.1) Traceback (most recent call last):",
     "Traceback (most recent call last):"),
    ("#10 18.23 pip._vendor.urllib3.exceptions.ReadTimeoutError: x",
     "pip._vendor.urllib3.exceptions.ReadTimeoutError: x"),
    ("\u2502 KeyError: 'x'          \u2502", "KeyError: 'x'"),
    ("    RuntimeError: [enforce fail at inline_container.cc:593]",
     "RuntimeError: [enforce fail at inline_container.cc:593]"),
    ("\tsize mismatch for fc.weight", "size mismatch for fc.weight"),
]


@pytest.mark.parametrize("line,bare", PREFIXED, ids=[str(i) for i in range(len(PREFIXED))])
def test_logging_prefixes_are_stripped_for_matching(line, bare):
    assert strip_prefixes(line) == bare


def test_a_plain_line_keeps_its_words():
    for line in ("step 5/10 loss 0.1", "Killed", "Epoch 3: 45%", "ValueError: x", ""):
        assert strip_prefixes(line) == line


def test_a_rank_prefixed_exception_is_an_exception_and_shows_its_prefix():
    rs = build_rules()
    state = ScanState()
    state.traceback_line = 1
    h = rs.match_line(b"[rank0]: ValueError: shapes (3,) and (4,) not aligned", 2, state)
    assert h is not None and h["class"] == "code_error"
    assert h["line"] == "[rank0]: ValueError: shapes (3,) and (4,) not aligned"


def test_killed_glued_to_a_tqdm_bar():
    """bash prints `Killed` on the line a progress bar left without a newline"""
    raw = "Loading checkpoint shards:  38%|###   | 3/8 [00:02<00:03,  1.28it/s]Killed".encode()
    text = match_text(raw)
    m = re.search(r"^Killed$", text, re.M)
    assert m is not None
    assert show_match(text, m.start()).startswith("Loading checkpoint shards:  38%")
    h = build_rules().match_line(raw, 4, ScanState())
    assert h is not None and h["class"] == "cgroup_oom"


def test_a_pattern_for_the_whole_line_still_matches_it():
    """copies are added, never substituted: a job's fail_pattern may name the prefix"""
    text = match_text(b"[rank3]: shard 7 missing")
    assert re.search(r"^\[rank3\]: shard 7", text, re.M)
    assert re.search(r"^shard 7", text, re.M)


def test_cr_segments_keep_their_own_lines():
    text = match_text(b"a 10%\rb 20% [00:01<00:09, 1.0it/s]Traceback (most recent call last):\r")
    lines = text.split("\n")
    assert lines[:2] == ["a 10%", "b 20% [00:01<00:09, 1.0it/s]Traceback (most recent call last):"]
    assert "Traceback (most recent call last):" in lines[2:]
    assert show_match(text, text.rfind("Traceback")).startswith("b 20%")
