"""The docs tell the truth: the site builds strictly (no dead link, anchor or orphan page), the
README's fresh-machine commands are the ones install.sh and .ci/run support, and every
`rgt-client COMMAND` / `rgt-agent COMMAND` the README and the pages name is a real command."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from boxagent import cli as agent_cli
from rgt_client.cli import cli as client_cli

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DEMO = "./install.sh && .venv/bin/rgt-client demo"
TESTS = "./install.sh --dev && .venv/bin/python -m pytest -q"


def _doc_files() -> list:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def _bash_blocks(text: str) -> list:
    return [b.strip() for b in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)]


def test_site_builds_strictly(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed next to %s (./install.sh --dev installs it)" % sys.executable)
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")   # the theme's end-of-life banner is not ours
    out = subprocess.run([str(mkdocs), "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(site)],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (site / "search" / "search_index.json").stat().st_size > 0   # the site has search
    assert (site / "jobs" / "index.html").exists()
    # the home page is the README itself (docs/index.md was a copy that drifted from it)
    home = (site / "index.html").read_text()
    assert "What it costs" in home and 'href="client/#ssh-your-own-client-bounded"' in home
    assert 'src="img/report.png"' in home and 'href="docs/' not in home and 'src="docs/' not in home
    assert (REPO / "docs" / "index.md").read_text().startswith("<!-- The home page is README.md")


def test_readme_fresh_machine_commands_are_the_supported_ones():
    blocks = _bash_blocks(README.read_text())
    assert DEMO in blocks and TESTS in blocks, blocks
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert TESTS in ci, "the README's test command is not the one .ci/run runs"
    install = (REPO / "install.sh").read_text()
    assert "--dev)" in install and '"") ;;' in install          # both forms accepted
    assert ".venv/bin/rgt-client demo" in install and ".venv/bin/python -m pytest -q" in install
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    # rgt-client's launcher is a script file of ours (pip's console-script one imports re first)
    launchers = set(project["scripts"]) | {Path(p).name for p in pyproject["tool"]["setuptools"]["script-files"]}
    assert {"rgt-client", "rgt-agent"} <= launchers
    assert all((REPO / p).is_file() for p in pyproject["tool"]["setuptools"]["script-files"])
    dev = " ".join(project["optional-dependencies"]["dev"])
    assert all(tool in dev for tool in ("pytest", "vermin", "mkdocs"))


def _anchors(page: Path) -> set:
    # Python-Markdown's toc slugify, which MkDocs uses: what `#anchor` a heading answers to.
    headings = re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M), re.M)
    return {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", h).strip().lower()) for h in headings}


def test_readme_links_point_at_pages_and_headings_that_exist():
    # The site's strict build checks the pages' links; the README is outside it, so here.
    text = re.sub(r"<!--.*?-->", "", README.read_text(), flags=re.S)
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]
    assert targets
    dead = []
    for target in targets:
        path, _, anchor = target.partition("#")
        page = REPO / path if path else README
        if not page.exists() or (anchor and anchor not in _anchors(page)):
            dead.append(target)
    assert not dead, dead
    # The front door leads to every page (a new part adds a row to its table of pages).
    pages = {p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")} - {"docs/index.md"}
    assert not pages - {t.partition("#")[0] for t in targets}, "pages the README does not link"


def test_readme_stays_a_front_door():
    assert len(README.read_text().splitlines()) < 250


# `rgt-client WORD [WORD]`, `rgt-agent WORD`, `rgt-agent.pyz WORD`; not `rgt-agent.pyz agent.sha256`
# (a file listing), not `rgt-client HOST` placeholders (upper case).
WORD = r"([a-z][a-z0-9-]*)(?![\w-]|\.\w)"
MENTION = re.compile(r"\brgt-(client|agent)(?:\.pyz)?[ \t]+" + WORD + r"(?:[ \t]+" + WORD + ")?")


def _mentions(tool: str) -> dict:
    found: dict = {}
    for path in _doc_files():
        for m in MENTION.finditer(path.read_text()):
            if m.group(1) == tool:
                found.setdefault((m.group(2), m.group(3)), path.relative_to(REPO).as_posix())
    return found


def _missing_client_commands(mentioned: dict) -> list:
    ctx = click.Context(client_cli)
    missing = []
    for (word, sub), where in sorted(mentioned.items(), key=str):
        cmd = client_cli.get_command(ctx, word)
        if cmd is None:
            missing.append("rgt-client %s (%s)" % (word, where))
            continue
        args = [word]
        if isinstance(cmd, click.Group) and sub:
            if cmd.get_command(ctx, sub) is None:
                missing.append("rgt-client %s %s (%s)" % (word, sub, where))
                continue
            args.append(sub)
        res = CliRunner().invoke(client_cli, [*args, "--help"], obj={})
        if res.exit_code != 0:
            missing.append("rgt-client %s --help: exit %s (%s)" % (" ".join(args), res.exit_code, where))
    return missing


def _missing_agent_commands(words: set, capsys) -> list:
    missing = []
    for word in sorted(words):
        with pytest.raises(SystemExit) as exit_:
            agent_cli.main([word, "--help"])
        capsys.readouterr()
        if exit_.value.code not in (0, None):
            missing.append("rgt-agent %s --help: exit %s" % (word, exit_.value.code))
    return missing


def test_every_client_command_the_docs_name_exists():
    mentioned = _mentions("client")
    assert {"demo", "install", "status", "pull"} <= {word for word, _ in mentioned}
    assert not _missing_client_commands(mentioned)


def test_every_agent_command_the_docs_name_exists(capsys):
    words = {word for word, _ in _mentions("agent")}
    assert {"start", "submit", "probe"} <= words
    assert not _missing_agent_commands(words, capsys)


def test_a_made_up_command_is_caught(capsys):
    text = ("run `rgt-client frobnicate gpu1`, then `rgt-client profiles frob` and `rgt-agent.pyz frob`;"
            " not rgt-agent.pyz agent.sha256 nor rgt-client HOST")
    found = {(m.group(1), m.group(2), m.group(3)) for m in MENTION.finditer(text)}
    assert found == {("client", "frobnicate", "gpu1"), ("client", "profiles", "frob"), ("agent", "frob", None)}
    assert len(_missing_client_commands({("frobnicate", None): "x", ("profiles", "frob"): "x"})) == 2
    assert _missing_agent_commands({"frob"}, capsys) == ["rgt-agent frob --help: exit 2"]


def _job_blocks() -> list:
    """Every TOML block in the README and docs that is a whole job (a name and a stage)."""
    out = []
    for path in _doc_files():
        for block in re.findall(r"^```toml\n(.*?)^```", path.read_text(), re.S | re.M):
            try:
                job = tomllib.loads(block)
            except tomllib.TOMLDecodeError:
                continue  # a fragment with placeholders, not a job
            if "name" in job and "stage" in job:
                out.append((path.relative_to(REPO).as_posix(), block))
    return out


def test_every_complete_job_the_docs_show_is_accepted_by_the_agent():
    from boxagent.engine import jobspec
    blocks = _job_blocks()
    assert any(p == "README.md" and 'backend = "slurm"' in b for p, b in blocks)  # the README's Slurm job
    for path, block in blocks:
        try:
            jobspec.validate(jobspec.parse_text(block, path), path)
        except Exception as e:  # noqa: BLE001 - the message names the doc and the block
            raise AssertionError("%s: a job the docs show is refused: %s\n%s" % (path, e, block)) from e
