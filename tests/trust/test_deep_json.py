"""One line of 1,000 nested `[` in events.jsonl raised RecursionError, which no reader caught:
`rgt-agent start` failed, the daemon's notifier stopped sending while status said nothing failed,
`watch` printed a traceback and every `wait_for_change` failed. Every reader of box JSON now goes
through one bounded reader (boxagent/base/boxjson.py; rgt_client/box/boxside.py on the box):
the line is skipped, everything else goes on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxagent.base import boxjson
from boxagent.base.fsutil import parse_jsonl, read_json
from rgt_client.box.boxside import SAFE_READ
from rgt_client.status.eventwait import BOX_SCRIPT, MARK
from tests.notify.receiver import Receiver
from tests.realbox import job, wait_for

DEEP = b"[" * 1000 + b"]" * 1000
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _depth(value: Any) -> int:
    best, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, (dict, list)):
            best = max(best, d)
            stack.extend((c, d + 1) for c in (item.values() if isinstance(item, dict) else item))
    return best


def _nested(depth: int, opener: str) -> str:
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


@FUZZ
@given(depth=st.integers(1, 200_000), opener=st.sampled_from(["[", "{"]),
       cut=st.integers(0, 50), junk=st.binary(max_size=40))
def test_any_nesting_is_a_value_or_a_skip_never_a_crash(depth, opener, cut, junk):
    text = _nested(depth, opener)
    text = text[:len(text) - cut] if cut else text
    raw = junk + text.encode() if junk and cut % 2 else text.encode()
    try:
        value = boxjson.loads(raw)
    except boxjson.BadJSON as exc:
        assert raw.decode("utf-8", "replace")[:50] not in str(exc) or len(raw) < 5   # why, never the text
        return
    assert _depth(value) <= boxjson.MAX_DEPTH


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=30))
def test_ordinary_json_reads_back_whole(value):
    assert boxjson.loads(json.dumps(value)) == value


@FUZZ
@given(st.binary(max_size=300) | st.text(alphabet="[]{}\":,0123456789\\ud\x00", max_size=3000).map(str.encode))
def test_any_bytes_on_a_line_parse_or_skip(raw):
    obj = parse_jsonl(raw)
    assert obj is None or isinstance(obj, dict)
    _box_side_loads(raw)


_BOX_NS: dict = {}
exec(compile(SAFE_READ, "boxside", "exec"), _BOX_NS)


def _box_side_loads(raw: bytes) -> None:
    value = _BOX_NS["loads"](raw)
    assert value is None or _depth(value) <= _BOX_NS["MAX_DEPTH"]


def test_the_box_side_reader_skips_a_deep_line():
    assert _BOX_NS["loads"](DEEP) is None and _BOX_NS["loads"](b"[" * 200 + b"]" * 200) is None
    assert _BOX_NS["loads"](b'{"id": "1"}') == {"id": "1"}


def test_a_deep_document_reads_as_missing(tmp_path):
    for raw in (DEEP, b"[" * 900 + b"]" * 900, b'{"a":' * 100_000):
        (tmp_path / "status.json").write_bytes(raw)
        assert read_json(str(tmp_path / "status.json"), "missing") == "missing"


def _configure_notifier(box, receiver: Receiver) -> None:
    cfg = {"host": "box1", "notify": {"retry_base_s": 0.05, "retry_cap_s": 0.3}}
    assert box.agent("configure", stdin=json.dumps(cfg)).returncode == 0
    res = box.agent("notify-set", stdin=json.dumps({"notify": [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}]}))
    assert res.returncode == 0, res.stderr


def _box_wait(box, cursor: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BOX_SCRIPT, cursor, "", "1.0", "20"], env=box.env,
                         capture_output=True, timeout=90)
    assert out.returncode == 0 and MARK in out.stdout, out.stderr.decode()[-2000:]
    return json.loads(out.stdout[out.stdout.index(MARK) + len(MARK):].split(b"\n", 1)[0])


def test_a_1000_deep_line_in_events_jsonl_stops_neither_start_nor_the_notifier_nor_the_readers(box):
    receiver = Receiver()
    try:
        _configure_notifier(box, receiver)
        box.home.mkdir(parents=True, exist_ok=True)
        events = box.home / "events.jsonl"
        events.write_bytes(b'{"id":"0000000001000-aaaaaa-1","type":"note","summary":"before"}\n' + DEEP + b"\n")
        box.start()                                                      # failed with RecursionError
        with open(events, "ab") as fh:                                   # and one more while it runs
            fh.write(DEEP + b"\n")
        assert box.submit(job("deep", box.workdir, {"name": "s", "run": "echo Killed; exit 3"})).returncode == 0
        assert box.wait_run("deep")["state"] == "failed"
        wait_for(lambda: any(r.headers.get("Tags") == "x" for r in receiver.requests), 20, "the failure sent")
        out = box.agent("status", "--json", "--events", "50", timeout=20)
        assert out.returncode == 0, out.stderr
        st = json.loads(out.stdout)
        assert any(e.get("type") == "run_failed" for e in st["events"])
        wait_for(lambda: sum(t.get("sent", 0) for t in box.status_file()["notifications"]["targets"]) >= 1, 10,
                 "status counting what was sent")
        out = box.agent("status", "--events", "50", timeout=20)
        assert out.returncode == 0 and "Traceback" not in out.stderr + out.stdout
        head = _box_wait(box, "0000000001000-aaaaaa-1")                  # `watch`, `wait_for_change`
        types = [e["type"] for e in head["events"]]
        assert "run_failed" in types and head["status_rc"] is not None
    finally:
        receiver.down()


def test_a_deep_line_in_a_runs_history_is_skipped_by_its_readers(box):
    box.start()
    assert box.submit(job("h", box.workdir, {"name": "s", "run": "echo loss=1"})).returncode == 0
    box.wait_run("h")
    path = box.home / "runs" / "h" / "history.jsonl"
    with open(path, "ab") as fh:
        fh.write(DEEP + b"\n")
    for args in (("status", "--json"), ("report-data", "h")):
        out = box.agent(*args, timeout=20)
        assert "RecursionError" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert os.path.exists(path)
