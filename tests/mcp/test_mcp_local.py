"""Against a real `local` box (a real daemon): an agent's whole flow through the SDK's client,
from submit to a verified pull and a report, with one failure fixed and resumed; the wait
returning within a second of a stage's end and timing out at its bound; cursors giving each
event once, across a restart of the server; no secret in any result."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import iso_ts, mcp_server

pytestmark = pytest.mark.slow
HF = "hf_" + "Q" * 30                       # shaped like a Hugging Face token
JOB_SECRET = "wandb-S3CRET-value-123"
JOB = '''
name = "%(name)s"
workdir = %(workdir)s
[env]
WANDB_API_KEY = "%(secret)s"
[[stage]]
name = "train"
run = "sleep 1.5; printf '10%%%%\\r50%%%%\\r100%%%%\\n'; echo HF_TOKEN=plain-S3CRET-value; mkdir -p ckpt; echo weights > ckpt/best.pt"
expect = ["ckpt/best.pt"]
[[stage]]
name = "eval"
run = "echo key=$WANDB_API_KEY; echo token %(hf)s; test -f fixed || { echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1; }; echo eval-ok > metrics.txt"
expect = ["metrics.txt"]
[[stage]]
name = "aggregate"
run = "cat metrics.txt"
[artifacts]
include = ["ckpt/best.pt", "metrics.txt"]
'''


def job_text(box, name: str) -> str:
    return JOB % {"name": name, "workdir": json.dumps(str(box.work)), "secret": JOB_SECRET, "hf": HF}


class Watcher:
    """An agent's loop: wait_for_change with the last cursor until an event of a type came."""

    def __init__(self, m, run: str, cursor: str):
        self.m, self.run, self.cursor = m, run, cursor
        self.events: list[dict] = []
        self.last: dict = {}

    async def until(self, want: str, rounds: int = 6):
        for _ in range(rounds):
            hit = next((e for e in self.events if e["type"] == want), None)
            if hit:
                self.events = self.events[self.events.index(hit) + 1:]
                return hit, self.back
            w = await self.m.ok("wait_for_change", host="local", run=self.run, cursor=self.cursor, timeout_s=20)
            self.back = time.time()
            self.cursor, self.last = w.get("cursor") or self.cursor, w
            self.events += w["events"]
        raise AssertionError("no %s event" % want)


def test_submit_fail_fix_resume_pull_verified_report(local_box):
    env = dict(local_box.env, HF_TOKEN=HF, RGT_DATA_HOME=str(local_box.base / "data"))
    progress: list[tuple] = []

    async def on_progress(p, t, msg):
        progress.append((p, t, msg))

    async def main():
        async with mcp_server("local", env) as m:
            sub = await m.ok("submit_job", host="local", job=job_text(local_box, "flow"))
            assert sub["run"] == "flow" and sub["state"] in ("queued", "running") and sub["cursor"]
            assert "wait_for_change" in sub["next"]
            watch = Watcher(m, "flow", sub["cursor"])
            ended, back = await watch.until("stage_succeeded")
            assert ended["stage"] == "train"
            assert back - iso_ts(ended["at"]) < 1.0, "the stage's end reached the model %.2fs late" % (
                back - iso_ts(ended["at"]))
            await watch.until("run_failed")
            assert watch.last["summary"]["runs"][0]["state"] == "failed"
            assert "resume" in watch.last["next"]
            d = await m.ok("diagnose", host="local", run="flow")
            assert d["state"] == "failed" and d["failed_stage"] == "eval"
            assert d["cause"]["class"] == "cuda_oom" and d["cause"]["remediation"] and d["cause"]["decided_by"]
            if d["confidence"] != "high":
                bundle = d["evidence_bundle"]
                assert bundle["log_windows"] and any("CUDA out of memory" in ln for w_ in bundle["log_windows"]
                                                     for ln in w_["lines"])
                assert bundle["facts_at_stage_end"]["type"] == "stage_failed"
            bar = await m.ok("read_logs", host="local", run="flow", stage="train")
            assert [ln["text"] for ln in bar["lines"]] == ["100%", "HF_TOKEN=[redacted]"]     # redraws folded
            logs = await m.ok("read_logs", host="local", run="flow", stage="eval", grep="cuda")
            assert logs["matched"] == 1 and "CUDA out of memory" in logs["lines"][0]["text"]
            (local_box.work / "fixed").write_text("yes\n")
            res = await m.ok("resume_run", host="local", run="flow")
            assert res["done"] and res["cursor"]
            watch = Watcher(m, "flow", res["cursor"])
            await watch.until("run_succeeded")
            st = await m.ok("get_status", host="local", run="flow")
            assert st["runs"][0]["state"] == "succeeded" and "pull" in st["next"]
            d = await m.ok("diagnose", host="local", run="flow")
            assert d["artifacts_verified"] is False
            pulled = await m.call("pull_artifacts", host="local", run="flow", dest="pulled",
                                  progress=on_progress)
            p = pulled.structured_content
            assert not pulled.is_error and p["verified"] is True and p["safe_to_tear_down"] is True
            assert p["files"] == 2 and "Nothing to tear down" in p["teardown"] or "Safe to tear down" in p["teardown"]
            assert p["dest"].startswith(str(local_box.base / "data" / "mcp-pulls")) and p["dest"].endswith("/local/flow-pulled")
            assert (Path(p["dest"]) / "ckpt" / "best.pt").read_text() == "weights\n"
            d = await m.ok("diagnose", host="local", run="flow")
            assert d["artifacts_verified"] is True
            rep = await m.ok("make_report", host="local", run="flow", out="reports/flow.html")
            html = Path(rep["path"])
            assert rep["path"].startswith(str(local_box.base / "data" / "reports")) and rep["path"].endswith("/reports/flow.html")
            assert html.stat().st_size > 1000
            again = await m.ok("submit_job", host="local", job=job_text(local_box, "flow"))
            assert again["duplicate"] is True
            # 11 calls above, and at least one wait per watcher (more when an event comes later)
            assert await m.check_output_schemas() >= 13
            assert progress and progress[-1][0] == progress[-1][1], progress     # the pull's bytes
            everything = m.text()
            for secret in (HF, JOB_SECRET, "plain-S3CRET-value"):
                assert secret not in everything
            assert "[redacted]" in everything          # the token the job printed was there, and hidden
    anyio.run(main)


