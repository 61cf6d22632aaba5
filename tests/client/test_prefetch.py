"""prefetch: `status` starts its ssh calls before click is imported, and the command takes the
call already under way. Still exactly one ssh call per host; a head start the command does not
take is killed at exit; any command line it does not fully understand starts nothing."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
import time

import pytest

from rgt_client.status import prefetch
from tests.client.conftest import wait_for
from tests.hostile import pause, run_argv
from tests.sshd import counting_ssh

ENTRY = [sys.executable, "-c", "import sys; from rgt_client.entry import main; sys.argv[0] = 'rgt-client'; main()"]
STATUS = {"schema": "rgt.status/1", "agent": {"version": "0.1.0", "pid": 7, "running": True, "state": "running",
                                              "heartbeat_age_s": 1}, "runs": []}


@pytest.mark.parametrize("argv, parsed", [
    (["status", "h1", "h2"], (None, {}, ["h1", "h2"])),
    (["--ssh-config", "c", "--debug", "status", "h", "--json", "--run=r1", "--events", "3", "--home", "/x y"],
     ("c", {"as_json": "", "run": "r1", "events": "3", "home": "/x y"}, ["h"])),
    (["status"], None), (["logs", "h", "r"], None), (["status", "h", "--bogus"], None), (["status", "h", "-h"], None),
    (["status", "h", "--events", "x"], None), (["status", "h", "--run"], None), (["--version"], None), ([], None),
])
def test_only_a_plain_status_command_line_gets_a_head_start(argv, parsed, monkeypatch):
    monkeypatch.delenv("RGT_SSH_CONFIG", raising=False)
    assert prefetch._parse(argv) == parsed


@pytest.mark.ssh
def test_status_from_the_console_script_is_one_ssh_call_taken_from_the_head_start(hostile, sshd, tmp_path):
    hostile.answer("status", stdout=STATUS)
    count = tmp_path / "count"
    env = {"PATH": "%s:%s" % (counting_ssh(tmp_path / "bin", count), os.environ["PATH"])}
    res = run_argv(ENTRY + ["--ssh-config", str(sshd.config), "status", "rgt-box"] + hostile.args(), env=env)
    assert res.rc == 0, res.err_text
    assert res.text.startswith("rgt-box · profile - · agent 0.1.0 (pid 7, heartbeat 1s ago)")
    assert count.read_text().count("x") == 1
    assert [c["argv"] for c in hostile.calls("status")] == [["status", "--json", "--events", "0"]]


@pytest.mark.ssh
def test_status_ended_at_once_keeps_its_answer_and_exit_code(hostile, sshd, tmp_path):
    """The console script ends a status without Python's teardown: the whole --json answer is
    still out, and the agent's "daemon down" is still exit 3."""
    down = dict(STATUS, agent=dict(STATUS["agent"], running=False, state="stopped"),
                runs=[{"name": "r%d" % i, "state": "succeeded", "stages": []} for i in range(300)])
    hostile.answer("status", stdout=down, rc=3)
    res = run_argv(ENTRY + ["--ssh-config", str(sshd.config), "status", "rgt-box", "--json"] + hostile.args())
    assert res.rc == 3, res.err_text
    got = json.loads(res.text)
    assert [r["name"] for r in got["runs"]] == ["r%d" % i for i in range(300)]
    assert got["client"]["exit_code"] == 3


@pytest.mark.ssh
def test_a_run_name_that_is_not_one_is_an_error_from_the_console_script_not_a_traceback(hostile, sshd):
    """The head start builds the agent's arguments too, and their name check raised before the
    command's own error handling: `status HOST --run a/b` printed a traceback."""
    res = run_argv(ENTRY + ["--ssh-config", str(sshd.config), "status", "rgt-box", "--run", "a/b"] + hostile.args())
    assert res.rc == 2, res.err_text
    assert "Traceback" not in res.err_text
    assert "Error: 'a/b' is not a run name" in res.err_text and "Hint:" in res.err_text
    assert hostile.calls("status") == []          # nothing reached the box


