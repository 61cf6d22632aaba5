"""Every install line we print or document installs THIS project: the distribution `rgt` on PyPI
is an unrelated project (a regulatory-genomics toolkit), and the docs and the MCP error's Hint
said `pip install 'rgt[mcp]'`, which outside a venv holding this checkout installed it. A line
may install from the checkout (`./install.sh`, `pip install -e .`) or by our own name."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rgt_client import DISTRIBUTION
from rgt_client.mcp import cmd as mcp_cmd

REPO = Path(__file__).resolve().parents[1]
INSTALL = re.compile(r"\bpip3?\s+install\b([^\n`\"]*)")
# A name that reads as this project's: the commands, the import names, the old distribution name.
# (Lines that name other projects' packages, `pip install apprise`, install what they say.)
OURS_BY_LOOKS = re.compile(r"(rgt|boxagent)([-_.][a-z0-9_.-]*)?")


def _names(args: str) -> list:
    """The package names an install line's arguments name (options, paths and the checkout skipped)."""
    out = []
    args = re.split(r"[;(),#|]|&&|\s(?:or|and|on|of|then)\s", args + " ")[0]    # the command ends there
    for word in args.replace("'", " ").split():
        if word.startswith("-") or word.startswith((".", "/", "$", "%", "{")) or "=" in word.split("[")[0][:1]:
            continue
        name = re.split(r"[\[<>=!~;]", word, 1)[0].strip(",;:()")
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name or ""):
            out.append(name.lower())
    return out


def _our_text_files() -> list:
    files = [REPO / "README.md", REPO / "install.sh", REPO / "pyproject.toml"]
    files += sorted((REPO / "docs").rglob("*.md")) + sorted((REPO / "skills").rglob("*.md"))
    return files


def _code_strings() -> list:
    """Every string constant in the client's and the agent's code (where hints live)."""
    out = []
    for folder in ("rgt_client", "boxagent"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    out.append((path, node.value))
    return out


def _bad_lines(where: str, text: str) -> list:
    bad = []
    for m in INSTALL.finditer(text):
        for name in _names(m.group(1)):
            if name != DISTRIBUTION and OURS_BY_LOOKS.fullmatch(name):
                bad.append("%s: %r installs %r" % (where, m.group(0).strip(), name))
    return bad


def test_the_distribution_is_ours_and_the_code_knows_its_name():
    project = re.search(r'^name = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert project and project.group(1) == DISTRIBUTION != "rgt"


def test_no_doc_names_a_package_we_do_not_own_in_an_install_line():
    bad = []
    for path in _our_text_files():
        bad += _bad_lines(str(path.relative_to(REPO)), path.read_text())
    assert not bad, "\n".join(bad)


def test_no_hint_in_the_code_names_a_package_we_do_not_own():
    bad = []
    for path, text in _code_strings():
        bad += _bad_lines(str(path.relative_to(REPO)), text)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line", ["pip install 'rgt[mcp]'", "pip install -U rgt", "pip3 install rgt==0.1"])
def test_the_check_catches_the_old_lines(line):
    assert _bad_lines("x", line)


def test_the_mcp_hint_outside_a_checkout_installs_our_distribution(monkeypatch):
    monkeypatch.setattr(mcp_cmd.os.path, "exists", lambda p: False)
    line = mcp_cmd.install_line()
    assert "'%s[mcp]'" % DISTRIBUTION in line and not _bad_lines("hint", line)
