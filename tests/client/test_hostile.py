"""A compromised box against the real client (tests/hostile.py: a crafted agent on the loopback
sshd, the client as a real process, its output on a real pty): one test per attack, named after it.
Nothing the box sends may reach the terminal raw, fill this machine's memory, or hide the other
hosts; --json stays exact."""
from __future__ import annotations

import copy
import json
import sys
import time

import pytest

from rgt_client import exitcodes
from rgt_client.box import hosts
from rgt_client.errors import BoxTooSlow
from rgt_client.status.fetch import fetch_status
from tests.hostile import HostileBox, assert_terminal_safe, huge, pause, run_argv, run_client, run_on_pty

pytestmark = pytest.mark.ssh

OSC52 = b"\x1b]52;c;cm0gLXJmIH4=\x07"      # writes the clipboard
CLEAR = b"\x1b[2J\x1b[H"                    # clears the screen
FAKE_OK = b"\r\x1b[32m\xe2\x9c\x93 all good\x1b[0m"   # paints over the line
BIDI = "\u202e"                              # shows `gpj.exe` as `exe.jpg`
EVIL = (OSC52 + CLEAR + FAKE_OK).decode("utf-8") + BIDI + "\x9b31m\x08\x00"
RSS_GOAL = 100 << 20


def status_doc(**over) -> dict:
    doc = {"schema": "rgt.status/1", "observed_at": "2025-01-02T10:00:00Z", "host": "box", "profile": "generic",
           "agent": {"version": "0.1.0", "pid": 42, "running": True, "state": "running", "heartbeat_age_s": 2},
           "health": {"memory": {"cgroup": "v2", "used_pct": 10.0, "max_bytes": 8e9}, "gpus": [], "disks": []},
           "runs": [{"name": "r1", "state": "running", "workdir": "/w", "stages": [
               {"name": "train", "state": "running", "attempt": 1, "duration_s": 60,
                "progress": {"done": 3, "total": 10, "fraction": 0.3, "eta_s": 140}}]}],
           "alerts": [], "notifications": {"sent": 0, "pending": 0, "failed": 0, "last_error": None}}
    doc.update(over)
    return doc


def evil_status(name: str = "r1" + EVIL) -> dict:
    doc = status_doc(host=EVIL, profile=EVIL)
    doc["agent"]["version"] = EVIL
    doc["runs"] = [{"name": name, "state": "failed", "workdir": EVIL, "stages": [
        {"name": EVIL, "state": "failed", "attempt": 1, "duration_s": 5, "warnings": [EVIL],
         "cause": {"class": EVIL, "summary": EVIL, "remediation": EVIL, "evidence": [EVIL]}}]}]
    doc["health"] = {"memory": {"cgroup": EVIL}, "gpu_unavailable_reason": EVIL, "gpus": [
        {"index": 0, "name": EVIL, "throttle_reasons": [EVIL]}],
        "disks": [{"path": EVIL, "role": EVIL}]}
    doc["alerts"] = [{"severity": EVIL, "type": EVIL, "summary": EVIL}]
    doc["notifications"] = {"sent": 1, "pending": 0, "failed": 1, "last_error": EVIL}
    doc["events"] = [{"at": EVIL, "severity": "info", "type": EVIL, "summary": EVIL}]
    return doc


