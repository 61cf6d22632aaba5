"""Matching that survives spelling: each errno row decides the same class whichever layer
printed the message (glibc, Go, CPython, Rust, Node, the JVM), wherever it sits in the line."""
from __future__ import annotations

import pytest

from boxagent.triage.cli import report
from boxagent.triage.vocab import errno
from boxagent.triage.vocab.spelling import cased, forms


def _cause(tmp_path, line: str):
    p = tmp_path / "x.log"
    p.write_text("step 1/10\n%s\n" % line, encoding="utf-8")
    rep = report(str(p), 1, [], "python", None, probe_disks=False)
    return rep["cause"]


@pytest.mark.parametrize("spec", errno.ERRNOS, ids=[e[2] for e in errno.ERRNOS])
def test_every_spelling_of_an_errno_decides_its_class(tmp_path, spec):
    cls, num, name, msg, _, kind, more = spec
    got = {}
    for line in forms(num, name, msg, kind) + ["Error: %s" % m for m in more]:
        got[line] = _cause(tmp_path, line)["class"]
    want = "disk_full" if cls == "disk_full" else cls
    assert set(got.values()) == {want} or (
        cls == "disk_full" and set(got.values()) <= {"disk_full", "inodes_full"}), got


def test_go_prefixes_and_quotes_do_not_hide_the_errno(tmp_path):
    for line in ('failed to register layer: mkdir /var/lib/docker/overlay2/abc: no space left on device',
                 'Error response from daemon: open "/var/lib/x": no space left on device',
                 "level=error msg=\"write /run/containerd/x: no space left on device\""):
        assert _cause(tmp_path, line)["class"] == "disk_full", line


def test_cased_matches_both_first_letters_and_nothing_else():
    import re
    pat, keys = cased("No space left on device")
    assert re.search(pat, "write x: no space left on device")
    assert re.search(pat, "No space left on device")
    assert not re.search(pat, "Go space left on device")
    assert keys == ("o space left on device",)
