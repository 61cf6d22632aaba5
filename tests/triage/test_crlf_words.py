"""A script with Windows line endings, in the words of any tool that reads it: a name ending in
its CR shown as ^M, and the tools that say "Windows/DOS line endings" or "literal carriage
return" outright. Each through the whole engine; git's own CRLF conversion warning and a
dos2unix run are no failure of a script."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


@pytest.mark.parametrize("line,code", [
    ("bash: ./run.sh: /bin/bash^M: bad interpreter: No such file or directory", 126),   # bash
    ("zsh: ./train.sh: bad interpreter: /usr/bin/env^M: no such file or directory", 126),  # zsh
    ("/usr/bin/env: 'python3^M': No such file or directory", 127),                       # env, cat -v
    ("exec: Failed to execute process './run.sh':  The file uses Windows line endings (\\r\\n).",
     126),                                                                                 # fish
    ("sbatch: error: Batch script contains DOS line breaks (\\r\\n)", 1),                  # sbatch
    ("In train.sh line 3: SC1017 (error): Literal carriage return. Run script through tr -d '\\r'.",
     1),                                                                                   # shellcheck
    ("error: script has CRLF line endings; convert it with dos2unix", 1),
])
def test_a_script_with_windows_line_endings_in_any_tools_words(tmp_path, line, code):
    assert _cause(tmp_path, line + "\n", code)["class"] == "crlf_script"


@pytest.mark.parametrize("text", [
    "warning: in the working copy of 'run.sh', LF will be replaced by CRLF the next time Git "
    "touches it\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
    "ValueError: bad shape\n",
    "dos2unix: converting file run.sh to Unix format...\nValueError: bad shape\n",
])
def test_git_and_dos2unix_saying_crlf_is_no_crlf_failure(tmp_path, text):
    assert _cause(tmp_path, text)["class"] != "crlf_script"


@pytest.mark.parametrize("line", [
    "train.sh: line 12: syntax error near unexpected token `fi'",
    "train.sh: line 3: DATA_DIR: unbound variable",
    "train.sh: line 4: $OUT: ambiguous redirect",
])
def test_bashs_own_words_for_a_wrong_script_are_the_jobs_code(tmp_path, line):
    assert _cause(tmp_path, line + "\n", 2)["class"] == "code_error"


def test_a_syntax_error_at_a_cr_token_is_still_the_cr(tmp_path):
    c = _cause(tmp_path, "train.sh: line 12: syntax error near unexpected token `$'do\\r''\n", 2)
    assert c["class"] == "crlf_script", c


@pytest.mark.parametrize("line", [
    "slurmstepd: error: execve(): bad interpreter(/usr/bin/env python3): No such file or directory",
    "slurmstepd: error: execve(): train.sh: Permission denied",
])
def test_slurmstepd_failing_to_start_the_task_is_the_jobs_command_not_a_cr(tmp_path, line):
    c = _cause(tmp_path, line + "\n", 2)
    assert c["class"] == "code_error", c
