"""Nothing a compromised box sends writes outside DEST: each known attack, driven through the
real client against the hostile agent on the real sshd."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from rgt_client.pull.destdir import Dest
from rgt_client.pull.rsync import adopt_rsync_temps
from tests.hostile import END, frame, huge

pytestmark = pytest.mark.ssh


def _pull(rgt, box, dest: Path, *extra: str):
    return rgt("pull", box.alias, "r1", str(dest), *box.args(), *extra)


def _tree(root: Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def outside(tmp_path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "keep.txt").write_text("the user's own file")
    return d


def _first_pull_leaves_symlink(rgt, hostile, dest: Path, target: Path) -> None:
    """An earlier, verified pull whose manifest recorded `d -> target` (a symlink is data)."""
    hostile.pull_info("r1", hostile.manifest({"a.txt": b"hello"}, links={"d": str(target)}))
    hostile.pull_stream(frame("a.txt", b"hello"), END)
    res = _pull(rgt, hostile, dest)
    assert res.exit_code == 0, res.stderr
    assert os.readlink(dest / "d") == str(target)


def test_manifest_symlink_to_outside_with_an_entry_below_it_is_refused(rgt, hostile, outside, tmp_path):
    m = hostile.manifest({"d/sub/deeper/x": b"pwned!"}, links={"d": str(outside)}, write=False)
    hostile.pull_info("r1", m)
    hostile.pull_stream(frame("d/sub/deeper/x", b"pwned!"), END)
    dest = tmp_path / "dest"
    res = _pull(rgt, hostile, dest)
    assert res.exit_code == 1
    assert "Error: the manifest from rgt-box: files[0].path: 'd/sub/deeper/x' lies below the symlink 'd'" \
        in res.stderr and "Hint:" in res.stderr
    assert _tree(outside) == ["keep.txt"]
    assert not hostile.calls("pull-stream"), "nothing may be asked for before the manifest is checked"


@pytest.mark.parametrize("method", ["stream", "rsync"])
def test_a_later_pull_under_a_symlink_left_by_an_earlier_one_creates_nothing_outside(
        rgt, hostile, outside, tmp_path, method):
    dest = tmp_path / "dest"
    _first_pull_leaves_symlink(rgt, hostile, dest, outside)
    # the next manifest has no symlink `d`, only a file below the one DEST now holds
    hostile.pull_info("r1", hostile.manifest({"d/sub/deeper/x": b"pwned!"}), rsync=method == "rsync")
    hostile.pull_stream(frame("d/sub/deeper/x", b"pwned!"), END)
    streams = len(hostile.calls("pull-stream"))
    res = _pull(rgt, hostile, dest, "--method", method)
    assert res.exit_code == 1
    assert ("Error: d/sub/deeper/x from rgt-box would be written through d in %s (is a symlink -> %s); refused"
            % (dest, outside)) in res.stderr
    assert _tree(outside) == ["keep.txt"]
    assert len(hostile.calls("pull-stream")) == streams, "refused before anything was asked for"


def test_stream_symlink_then_rsync_pull_never_adopts_files_outside(rgt, hostile, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".bashrc.backup").write_text("the user's backup")
    dest = tmp_path / "dest"
    _first_pull_leaves_symlink(rgt, hostile, dest, victim)
    hostile.pull_info("r1", hostile.manifest({"d/bashrc": b"x" * 100}), rsync=True)
    res = _pull(rgt, hostile, dest, "--method", "rsync")
    assert res.exit_code == 1 and "d/bashrc from rgt-box would be written through d" in res.stderr
    assert _tree(victim) == [".bashrc.backup"]


def test_rsync_temps_are_adopted_only_from_inside_dest_without_following_links(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".bashrc.backup").write_text("the user's backup")
    dest = tmp_path / "dest"
    (dest / "ck").mkdir(parents=True)
    os.symlink(victim, dest / "d")
    (dest / "ck" / ".big.bin.Ab3dEf").write_bytes(b"x" * 10)
    os.symlink(victim / ".bashrc.backup", dest / "ck" / ".model.bin.Zz9yXw")   # a link posing as a temp
    with Dest(str(dest)) as d:
        n = adopt_rsync_temps(d, [{"path": "d/bashrc", "bytes": 100}, {"path": "ck/big.bin", "bytes": 100},
                                  {"path": "ck/model.bin", "bytes": 100}])
    assert n == 1
    assert (dest / "ck" / ".rgt-partial" / "big.bin").read_bytes() == b"x" * 10
    assert _tree(victim) == [".bashrc.backup"]
    assert os.path.islink(dest / "ck" / ".model.bin.Zz9yXw")


def test_a_frame_longer_than_its_manifest_entry_writes_nothing(rgt, hostile, tmp_path):
    hostile.pull_info("r1", hostile.manifest({"a.txt": b"sixsix"}))
    hostile.pull_stream(frame("a.txt", huge(200 << 20)), END)
    dest = tmp_path / "dest"
    res = _pull(rgt, hostile, dest)
    assert res.exit_code == 1
    assert ("Error: rgt-box sent a broken stream: 209715200 bytes from offset 0 for a.txt, whose manifest "
            "entry has 6 bytes") in res.stderr
    assert not (dest / "a.txt").exists()
    assert [p for p in _tree(dest) if "partial" in p] == []
    assert hostile.ended("pull-stream")[0]["stdout_bytes"] < 64 << 20     # it hung up, it did not drain


@pytest.mark.parametrize("frames, why", [
    ([frame("b.txt", b"abc")], "'b.txt', which this pull did not ask for"),
    ([frame("a.txt", b"abc"), frame("a.txt", b"abc")], "'a.txt', which this pull did not ask for (or had"),
    ([frame("a.txt", b"abc", offset=2)], "a.txt from offset 2, past the 0 bytes asked from"),
    ([frame("a.txt", b"", nbytes=-1)], "bytes -1 for a.txt"),
    ([b'{"path": "a.txt", "offset": 0, "bytes": "3"}\nabc'], 'bytes "3" for a.txt'),
    ([b'{"path": "a.txt", "offset": 1e999, "bytes": 3}\nabc'], "offset Infinity for a.txt"),
    ([b"\x1b[2Jnot json\n"], "a frame header that is not JSON: \\x1b[2Jnot json"),
    ([b"[1, 2]\n"], "a frame header that is not an object"),
    ([b'{"path": "a.txt", "error": 42}\n'], "an error for a.txt that is not text"),
])
def test_a_frame_outside_what_was_asked_is_a_broken_stream(rgt, hostile, tmp_path, frames, why):
    hostile.pull_info("r1", hostile.manifest({"a.txt": b"abc"}))
    hostile.pull_stream(*frames, END)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1
    assert "Error: rgt-box sent a broken stream: " + why in res.stderr, res.stderr
    assert "internal error" not in res.stderr


def _entry(path, **kw):
    e = {"path": path, "bytes": 3, "mtime_ns": 0, "sha256": "a" * 64}
    e.update(kw)
    return e


@pytest.mark.parametrize("files, links, field, why", [
    ([_entry("../.bashrc")], [], "files[0].path", "'../.bashrc': an empty, `.` or `..` component"),
    ([_entry("ck/../../x")], [], "files[0].path", "`..` component"),
    ([_entry("/etc/cron.d/x")], [], "files[0].path", "'/etc/cron.d/x': an absolute path"),
    ([_entry("a\x00b")], [], "files[0].path", "'a\\x00b': a NUL byte in a path"),
    ([_entry("..\\..\\x")], [], "files[0].path", "a backslash in a path"),
    ([_entry("a.txt"), _entry("a.txt")], [], "files[1].path", "'a.txt': listed twice (also files[0])"),
    ([_entry("d")], [{"path": "d", "target": "x"}], "symlinks[0].path", "'d': listed twice (also files[0])"),
    ([_entry("d/x")], [{"path": "d", "target": "/etc"}], "files[0].path", "'d/x' lies below the symlink 'd'"),
    ([_entry("a"), _entry("a/b")], [], "files[1].path", "'a/b' lies below the file 'a'"),
    ([_entry(".rgt/manifest.json")], [], "files[0].path", "a hidden path"),
    ([_entry("ck/.rgt-partial/a")], [], "files[0].path", "a hidden path"),
    ([_entry("PULL_VERIFIED.json")], [], "files[0].path", "one of rgt's own names in DEST"),
    ([_entry(".git/hooks/post-commit")], [], "files[0].path", "a hidden path"),
    ([_entry("vendor/dep/.git/hooks/pre-commit")], [], "files[0].path", "a hidden path"),
    ([_entry(".env")], [], "files[0].path", "a hidden path"),
    ([], [{"path": ".ssh", "target": "/home"}], "symlinks[0].path", "a hidden path"),
    ([_entry("x/" * 300 + "y")], [], "files[0].path", "longer or deeper than a file system allows"),
    ([], [{"path": "l", "target": "a\x00b"}], "symlinks[0].target", "expected a symlink target"),
])
def test_unsafe_manifest_paths_are_refused_naming_the_path_and_the_host(rgt, hostile, tmp_path, files, links,
                                                                       field, why):
    m = hostile.manifest({}, write=False)
    m.update(files=files, symlinks=links)
    hostile.pull_info("r1", m)
    dest = tmp_path / "dest"
    res = _pull(rgt, hostile, dest)
    assert res.exit_code == 1
    assert "Error: the manifest from rgt-box: %s" % field in res.stderr and why in res.stderr, res.stderr
    assert "Hint:" in res.stderr
    assert not dest.exists(), "nothing is written before the manifest is checked"


def test_a_symlink_entry_is_created_as_a_link_and_never_followed(rgt, hostile, outside, tmp_path):
    dest = tmp_path / "dest"
    _first_pull_leaves_symlink(rgt, hostile, dest, outside)
    # the same manifest again: the link exists; the files are in place; nothing is followed
    hostile.pull_stream(END)
    res = _pull(rgt, hostile, dest)
    assert res.exit_code == 0, res.stderr
    assert _tree(outside) == ["keep.txt"]