def test_escape_sequences_in_every_status_field_never_reach_the_terminal(hostile, sshd):
    hostile.answer("status", stdout=evil_status())
    res = run_on_pty(["status", "rgt-box", "--events", "5"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.OK, res.text
    assert "\\x1b]52;c;" in res.text and "\\u202e" in res.text   # shown, as visible escapes
    assert_terminal_safe(res.out, [OSC52, CLEAR, FAKE_OK])


def test_json_stays_exact_whatever_the_box_sent(hostile, sshd):
    hostile.answer("status", stdout=evil_status())
    res = run_client(["status", "rgt-box", "--json"] + hostile.args(), sshd.config)
    data = json.loads(res.out)
    assert data["runs"][0]["stages"][0]["cause"]["summary"] == EVIL and data["host"] == EVIL


def test_escape_sequences_in_watch_and_patrol_lines(hostile, sshd):
    hostile.answer("status", stdout=evil_status())
    res = run_on_pty(["patrol", "rgt-box"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.RUN_FAILED and "RUN-FAILED" in res.text
    assert_terminal_safe(res.out, [OSC52, CLEAR, FAKE_OK])
    hostile.answer("status", stdout=evil_status(name="r1"))
    res = run_on_pty(["watch", "rgt-box", "r1", "--every", "0.1s", "--max-wait", "5s"] + hostile.args(),
                     sshd.config)
    assert res.rc == exitcodes.RUN_FAILED, res.text
    assert_terminal_safe(res.out, [OSC52, CLEAR, FAKE_OK])


def test_gigabyte_status_answer_is_refused_naming_the_host_in_bounded_memory(hostile, sshd):
    hostile.answer("status", stdout=huge(1 << 30, b'{"runs": ['))
    for cmd in (["status", "rgt-box"], ["patrol", "rgt-box"]):
        t0 = time.monotonic()
        peak, rc, err = peak_rss(cmd + hostile.args(), sshd)
        assert rc == exitcodes.ERROR, (cmd, err)
        assert peak < RSS_GOAL, "peak RSS %d MB" % (peak >> 20)
        assert time.monotonic() - t0 < 30
    res = run_client(["status", "rgt-box"] + hostile.args(), sshd.config)
    assert "rgt-box sent more than 4 MiB for `status`" in res.err_text
    assert all(c["broken"] and c["stdout_bytes"] < (64 << 20) for c in hostile.calls("status"))


@pytest.mark.slow
def test_gigabyte_log_answer_is_cut_off_in_bounded_memory(hostile, sshd):
    hostile.answer("logs", stdout=huge(1 << 30, b"x" * 99 + b"\n"))
    res = run_client(["logs", "rgt-box", "r1"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR and "sent more than 64 MiB for `logs`" in res.err_text
    assert res.out_bytes <= (64 << 20) + 65536
    peak, rc, _ = peak_rss(["logs", "rgt-box", "r1"] + hostile.args(), sshd)
    assert rc == exitcodes.ERROR and peak < RSS_GOAL


@pytest.mark.parametrize("field, value, named", [
    ("duration_s", "soon", "runs[0].stages[0].duration_s: expected a finite number, got 'soon'"),
    ("duration_s", 10 ** 400, "runs[0].stages[0].duration_s: expected a finite number"),
    ("progress", {"fraction": "x"}, "runs[0].stages[0].progress.fraction"),
    ("warnings", "not a list", "runs[0].stages[0].warnings: expected a list"),
    ("attempt", 1.5, "runs[0].stages[0].attempt: expected an integer"),
])
def test_malformed_status_field_is_an_error_naming_the_field_and_the_host(hostile, sshd, field, value, named):
    doc = status_doc()
    doc["runs"][0]["stages"][0][field] = value
    hostile.answer("status", stdout=doc)
    res = run_client(["status", "rgt-box"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR, res.text
    assert "rgt-box sent a malformed status: %s" % named in res.err_text
    assert "internal error" not in res.err_text and "Traceback" not in res.err_text


def test_overflowing_numbers_are_named_not_internal_errors(hostile, sshd):
    # 1e400 is valid JSON text that Python reads as inf: format_duration(inf) raised OverflowError
    text = json.dumps(status_doc()).replace('"heartbeat_age_s": 2', '"heartbeat_age_s": 1e400')
    hostile.answer("status", stdout=text.encode() + b"\n")
    res = run_client(["status", "rgt-box"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR and "agent.heartbeat_age_s: expected a finite number, got inf" in res.err_text
    for broken in ({"agent": ["a list"]}, {"runs": {"r1": {}}}, {"runs": ["not an object"]}):
        hostile.answer("status", stdout=status_doc(**broken))
        res = run_client(["status", "rgt-box"] + hostile.args(), sshd.config)
        assert res.rc == exitcodes.ERROR and "rgt-box sent a malformed status" in res.err_text, res.err_text


def test_patrol_one_hostile_host_still_reports_every_other_host(hostile, sshd, tmp_path):
    good = HostileBox(tmp_path / "good", sshd.config, alias="rgt-box2")
    failed = HostileBox(tmp_path / "failed", sshd.config, alias="rgt-box3")
    doc = status_doc()
    good.answer("status", stdout=doc)
    bad_run = copy.deepcopy(doc)
    bad_run["runs"][0].update(state="failed", ended_at="2025-01-02T09:59:00Z")
    bad_run["runs"][0]["stages"][0].update(state="failed", cause={"class": "cuda_oom", "summary": "OOM"})
    failed.answer("status", stdout=bad_run)
    hostile.answer("status", stdout=status_doc(runs=[{"name": "r", "stages": [{"duration_s": "x"}]}]))
    for box in (hostile, good, failed):
        hosts.remember(box.alias, home=str(box.home))
    res = run_client(["patrol", "rgt-box", "rgt-box2"], sshd.config)
    lines = res.text.splitlines()
    assert len(lines) == 2 and res.rc == exitcodes.ERROR, res.text
    assert " ERROR " in lines[0] and "runs[0].stages[0].duration_s" in lines[0]
    assert " HEALTHY " in lines[1] and "r1 running stage train" in lines[1]
    res = run_client(["patrol", "rgt-box", "rgt-box2", "rgt-box3"], sshd.config)
    assert res.rc == exitcodes.RUN_FAILED and len(res.text.splitlines()) == 3   # the worst one wins
    res = run_client(["status", "rgt-box", "rgt-box2"], sshd.config)
    assert res.rc == exitcodes.ERROR and "run r1  running" in res.text and "malformed" in res.err_text


def test_log_escape_sequences_are_visible_escapes_on_a_terminal_and_raw_with_raw(hostile, sshd, tmp_path):
    log = b"epoch 1\n" + OSC52 + b"\n" + CLEAR + b"loss 0.3\n" + FAKE_OK + b"\n"
    hostile.answer("logs", stdout=log)
    res = run_on_pty(["logs", "rgt-box", "r1"] + hostile.args(), sshd.config)
    assert res.rc == 0 and "\\x1b]52;c;" in res.text and "loss 0.3" in res.text
    assert_terminal_safe(res.out, [OSC52, CLEAR, FAKE_OK])
    res = run_on_pty(["logs", "rgt-box", "r1", "--raw"] + hostile.args(), sshd.config)
    assert OSC52 in res.out and CLEAR in res.out                   # asked for: the colours and all
    piped = run_client(["logs", "rgt-box", "r1"] + hostile.args(), sshd.config)
    assert piped.out == log                                        # a pipe gets the bytes as they are


def test_log_without_final_newline_leaves_the_prompt_on_its_own_line(hostile, sshd):
    hostile.answer("logs", stdout=b"step 9/10")
    res = run_client(["logs", "rgt-box", "r1"] + hostile.args(), sshd.config)
    assert res.out == b"step 9/10\n"


def test_error_text_from_the_box_is_sanitised(hostile, sshd):
    hostile.answer("handbook", stderr=b"Error: no such run " + OSC52 + b"\nHint: " + CLEAR + b"run `rgt-agent status`\n",
                   rc=1)
    res = run_on_pty(["handbook", "rgt-box", "r1"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR and "Error: handbook on rgt-box failed: no such run" in res.text
    assert "rgt-client status rgt-box" in res.text                  # the hint in the client's words
    assert_terminal_safe(res.out, [OSC52, CLEAR])


def test_handbook_and_cancel_text_is_sanitised(hostile, sshd):
    hostile.answer("handbook", stdout=b"# Run r1\n" + OSC52 + CLEAR + b"\n")
    hostile.answer("cancel", stdout=b"run r1 cancelled" + FAKE_OK + b"\n")
    for cmd in ("handbook", "cancel"):
        res = run_on_pty([cmd, "rgt-box", "r1"] + hostile.args(), sshd.config)
        assert res.rc == 0, res.text
        assert_terminal_safe(res.out, [OSC52, CLEAR, FAKE_OK])


def test_notify_test_results_are_sanitised(hostile, sshd):
    hostile.answer("notify-test", stdout={"ok": False, "results": [
        {"id": EVIL, "format": EVIL, "target": EVIL, "ok": False, "error": EVIL, "elapsed_s": "x"}],
        "config_errors": [EVIL]}, rc=1)
    res = run_on_pty(["notify-test", "rgt-box"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR and "FAIL" in res.text
    assert_terminal_safe(res.out, [OSC52, CLEAR, FAKE_OK])


def test_slow_box_is_told_apart_from_an_unreachable_one(hostile):
    hostile.answer("status", stdout=[pause(5), json.dumps(status_doc()) + "\n"])
    t0 = time.monotonic()
    hs = fetch_status(hostile.target(), timeout=1.5)
    assert isinstance(hs.error, BoxTooSlow) and hs.error.code == exitcodes.ERROR
    assert "rgt-box answered too slowly" in hs.error.message and "after the connection came up" in hs.error.message
    assert time.monotonic() - t0 < 5


def test_install_box_summary_is_sanitised():
    from rgt_client.install.render import box_summary
    evil = {"python_version": EVIL, "python": EVIL, "probe": {
        "deps": {EVIL: True}, "cgroup": {"version": EVIL, "max_bytes": "x"}, "system": [],
        "cpu": {"quota_cores": EVIL, "host_cores": EVIL},
        "gpu": {"driver_version": EVIL, "gpus": [{"name": EVIL}, "junk"]},
        "disks": [{"path": EVIL, "role": EVIL, "bytes_used_pct": float("inf")}, 7],
        "kernel_log": {"readable": True, "hard_faults_since_boot": "x"}, "warnings": [EVIL]}}
    text = "\n".join(box_summary(evil)).encode("utf-8")
    assert b"\\x1b]52" in text
    assert_terminal_safe(text, [OSC52, CLEAR, FAKE_OK])


def test_deeply_nested_json_is_an_error_naming_the_host_not_a_crash(hostile, sshd):
    hostile.answer("status", stdout=b"[" * 200000 + b"\n")
    res = run_client(["status", "rgt-box"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR and "rgt-box answered status with something that is not JSON" in res.err_text
    assert "internal error" not in res.err_text


# wait4's ru_maxrss of a child started by vfork+exec from this (big) test process includes this
# process's own high-water mark; a fresh small launcher that forks gives the client's alone.
_LAUNCH = ("import os, sys\npid = os.fork()\nif pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n"
           "_, status, usage = os.wait4(pid, 0)\nsys.stderr.write('\\nPEAK %d\\n' % usage.ru_maxrss)\n"
           "sys.exit(os.waitstatus_to_exitcode(status))\n")


def peak_rss(args: list, sshd) -> tuple[int, int, str]:
    """(the client's own peak RSS in bytes, its exit code, its stderr)."""
    from tests.hostile import client_argv
    res = run_argv([sys.executable, "-c", _LAUNCH] + client_argv(args, sshd.config))
    err, _, peak = res.err_text.rpartition("\nPEAK ")
    return int(peak) * 1024, res.rc, err


@pytest.mark.parametrize("shape", [pytest.param("many runs", marks=pytest.mark.slow),
                                   pytest.param("long history", marks=pytest.mark.slow), "one long string"])
def test_a_status_just_under_the_cap_stays_in_bounded_memory(hostile, sshd, shape):
    doc = status_doc()
    if shape == "many runs":
        doc["runs"] = [{"name": "r%d" % i, "state": "succeeded", "stages": []} for i in range(70000)]
    elif shape == "long history":
        doc["history"] = {"mem_used_pct": [0] * 1_300_000}
    else:
        doc["alerts"] = [{"severity": "warning", "type": "x", "summary": "s" * 3_900_000}]
    assert len(json.dumps(doc)) < 4 << 20
    hostile.answer("status", stdout=doc)
    for cmd in (["status", "rgt-box"], ["patrol", "rgt-box"], ["status", "rgt-box", "--json"]):
        peak, rc, err = peak_rss(cmd + hostile.args(), sshd)
        assert rc == 0, (cmd, err[-500:])
        assert peak < RSS_GOAL, "%s %s: peak RSS %d MB" % (shape, cmd, peak >> 20)
