"""The server as a client sees it: its tools, their schemas and annotations, its instructions and
resources; bad input as isError results with the CLI's Error:/Hint:; the host allow-list and
--read-only; and the Error/Hint when the SDK is missing. No box is needed for these."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest

from tests.mcp.conftest import mcp_server, server_argv

pytestmark = pytest.mark.slow        # each test starts the server: a few seconds on a loaded machine
READ_TOOLS = {"list_hosts", "get_status", "wait_for_change", "read_logs", "diagnose", "explain_platform"}
ACT_TOOLS = {"submit_job", "cancel_run", "resume_run", "install_agent", "pull_artifacts", "make_report"}


def env_for(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ, RGT_HOME=str(tmp_path / "no-box"), RGT_CLIENT_CONFIG_DIR=str(tmp_path / "cc"),
             TEST_CWD=str(tmp_path))
    e.pop("RGT_SSH_CONFIG", None)
    return e


def test_every_tool_has_input_and_output_schemas_and_annotations(tmp_path):
    async def main():
        async with mcp_server("gpu1,local", env_for(tmp_path)) as m:
            tools = {t.name: t for t in (await m.session.list_tools()).tools}
            assert set(tools) == READ_TOOLS | ACT_TOOLS
            for name, t in tools.items():
                assert name.islower() and " " not in name
                assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object", name
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
                assert t.description and t.annotations is not None, name
                assert t.annotations.read_only_hint is (name in READ_TOOLS), name
            assert tools["cancel_run"].annotations.destructive_hint is True
            assert tools["cancel_run"].annotations.idempotent_hint is False
            assert tools["get_status"].annotations.idempotent_hint is True
            assert tools["wait_for_change"].input_schema["properties"]["timeout_s"]["maximum"] == 50
            assert tools["read_logs"].input_schema["properties"]["lines"]["maximum"] == 500
            ins = m.init.instructions
            assert "wait_for_change" in ins and "verified" in ins and "Never destroy" in ins and "Cost" in ins
            templates = {t.uri_template for t in (await m.session.list_resource_templates()).resource_templates}
            assert templates == {"rgt://status/{host}", "rgt://logs/{host}/{run}"}
    anyio.run(main)


def test_read_only_exposes_only_the_read_tools(tmp_path):
    async def main():
        async with mcp_server("local", env_for(tmp_path), "--read-only") as m:
            tools = {t.name for t in (await m.session.list_tools()).tools}
            assert tools == READ_TOOLS
            res = await m.call("cancel_run", host="local", run="r1")
            assert res.is_error
            hosts = await m.ok("list_hosts")
            assert hosts == {"hosts": [{"host": "local", "status_tool": "get_status"}], "read_only": True}
    anyio.run(main)


def test_a_host_off_the_allow_list_is_refused_before_any_ssh(tmp_path):
    ssh_log = tmp_path / "ssh.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text("#!/bin/sh\necho \"$@\" >> '%s'\nexit 255\n" % ssh_log)
    (bin_dir / "ssh").chmod(0o755)
    env = dict(env_for(tmp_path), PATH="%s:%s" % (bin_dir, os.environ["PATH"]))

    async def main():
        async with mcp_server("gpu1", env) as m:
            for tool, args in (("get_status", {}), ("wait_for_change", {"timeout_s": 1}),
                               ("read_logs", {"run": "r"}), ("diagnose", {"run": "r"}),
                               ("submit_job", {"job": "name='a'"}), ("cancel_run", {"run": "r"}),
                               ("pull_artifacts", {"run": "r"}), ("install_agent", {})):
                for host in ("gpu2", "local", "evil.example.com", "-oProxyCommand=touch x"):
                    res = await m.call(tool, host=host, **args)
                    assert res.is_error, (tool, host)
                    text = res.content[0].text
                    assert text.startswith("Error: ") and "\nHint: " in text, text
            res = await m.call("get_status", host="gpu2")
            assert "allow-list" in res.content[0].text and res.structured_content["exit_code"] == 2
    anyio.run(main)
    assert not ssh_log.exists()


def test_bad_input_is_an_error_result_with_error_and_hint(tmp_path):
    async def main():
        async with mcp_server("local", env_for(tmp_path)) as m:
            res = await m.call("submit_job", host="local", job="name = 'x'\n[[stage]]\nnme = 'a'\n")
            text = res.content[0].text
            assert res.is_error and text.startswith("Error: job: ") and "stage[0].nme: unknown key" in text
            assert "\nHint: " in text and "/tmp" not in text.split("\n")[0]
            res = await m.call("submit_job", host="local", job="this is [ not toml")
            assert res.is_error and "not valid TOML" in res.content[0].text
            res = await m.call("submit_job", host="local", job=str(tmp_path / "missing.toml"))
            assert res.is_error and "cannot read" in res.content[0].text
            res = await m.call("wait_for_change", host="local", timeout_s=51)
            assert res.is_error and "timeout_s" in res.content[0].text
            res = await m.call("read_logs", host="local", run="r", lines=501)
            assert res.is_error
            res = await m.call("explain_platform", profile="no-such-platform")
            assert res.is_error and res.content[0].text.startswith("Error: ")
            for dest in ("/etc/rgt", "~/.ssh", ".git/hooks", "../outside", ".", "pulled/r"):
                res = await m.call("pull_artifacts", host="local", run="r", dest=dest)
                assert res.is_error and "expected one plain word" in res.content[0].text, dest
            for out in ("/tmp/x.html", ".git/hooks/post-commit", "report.sh"):
                res = await m.call("make_report", host="local", run="r", out=out)
                assert res.is_error and res.content[0].text.startswith("Error: report file"), out
            res = await m.call("get_status", host="local")        # no agent in that home
            assert res.is_error and "Hint: " in res.content[0].text
    anyio.run(main)


def test_explain_platform_says_what_each_verb_destroys(tmp_path):
    async def main():
        async with mcp_server("local", env_for(tmp_path)) as m:
            p = await m.ok("explain_platform", profile="runpod")
            verbs = {v["name"]: v for v in p["teardown"]}
            assert verbs["terminate"]["irreversible"] is True and verbs["terminate"]["destroys"]
            assert p["checkpoints"] and "Stop verbs" in p["text"]
            names = (await m.ok("explain_platform", profile="list"))["profiles"]
            assert "runpod" in names and "local" in names
    anyio.run(main)


def test_without_the_sdk_mcp_says_error_and_hint_with_the_install_line(tmp_path):
    fake = tmp_path / "nosdk" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mcp (test: SDK absent)')\n")
    env = dict(env_for(tmp_path), PYTHONPATH=str(fake.parent))
    proc = subprocess.run(server_argv("gpu1"), env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("Error: the MCP server needs the `mcp` Python SDK")
    hint = proc.stderr.splitlines()[1]
    assert hint.startswith("Hint: ") and "-m pip install" in hint and "[mcp]" in hint
    assert "Traceback" not in proc.stderr


def test_no_host_named_is_an_error_not_a_server_that_refuses_everything(tmp_path):
    argv = server_argv("x")[:-2]
    proc = subprocess.run(argv, env=env_for(tmp_path), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: no host allowed")
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("# my boxes\ngpu1\n")
    proc = subprocess.run(argv + ["--hosts-file", str(tmp_path / "nope.txt")], env=env_for(tmp_path),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "Hint: " in proc.stderr


def test_hosts_file_is_an_allow_list(tmp_path):
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("# my boxes\ngpu1\ngpu2  # the second\n")
    argv = server_argv("x")[:-2] + ["--hosts-file", str(hosts_file)]

    async def main():
        from mcp.client import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env_for(tmp_path))
        with open(os.devnull, "w") as err:
            async with stdio_client(params, errlog=err) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    res = await s.call_tool("list_hosts", {})
                    assert [h["host"] for h in res.structured_content["hosts"]] == ["gpu1", "gpu2"]
                    res = await s.call_tool("get_status", {"host": "local"})
                    assert res.is_error
    anyio.run(main)


@pytest.mark.skipif(sys.platform != "linux", reason="linux paths")
def test_the_install_line_names_this_checkout():
    from rgt_client.mcp.cmd import install_line
    line = install_line()
    assert line.startswith(sys.executable) and "[mcp]" in line
