"""A full state dir is a state, not a crash: RGT_HOME on a 3 MB tmpfs, filled by a stage or by
another process. The daemon stays up, says "full" in status, starts nothing new, keeps what it
could not write in memory and writes it when space returns; no event line is ever torn, and a
stage that ends on the full disk still leaves its exit status."""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.realbox import Box, job, wait_for
from tests.mounts import tmpfs

# Fills every last page: big writes, then ever smaller ones, then dies of it (a checkpoint save).
FILL = ("import os\nprint('epoch 1/3 loss 1.0', flush=True)\nfd = os.open('blob', os.O_WRONLY | os.O_CREAT)\n"
        "for size in (65536, 4096, 1):\n    try:\n        while True:\n            os.write(fd, b'x' * size)\n"
        "    except OSError:\n        pass\nraise OSError(28, 'No space left on device', 'ckpt.pt')\n")


@pytest.fixture
def small_box(tmp_path):
    with tmpfs(tmp_path / "small", "size=3m,nr_inodes=2000") as mnt:
        box = Box(tmp_path)
        box.home = mnt / "home"
        box.workdir = mnt / "work"
        box.workdir.mkdir()
        box.env["RGT_HOME"] = str(box.home)
        yield box
        box.cleanup()


def _status(box):
    out = box.agent("status", "--json")
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {}


