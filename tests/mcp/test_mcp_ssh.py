"""Over the real loopback sshd with the real agent: install_agent (a price, a notifier with a
secret), submit, the wait within a second of a stage's end over ssh, logs, cancel; no secret in
any result."""
from __future__ import annotations

import json
import os
import time

import anyio
import pytest

from rgt_client import hosts
from tests.mcp.conftest import FAST_ENV, iso_ts, mcp_server, stop_daemon

pytestmark = [pytest.mark.ssh, pytest.mark.slow]
SECRET = "hmac-S3CRET-mcp-do-not-leak"


def remember_home(config, alias: str, home) -> None:
    old = os.environ.get("RGT_CLIENT_CONFIG_DIR")
    os.environ["RGT_CLIENT_CONFIG_DIR"] = str(config)
    try:
        hosts.remember(alias, home=str(home))
    finally:
        if old is None:
            os.environ.pop("RGT_CLIENT_CONFIG_DIR")
        else:
            os.environ["RGT_CLIENT_CONFIG_DIR"] = old


def test_install_submit_wait_logs_cancel_over_ssh(sshd, tmp_path):
    home, work, config = tmp_path / "ssh box home", tmp_path / "work", tmp_path / "client-config"
    work.mkdir()
    remember_home(config, "rgt-box", home)
    notify = tmp_path / "notify.toml"
    notify.write_text('[[notify]]\nurl = "http://127.0.0.1:9/hook"\nformat = "json"\nsecret = "%s"\n' % SECRET)
    env = dict(os.environ, RGT_CLIENT_CONFIG_DIR=str(config), TEST_CWD=str(tmp_path), **FAST_ENV)
    env.pop("RGT_HOME", None)
    job = ('name = "s1"\nworkdir = %s\n[[stage]]\nname = "a"\nrun = "sleep 2; echo a-done"\n'
           '[[stage]]\nname = "b"\nrun = "echo b-start; sleep 600"\n' % json.dumps(str(work)))

    async def main():
        async with mcp_server("rgt-box", env, ssh_config=sshd.config) as m:
            inst = await m.ok("install_agent", host="rgt-box", price="2.5", notify=str(notify))
            assert inst["installed"] is True and "submit_job" in inst["next"]
            sub = await m.ok("submit_job", host="rgt-box", job=job)
            ended = None
            cursor = sub["cursor"]
            for _ in range(5):
                w = await m.ok("wait_for_change", host="rgt-box", run="s1", cursor=cursor, timeout_s=20)
                back, cursor = time.time(), w["cursor"]
                ended = next((e for e in w["events"] if e["type"] == "stage_succeeded"), None)
                if ended:
                    break
            assert ended is not None and ended["stage"] == "a"
            assert back - iso_ts(ended["at"]) < 1.0, back - iso_ts(ended["at"])
            logs = await m.ok("read_logs", host="rgt-box", run="s1", stage="a")
            assert [ln["text"] for ln in logs["lines"]] == ["a-done"]
            st = await m.ok("get_status", host="rgt-box", run="s1")
            assert st["runs"][0]["state"] == "running" and st["cost"]["price_per_hour"] == 2.5
            c = await m.ok("cancel_run", host="rgt-box", run="s1")
            assert c["done"] is True
            w = await m.ok("wait_for_change", host="rgt-box", run="s1", cursor=c["cursor"], timeout_s=20)
            assert "run_cancelled" in {e["type"] for e in w["events"]}
            assert SECRET not in m.text()
    try:
        anyio.run(main)
    finally:
        stop_daemon(home)
