"""`rgt-client report` over the real sshd: one ssh round trip, errors as Error + Hint."""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.client.conftest import needs_daemon, stop_daemon, wait_for
from tests.report.htmlcheck import offline_problems
from tests.sshd import counting_ssh

pytestmark = [pytest.mark.ssh, pytest.mark.slow, needs_daemon]


@pytest.fixture
def sshbox(rgt, tmp_path, client_config):
    home, work = tmp_path / "box home", tmp_path / "work"
    work.mkdir()
    res = rgt("install", "rgt-box", "--home", str(home), "--sample-every", "1s")
    assert res.exit_code == 0, res.output
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"name": "r1", "workdir": str(work), "stage": [
        {"name": "train", "run": "%s -c 'print(\"loss=0.5\")'" % sys.executable,
         "metrics_pattern": "loss=(?P<loss>[0-9.]+)"}]}))
    assert rgt("run", "rgt-box", str(job), "--home", str(home)).exit_code == 0
    wait_for(lambda: json.loads((home / "runs" / "r1" / "state.json").read_text()).get("state") == "succeeded"
             if (home / "runs" / "r1" / "state.json").exists() else False, 60)
    yield home
    stop_daemon(home)


def test_report_over_ssh_is_one_round_trip(rgt, sshbox, tmp_path):
    count = tmp_path / "count"
    path = "%s:%s" % (counting_ssh(tmp_path / "bin", count), os.environ["PATH"])
    out = tmp_path / "r1.html"
    res = rgt("report", "rgt-box", "r1", "--home", str(sshbox), "-o", str(out), env={"PATH": path})
    assert res.exit_code == 0, res.output
    assert count.read_text().count("x") == 1
    html = out.read_text()
    assert offline_problems(html) == []
    assert "Run r1" in html and 'class="badge st-succeeded"' in html and "stage train started" in html


def test_an_unknown_run_names_the_runs_there(rgt, sshbox, tmp_path):
    res = rgt("report", "rgt-box", "nope", "--home", str(sshbox), "-o", str(tmp_path / "x.html"))
    assert res.exit_code == 2
    assert "Error: no run 'nope' on rgt-box" in res.stderr and "Hint: runs on rgt-box: r1" in res.stderr
    assert not (tmp_path / "x.html").exists() and "Traceback" not in res.output


def test_the_default_file_name_is_safe(rgt, sshbox, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = rgt("report", "rgt-box", "r1", "--home", str(sshbox))
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(tmp_path / "rgt-report-rgt-box-r1.html")