def _sink(path):
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _events_parse(box):
    lines = (box.home / "events.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"", "the log ends in the middle of a line"
    return [json.loads(line) for line in lines[:-1]]          # raises on a torn line


@pytest.mark.root
def test_a_stage_that_fills_the_state_dir_leaves_the_daemon_up_and_it_catches_up(small_box):
    box = small_box
    (box.workdir / "fill.py").write_text(FILL)
    box.submit(job("fill", box.workdir, {"name": "fill", "run": "%s fill.py" % sys.executable},
                   {"name": "after", "run": "touch after-ran"}))
    sink = box.tmp / "sink.jsonl"                            # the phone, on another disk
    assert box.agent("notify-set", stdin=json.dumps({"notify": [{"url": "file://%s" % sink}]})).returncode == 0
    box.start()
    try:
        st = wait_for(lambda: (lambda s: s if (s.get("agent") or {}).get("storage", {}).get("state") == "full"
                               and (s.get("runs") or [{}])[0].get("state") == "failed" else None)(_status(box)),
                      30, "status to say the state dir is full and the run failed")
    except AssertionError:
        s = _status(box)
        raise AssertionError("%s %s %s" % (s.get("agent"), [r.get("state") for r in s.get("runs") or []],
                                           box.diagnostics()))
    assert st["agent"]["running"] is True and st["agent"]["state"] == "running"
    assert st["runs"][0]["stages"][0]["cause"]["class"] == "disk_full"
    assert not (box.workdir / "after-ran").exists()
    # what the client makes of this very answer: its own patrol verdict (not AGENT-DOWN), said in status
    from rgt_client.status.fetch import HostStatus
    from rgt_client.status.poll import patrol_verdict
    from rgt_client.status.render import render_status
    from rgt_client.status.statusdata import validate
    from rgt_client.box.transport import Target
    verdict = patrol_verdict(HostStatus(Target("box"), status=validate(st, "box")), since_s=86400)
    assert (verdict.word, verdict.code) == ("STATE-FULL", 7)
    assert "the agent's state dir is FULL since 20" in render_status(st, {"host": "box"})
    storage = st["agent"]["storage"]       # how much room it needs, and has (a real statvfs)
    assert storage["need_free_bytes"] == 2 << 20 and 0 <= storage["free_bytes"] < storage["need_free_bytes"]
    assert "it needs 2.1 MB free and has" in " ".join(render_status(st, {"host": "box"}).split())
    # one message, sent from memory while the disk is still full
    full_msgs = wait_for(lambda: [m for m in _sink(sink) if m.get("type") == "state_dir_full"], 20,
                         "the state_dir_full message")
    assert len(full_msgs) == 1 and full_msgs[0]["severity"] == "critical"
    assert (box.workdir / "blob").exists()
    os.unlink(box.workdir / "blob")                          # space returns
    run = box.wait_run("fill", timeout=30)                   # state.json and its event on disk now
    assert run["state"] == "failed" and run["stages"][0]["cause"]["class"] == "disk_full"
    box.wait_event("state_dir_ok", timeout=40)               # retries back off up to 30 s
    types = [e["type"] for e in _events_parse(box)]
    assert "state_dir_full" in types and "state_dir_ok" in types and types.count("run_failed") == 1, " ".join(types)
    # status.json is rewritten at the end of the tick whose event said so: a read in between (the
    # full suite's load) still saw "full"
    wait_for(lambda: (_status(box).get("agent") or {}).get("storage", {}).get("state") == "ok", 10,
             "status to say the state dir is ok again")
    wait_for(lambda: [m for m in _sink(sink) if m.get("type") == "stage_failed"], 20, "the caught-up messages")
    assert [m.get("type") for m in _sink(sink)].count("state_dir_full") == 1    # caught up: not sent again


@pytest.mark.root
def test_a_stage_ending_while_another_process_fills_the_disk_keeps_its_exit_and_the_chain_waits(small_box):
    box = small_box
    (box.workdir / "go").write_text("")
    box.submit(job("wait", box.workdir, {"name": "a", "run": "while [ -e go ]; do sleep 0.05; done; exit 0"},
                   {"name": "b", "run": "touch b-ran"}))
    box.start()
    box.wait_stage("wait", "a", "running")
    stages = box.home / "runs" / "wait" / "stages"
    wait_for((stages / "a.1.pid").exists, 10, "the stage's command to start")
    filler = box.workdir / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)           # another process fills every page
    for size in (65536, 4096, 1):
        try:
            while True:
                os.write(fd, b"x" * size)
        except OSError:
            pass
    os.close(fd)
    os.unlink(box.workdir / "go")                            # stage a ends now, on a full disk
    wait_for(lambda: (_status(box).get("agent") or {}).get("storage", {}).get("state") == "full", 30,
             "status to say the state dir is full")
    exit_file = stages / "a.1.exit"
    wait_for(exit_file.exists, 10, "the stage's exit record")
    assert json.loads(exit_file.read_text())["exit_code"] == 0     # the shim's slot held it
    assert not (box.workdir / "b-ran").exists()                    # nothing new starts while full
    os.unlink(filler)
    run = box.wait_run("wait", timeout=30)
    assert run["state"] == "succeeded" and (box.workdir / "b-ran").exists()
    _events_parse(box)


@pytest.mark.root
def test_a_failed_runs_full_workdir_disk_stays_in_status_with_its_alert(tmp_path):
    """A workdir's filesystem at 100% vanished from status once its run had failed, and no
    disk_low fired (docs/health.md promises every run's workdir)."""
    from rgt_client.status.render import render_status
    box = Box(tmp_path)
    try:
        with tmpfs(tmp_path / "data", "size=2m") as mnt:
            work = mnt / "work"
            work.mkdir()
            box.submit(job("dd", work, {"name": "fill", "run": "dd if=/dev/zero of=blob bs=64k; exit 1"}))
            box.start()
            box.wait_run("dd", "failed")

            def shown():
                st = _status(box)
                disk = next((d for d in st.get("health", {}).get("disks") or []
                             if d.get("path") == os.path.realpath(str(work))), None)
                alert = next((a for a in st.get("alerts") or [] if a.get("type") == "disk_low"), None)
                return (st, disk, alert) if disk and alert else None
            st, disk, alert = wait_for(shown, 30)
            assert disk["role"] == "workdir" and disk["bytes_used_pct"] >= 99
            text = render_status(st, {"host": "box"})
            assert str(os.path.realpath(str(work))) in text and "disk_low" in text or "disk" in text
    finally:
        box.cleanup()
