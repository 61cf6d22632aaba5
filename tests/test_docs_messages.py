"""The messages the docs quote are the ones the tool prints: jobs.md quoted a hint the agent had
stopped giving. Each quoted `Error:` block that needs no box is reproduced here, and every quoted
`Hint:` line must match a message template in the code."""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FMT = re.compile(r"%(?:\([a-z_]+\))?[-#0 +]*\d*(?:\.\d+)?[sdrifgx]")


def _quoted(prefix: str) -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for line in page.read_text().splitlines():
            line = line.strip()
            if line.startswith(prefix):
                out.append((page.name, line[len(prefix):]))
    return out


def _templates() -> list[tuple[re.Pattern[str], int]]:
    """Every string literal of the client and the agent, its % fields made wildcards, with the
    count of its literal characters (`%s %s (%s)` matches anything and proves nothing)."""
    out = []
    for pkg in ("rgt_client", "boxagent"):
        for path in (REPO / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 12:
                    parts = _FMT.split(node.value)
                    out.append((re.compile(".+".join(re.escape(p) for p in parts)), sum(len(p) for p in parts)))
    return out


def test_every_hint_the_docs_quote_is_one_the_code_gives():
    templates = _templates()
    quoted = _quoted("Hint: ")
    assert len(quoted) >= 4
    stale = ["%s: Hint: %s" % (page, hint) for page, hint in quoted
             if not any(n >= min(15, len(hint) // 2) and t.fullmatch(hint) for t, n in templates)]
    assert not stale, "\n".join(stale)


def _block_after(page: str, marker: str) -> list[str]:
    lines = (REPO / "docs" / page).read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if marker in line)
    start = next(j for j in range(i, len(lines)) if lines[j].startswith("```")) + 1
    end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
    return lines[start:end]


def test_the_bad_job_block_in_jobs_md_is_what_run_prints(rgt_local, tmp_path, monkeypatch):
    block = _block_after("jobs.md", "Bad input is refused with the exact place")
    (tmp_path / "job.toml").write_text('name = "x"\nworkdir = "/tmp"\n[[stage]]\nname = "a"\nrun = "true"\n'
                                       '[[stage]]\nname = "b"\nrun = "true"\ntimeout = "abc"\n')
    monkeypatch.chdir(tmp_path)
    res = rgt_local("run", "local", "job.toml")
    assert res.exit_code == 2 and res.stderr.splitlines() == block


def test_the_unsafe_pattern_block_in_triage_md_is_what_run_prints(rgt_local, tmp_path, monkeypatch):
    (quoted,) = _block_after("triage.md", "| a backreference inside a repeat")
    assert quoted.endswith(", ...")
    (tmp_path / "job.toml").write_text('name = "x"\nworkdir = "/tmp"\n[[stage]]\nname = "a"\nrun = "true"\n'
                                       'fail_pattern = "^(a+)+$"\n')
    monkeypatch.chdir(tmp_path)
    res = rgt_local("run", "local", "job.toml")
    assert res.exit_code == 2 and res.stderr.startswith(quoted[:-len(", ...")]), res.stderr
