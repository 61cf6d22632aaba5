"""A far, flaky link on the real sshd: bench/delayproxy.py in front of it (75 ms each way), rgt's
shared connection on. `watch` shows a stage's end within a second and a round trip, loses and
repeats no event across a 30 s stall of the link, `logs --follow` loses and repeats no line
across a broken link, and an agent with no event feed is polled."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rgt_client.box import sshmux
from tests.client.conftest import stop_daemon, wait_for
from tests.client.test_e2e import install

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from delayproxy import DelayProxy  # noqa: E402

pytestmark = pytest.mark.ssh
CLIENT = str(Path(sys.executable).parent / "rgt-client")
RTT = 0.15
QUIET = ("heartbeat", "ping")


@pytest.fixture
def far(sshd, rgt, tmp_path, monkeypatch):
    """A box home installed over the near alias, reached through the proxy as `far-box`."""
    proxy = DelayProxy(sshd.port, RTT / 2)
    cfg = tmp_path / "ssh_config"
    text = "\n".join(line for line in sshd.config.read_text().splitlines() if "ControlMaster" not in line)
    cfg.write_text(text.replace("Host rgt-box", "Host far-box").replace("Port %d" % sshd.port, "Port %d" % proxy.port)
                   + "\n")
    (tmp_path / "run").mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))     # where the shared connection lives
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    install(rgt, home)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path / "run"), RGT_SSH_CONFIG=str(cfg),
               RGT_CLIENT_CONFIG_DIR=str(tmp_path / "client"))
    yield {"proxy": proxy, "cfg": cfg, "home": home, "work": work, "env": env, "rgt": rgt}
    stop_daemon(home)
    sshmux.close("far-box", str(cfg))
    proxy.close()


def submit(far, name: str, stages: list[tuple[str, str]]) -> None:
    job = far["work"] / ("%s.toml" % name)
    job.write_text("name = %s\nworkdir = %s\n" % (json.dumps(name), json.dumps(str(far["work"]))) + "".join(
        "[[stage]]\nname = %s\nrun = %s\n" % (json.dumps(s), json.dumps(cmd)) for s, cmd in stages))
    res = far["rgt"]("run", "rgt-box", str(job), "--home", str(far["home"]))
    assert res.exit_code == 0, res.output


class Lines(threading.Thread):
    """A command's stdout lines, each with the time it arrived here."""

    def __init__(self, proc: subprocess.Popen) -> None:
        super().__init__(daemon=True)
        self.proc, self.got = proc, []
        self.start()

    def run(self) -> None:
        for raw in self.proc.stdout:
            self.got.append((time.time(), raw.rstrip("\n")))


