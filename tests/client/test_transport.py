"""The ssh seam over a real sshd: quoting, unreachable hosts, missing python, missing agent."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.box.transport import Target, agent_command, run_python, ssh_argv
from tests.client.conftest import Cli
from tests.sshd import add_alias, free_port

pytestmark = pytest.mark.ssh

NASTY = ["it's", 'say "hi"', "$(touch PWNED)", "`touch PWNED2`", "a b\tc", "semi;colon|pipe&", "new\nline",
         "*", "~", "--flag", ""]


def test_ssh_argv_is_bounded_and_uses_the_config():
    argv = ssh_argv(Target("box", ssh_config="/x/cfg"), "true")
    assert argv[:3] == ["ssh", "-F", "/x/cfg"]
    for opt in ("BatchMode=yes", "ConnectTimeout=15", "ServerAliveInterval=10", "ServerAliveCountMax=3"):
        assert opt in argv
    assert argv[-2:] == ["--", "true"]


def test_nasty_words_travel_unchanged_over_ssh(sshd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home with space 'q' $(touch PWNED3)"
    t = Target("rgt-box", home=str(home), ssh_config=str(sshd.config))
    res = run_python(t, "import json, os, sys\nprint(json.dumps([os.environ['RGT_HOME']] + sys.argv[1:]))", NASTY)
    assert res.rc == 0, res.err
    assert json.loads(res.text) == [str(home)] + NASTY
    assert not list(tmp_path.glob("PWNED*")) and not list(Path.home().glob("PWNED*"))


def test_agent_command_quotes_every_word():
    line = agent_command(Target("box", home="/h $(x)"), ["status", "$(reboot)"])
    assert "'$(reboot)'" in line and "'/h $(x)'" in line


def test_unreachable_host_exits_5_within_the_connect_timeout(sshd, rgt, tmp_path):
    cfg = tmp_path / "ssh_config"
    add_alias(sshd, "dead-box", port=free_port(), config=cfg)
    t0 = time.monotonic()
    res = rgt("--ssh-config", str(cfg), "status", "dead-box")
    assert res.exit_code == exitcodes.UNREACHABLE, res.output
    assert time.monotonic() - t0 < 15
    assert "cannot reach dead-box" in res.output and "refused" in res.output.lower()


def test_unreachable_among_reachable_hosts_is_one_block_each(sshd, rgt, tmp_path, homes):
    cfg = tmp_path / "ssh_config"
    add_alias(sshd, "dead-box", port=free_port(), config=cfg)
    res = Cli()("status", "dead-box", "rgt-box", "--home", str(homes.new()), env={"RGT_SSH_CONFIG": str(cfg)})
    assert res.exit_code == exitcodes.UNREACHABLE
    # a host's error is a diagnostic: stderr, so stdout stays the data of the hosts that answered
    assert "dead-box · Error: cannot reach" in res.stderr
    assert "rgt-box · Error: the rgt agent is not installed" in res.stderr and res.stdout == ""


def test_no_python_on_the_box_hints_python(sshd, rgt, homes):
    res = rgt("install", "rgt-box", "--home", str(homes.new()), "--python", "/nonexistent/python3")
    assert res.exit_code == exitcodes.ERROR
    assert "has no /nonexistent/python3" in res.stderr and "--python" in res.stderr


def test_agent_not_installed_hints_install(sshd, rgt, homes):
    res = rgt("status", "rgt-box", "--home", str(homes.new()))
    assert res.exit_code == exitcodes.AGENT_DOWN
    assert "not installed" in res.stderr and "rgt-client install rgt-box" in res.stderr


def test_logs_of_a_box_without_agent_is_an_error_not_a_traceback(sshd, rgt, homes):
    res = rgt("logs", "rgt-box", "somerun", "--home", str(homes.new()))
    assert res.exit_code == exitcodes.AGENT_DOWN
    assert res.stderr.startswith("Error: the rgt agent is not installed")


def test_missing_ssh_binary_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClientError) as exc:
        run_python(Target("rgt-box"), "print(1)")
    assert "openssh-client" in (exc.value.hint or "")


def test_watch_tells_ssh_failed_from_run_failed_and_gives_up(sshd, rgt, tmp_path):
    cfg = tmp_path / "ssh_config"
    add_alias(sshd, "dead-box", port=free_port(), config=cfg)
    res = rgt("--ssh-config", str(cfg), "watch", "dead-box", "r1", "--every", "0.1s", "--max-wait", "0.35s")
    assert res.exit_code == exitcodes.GAVE_UP, res.output
    lines = res.stdout.splitlines()
    # one try, then a backoff of 1 s that --max-wait cuts short
    assert len(lines) >= 2 and all("ssh failed (the run is not affected)" in ln for ln in lines[:-1])
    assert "gave up" in lines[-1]
    # never a claim about a state it did not observe: the box never answered during the wait
    assert "never reached dead-box during the wait: the state of run r1 is unknown" in lines[-1]
    assert "still not finished" not in res.stdout


def test_only_status_runs_the_box_python_without_its_site_packages():
    """status reads files (stdlib only): -S spares it a conda site's .pth files; the commands that
    may use the box's packages (notify-test with apprise, probe with psutil) keep them."""
    from rgt_client.box.transport import Target, agent_command
    t = Target("box", python="/opt/conda/bin/python")
    assert "exec /opt/conda/bin/python -S \"$a\" status --json" in agent_command(t, ["status", "--json"])
    for args in (["notify-test"], ["probe", "--json"], ["submit", "-"]):
        assert " -S " not in agent_command(t, args), args
