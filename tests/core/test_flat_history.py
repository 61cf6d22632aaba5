"""Flat in history: status.json holds the active runs and a recent tail of ended ones (with counts
of the rest); older runs are served from their own files on demand (`status --all`, `--run`);
the daemon lets go of ended runs past the tail but brings one back when a request names it; a
sweep's `group_finished` still counts its runs the daemon let go of; patrol's line stays short.
(The idle CPU and RSS at 0 / 2,000 / 20,000 ended runs: bench/scale_history.py.)"""
from __future__ import annotations

import copy
import json
from types import SimpleNamespace

from boxagent.engine import retire
from boxagent.engine.requests import group_end
from boxagent.wire.status import RECENT_ENDED
from rgt_client.status.fetch import HostStatus
from rgt_client.status.poll import patrol_verdict
from rgt_client.status.render_poll import patrol_detail
from tests.client.test_render import BASE
from tests.realbox import job, wait_for

OLD = 300


def _history(box, n=OLD, state="succeeded"):
    """n ended runs made directly from one real run's files (not n jobs run)."""
    assert box.submit(job("tpl", box.workdir, {"name": "s", "run": "true"})).returncode == 0
    box.start()
    box.wait_run("tpl")
    assert box.agent("stop").returncode == 0
    tpl = box.home / "runs" / "tpl"
    st, spec = json.loads((tpl / "state.json").read_text()), json.loads((tpl / "spec.json").read_text())
    for i in range(n):
        d = box.home / "runs" / ("old-%04d" % i)
        d.mkdir()
        (d / "state.json").write_text(json.dumps(dict(st, name=d.name, seq=i + 2, state=state)))
        (d / "spec.json").write_text(json.dumps(dict(spec, name=d.name)))


def test_status_json_holds_the_active_runs_and_a_recent_tail_with_counts(box):
    _history(box)
    box.start()
    assert box.submit(job("live", box.workdir, {"name": "s", "run": "sleep 30"})).returncode == 0
    box.wait_stage("live", "s", "running")
    status = wait_for(lambda: (lambda st: st if "live" in [r["name"] for r in st.get("runs") or []] else None)(
        box.status_file()), 10, "status.json with the live run")
    names = [r["name"] for r in status["runs"]]
    assert "live" in names and len(names) == RECENT_ENDED + 1
    assert status["runs_summary"]["total"] == OLD + 2
    assert status["runs_summary"]["ended_not_shown"] == OLD + 1 - RECENT_ENDED
    every = json.loads(box.agent("status", "--json", "--all").stdout)
    assert len(every["runs"]) == OLD + 2
    one = json.loads(box.agent("status", "--json", "--run", "old-0001").stdout)
    assert [r["name"] for r in one["runs"]] == ["old-0001"]


def test_a_run_the_daemon_let_go_of_comes_back_for_resume_and_a_submit_under_its_name(box):
    _history(box, state="failed")
    box.start()
    out = box.agent("resume", "old-0003")
    assert out.returncode == 0, out.stderr
    assert box.wait_run("old-0003")["state"] == "succeeded"
    other = job("old-0004", box.workdir, {"name": "different", "run": "true"})
    out = box.submit(other)
    assert out.returncode == 2 and "already exists" in out.stderr


def _run(name, group, state, seq):
    return SimpleNamespace(name=name, group=group, state=state, cause={"class": "crashed"}, seq=seq)


def test_group_finished_counts_the_sweeps_runs_the_daemon_let_go_of():
    gone = retire.Retired()
    for i in range(1, 991):
        gone.add(_run("abl-%d" % i, "abl", "failed" if i in (5, 6) else "succeeded", i))
    last = [_run("abl-%d" % i, "abl", "succeeded", i) for i in range(991, 1001)]
    sched = SimpleNamespace(runs={r.name: r for r in last}, retired=gone)
    [ev] = group_end(sched.runs, sched.retired, last[-1])
    assert ev["runs"] == 1000 and ev["succeeded"] == 998
    assert ev["summary"].startswith("sweep abl finished: 998 of 1000 succeeded; not: abl-5 (crashed), abl-6")


def test_patrols_line_stays_one_short_line_with_200_queued_runs():
    status = copy.deepcopy(BASE)
    status["runs"] = [{"name": "sweep-%d" % i, "state": "queued", "stages": []} for i in range(200)]
    status["runs"][0]["state"] = "running"
    line = patrol_detail(patrol_verdict(HostStatus(target=None, status=status), 3600.0), "box")
    assert "\n" not in line and len(line) < 300, line
    assert "+197 more (197 queued)" in line
