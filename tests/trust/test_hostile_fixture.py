"""The hostile-agent fixture itself: it answers through the real sshd exactly as planned, its
1 GB answers are generated as the client reads, and the pty helper sees raw control bytes."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from rgt_client.box import transport
from tests.hostile import Answer, END, frame, huge, raw_controls, run_argv, run_client

pytestmark = pytest.mark.ssh


def test_status_answer_arrives_byte_for_byte_through_sshd(hostile):
    status = {"schema": "rgt.status/1", "host": "box\x1b]0;pwned\x07", "runs": "not a list"}
    hostile.answer("status", stdout=status, stderr=b"warn \x9b\n")
    res = transport.run_agent(hostile.target(), ["status", "--json"], timeout=30)
    assert res.rc == 0
    assert json.loads(res.stdout) == status
    assert res.stderr == b"warn \x9b\n"
    call = hostile.calls("status")[0]
    assert call["argv"] == ["status", "--json"] and call["stdout_bytes"] == len(res.stdout)


def test_answers_per_call_exit_codes_and_what_the_client_sent(hostile):
    hostile.answers("notify-test", Answer(stdout=b"{not json"), Answer(stderr="Error: x\n", rc=3))
    first = transport.run_agent(hostile.target(), ["notify-test", "--json"], timeout=30)
    second = transport.run_agent(hostile.target(), ["notify-test", "--json"], stdin=b"hello", timeout=30)
    third = transport.run_agent(hostile.target(), ["notify-test"], timeout=30)
    assert (first.rc, first.stdout) == (0, b"{not json")
    assert (second.rc, second.stderr, third.rc) == (3, b"Error: x\n", 3)
    assert [c["stdin"] for c in hostile.calls("notify-test")] == [b"", b"hello", b""]
    unplanned = transport.run_agent(hostile.target(), ["handbook", "r1"], timeout=30)
    assert unplanned.rc == 1 and b"no answer for 'handbook r1'" in unplanned.stderr


def test_a_1gb_answer_is_generated_as_the_client_reads(hostile):
    hostile.answer("logs", stdout=huge(1 << 30, b"\x1b[31m"))
    proc = transport.spawn(hostile.target(), transport.agent_command(hostile.target(), ["logs", "r1"]),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    head = proc.stdout.read(1 << 20)
    proc.kill()
    proc.wait()
    assert head[:10] == b"\x1b[31m\x1b[31m" and len(head) == 1 << 20
    calls = hostile.ended("logs")
    assert calls[0]["broken"] and calls[0]["stdout_bytes"] < 64 << 20


def test_pull_stream_frames_are_sent_as_planned(hostile):
    hostile.pull_stream(frame("a.bin", b"abc"), frame("b.bin", b"xy", nbytes=99), END)
    res = transport.run_agent(hostile.target(), ["pull-stream", "r1"], stdin=b'[{"path": "a.bin"}]', timeout=30)
    assert res.stdout == (b'{"path": "a.bin", "offset": 0, "bytes": 3}\nabc'
                          b'{"path": "b.bin", "offset": 0, "bytes": 99}\nxy{"end": true}\n')
    assert hostile.calls("pull-stream")[0]["stdin"] == b'[{"path": "a.bin"}]'


def test_pty_helper_sees_raw_escapes_and_the_terminals_crlf():
    code = "import sys; sys.stdout.write('x\\x1b[2J\\x07\\u202e\\n'); sys.stderr.write('e\\x9b\\n')"
    res = run_argv([sys.executable, "-c", code], tty=True)
    assert res.rc == 0
    assert res.out == "x\x1b[2J\x07\u202e\r\ne\x9b\r\n".encode("utf-8")
    assert raw_controls(res.out) == [b"\x1b", b"\x07", "\u202e".encode(), "\x9b".encode()]


def test_run_client_reports_the_peak_rss():
    small = run_client(["--version"])
    assert small.rc == 0 and b"rgt-client" in small.out
    code = "b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])"
    big = run_argv([sys.executable, "-c", code])
    assert 10 << 20 < small.maxrss_bytes < 100 << 20
    assert big.maxrss_bytes > 200 << 20
