"""Phone-sized texts and truncation that keeps the cause and the remediation."""
from __future__ import annotations

import json

import pytest

from boxagent.notify import chat, ntfy
from boxagent.notify.config import parse_entry
from boxagent.notify.registry import endpoint
from boxagent.notify.types import Item
from boxagent.notify.messages import render_event

CAUSE = {"class": "cgroup_oom", "summary": "cgroup OOM kill", "retryable": False,
         "remediation": "size DataLoader workers against memory.max, not the CPU count",
         "evidence": ["oom_kill 3 -> 4", "exit 137 (SIGKILL)", "memory peak 31.9 GB of 32 GB"]}


def _failed(lines):
    return {"id": "e1", "type": "stage_failed", "severity": "critical", "run": "resnet-a3", "stage": "train",
            "cause": CAUSE, "attempt": 1, "duration_s": 100, "last_lines": lines, "host": "box1"}


def test_stage_failed_reads_like_the_issue():
    text = render_event(_failed(["epoch 3", "Killed"]), "box1").plain()
    assert text.splitlines()[0] == "\u274C box1 \u00b7 resnet-a3/train failed: cgroup OOM kill"
    assert "What to do:\nsize DataLoader workers" in text
    assert "\u2022 oom_kill 3 -> 4" in text
    assert text.index("What to do") < text.index("Evidence") < text.index("Last lines:\nepoch 3\nKilled")
    assert text.endswith("\u2192 rgt-client status box1")


def test_run_succeeded_one_line():
    ev = {"type": "run_succeeded", "severity": "info", "run": "resnet-a3", "stages": 3, "duration_s": 15120,
          "artifacts": {"files": 12, "bytes": 3_100_000_000, "sha256": "ab"}}
    assert render_event(ev, "box1").first_line() == \
        "\u2705 box1 \u00b7 resnet-a3 done \u2014 3 stages, 4h12m, 12 files (3.1 GB)"


def _giant_lines():
    # CJK and emoji: 3-4 bytes each, so a byte limit and a char limit differ a lot
    return ["第%d步 损失 nan \U0001F525 %s" % (i, "界" * 400) for i in range(20)]


@pytest.mark.parametrize("limit,unit", [(4096, "bytes"), (2000, "chars"), (4096, "chars"), (600, "chars")])
def test_truncation_keeps_cause_and_remediation(limit, unit):
    msg = render_event(_failed(_giant_lines()), "box1").fit(limit, unit)
    text = msg.plain()
    size = len(text.encode()) if unit == "bytes" else len(text)
    assert size <= limit
    assert "cgroup OOM kill" in text and CAUSE["remediation"] in text
    assert "rgt-client status box1" in text or limit < 700


def test_truncation_drops_oldest_log_lines_first():
    lines = ["line %03d %s" % (i, "x" * 150) for i in range(20)]
    text = render_event(_failed(lines), "box1").fit(2000).plain()
    assert "line 019" in text and "line 000" not in text
    assert "Evidence:" in text


def test_giant_single_log_line_is_cut():
    text = render_event(_failed(["x" * 100000]), "box1").plain()
    assert len(text) < 1500


def test_remediation_itself_shrinks_only_as_the_last_resort():
    cause = dict(CAUSE, remediation="R" * 5000)
    ev = dict(_failed(["a"]), cause=cause)
    text = render_event(ev, "box1").fit(1000).plain()
    assert len(text) <= 1000 and text.startswith("\u274C box1 \u00b7 resnet-a3/train failed: cgroup OOM kill")
    assert "RRRR" in text and "\u2026" in text


@pytest.mark.parametrize("url,limit,extract", [
    ("discord://1/tok", 2000, lambda b: json.loads(b)["content"]),
    ("tgram://1:x/2", 4096, None),
])
def test_service_limits(url, limit, extract):
    n = parse_entry(0, {"url": url})
    svc = chat.DISCORD if n.format == "discord" else chat.TELEGRAM
    ev = _failed(_giant_lines())
    req = svc.request(n, endpoint(n), Item("event", ev, render_event(ev, "box1")))
    body = json.loads(req.body)
    if extract:
        assert len(extract(req.body)) <= limit
    else:
        # Telegram counts the text after entity parsing: strip our tags, unescape
        import html
        import re
        visible = html.unescape(re.sub(r"</?(b|pre)>", "", body["text"]))
        assert len(visible) <= limit
    assert "cgroup OOM kill" in req.body.decode()


def test_ntfy_body_fits_4096_bytes():
    n = parse_entry(0, {"url": "ntfys://ntfy.sh/topic-x"})
    ev = _failed(_giant_lines())
    req = ntfy.request(n, endpoint(n), Item("event", ev, render_event(ev, "box1")))
    assert len(req.body) <= 4096
    assert CAUSE["remediation"].encode() in req.body


def test_repeat_note_and_info_without_footer():
    ev = {"type": "run_started", "severity": "info", "run": "r"}
    text = render_event(ev, "b").plain()
    assert text == "\U0001F680 b \u00b7 r started"
    ev2 = {"type": "gpu_throttle", "severity": "warning", "summary": "GPU 0 thermal slowdown", "key": "k"}
    text2 = render_event(ev2, "b", repeated=4, since="2025-01-01T10:02:00Z").plain()
    assert "(repeated 4\u00d7 since 2025-01-01T10:02:00Z)" in text2


def test_the_nearest_known_failure_is_one_line_dropped_before_the_remediation():
    near = [{"source": "pytorch/pytorch#8976", "url": "https://github.com/pytorch/pytorch/issues/8976",
             "class": "cgroup_oom", "why": "a DataLoader worker killed while materialising a batch",
             "fix": "fewer workers", "score": 0.61}] * 3
    event = dict(_failed(["epoch 3", "Killed"]), cause=dict(CAUSE, similar=near))
    text = render_event(event, "box1").plain()
    like = [ln for ln in text.splitlines() if ln.startswith("Like: ")]
    assert like == ["Like: pytorch/pytorch#8976 (cgroup_oom, similarity 0.61): a DataLoader worker "
                    "killed while materialising a batch"]
    small = render_event(dict(event, last_lines=["x" * 300] * 20), "box1").fit(250).plain()
    assert "What to do:" in small and "Like: " not in small     # a hint goes before the fix does
    assert "Like: " not in render_event(_failed(["Killed"]), "box1").plain()
