"""End to end over the real sshd: install, a 3-stage job, status (human, --json, one ssh call,
several aliases), logs, watch, patrol, cancel, resume, attach, hostile names and paths."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rgt_client import exitcodes
from tests.client.conftest import Cli, needs_daemon, read_status, stop_daemon, wait_for
from tests.sshd import counting_ssh

pytestmark = [pytest.mark.ssh, needs_daemon]
PY = sys.executable
SECRET = "hmac-S3CRET-do-not-leak"


def argv_logging_ssh(bin_dir: Path, log: Path) -> Path:
    """An `ssh` first on PATH that records its whole argv, then execs the real one."""
    real = shutil.which("ssh")
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "ssh").write_text("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> '%s'\nexec '%s' \"$@\"\n" % (log, real))
    (bin_dir / "ssh").chmod(0o755)
    return bin_dir
NASTY_DIR = "work dir 'q' \"dq\" $(touch PWNED)"

JOB = '''
name = "chain3"
workdir = %(workdir)s
[[stage]]
name = "train"
run = "%(py)s -c 'import os,time\\nfor e in range(1,4):\\n    print(\\"epoch %%d/3\\" %% e, flush=True); time.sleep(0.1)\\nos.makedirs(\\"ckpt\\", exist_ok=True); open(\\"ckpt/best.pt\\",\\"w\\").write(\\"w\\")'"
expect = ["ckpt/best.pt"]
[[stage]]
name = "eval"
run = "echo eval-ok > metrics.txt; echo evaluated"
expect = ["metrics.txt"]
[[stage]]
name = "aggregate"
run = "cat metrics.txt; echo aggregated"
[artifacts]
include = ["ckpt/best.pt", "metrics.txt"]
'''


def install(rgt: Cli, home: Path, *extra: str):
    res = rgt("install", "rgt-box", "--home", str(home), "--sample-every", "1s", *extra)
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def box(sshd, tmp_path_factory):
    """One installed box with the 3-stage chain run to completion (read-only tests share it)."""
    base = tmp_path_factory.mktemp("e2e")
    home, work = base / "box home 'x'", base / NASTY_DIR
    work.mkdir()
    notify = base / "notify.toml"
    notify.write_text('[[notify]]\nurl = "http://127.0.0.1:9/hook"\nformat = "json"\nsecret = "%s"\n'
                      '\n[[notify]]\nurl = "file://%s"\n' % (SECRET, base / "sink.jsonl"))
    argv_log = base / "ssh-argv.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RGT_CLIENT_CONFIG_DIR", str(base / "client-config"))
        mp.setenv("PATH", "%s:%s" % (argv_logging_ssh(base / "bin", argv_log), os.environ["PATH"]))
        rgt = Cli(sshd.config)
        first = install(rgt, home, "--notify", str(notify))
        job = base / "job.toml"
        job.write_text(JOB % {"workdir": json.dumps(str(work)), "py": PY})
        submitted = rgt("run", "rgt-box", str(job), "--home", str(home))
        watched = rgt("watch", "rgt-box", "chain3", "--every", "0.3s", "--max-wait", "60s", "--home", str(home))
        patrol = rgt("patrol", "rgt-box", "rgt-box2", "--home", str(home))
        yield {"home": home, "work": work, "install": first, "submitted": submitted, "watched": watched,
               "patrol": patrol, "rgt": rgt, "base": base, "argv_log": argv_log}
    stop_daemon(home)


def test_install_prints_the_box_and_the_profile(box):
    out = box["install"].stdout
    assert "rgt agent 0.1.0 on rgt-box: installed" in out
    assert "python " in out and "profile  " in out and "daemon   running, pid" in out
    assert "Profile " in out  # the profile's first-contact block
    sha = (box["home"] / "agent.sha256").read_text().strip()
    assert sha in json.dumps(read_status(box["home"]))
    assert list((box["home"] / ".agent-pyc" / sha).glob("*/boxagent.cli.pyc"))   # compiled once, at install


def test_install_notify_lists_the_notifiers_it_set(box):
    out = box["install"].stdout
    assert "  notify   2 notifiers set" in out, out
    assert re.search(r"^ +\S+ +json +http://127\.0\.0\.1:9/\*\*\*$", out, re.M), out
    assert SECRET not in out


def test_notifier_ids_stay_the_same_after_another_notify_set(box):
    """notify-set promises a stable id per URL: a notifier added before the others, or the same
    file sent again, keeps each old notifier's id (its outbox files and dead-man stay its own)."""
    rgt, home, base = box["rgt"], box["home"], box["base"]
    before = {n["url"]: n["id"] for n in json.loads((home / "secrets.json").read_text())["notify"]}
    more = base / "notify-more.toml"
    more.write_text('[[notify]]\nurl = "file://%s"\n\n' % (base / "other.jsonl")
                    + (base / "notify.toml").read_text())
    try:
        res = rgt("notify-set", "rgt-box", str(more), "--home", str(home))
        assert res.exit_code == 0, res.output
        after = {n["url"]: n["id"] for n in json.loads((home / "secrets.json").read_text())["notify"]}
        assert {u: after[u] for u in before} == before and len(set(after.values())) == 3
    finally:
        assert rgt("notify-set", "rgt-box", str(base / "notify.toml"), "--home", str(home)).exit_code == 0
    assert {n["url"]: n["id"] for n in json.loads((home / "secrets.json").read_text())["notify"]} == before


