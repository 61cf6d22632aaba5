"""Artifact globs: `**`, directories, excludes, and never leaving the workdir."""
from __future__ import annotations

import os

import pytest

from boxagent.artifacts import globs
from boxagent.base.errors import UsageError


def _tree(root, paths):
    for p in paths:
        full = root / p
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(p)


def _paths(root, include, exclude=()):
    entries, skipped = globs.expand(str(root), include, exclude)
    return [e.path for e in entries], skipped


def test_double_star_spans_directories_and_star_does_not(tmp_path):
    _tree(tmp_path, ["a.pt", "ck/b.pt", "ck/deep/er/c.pt", "ck/d.txt", "logs/x.pt"])
    assert _paths(tmp_path, ["ck/**/*.pt"])[0] == ["ck/b.pt", "ck/deep/er/c.pt"]
    assert _paths(tmp_path, ["*.pt"])[0] == ["a.pt"]
    assert _paths(tmp_path, ["**/*.pt"])[0] == ["a.pt", "ck/b.pt", "ck/deep/er/c.pt", "logs/x.pt"]
    assert _paths(tmp_path, ["ck/?.pt", "ck/[bd].*"])[0] == ["ck/b.pt", "ck/d.txt"]


def test_directory_pattern_takes_everything_below_and_excludes_win(tmp_path):
    _tree(tmp_path, ["ck/a.pt", "ck/tmp/b.pt", "ck/c.tmp", "other.txt"])
    assert _paths(tmp_path, ["ck"])[0] == ["ck/a.pt", "ck/c.tmp", "ck/tmp/b.pt"]
    assert _paths(tmp_path, ["ck/"], ["ck/tmp", "**/*.tmp"])[0] == ["ck/a.pt"]


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside/*", "ck/../../x", "~/secrets", "", "  ", ".",
                                 "a/./../b"])
def test_globs_escaping_the_workdir_are_refused(tmp_path, bad):
    with pytest.raises(UsageError) as exc:
        globs.expand(str(tmp_path), [bad])
    assert exc.value.hint


def test_symlinks_are_recorded_never_followed(tmp_path):
    outside = tmp_path / "outside"
    _tree(outside, ["secret.txt", "big/x.bin"])
    work = tmp_path / "work"
    _tree(work, ["ck/a.pt"])
    os.symlink(outside, work / "ck" / "escape")              # a directory symlink out of the workdir
    os.symlink("a.pt", work / "ck" / "best.pt")               # a file symlink inside it
    os.symlink(outside / "big", work / "data")                # the literal root itself is a symlink
    entries, _ = globs.expand(str(work), ["ck/**", "data/**"])
    got = {e.path: e.target for e in entries}
    assert got == {"ck/a.pt": None, "ck/best.pt": "a.pt", "ck/escape": str(outside),
                   "data": str(outside / "big")}


def test_name_that_is_not_utf8_is_skipped_with_a_reason(tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "ok.pt").write_text("x")
    with open(os.path.join(os.fsencode(tmp_path), b"ck", b"bad\xff.pt"), "wb") as fh:
        fh.write(b"y")
    paths, skipped = _paths(tmp_path, ["ck/**"])
    assert paths == ["ck/ok.pt"]
    assert [s["reason"] for s in skipped] == ["name is not valid UTF-8"]


def test_only_the_literal_prefix_is_walked(tmp_path, monkeypatch):
    _tree(tmp_path, ["ck/a.pt", "dataset/1.jpg"])
    walked = []
    real = os.scandir

    def spy(path="."):
        walked.append(os.path.relpath(path, tmp_path))
        return real(path)
    monkeypatch.setattr(globs.os, "scandir", spy)
    assert _paths(tmp_path, ["ck/*.pt"])[0] == ["ck/a.pt"]
    assert walked == ["ck"]
