"""Types that are written are checked: mypy, at the strictness pyproject.toml states ([tool.mypy]:
the bodies of every function checked, redundant casts reported, foreign packages without type
information the only imports it may skip), finds nothing in the agent and the client (its
`files`). The agent's floor (Python 3.8, the bare standard library) is vermin's and the
import test's, not mypy's: the client is Python >= 3.10."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECKED = ["boxagent", "rgt_client"]


@pytest.mark.slow
def test_mypy_finds_no_type_error():
    res = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir",
                          str(REPO / ".mypy_cache"), *CHECKED], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Success: no issues found" in res.stdout