def test_notifier_secrets_travel_on_stdin_only(box):
    home = box["home"]
    secrets = home / "secrets.json"
    assert oct(secrets.stat().st_mode & 0o777) == "0o600" and SECRET in secrets.read_text()
    argv = box["argv_log"].read_text()
    assert "rgt-box" in argv and SECRET not in argv
    for name in ("status.json", "events.jsonl", "config.json", "daemon.log"):
        assert SECRET not in (home / name).read_text(), name
    assert SECRET not in box["install"].output
    assert (box["base"] / "sink.jsonl").exists()


def test_run_prints_the_name_and_how_to_check(box):
    out = box["submitted"].stdout
    assert box["submitted"].exit_code == 0, box["submitted"].output
    assert "submitted run chain3 to rgt-box" in out and "rgt-client watch rgt-box chain3" in out


def test_watch_ends_with_0_on_success_one_line_per_tick(box):
    res = box["watched"]
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().splitlines()
    assert lines and all(line[:8].count(":") == 2 for line in lines)
    assert "chain3 succeeded" in lines[-1]
    assert not list(box["work"].parent.glob("PWNED*")) and (box["work"] / "ckpt" / "best.pt").exists()


def test_status_human_and_json(box):
    rgt, home = box["rgt"], str(box["home"])
    res = rgt("status", "rgt-box", "--home", home)
    assert res.exit_code == 0, res.output
    assert "rgt-box · profile" in res.stdout and "run chain3  succeeded" in res.stdout
    assert "✓ train" in res.stdout and "✓ aggregate" in res.stdout
    res = rgt("status", "rgt-box", "--home", home, "--json")
    data = json.loads(res.stdout)
    # others edit boxagent/ while the suite runs in a shared tree, so the local build may move on
    assert ("the box runs agent build" in res.stdout) is False
    mismatch = data["client"]["build_match"] is False
    raw = read_status(box["home"])
    assert data["schema"] == raw["schema"] == "rgt.status/1"
    assert set(raw) - {"observed_at"} <= set(data)
    assert data["client"]["host"] == "rgt-box" and data["client"]["local_build_sha256"]
    human = rgt("status", "rgt-box", "--home", home).stdout
    assert ("the box runs agent build" in human) is mismatch
    assert data["client"]["exit_code"] == 0 and data["client"]["round_trip_s"] > 0


def test_status_is_exactly_one_ssh_invocation(box, tmp_path):
    count = tmp_path / "count"
    path = "%s:%s" % (counting_ssh(tmp_path / "bin", count), os.environ["PATH"])
    res = box["rgt"]("status", "rgt-box", "--home", str(box["home"]), "--run", "chain3", env={"PATH": path})
    assert res.exit_code == 0, res.output
    assert count.read_text().count("x") == 1


def test_status_of_several_aliases_in_parallel(box, tmp_path):
    count = tmp_path / "count"
    path = "%s:%s" % (counting_ssh(tmp_path / "bin", count), os.environ["PATH"])
    aliases = ["rgt-box", "rgt-box2", "rgt-box3", "rgt-box4"]
    res = box["rgt"]("status", *aliases, "--home", str(box["home"]), "--json", env={"PATH": path})
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [d["client"]["host"] for d in data] == aliases
    assert count.read_text().count("x") == 4


@pytest.mark.slow
def test_logs_handbook_and_unknown_run(box):
    rgt, home = box["rgt"], str(box["home"])
    res = rgt("logs", "rgt-box", "chain3", "--stage", "train", "--home", home)
    assert res.exit_code == 0 and "epoch 3/3" in res.stdout
    res = rgt("handbook", "rgt-box", "chain3", "--home", home)
    assert res.exit_code == 0 and "chain3" in res.stdout
    for cmd in (["logs", "rgt-box", "nope"], ["watch", "rgt-box", "nope"], ["status", "rgt-box", "--run", "nope"]):
        res = rgt(*cmd, "--home", home)
        assert res.exit_code == exitcodes.USAGE, (cmd, res.output)
        assert "no run 'nope'" in res.stderr and "chain3" in res.stderr, res.stderr


