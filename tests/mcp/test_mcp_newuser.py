"""What a new user's agent met through MCP: the first wait after a resume woke on `stage_skipped`
alone (a call that said nothing new), `make_report` had no `next`, and a client that starts the
server with a minimal environment dropped RGT_SSH_CONFIG: `no host named farbox`, with a hint
that lacked any way to name the config. Real SDK client, real daemon, real sshd."""
from __future__ import annotations

import json
import os

import anyio
import pytest

from tests.mcp.conftest import mcp_server

pytestmark = pytest.mark.slow
FOLLOW_ONLY = {"run_queued", "run_started", "stage_skipped", "stage_started"}
JOB = '''
name = "again"
workdir = %s
[[stage]]
name = "prep"
run = "echo prepared > out.txt"
[[stage]]
name = "eval"
run = "sleep 0.5; test -f fixed"
[artifacts]
include = ["out.txt"]
'''


def test_the_first_wait_after_a_resume_brings_a_change_and_the_report_says_what_next(local_box):
    async def main():
        async with mcp_server("local", local_box.env) as m:
            sub = await m.ok("submit_job", host="local", job=JOB % json.dumps(str(local_box.work)))
            cursor = sub["cursor"]
            for _ in range(8):
                w = await m.ok("wait_for_change", host="local", run="again", cursor=cursor, timeout_s=20)
                cursor = w.get("cursor") or cursor
                if any(e["type"] == "run_failed" for e in w["events"]):
                    break
            else:
                raise AssertionError("the run never failed")
            (local_box.work / "fixed").write_text("yes\n")
            res = await m.ok("resume_run", host="local", run="again")
            first = await m.ok("wait_for_change", host="local", run="again", cursor=res["cursor"], timeout_s=20)
            kinds = {e["type"] for e in first["events"]}
            assert "stage_skipped" in kinds and not kinds <= FOLLOW_ONLY, first["events"]
            for _ in range(6):
                if any(e["type"] == "run_succeeded" for e in first["events"]):
                    break
                first = await m.ok("wait_for_change", host="local", run="again", cursor=first["cursor"],
                                   timeout_s=20)
            st = await m.ok("get_status", host="local", run="again")
            assert "pull_artifacts" in st["next"], st["next"]
            pulled = await m.ok("pull_artifacts", host="local", run="again", dest="pulled")
            assert pulled["verified"] is True
            st = await m.ok("get_status", host="local", run="again")
            assert st["next"].startswith("nothing to pull: a verified pull"), st["next"]    # it said "pull" again
            rep = await m.ok("make_report", host="local", run="again", out="reports/again.html")
            assert rep["next"] and "get_status" in rep["next"] and "rgt-client status local --run again" in rep["next"]
            assert await m.check_output_schemas() >= 8
    anyio.run(main)


@pytest.mark.ssh
def test_a_server_started_with_a_minimal_environment_takes_ssh_config_and_says_so(sshd, tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
           "RGT_CLIENT_CONFIG_DIR": str(tmp_path / "client-config"), "TEST_CWD": str(tmp_path)}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    async def main():
        async with mcp_server("rgt-box", env) as m:          # no RGT_SSH_CONFIG reaches it
            res = await m.call("get_status", host="rgt-box")
            text = res.content[0].text
            assert res.is_error and "no host named rgt-box" in text and "--ssh-config" in text, text
        async with mcp_server("rgt-box", env, "--ssh-config", str(sshd.config)) as m:
            res = await m.call("get_status", host="rgt-box")
            text = res.content[0].text
            assert "no host named" not in text and "not installed" in text, text
    anyio.run(main)
