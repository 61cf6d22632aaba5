"""Every input error the client can give without a box: `Error:` + `Hint:`, exit 2, and no
literal `\\n` (a TOML syntax error printed `Illegal character '\\n'`, and an empty job file two
problems joined by literal `\\n`s)."""
from __future__ import annotations

import pytest

JOBS = {
    "unclosed.toml": 'name = "x\n',
    "empty.toml": "",
    "badvalue.toml": 'name = "x"\n[[stage]]\nname = "a"\nrun = "true"\nretries = \n',
    "badjson.json": '{"name": "x",\n "stage": [}\n',
    "crlf.toml": 'name = "x"\r\n[[stage]]\r\nname = "a"\r\nrun = "true"\rretries = 1\n',
    "notutf8.toml": b'name = "\xff"\n',
    "unknown-key.toml": 'name = "x"\nworkdir = "/w"\nbogus = 1\n[[stage]]\nname = "a"\nrun = "true"\n',
    "twostage.toml": 'name = "x"\n[[stage]]\nname = "a"\n[[stage]]\nname = "a"\nrun = "true"\n',
}
ARGV = [
    ("verify",), ("verify", "gpu1", "run1"), ("profiles", "runpod"), ("logs", "h", "r", "-n", "-1"),
    ("install",), ("status", "h", "--events", "-3"), ("watch", "h", "r", "--every", "soon"),
    ("run", "local"), ("run", "local", "--name", "bad name!", "--", "true"),
    ("install", "local", "--price", "-1"), ("profiles", "show", "no-such-platform"),
]


def _check(res) -> None:
    assert res.exit_code == 2, res.output
    err = res.stderr
    assert err.startswith("Error: ") and "\nHint: " in err, err
    assert "\\n" not in err and "\\r" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("name", sorted(JOBS))
def test_a_bad_job_file_is_one_error_with_a_hint_and_no_literal_newline(rgt_local, tmp_path, name):
    path = tmp_path / name
    data = JOBS[name]
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    _check(rgt_local("run", "local", str(path)))


@pytest.mark.parametrize("argv", ARGV, ids=[" ".join(a) for a in ARGV])
def test_every_usage_error_has_a_hint_and_no_literal_newline(rgt_local, argv):
    _check(rgt_local(*argv))


def test_a_toml_error_shows_the_line_and_a_caret(rgt_local, tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('name = "x"\nworkdir = "/w\n')
    res = rgt_local("run", "local", str(path))
    _check(res)
    lines = res.stderr.splitlines()
    assert lines[0] == "Error: %s line 2, column 14 is not valid TOML: the line ends before its value does " \
                       "(an unclosed quote or bracket?)" % path, lines
    assert lines[1:] == ["Hint: fix line 2:", '    workdir = "/w', "                 ^"]


def test_a_reader_that_goes_away_is_not_an_internal_error():
    """`rgt-client … --json | head`: the reader closed the pipe. That is not rgt's failure: no
    "internal error", no traceback, exit 141 as a command killed by SIGPIPE (a real subprocess,
    its stdout closed before it writes)."""
    import subprocess
    import sys
    from pathlib import Path
    exe = str(Path(sys.executable).with_name("rgt-client"))
    proc = subprocess.Popen([exe, "profiles", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == "", err