def test_patrol_says_done(box):
    res = box["patrol"]
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and all(" DONE " in line for line in lines)
    assert "rgt-client pull rgt-box chain3" in lines[0]


@pytest.mark.slow
def test_reinstall_readopts_the_running_stage(box, tmp_path):
    rgt, home = box["rgt"], box["home"]
    counter = tmp_path / "count it"
    rgt("run", "rgt-box", "--home", str(home), "--name", "once", "--workdir", str(tmp_path), "--",
        "echo run >> 'count it'; sleep 2; echo done")
    wait_for(lambda: _state(home, "once") == "running", 20)
    res = install(rgt, home)
    same_build = res.stdout.split("sha256 ")[1][:16] == box["install"].stdout.split("sha256 ")[1][:16]
    # others edit boxagent/ in this shared tree while the suite runs: the build may have moved on
    assert ("unchanged" in res.stdout) is same_build and ("installed" in res.stdout) is not same_build
    res = rgt("watch", "rgt-box", "once", "--every", "0.2s", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert counter.read_text() == "run\n"


def test_hostile_run_words_travel_safely(box, tmp_path):
    rgt, home, work = box["rgt"], box["home"], tmp_path / NASTY_DIR
    work.mkdir()
    args = ["it's", '"quoted"', "$(touch PWNED)", "`touch PWNED2`", "a b"]
    script = "import sys; open('argv.json', 'w').write(__import__('json').dumps(sys.argv[1:]))"
    res = rgt("run", "rgt-box", "--home", str(home), "--name", "hostile.1", "--workdir", str(work), "--",
              PY, "-c", script, *args)
    assert res.exit_code == 0, res.output
    res = rgt("watch", "rgt-box", "hostile.1", "--every", "0.2s", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert json.loads((work / "argv.json").read_text()) == args
    assert not list(tmp_path.rglob("PWNED*"))


def test_attach_to_a_log_and_a_pid(box, tmp_path):
    rgt, home = box["rgt"], box["home"]
    log = tmp_path / "old train.log"
    log.write_text("epoch 1\n")
    res = rgt("attach", "rgt-box", "--home", str(home), "--name", "old", "--log", str(log),
              "--done", "Training completed", "--fail", "Traceback", "--timeout", "1m")
    assert res.exit_code == 0, res.output
    wait_for(lambda: _state(home, "old") == "running", 20)
    with open(log, "a") as fh:
        fh.write("Training completed\n")
    res = rgt("watch", "rgt-box", "old", "--every", "0.2s", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == 0, res.output
    proc = subprocess.Popen(["sleep", "30"])
    try:
        res = rgt("attach", "rgt-box", "--home", str(home), "--name", "bypid", "--pid", str(proc.pid))
        assert res.exit_code == 0, res.output
        wait_for(lambda: _state(home, "bypid") == "running", 20)
    finally:
        proc.kill()
        proc.wait()
    res = rgt("watch", "rgt-box", "bypid", "--every", "0.2s", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code in (0, exitcodes.RUN_FAILED), res.output
    assert "bypid" in res.stdout


def _state(home: Path, run: str) -> str | None:
    for r in read_status(home).get("runs") or []:
        if r.get("name") == run:
            return r.get("state")
    return None


@pytest.mark.slow
def test_a_changed_job_under_a_finished_runs_name_needs_run_replace(box, tmp_path):
    rgt, home = box["rgt"], str(box["home"])
    def run(cmd: str, *extra: str):
        return rgt("run", "rgt-box", "--home", home, "--name", "again", "--workdir", str(tmp_path), *extra, "--", cmd)
    assert run("echo first").exit_code == 0
    assert rgt("watch", "rgt-box", "again", "--every", "0.2s", "--max-wait", "30s", "--home", home).exit_code == 0
    res = run("echo second")
    assert res.exit_code == exitcodes.USAGE and "already exists" in res.stderr
    hint = next(ln for ln in res.stderr.splitlines() if ln.startswith("Hint: "))
    # resume would rerun the OLD job: the hint names --replace only
    assert "rgt-client run rgt-box … --replace" in hint and "resume" not in hint
    res = run("echo second", "--replace")
    assert res.exit_code == 0 and "replacing the old run" in res.stdout, res.output
    assert rgt("watch", "rgt-box", "again", "--every", "0.2s", "--max-wait", "30s", "--home", home).exit_code == 0
    assert rgt("logs", "rgt-box", "again", "--home", home).stdout == "second\n"
