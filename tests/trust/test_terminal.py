"""What pull and verify print of the box's text reaches a real terminal (a pty) with every
control character shown, never sent; `--json` stays exact."""
from __future__ import annotations

import json
import os

import pytest

from tests.hostile import END, assert_terminal_safe, frame, raw_controls, run_on_pty

pytestmark = pytest.mark.ssh

ESC_NAME = "ck/\x1b]0;owned\x07model\u202egp.bin"        # a legal file name on Linux
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"                       # writes the clipboard
PLANTED = [b"\x1b", b"\x07", b"\rOK ", "\u202e".encode(), "\x9b".encode()]


def _hostile_manifest(box):
    m = box.manifest({ESC_NAME: b"weights", "a.txt": b"hi"}, links={"best\x1b[8m": OSC52},
                     warnings=["include matched \x1b[2J nothing\rOK all good"],
                     skipped=[{"path": "s\x9b31m", "reason": "too big\x07"}])
    box.pull_info("r1", m, run_state="running\x1b[32m", profile={
        "name": "not-a-shipped-one", "platform": "Evil\x1b[5mCloud",
        "teardown": [{"name": "destroy\x1b]8;;http://x\x07", "stops_billing": True, "irreversible": True,
                      "destroys": ["the disk\rOK safe"]}]})
    box.pull_stream(frame(ESC_NAME, b"weights"), frame("a.txt", b"hi"), END)


def test_pull_on_a_terminal_shows_the_boxs_escapes_instead_of_sending_them(hostile, tmp_path):
    _hostile_manifest(hostile)
    res = run_on_pty(["pull", hostile.alias, "r1", str(tmp_path / "dest"), *hostile.args()],
                     ssh_config=hostile.ssh_config)
    assert res.rc == 0, res.text
    assert_terminal_safe(res.out, PLANTED)
    assert "symlink recorded, not followed: best\\x1b[8m -> \\x1b]52;c;cm0gLXJmIH4K\\x07" in res.text
    assert "warning: include matched \\x1b[2J nothing\\rOK all good" in res.text
    assert "skipped on the box: s\\x9b31m (too big\\x07)" in res.text
    assert "note: run r1 is running\\x1b[32m on the box" in res.text
    assert "Safe to tear down Evil\\x1b[5mCloud" in res.text
    assert os.path.exists(tmp_path / "dest" / ESC_NAME)       # the file itself keeps its real name


def test_verify_on_a_terminal_names_a_missing_escape_path_safely_and_json_stays_exact(hostile, tmp_path):
    _hostile_manifest(hostile)
    dest = tmp_path / "dest"
    first = run_on_pty(["pull", hostile.alias, "r1", str(dest), *hostile.args()], ssh_config=hostile.ssh_config)
    assert first.rc == 0, first.text
    os.unlink(dest / ESC_NAME)
    shown = run_on_pty(["verify", str(dest)])
    assert shown.rc == 4
    assert_terminal_safe(shown.out, PLANTED)
    assert "MISSING    ck/\\x1b]0;owned\\x07model\\u202egp.bin" in shown.text
    exact = run_on_pty(["verify", str(dest), "--json"])
    assert exact.rc == 4 and not raw_controls(exact.out)        # JSON escapes them itself...
    problems = json.loads(exact.text)["problems"]
    assert [p["path"] for p in problems] == [ESC_NAME]           # ...and the value is exact


def test_agent_error_text_reaches_the_terminal_escaped(hostile, tmp_path):
    hostile.answer("pull-info", stderr="Error: \x1b[2Jdisk \x9bfull\rOK done\nHint: \x1b]52;c;eA==\x07\n", rc=1)
    res = run_on_pty(["pull", hostile.alias, "r1", str(tmp_path / "dest"), *hostile.args()],
                     ssh_config=hostile.ssh_config)
    assert res.rc == 1
    assert_terminal_safe(res.out, PLANTED)
    assert "Error: \\x1b[2Jdisk \\x9bfull\\rOK done" in res.text and "Hint: \\x1b]52;c;eA==\\x07" in res.text


def test_a_stream_error_frame_reaches_the_terminal_escaped(hostile, tmp_path):
    hostile.pull_info("r1", hostile.manifest({"a.txt": b"hi"}))
    hostile.pull_stream(b'{"path": "a.txt", "error": "gone\\u001b[2J\\rOK"}\n', END)
    res = run_on_pty(["pull", hostile.alias, "r1", str(tmp_path / "dest"), *hostile.args()],
                     ssh_config=hostile.ssh_config)
    assert res.rc == 1
    assert_terminal_safe(res.out, PLANTED)
    assert "first a.txt: gone\\x1b[2J\\rOK" in res.text


def test_the_pty_check_fails_on_raw_escapes():
    with pytest.raises(AssertionError):
        assert_terminal_safe(b"fine\r\n\x1b[2J")
    with pytest.raises(AssertionError):
        assert_terminal_safe(b"fine\rOK now", [b"\rOK "])
