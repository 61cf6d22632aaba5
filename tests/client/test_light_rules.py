"""The rules `status` follows before its ssh call, written without re, shlex, glob or subprocess
(their imports were most of what the client did before that call), say exactly what the
originals say: shlex.quote, glob.glob of an ssh config's Include, the Control* keyword check the
regex made, and Popen's child (its pipes, its exit code, no descriptor of ours passed on)."""
from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from rgt_client.box import earlyproc, sshmux, transport
from tests.conftest import REPO, fuzz_examples

FUZZ = settings(max_examples=fuzz_examples(400), deadline=None)
WORDS = st.text(alphabet=st.sampled_from(list("aZ09_@%+=:,./-'\" \t\n$`\\!*?[]é~#;&|<>(){}") + ["\x00", "\U0001f600"]),
                max_size=20)


@FUZZ
@given(WORDS)
def test_quote_is_shlex_quote(word):
    assert transport.quote(word) == shlex.quote(word)


NAMES = st.text(alphabet=st.sampled_from(list("ab.c*?-_")), max_size=8)


@FUZZ
@given(NAMES.filter(lambda n: "*" not in n and "?" not in n), st.text(alphabet=st.sampled_from(list("ab.c*?")),
                                                                      max_size=6))
def test_wild_is_fnmatch_for_star_and_question_mark(name, pattern):
    import fnmatch
    assert sshmux._wild(name, pattern) == fnmatch.fnmatchcase(name, pattern)


def test_an_include_matches_what_glob_matches(tmp_path):
    for name in ("10-a.conf", "20-b.conf", ".hidden.conf", "a.conf.bak", "x", ".x.conf"):
        (tmp_path / name).write_text("")
    for pattern in ("*.conf", "?0-*.conf", ".*", "*", "10-a.conf", "missing.conf", "*.nothing", "[12]*.conf",
                    "*/x", ".*.conf"):
        full = str(tmp_path / pattern)
        assert sshmux._matching(full) == sorted(glob.glob(full)), pattern


def test_a_pathological_include_pattern_does_not_hold_status(tmp_path):
    """`*a*a*a*a*a*a*a*a*b` over a folder holding one long name of `a`s: the matcher that split at
    every `*` tried every way to place eight stars (15 s at five stars and 60 letters; this case
    would run for years). A real process, so a hang is ended and seen as one. The bound is not a
    speed figure: a pass takes milliseconds, the old code never finishes."""
    folder = tmp_path / "conf.d"
    folder.mkdir()
    (folder / ("a" * 200)).write_text("ControlMaster no\n")
    (folder / ("a" * 40 + "b")).write_text("ControlPath none\n")
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Include %s/%s\n" % (folder, "*a" * 8 + "*b"))
    code = "from rgt_client.box import sshmux; print(sshmux._config_mentions_control(%r))" % str(cfg)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
    except subprocess.TimeoutExpired:
        raise AssertionError("reading an Include with eight stars did not end within 30 s") from None
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert sshmux._matching(str(folder / ("*a" * 8 + "*b"))) == [str(folder / ("a" * 40 + "b"))]


_OLD_CONTROL = re.compile(r"^\s*control(master|path|persist)\b", re.I | re.M)
# Line by line: over a whole file, its \s+ ran over a line's end ("Include" alone, then a
# "ControlMaster yes" line, included a file named ControlMaster).
_OLD_INCLUDE = re.compile(r"^\s*include\s+(.+)$", re.I)
LINES = st.lists(st.tuples(st.sampled_from(["", " ", "\t", "  #"]),
                           st.sampled_from(["ControlMaster", "controlpath", "CONTROLPERSIST", "ControlMasterX",
                                            "Control", "Include", "include", "IncludeX", "Host", "controlpathé"]),
                           st.sampled_from(["", " ", "=", " yes", "\tno", "  a b", " \"q r\""])), max_size=5)


@FUZZ
@given(LINES)
def test_the_config_keywords_are_read_as_the_regex_read_them(lines):
    text = "\n".join(a + b + c for a, b, c in lines)
    words = [sshmux._keyword(line) for line in text.split("\n")]
    assert any(w in sshmux._CONTROL_WORDS for w, _ in words) == bool(_OLD_CONTROL.search(text))
    includes = [rest.split() for w, rest in words if w == "include" and rest[:1].isspace() and rest.strip()]
    matched = (_OLD_INCLUDE.match(line) for line in text.split("\n"))
    assert includes == [m.group(1).split() for m in matched if m]


def test_the_early_process_is_what_popen_gives(tmp_path):
    """Its pipes, its exit code (a signal's too), SIGPIPE at its default (Python ignores it), and
    none of this process's inheritable descriptors (Popen's close_fds): a pipe our caller left
    open must not be held by ssh's master for a minute."""
    opened = os.open(str(tmp_path / "inherited"), os.O_WRONLY | os.O_CREAT)
    keep = os.dup2(opened, 57)            # inheritable, as dup2 makes it
    os.close(opened)
    try:
        script = "read x; echo $x | tr a-z A-Z; grep SigIgn /proc/self/status; ls /proc/self/fd; echo err >&2; exit 7"
        proc = earlyproc.EarlyProcess(["sh", "-c", script], None)
        proc.stdin.write(b"hello\n")
        proc.stdin.close()
        out, err = proc.stdout.read().decode(), proc.stderr.read()
        assert proc.wait(10) == 7 and proc.poll() == 7
        lines = out.split("\n")
        assert lines[0] == "HELLO"
        assert not int(lines[1].split()[1], 16) & (1 << 12 | 1 << 24), lines[1]   # SIGPIPE, SIGXFSZ: not ignored
        assert str(keep) not in lines[2:], out
        assert err == b"err\n"
    finally:
        os.close(keep)
    sleeper = earlyproc.EarlyProcess(["sleep", "30"], dict(os.environ))
    try:
        sleeper.wait(0.05)
        raise AssertionError("wait returned before the process ended")
    except subprocess.TimeoutExpired:
        pass
    sleeper.kill()
    assert sleeper.wait() == -9
    for pipe in (sleeper.stdin, sleeper.stdout, sleeper.stderr):
        pipe.close()


def test_an_early_process_that_cannot_start_raises_oserror():
    try:
        earlyproc.EarlyProcess(["/nonexistent/ssh"], None)
    except OSError:
        return
    raise AssertionError("no error for a missing program")