def test_wait_times_out_at_its_bound_with_the_summary(local_box):
    async def main():
        async with mcp_server("local", local_box.env) as m:
            st = await m.ok("get_status", host="local")
            seen: list[float] = []

            async def on_progress(p, t, msg):
                seen.append(p)
            t0 = time.monotonic()
            res = await m.call("wait_for_change", host="local", run="nothing-here", cursor=st["cursor"],
                               timeout_s=6, progress=on_progress)
            took = time.monotonic() - t0
            w = res.structured_content
            assert w["timed_out"] is True and w["events"] == [] and w["cursor"] == st["cursor"]
            assert 6.0 <= took < 9.0, took
            assert "again" in w["next"] and "no run nothing-here" in w["note"]
            assert seen, "no progress notification while waiting"
    anyio.run(main)


def test_cursors_give_each_event_once_across_a_server_restart(local_box):
    async def main():
        async with mcp_server("local", local_box.env) as m:
            cursor = (await m.ok("get_status", host="local"))["cursor"]
            job = ('name = "cur"\nworkdir = %s\n[[stage]]\nname = "a"\nrun = "sleep 0.5"\n[[stage]]\nname = "b"\n'
                   'run = "sleep 0.5"\n[[stage]]\nname = "c"\nrun = "sleep 0.5"\n' % json.dumps(str(local_box.work)))
            await m.ok("submit_job", host="local", job=job)
            first = await m.ok("wait_for_change", host="local", run="cur", cursor=cursor, timeout_s=10)
        got = list(first["events"])
        cursor = first["cursor"]
        for _ in range(8):            # a new server each time: only the cursor carries over
            async with mcp_server("local", local_box.env) as m:
                w = await m.ok("wait_for_change", host="local", run="cur", cursor=cursor, timeout_s=3)
            got += w["events"]
            cursor = w["cursor"]
            if any(e["type"] == "run_succeeded" for e in got):
                break
        ids = [e["id"] for e in got]
        assert len(ids) == len(set(ids)), "an event came twice"
        on_box = [e["id"] for e in local_box.events() if e.get("run") == "cur"]
        assert ids == on_box[:len(ids)] and "run_succeeded" in {e["type"] for e in got}
    anyio.run(main)


def test_status_and_logs_resources(local_box):
    async def main():
        async with mcp_server("local", local_box.env) as m:
            res = await m.session.read_resource("rgt://status/local")
            doc = json.loads(res.contents[0].text)
            assert doc["host"] == "local" and doc["agent"]["running"] is True
            with pytest.raises(Exception):
                await m.session.read_resource("rgt://status/gpu7")
            job = 'name = "res"\nworkdir = %s\n[[stage]]\nname = "a"\nrun = "echo resource-line"\n' % json.dumps(
                str(local_box.work))
            sub = await m.ok("submit_job", host="local", job=job)
            await Watcher(m, "res", sub["cursor"]).until("run_succeeded")
            res = await m.session.read_resource("rgt://logs/local/res")
            assert [ln["text"] for ln in json.loads(res.contents[0].text)["lines"]] == ["resource-line"]
    anyio.run(main)


def test_the_server_keeps_no_state_a_restart_needs(local_box):
    """The cursor is the caller's: the server writes nothing in the client's config dir."""
    before = sorted(os.listdir(local_box.config)) if local_box.config.exists() else []

    async def main():
        async with mcp_server("local", local_box.env) as m:
            await m.ok("wait_for_change", host="local", timeout_s=1)
    anyio.run(main)
    after = sorted(os.listdir(local_box.config)) if local_box.config.exists() else []
    assert before == after
