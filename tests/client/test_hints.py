"""Every command a hint, a help text or the docs tell a user to type names a command and options
the real CLI has. A hint once said "submit with --replace" and `rgt-client run … --replace` did
not exist. Walks every string in rgt_client/, the agent's hints as the client passes them on
(agentcall.client_hint), and the client docs, and checks each `rgt-client CMD … --flag` against
the click commands."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from rgt_client.box.agentcall import client_hint
from rgt_client.cli import cli

REPO = Path(__file__).resolve().parents[2]
CALL = re.compile(r"rgt-client ((?:[a-z][a-z-]*)(?: [^`|;()\n]*)?)")
GLOBAL = {"--ssh-config", "--debug", "--version", "-h", "--help"}


def _strings(path: Path) -> list[str]:
    """Every string constant but docstrings (prose such as "rgt-client exit codes: ...")."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _calls(text: str) -> list[str]:
    return [m.group(1).strip() for m in CALL.finditer(text)]


def _problem(call: str) -> str | None:
    words = call.split()
    cmd = cli.get_command(click.Context(cli), words[0])
    if cmd is None:
        return "no command %r" % words[0]
    rest = words[1:]
    if isinstance(cmd, click.Group) and rest and rest[0] in cmd.list_commands(click.Context(cmd)):
        cmd, rest = cmd.get_command(click.Context(cmd), rest[0]), rest[1:]
    known = set(GLOBAL)
    for p in cmd.params:
        known.update(p.opts + p.secondary_opts)
    for word in rest:
        flag = word.split("=")[0].strip("`'\".,:[]")
        if re.match(r"^--?[A-Za-z]", flag) and flag not in known:
            return "%s has no option %s" % (cmd.name, flag)
    return None


def _client_texts() -> list[tuple[str, str]]:
    out = []
    for path in sorted((REPO / "rgt_client").rglob("*.py")):
        out += [(path.name, s) for s in _strings(path)]
    return out


def _agent_hints() -> list[tuple[str, str]]:
    out = []
    for path in sorted((REPO / "boxagent").rglob("*.py")):
        for s in _strings(path):
            if "rgt-agent " in s or "--replace" in s:
                out.append((path.name, client_hint(s, "HOST")))
    return out


def _docs() -> list[tuple[str, str]]:
    docs = [p for p in (REPO / "docs" / "client.md", REPO / "docs" / "readme" / "client.md") if p.exists()]
    return [(p.name, line) for p in docs for line in p.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("source", ["client", "agent hints", "docs"])
def test_every_rgt_client_command_named_anywhere_exists_with_its_options(source):
    texts = {"client": _client_texts, "agent hints": _agent_hints, "docs": _docs}[source]()
    calls = [(where, call) for where, text in texts for call in _calls(text)]
    assert calls, "found no rgt-client command in the %s: the walk is broken" % source
    bad = sorted({"%s: `rgt-client %s`: %s" % (where, call, why) for where, call in calls
                  for why in [_problem(call)] if why})
    assert not bad, "\n".join(bad)


def test_the_agents_resubmit_hint_names_run_replace():
    hint = client_hint("pick another name, or, to run this job under that name, submit with --replace: the "
                       "old run moves to runs/.archive/", "gpu1")
    assert "`rgt-client run gpu1 … --replace`" in hint
    assert client_hint("cancel it first: `rgt-agent resume r1`", "gpu1") == "cancel it first: `rgt-client resume gpu1 r1`"
    assert client_hint("rgt-client notify-set HOST FILE", "gpu1") == "rgt-client notify-set gpu1 FILE"
    assert _problem("run gpu1 JOB.toml --replace") is None
    assert _problem("run gpu1 JOB.toml --no-such-flag") == "run has no option --no-such-flag"
