"""The manifest on the box: `rgt-agent manifest RUN`, run through the built single-file agent."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from boxagent.artifacts import build_manifest, summary
from boxagent.base.home import Home


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_manifest_lists_declared_files_with_sizes_and_hashes(box):
    box.write("ck/model final.pt", b"w" * 100_000)
    box.write("résultats/metrics ü.json", "{}")
    box.write("ck/scratch.tmp", "x")
    box.write("notes.txt", "not declared")
    os.symlink("model final.pt", box.work / "ck" / "best.pt")
    run = box.run("r1", ["ck/**", "résultats/*.json"], ["**/*.tmp"])
    out = box.agent("manifest", run)
    assert out.returncode == 0, out.stderr
    assert b"2 files" in out.stdout and b"1 symlinks" in out.stdout
    m = box.manifest(run)
    assert m["schema"] == "rgt.manifest/1" and m["run"] == "r1" and m["root"] == str(box.work)
    assert m["files"] == [
        {"path": "ck/model final.pt", "bytes": 100_000, "mtime_ns": os.stat(box.work / "ck/model final.pt").st_mtime_ns,
         "sha256": _sha(b"w" * 100_000)},
        {"path": "résultats/metrics ü.json", "bytes": 2,
         "mtime_ns": os.stat(box.work / "résultats/metrics ü.json").st_mtime_ns, "sha256": _sha(b"{}")}]
    assert m["symlinks"] == [{"path": "ck/best.pt", "target": "model final.pt"}]
    assert m["totals"] == {"files": 2, "bytes": 100_002, "symlinks": 1, "skipped": 0}
    assert m["created_at"].endswith("Z")


def test_json_prints_the_manifest_file_byte_for_byte(box):
    box.write("a.bin", "a")
    run = box.run("r1", ["*.bin"])
    out = box.agent("manifest", run, "--json")
    assert out.returncode == 0
    assert out.stdout == (box.home / "runs" / run / "manifest.json").read_bytes()


def test_refresh_rehashes_only_changed_files_and_keeps_the_file_when_nothing_changed(box):
    for i in range(20):
        box.write("ck/%02d.pt" % i, os.urandom(1000))
    run = box.run("r1", ["ck/**"])
    home = Home(str(box.home))
    spec = json.loads((box.home / "runs" / run / "spec.json").read_text())
    first = build_manifest(home, run, spec, now=1_000_000)
    assert first["hashed"] == 20
    raw = (box.home / "runs" / run / "manifest.json").read_bytes()
    again = build_manifest(home, run, spec, now=2_000_000)
    assert again["hashed"] == 0
    # unchanged: same bytes, so the sha256 in the run_succeeded message stays the verified one
    assert (box.home / "runs" / run / "manifest.json").read_bytes() == raw
    p = box.write("ck/07.pt", b"new content")
    os.utime(p, ns=(1, 1))
    third = build_manifest(home, run, spec, now=3_000_000)
    assert third["hashed"] == 1
    entry = [f for f in third["files"] if f["path"] == "ck/07.pt"][0]
    assert entry["sha256"] == _sha(b"new content") and entry["mtime_ns"] == 1
    assert summary(home, run)["sha256"] == _sha((box.home / "runs" / run / "manifest.json").read_bytes())
    assert summary(home, run)["files"] == 20


def test_refuses_while_the_writing_stage_runs_unless_forced(box):
    box.write("ck/a.pt", "x")
    run = box.run("r1", ["ck/**"], state={"schema": "rgt.runstate/1", "name": "r1", "state": "running",
                                           "stages": [{"name": "train", "state": "running"}]})
    out = box.agent("manifest", run)
    assert out.returncode == 1
    assert b"Error: stage train of run r1 is still running" in out.stderr
    assert b"Hint:" in out.stderr and b"--force" in out.stderr
    assert not (box.home / "runs" / run / "manifest.json").exists()
    assert box.agent("manifest", run, "--force").returncode == 0
    assert box.manifest(run)["totals"]["files"] == 1


def test_glob_escaping_the_workdir_is_refused_without_traceback(box):
    run = box.run("r1", ["../*"])
    out = box.agent("manifest", run)
    assert out.returncode == 2
    assert out.stderr.startswith(b"Error: artifact pattern '../*' uses `..` to leave the workdir")
    assert b"Traceback" not in out.stderr
    assert not (box.home / "runs" / run / "manifest.json").exists()


def test_unknown_run_and_run_without_artifacts_are_usage_errors(box):
    out = box.agent("manifest", "nope")
    assert out.returncode == 2 and b"Error: no run 'nope'" in out.stderr
    out = box.agent("manifest", "../../etc")
    assert out.returncode == 2 and b"is not a run name" in out.stderr
    run = box.run("r2", [])
    out = box.agent("manifest", run)
    assert out.returncode == 2 and b"declares no artifacts" in out.stderr and b"Hint:" in out.stderr


def test_daemon_call_for_a_run_without_artifacts_writes_nothing(box):
    run = box.run("r1", [])
    spec = json.loads((box.home / "runs" / run / "spec.json").read_text())
    m = build_manifest(Home(str(box.home)), run, spec)
    assert m["declared"] is False and m["files"] == []
    assert summary(Home(str(box.home)), run) == {"files": 0, "bytes": 0, "manifest": None, "sha256": None}


def test_runs_under_a_bare_python_without_site_packages(box, agent_pyz):
    box.write("a.bin", "a")
    run = box.run("r1", ["a.bin"])
    out = subprocess.run([sys.executable, "-S", str(box.home / "rgt-agent.pyz"), "manifest", run],
                         capture_output=True, env=dict(os.environ, RGT_HOME=str(box.home)))
    assert out.returncode == 0, out.stderr


def test_pull_stream_serves_only_manifest_files(box):
    box.write("ck/a.pt", b"0123456789")
    box.write("secret.txt", "no")
    run = box.run("r1", ["ck/**"])
    assert box.agent("manifest", run).returncode == 0
    req = json.dumps([{"path": "ck/a.pt", "offset": 4}, {"path": "secret.txt"},
                      {"path": "../box home/config.json"}]).encode()
    out = box.agent("pull-stream", run, stdin=req)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split(b"\n")
    assert json.loads(lines[0]) == {"path": "ck/a.pt", "offset": 4, "bytes": 6}
    assert lines[1].startswith(b"456789")
    assert json.loads(lines[1][6:])["error"] == "not in the run's manifest"
    assert json.loads(lines[2])["error"] == "not in the run's manifest"
    assert json.loads(lines[3]) == {"end": True}


def test_pull_info_is_one_header_line_then_the_exact_manifest(box):
    box.write("a.bin", "a")
    run = box.run("r1", ["a.bin"])
    box.profile({"name": "autodl", "teardown": [{"name": "release", "irreversible": True}]})
    out = box.agent("pull-info", run)
    assert out.returncode == 0, out.stderr
    head, _, rest = out.stdout.partition(b"\n")
    head = json.loads(head)
    raw = (box.home / "runs" / run / "manifest.json").read_bytes()
    assert rest == raw and head["manifest_bytes"] == len(raw) and head["manifest_sha256"] == _sha(raw)
    assert head["root"] == str(box.work) and head["profile"]["name"] == "autodl"
    assert head["rsync"] is None or os.path.basename(head["rsync"]) == "rsync"
    nopath = box.agent("pull-info", run, env={"PATH": os.path.dirname(sys.executable)})
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "rsync")):
        assert json.loads(nopath.stdout.partition(b"\n")[0])["rsync"] is None


def _python38():
    import shutil
    for c in ("/root/.pyenv/versions/3.8.18/bin/python3.8", shutil.which("python3.8")):
        if c and os.access(c, os.X_OK) and subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0:
            return c  # (a pyenv shim exists even where it cannot run 3.8)
    return None


def test_manifest_and_stream_run_on_python_3_8(box):
    py38 = _python38()
    if not py38:
        import pytest
        pytest.skip("no Python 3.8 interpreter here (the agent's oldest supported Python)")
    box.write("ck/a.pt", os.urandom(300_000))          # above the one-read size: the chunked path
    box.write("ck/b.pt", "small")
    run = box.run("r1", ["ck/**"])
    env = dict(os.environ, RGT_HOME=str(box.home))
    out = subprocess.run([py38, "-S", str(box.home / "rgt-agent.pyz"), "manifest", run],
                         capture_output=True, env=env)
    assert out.returncode == 0, out.stderr
    assert box.manifest(run)["files"][0]["sha256"] == _sha((box.work / "ck/a.pt").read_bytes())
    req = json.dumps([{"path": "ck/a.pt", "offset": 0}]).encode()
    out = subprocess.run([py38, "-S", str(box.home / "rgt-agent.pyz"), "pull-stream", run], input=req,
                         capture_output=True, env=env)
    assert out.returncode == 0, out.stderr
    head, _, rest = out.stdout.partition(b"\n")
    assert json.loads(head)["bytes"] == 300_000 and rest[:300_000] == (box.work / "ck/a.pt").read_bytes()


def test_hidden_paths_are_skipped_once_each_so_the_rest_still_pulls(box):
    box.write("out/.hydra/config.yaml", "a: 1")
    box.write("out/.hydra/hydra.yaml", "b: 2")
    box.write(".git/hooks/post-commit", "#!/bin/sh\nid\n")
    box.write("out/model.pt", "w")
    run = box.run("r1", ["**"], [])
    assert box.agent("manifest", run).returncode == 0
    m = box.manifest(run)
    assert [f["path"] for f in m["files"]] == ["out/model.pt"]
    assert sorted(s["path"] for s in m["skipped"]) == [".git", "out/.hydra"]
    assert all(s["reason"].startswith("hidden") for s in m["skipped"])
