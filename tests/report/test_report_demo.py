"""`rgt-client demo` ends with the run's report: a file path people can open."""
from __future__ import annotations

import re

import pytest

from tests.client.conftest import needs_daemon, stop_daemon
from tests.report.htmlcheck import offline_problems

pytestmark = [needs_daemon, pytest.mark.slow]


def test_the_demo_writes_the_runs_report(rgt_local, tmp_path, client_config):
    base = tmp_path / "demo"
    try:
        res = rgt_local("demo", "--dir", str(base), "--epochs", "2")
    finally:
        stop_daemon(base / "box-home")
    assert res.exit_code == 0, res.output
    m = re.search(r"the run's report \(.*\): (\S+report\.html)", res.stdout)
    assert m, res.stdout
    html = (base / "report.html").read_text()
    assert m.group(1) == str(base / "report.html")
    assert offline_problems(html) == []
    assert "Run demo" in html and "st-succeeded" in html and "stage timeline" in html
    assert "3 files" in html                      # the verified pull the demo made is in it
