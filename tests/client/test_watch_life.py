"""`watch` shows life during a long stage, over the far link (bench/delayproxy.py, 150 ms round
trip): a progress line at most every --every, one line per change when piped. It printed
nothing for the whole stage once."""
from __future__ import annotations

import re
import time

import pytest

from tests.client.conftest import wait_for
from tests.client.test_far_link import Lines, far, run_events, spawn, submit  # noqa: F401 (far: fixture)

pytestmark = [pytest.mark.ssh, pytest.mark.slow]
STEPS = "for i in $(seq 1 40); do echo step $i/40; sleep 0.25; done"


def test_a_long_stage_shows_its_progress_while_it_runs(far):
    submit(far, "long", [("train", STEPS)])
    proc = spawn(far, "watch", "far-box", "long", "--every", "1s", "--max-wait", "60s")
    lines = Lines(proc)
    try:
        proc.wait(60)
        ended = next(e for e in run_events(far["home"], "long") if e["type"] == "stage_succeeded")
        progress = [(at, line) for at, line in lines.got if "stage train (1/1):" in line]
        assert len(progress) >= 3, lines.got
        said = [re.sub(r"^\S+ ", "", line).split(", as of")[0] for _, line in progress]
        assert len(set(said)) == len(said), said             # piped: one line per change
        assert any(re.search(r"\d+% \(\d+/40\) eta ", line) for _, line in progress), progress
        assert all(b - a >= 0.9 for (a, _), (b, _) in zip(progress, progress[1:])), progress
        written = int(ended["id"].split("-")[0]) / 1000.0
        assert progress[0][0] < written - 3, "no sign of life until the stage was nearly over"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_on_a_terminal_the_progress_line_is_redrawn_in_place(far):
    import os
    import pty
    import subprocess
    from tests.client.test_far_link import CLIENT
    submit(far, "tty", [("train", STEPS)])
    master, slave = pty.openpty()
    proc = subprocess.Popen([CLIENT, "watch", "far-box", "tty", "--every", "1s", "--max-wait", "60s",
                             "--home", str(far["home"])], stdout=slave, stderr=slave, env=far["env"])
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        proc.wait(60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.decode("utf-8", "replace")
    redraws = re.findall(r"\r\x1b\[K\S+ stage train \(1/1\):[^\r\n]*", text)
    assert len(redraws) >= 3, text
    assert "succeeded" in text.split(redraws[-1])[-1]     # the next line took the progress line's place


def _pty_run(argv: list, env: dict, during=None) -> str:
    """Run a client command on a real pseudo-terminal; `during(text_so_far)` may act as it reads."""
    import os
    import pty
    import subprocess
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if during is not None:
                during(out.decode("utf-8", "replace"))
        proc.wait(90)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out.decode("utf-8", "replace")


def test_logs_follow_on_a_terminal_says_link_lost_on_its_own_line_and_link_back(far):
    import threading
    from tests.client.test_far_link import CLIENT
    bar = "for i in $(seq 1 200); do printf '\\r%d/200 it' $i; sleep 0.05; done; echo; echo done-bar"
    submit(far, "bar", [("bar", bar)])
    state = {"cut": False}

    def cut_mid_bar() -> None:       # the link breaks while the bar is being drawn on the box
        logs = far["home"] / "runs" / "bar" / "logs"
        wait_for(lambda: any(b"\r40/200" in p.read_bytes() for p in logs.glob("bar.*.log")) if logs.exists()
                 else False, 30)
        far["proxy"].stall(True)
        time.sleep(1.5)
        far["proxy"].cut()
        time.sleep(1.5)
        far["proxy"].stall(False)
        state["cut"] = True
    cutter = threading.Thread(target=cut_mid_bar, daemon=True)
    cutter.start()
    text = _pty_run([CLIENT, "logs", "far-box", "bar", "--follow", "--max-wait", "90s", "--home", str(far["home"])],
                    far["env"])
    cutter.join(10)
    assert state["cut"], text
    assert text.lstrip().startswith("==> bar (attempt 1) <=="), text[:200]
    assert "link lost at" in text, repr(text[-1500:])
    lost = text.index("link lost at")
    before = text[:lost].replace("\r\n", "\n")
    assert before.endswith("\n") or re.search(r"\r *\r$", before), repr(text[lost - 80:lost + 40])
    assert "link back (lost since" in text[lost:], text[lost:]
    assert "done-bar" in text


def test_watch_with_the_agent_down_does_not_say_the_run_keeps_going(far):
    import subprocess
    from tests.client.conftest import stop_daemon
    from tests.client.test_far_link import CLIENT
    submit(far, "held", [("train", "sleep 30"), ("eval", "true")])
    wait_for(lambda: any(e["type"] == "stage_started" for e in run_events(far["home"], "held")), 30)
    stop_daemon(far["home"])
    res = subprocess.run([CLIENT, "watch", "far-box", "held", "--every", "5s", "--max-wait", "2s",
                          "--home", str(far["home"])], capture_output=True, text=True, env=far["env"], timeout=60)
    assert res.returncode == 6, res.stdout + res.stderr
    assert "keeps going on the box" not in res.stdout, res.stdout
    assert "the agent on far-box was down then: no next stage starts while it is down" in res.stdout, res.stdout
    assert "rgt-client install far-box" in res.stdout


def test_a_silent_drop_during_watch_is_not_said_to_be_a_connection_that_is_up(far):
    """A wait's bound passes while the link is dark (before ssh's own keepalive gives up): that
    silence tells nothing about the link, and watch once said "(the connection is up)"."""
    submit(far, "dark", [("train", "sleep 90")])
    proc = spawn(far, "watch", "far-box", "dark", "--every", "1s", "--max-wait", "40s")
    lines = Lines(proc)
    try:
        wait_for(lambda: any("stage train (1/1)" in line for _, line in lines.got), 30)
        far["proxy"].stall(True)
        wait_for(lambda: any("reconnecting" in line or "no answer" in line for _, line in lines.got), 45)
        far["proxy"].stall(False)
        proc.wait(60)
    finally:
        far["proxy"].stall(False)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        far["rgt"]("cancel", "rgt-box", "dark", "--home", str(far["home"]))
    text = [line for _, line in lines.got]
    said = [line for line in text if "reconnecting" in line or "no answer" in line]
    assert said and not any("connection is up" in line or "never came up" in line for line in text), text
    assert any("after the connection came up" in line or "nothing came back" in line or "broke" in line
               for line in said), said
