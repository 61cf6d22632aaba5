"""The client's command table: every command is in COMMAND_MODULES under the module that
defines it (cli imports a module only when one of its commands runs), and `status` imports
none of the other commands' modules."""
from __future__ import annotations

import pytest

import importlib
import os
import subprocess
import sys

from rgt_client.cli import COMMAND_MODULES


def test_command_table_matches_the_modules():
    for module, names in COMMAND_MODULES.items():
        assert sorted(c.name for c in importlib.import_module(module).COMMANDS) == sorted(names), module


def test_status_imports_only_what_status_needs(tmp_path):
    """The whole command (a box without an agent: it still fetches, renders and exits 3)."""
    code = ("import sys, atexit; atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sys.modules)));"
            "from rgt_client.cli import main; sys.argv[0] = 'rgt-client'; main()")
    for _ in range(2):   # the first one builds the agent once to learn its sha256 (build_cache)
        res = subprocess.run([sys.executable, "-c", code, "status", "local", "--home", str(tmp_path)],
                             capture_output=True, text=True)
    assert res.returncode == 3 and "not installed" in res.stderr, res.stderr
    out = res.stderr.split("MODULES ")[1].split()
    assert "rgt_client.status.render" in out and "rgt_client.status.fetch" in out
    for heavy in ("rgt_client.pull", "rgt_client.profiles", "rgt_client.demo", "rgt_client.jobs", "rgt_client.install",
                  "rgt_client.box.bundle", "zipfile", "concurrent.futures", "logging", "tomllib", "boxagent.artifacts"):
        assert heavy not in out, heavy


def test_help_lists_every_command(rgt_local):
    res = rgt_local("--help")
    assert res.exit_code == 0
    for names in COMMAND_MODULES.values():
        for name in names:
            assert "  %s " % name in res.stdout, name


@pytest.mark.parametrize("argv, meant", [
    (("verify", "gpu1", "run1"), "rgt-client verify DATA/pulls/"),     # the folder that pull wrote
    (("verify",), "usage: rgt-client verify [OPTIONS] DEST"),
    (("profiles", "runpod"), "`rgt-client profiles show runpod`"),
    (("logs", "gpu1", "run1", "-n", "-1"), "usage: rgt-client logs [OPTIONS] HOST RUN"),     # -n 0 is all
    (("stauts", "gpu1"), "`rgt-client status`"),
    (("install",), "usage: rgt-client install [OPTIONS] HOST"),
    (("status", "gpu1", "--no-such-flag"), "rgt-client status --help"),
])
def test_clicks_own_usage_errors_get_an_error_and_a_hint(rgt_local, argv, meant):
    """click printed its usage block and `Error: Missing argument 'DEST'.` with no Hint."""
    res = rgt_local(*argv)
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: "), res.stderr
    meant = meant.replace("DATA", os.environ["RGT_DATA_HOME"])     # rgt's data folder (tests/conftest.py)
    assert meant in lines[1] and res.stdout == ""