def spawn(far, *args: str) -> subprocess.Popen:
    return subprocess.Popen([CLIENT, *args, "--home", str(far["home"])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=far["env"])


def run_events(home: Path, run: str) -> list[dict]:
    out = []
    for raw in (home / "events.jsonl").read_text().splitlines():
        e = json.loads(raw)
        if e.get("run") == run and e.get("type") not in QUIET:
            out.append(e)
    return out


def test_watch_shows_a_stage_end_within_a_second_and_a_round_trip(far):
    submit(far, "quick", [("prep", "sleep 4"), ("train", "sleep 60")])
    proc = spawn(far, "watch", "far-box", "quick", "--max-wait", "60s")
    lines = Lines(proc)
    try:
        wait_for(lambda: any(e["type"] == "stage_succeeded" for e in run_events(far["home"], "quick")), 30)
        end = next(e for e in run_events(far["home"], "quick") if e["type"] == "stage_succeeded")
        wait_for(lambda: any(end["summary"] in line for _, line in lines.got), 10)
        shown = next(at for at, line in lines.got if end["summary"] in line)
        written = int(end["id"].split("-")[0]) / 1000.0
        assert shown - written <= 1.0 + RTT, (shown - written, lines.got)
        assert far["proxy"].counters()[0] == 1      # every wait on the one shared connection
    finally:
        proc.kill()
        proc.wait()
        far["rgt"]("cancel", "rgt-box", "quick", "--home", str(far["home"]))


@pytest.mark.slow
def test_a_30s_stall_mid_watch_loses_and_repeats_no_event(far):
    stages = [("s%d" % i, "sleep 3") for i in range(1, 15)]
    submit(far, "chain", stages)
    proc = spawn(far, "watch", "far-box", "chain", "--max-wait", "180s")
    lines = Lines(proc)
    wait_for(lambda: any("stage s1 succeeded" in line for _, line in lines.got), 60)
    far["proxy"].stall(True)          # the link goes dark mid-run, its connections left hanging
    dark = time.time()
    time.sleep(30)
    far["proxy"].stall(False)
    light = time.time()
    assert proc.wait(timeout=150) == 0, (lines.got, proc.stderr.read())
    lines.join(5)
    text = [line for _, line in lines.got]
    started = lines.got[0][0]         # what landed before watch began is not its to show
    after = [e for e in run_events(far["home"], "chain") if int(e["id"].split("-")[0]) / 1000.0 > started]
    assert len([e for e in after if dark < int(e["id"].split("-")[0]) / 1000.0 < light]) >= 10
    for e in after:
        shown = [line for line in text if line.endswith(" " + e["summary"])]
        assert len(shown) == 1, (e["summary"], text)
    assert "chain succeeded" in text[-1], text
    assert not any("connection is up" in line for line in text), text     # silence tells no such thing


@pytest.mark.slow
def test_logs_follow_across_a_broken_link_loses_and_repeats_no_line(far):
    count = "for i in $(seq 1 120); do echo line-$i; sleep 0.05; done"
    submit(far, "counted", [("first", count), ("second", "echo second-$(seq 1 3 | tr '\\n' ,)")])
    proc = spawn(far, "logs", "far-box", "counted", "--follow", "--max-wait", "120s")
    lines = Lines(proc)
    wait_for(lambda: any(line == "line-20" for _, line in lines.got), 30)
    far["proxy"].stall(True)          # dark for 3 s, then every connection reset: ssh ends with 255
    time.sleep(1.5)
    far["proxy"].cut()
    time.sleep(1.5)
    far["proxy"].stall(False)
    assert proc.wait(timeout=90) == 0, (lines.got, proc.stderr.read())
    lines.join(5)
    got = [line for _, line in lines.got if line.startswith("line-")]
    assert got == ["line-%d" % i for i in range(1, 121)][-len(got):] and got[-1] == "line-120", got
    # the first stage's last lines start the follow under its header; the chain's move to the next is told once
    assert [line for _, line in lines.got if line.startswith("==> ")] == ["==> first (attempt 1) <==",
                                                                          "==> second (attempt 1) <=="]
    assert "second-1,2,3," in [line for _, line in lines.got]
    err = proc.stderr.read()
    assert "link lost at" in err and "link back (lost since" in err, err


@pytest.mark.slow
def test_an_agent_with_no_event_feed_is_polled(far):
    submit(far, "old", [("only", "sleep 60")])
    wait_for(lambda: any(e["type"] == "stage_started" for e in run_events(far["home"], "old")), 30)
    stop_daemon(far["home"])
    for name in ("events.jsonl", "events.jsonl.1"):
        (far["home"] / name).unlink(missing_ok=True)
    # an agent that writes no events (too old), and down: polled every --every, a run line each
    # check (a stream shows one), until it stayed down for 3 checks
    res = subprocess.run([CLIENT, "watch", "far-box", "old", "--every", "0.1s", "--max-wait", "30s",
                          "--home", str(far["home"])], capture_output=True, text=True, env=far["env"], timeout=60)
    assert res.returncode == 3, res.stdout + res.stderr
    assert len([line for line in res.stdout.splitlines() if "old running stage only" in line]) == 3, res.stdout
    assert "stayed down for 3 checks" in res.stdout


@pytest.mark.slow
def test_a_re_pull_of_an_unchanged_run_copies_nothing_and_records_nothing_again(far, tmp_path):
    job = far["work"] / "art.toml"
    job.write_text('name = "art"\nworkdir = %s\n[[stage]]\nname = "make"\nrun = "mkdir -p out && echo w > out/m.bin"\n'
                   '[artifacts]\ninclude = ["out/**"]\n' % json.dumps(str(far["work"])))
    assert far["rgt"]("run", "rgt-box", str(job), "--home", str(far["home"])).exit_code == 0
    assert far["rgt"]("watch", "rgt-box", "art", "--max-wait", "60s", "--home", str(far["home"])).exit_code == 0
    dest = tmp_path / "pulled"

    def pull() -> subprocess.CompletedProcess:
        return subprocess.run([CLIENT, "pull", "far-box", "art", str(dest), "--home", str(far["home"]), "--json"],
                              capture_output=True, text=True, env=far["env"], timeout=120)
    first = pull()
    assert first.returncode == 0 and json.loads(first.stdout)["recorded_on_box"], first.stderr
    mark = far["home"] / "runs" / "art" / "pull_verified.json"
    recorded = mark.stat().st_mtime_ns
    again = pull()
    out = json.loads(again.stdout)
    assert again.returncode == 0 and out["verify"]["ok"] and out["method"] == "none" and out["bytes_moved"] == 0
    assert mark.stat().st_mtime_ns == recorded       # the box already knew: not asked again
    (dest / "out" / "m.bin").write_text("changed here\n")
    fixed = pull()                                    # a copy that stopped matching is put right
    assert fixed.returncode == 0 and json.loads(fixed.stdout)["method"] != "none", fixed.stderr
    assert (dest / "out" / "m.bin").read_text() == "w\n"