@pytest.mark.ssh
def test_a_head_start_the_command_does_not_take_is_killed_at_exit(hostile, sshd):
    hostile.answer("status", stdout=[pause(30)])
    code = ("import time; from rgt_client.status import prefetch; prefetch.start(['--ssh-config', %r, 'status', "
            "'rgt-box', '--home', %r]); time.sleep(3)" % (str(sshd.config), str(hostile.home)))
    t0 = time.monotonic()
    res = run_argv([sys.executable, "-c", code])
    assert res.rc == 0 and time.monotonic() - t0 < 13
    wait_for(lambda: hostile.calls("status"), 10)     # it had started: the box saw the call


def test_what_runs_before_the_ssh_call_imports_only_what_it_needs(tmp_path):
    """Every millisecond before the head start's ssh call adds to a first `status` (goal: 1.05x
    `ssh true`). Measured there once: typing and tempfile ~6 ms CPU (needed only for annotations
    and the /tmp fallback); pathlib 2.5 ms (urllib.parse, ipaddress); subprocess (locale, re,
    threading, signal, selectors) the largest of all, for one fork and exec; re 4 ms (shlex.quote,
    the hint rules, the ssh config's keywords); json for hosts.json; glob (re, fnmatch, contextlib)
    for Debian's `Include /etc/ssh/ssh_config.d/*.conf`. The call is started all the same, reading
    hosts.json and an Include. Bare python (-S): a wheel install has no dev checkout's import hooks."""
    import subprocess
    from tests.realbox import REPO
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "10-far.conf").write_text("Host h\n  HostName 127.0.0.1\n  Port 9\n")
    (tmp_path / "ssh_config").write_text("Include %s/conf.d/*.conf\nHost *\n  BatchMode yes\n" % tmp_path)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "hosts.json").write_text('{"hosts": {"h": {"home": "/box/rgt", "python": "python3"}}}')
    heavy = ("typing", "tempfile", "pathlib", "subprocess", "re", "json", "enum", "contextlib", "glob", "shlex",
             "selectors", "threading", "locale")
    code = ("import sys; sys.path.insert(0, sys.argv[1]);"
            "from rgt_client.status import prefetch; from rgt_client.box import transport;"
            "started = prefetch.start(['--ssh-config', sys.argv[2], 'status', 'h']);"
            "(argv, env), = transport._EARLY; "
            "print(started, '/box/rgt' in argv[-1], ' '.join(sorted(m for m in %r if m in sys.modules)))" % (heavy,))
    (tmp_path / "run").mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path / "run"), RGT_CLIENT_CONFIG_DIR=str(tmp_path / "cfg"))
    res = subprocess.run([sys.executable, "-S", "-c", code, str(REPO), str(tmp_path / "ssh_config")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True"], res.stdout


def test_the_installed_launcher_starts_the_client_before_importing_re():
    """pip's console-script launcher imports re first (6 ms of every command's start, before
    `status` could start its ssh call); ours (bin/rgt-client, pyproject's script-files) does not.
    importtime lists a module when its import ends: rgt_client.entry (which starts the call) ends
    before re is first imported. Without site (-S): an editable install's finder imports re there."""
    import subprocess
    import sysconfig
    launcher = Path(sys.executable).parent / "rgt-client"
    if not launcher.exists():
        pytest.skip("no rgt-client next to %s (./install.sh --dev installs it)" % sys.executable)
    from tests.realbox import REPO
    res = subprocess.run([sys.executable, "-S", "-X", "importtime", str(launcher), "--version"], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [str(REPO), sysconfig.get_paths()["purelib"]])))
    assert res.returncode == 0, res.stderr
    done = [line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")]
    assert "rgt_client.entry" in done and "re" in done, done
    assert done.index("rgt_client.entry") < done.index("re"), done[:done.index("re") + 1]
