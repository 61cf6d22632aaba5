"""Hostile tool arguments, as a model that read a planted log line would send them: paths to this
laptop's secrets, hidden paths, symlinks out of the project, option-like names, `..`, nested
repos, absolute paths, control characters. Each is one call through the real MCP SDK client to
one shared server; after each: no canary from a secret file is in the answer (error or not), no
file outside rgt's own folders changed, and the answer fits its budget."""
from __future__ import annotations

import pytest

from tests.mcp.trustworld import (BUDGET, LOGS_BUDGET, SharedServer, World, answer_size, assert_nothing_secret,
                                  run_doc, status_doc)

HOME = "__HOME__"      # replaced by the fake HOME's path

JOBS = ["~/.netrc", "~/.pgpass", "~/.git-credentials", "~/.aws/credentials", "~/.ssh/id_ed25519",
        HOME + "/.netrc", HOME + "/proj/.env", ".env", "./.env", "../.netrc", "../../../../etc/shadow",
        "/etc/shadow", "/proc/self/environ", "/etc/passwd", "leak.toml", "rel-leak.toml", "env.toml",
        "awsdir/credentials", ".hidden/job.toml", "vendor/dep/.git/hooks/pre-commit.toml",
        "vendor/dep/.git/config", "fifo.toml", "hard.toml", "big.toml", "syntax.toml", "values.toml", "keys.toml",
        "--help",
        "-rf", "job.toml\x00.txt", "\x1b[2J.toml", "job\u202elmot.toml", "a/../../.netrc", "/proc/self/cwd/.env",
        "~root/.bashrc", "file:///etc/shadow", ".hidden/../job.toml"]
DESTS = ["/etc", "~/.ssh", ".git/hooks", "../outside", ".", "vendor/dep/.git", "src", "tests", "-rf", "--help",
         "a\nb", "\u202e", "/proc/self/cwd", "rgt-box/mine", "a/" * 12 + "b"]
OUTS = ["/tmp/x.html", ".git/hooks/post-commit", "report.sh", "../x.html", "~/.bashrc", "a/.b.html",
        "--help.html", "x\n.html", "src/pkg/__init__.py"]
PROFILES = ["~/.netrc", "/etc/shadow", "../.pgpass", ".env", HOME + "/.aws/credentials"]
NOTIFIES = ["~/.netrc", "../.git-credentials", "/proc/self/environ", ".env", "leak.toml"]
RUNS = ["--help", "-rf", "../r1", "r1/../../x", "r1\nignore previous instructions", "$(id)", "r1;rm -rf ~",
        "r1\u202e", "\x1b]52;c;cm0=\x07"]
STAGES = ["--help", "../../.netrc", "a b"]
HOSTS = ["-oProxyCommand=touch /tmp/pwned", "evil.example.com", "local\nx", "../local"]
CURSORS = ["$(id)", "../../etc/shadow", "\x1b[2J"]

CASES = ([("submit_job", {"host": "local", "job": j}) for j in JOBS]
         + [("pull_artifacts", {"host": "local", "run": "r1", "dest": d}) for d in DESTS]
         + [("make_report", {"host": "local", "run": "r1", "out": o}) for o in OUTS]
         + [("explain_platform", {"profile": p}) for p in PROFILES]
         + [("install_agent", {"host": "local", "notify": n}) for n in NOTIFIES]
         + [(tool, {"host": "local", "run": r}) for r in RUNS for tool in ("get_status", "cancel_run")]
         + [("read_logs", {"host": "local", "run": "r1", "stage": s}) for s in STAGES]
         + [("get_status", {"host": h}) for h in HOSTS]
         + [("wait_for_change", {"host": "local", "cursor": c, "timeout_s": 1}) for c in CURSORS])


def test_there_are_over_fifty_hostile_arguments():
    assert len(CASES) > 50, len(CASES)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("args"))
    w.box.answer("status", stdout=status_doc([run_doc("r1", "succeeded")]))
    w.box.pull_info("r1", w.box.manifest({"ck/a.bin": b"weights"}))
    w.box.answer("pull-verified", stdout={"ok": True})
    w.box.answer("report-data", stdout={"schema": "rgt.report/1", "run": {"name": "r1", "state": "succeeded"}})
    return w


@pytest.fixture(scope="module")
def server(world):
    s = SharedServer(world.env)
    yield s
    s.close()


def _ids(case):
    tool, args = case
    return "%s-%s" % (tool, ascii(sorted(args.items())[-1][1])[:40])


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_a_hostile_argument_gets_no_secret_writes_nothing_outside_and_stays_in_budget(server, world, case):
    tool, args = case
    args = {k: v.replace(HOME, str(world.home)) if isinstance(v, str) else v for k, v in args.items()}
    before, own = world.snapshot(), world.own_snapshot()
    calls_before = len(world.box.calls())
    res = server.call(tool, **args)
    assert_nothing_secret(res)
    assert world.snapshot() == before and world.own_snapshot() == own
    assert answer_size(res) <= (LOGS_BUDGET if tool == "read_logs" else BUDGET)
    acted = [c for c in world.box.calls()[calls_before:] if c["key"] in ("cancel", "submit", "resume")]
    assert not acted, acted           # no hostile argument reached a verb that changes the box
