"""Every agent verb checks its run, stage and group names before using them, and never reads one
as an option. Field findings: `rgt-agent logs okrun/../badrun` printed another run's log, and a
run named `--help` was read as the option. Real agent processes on a real daemon's files; the
client refuses such a name before anything is sent to the box."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxagent.base import names
from tests.clirunner import Cli
from tests.conftest import fuzz_examples
from tests.realbox import job

HOSTILE = ["okrun/../badrun", "../badrun", "--help", "-n", "okrun\n", "ok run", "/etc/passwd",
           ".hidden", "okrun\x1b[2J", "okrun\u202e", "a" * 81, ""]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    from tests.realbox import Box
    b = Box(tmp_path_factory.mktemp("names"))
    b.submit(job("okrun", b.workdir, {"name": "train", "run": "echo ok-run-line"}))
    b.submit(job("badrun", b.workdir, {"name": "train", "run": "echo SECRET-OF-BADRUN"}))
    b.start()
    b.wait_run("okrun")
    b.wait_run("badrun")
    yield b
    b.cleanup()


# A name comes after `--` (or as --opt=NAME), as a careful caller passes it: `rgt-agent logs
# --help` typed at the box's shell is a person asking for help, and gets it.
@pytest.mark.parametrize("argv", [
    ["logs", "--", "{}"], ["logs", "okrun", "--stage={}"], ["handbook", "--", "{}"], ["cancel", "--", "{}"],
    ["cancel", "--group", "--", "{}"], ["resume", "--", "{}"], ["status", "--run={}"],
    ["report-data", "--", "{}"], ["manifest", "--", "{}"], ["pull-info", "--", "{}"],
    ["pull-verified", "--manifest-sha256", "0" * 64, "--", "{}"],
])
@pytest.mark.parametrize("name", HOSTILE, ids=[ascii(n)[:20] for n in HOSTILE])
def test_claim_an_agent_verb_refuses_a_name_that_is_not_one(two_runs, argv, name):
    res = two_runs.agent(*[a.replace("{}", name) for a in argv])
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "SECRET-OF-BADRUN" not in out and "Traceback" not in out
    assert out.startswith("Error:") and "\nHint:" in out, out
    assert "usage:" not in res.stdout       # never the help text of an option read from the name


def test_claim_a_valid_name_still_reads_its_own_run(two_runs):
    res = two_runs.agent("logs", "okrun", "-n", "5")
    assert res.returncode == 0 and "ok-run-line" in res.stdout and "SECRET-OF-BADRUN" not in res.stdout


def test_claim_a_sweeps_long_run_names_are_names(two_runs):
    """A sweep's runs are its (up to 64-character) name plus -N: still names."""
    long = "s" * 64 + "-12"
    res = two_runs.agent("logs", long)
    assert res.returncode == 2 and "no run named" in res.stderr, res.stderr


@pytest.mark.parametrize("argv", [["logs", "local", "--", "{}"], ["cancel", "local", "--", "{}"],
                                  ["handbook", "local", "--", "{}"], ["resume", "local", "--", "{}"],
                                  ["status", "local", "--run={}"]])
@pytest.mark.parametrize("name", ["okrun/../badrun", "-rf", "--help", "a\nb", "okrun\n"])
def test_claim_the_client_sends_no_name_that_is_not_one(argv, name, monkeypatch, tmp_path):
    monkeypatch.setenv("RGT_HOME", str(tmp_path / "nohome"))      # nothing there to reach anyway
    res = Cli()(*[a.replace("{}", name) for a in argv])
    assert res.exit_code == 2, res.output
    assert "is not a run name" in res.output and "Hint:" in res.output


_NAME_ALPHABET = st.sampled_from(list("aZ09._-/ \n\t%$é\x00") + ["\U0001f600"])


@settings(max_examples=fuzz_examples(400), deadline=None)
@given(st.text(alphabet=_NAME_ALPHABET, max_size=90), st.sampled_from(["run", "stage", "group", "job"]))
def test_the_name_rule_is_the_job_files_pattern(value, kind):
    """names.valid is written without a regex (re was the largest import of the box's `status`);
    it says what the job file's pattern says, for every kind's length."""
    longest = 80 if kind == "run" else 64
    pattern = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,%d}\Z" % (longest - 1))
    assert names.valid(kind, value) == bool(pattern.match(value))
