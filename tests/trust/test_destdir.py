"""destdir.Dest: every path below DEST is walked by descriptor; a symlink or a file on the way
is refused by the kernel, whatever any earlier check saw."""
from __future__ import annotations

import os
import subprocess

import pytest

from rgt_client.pull.destdir import Blocked, Dest, split


@pytest.fixture
def dest(tmp_path):
    d = tmp_path / "dest"
    d.mkdir()
    (tmp_path / "outside").mkdir()
    with Dest(str(d)) as dd:
        yield dd


def _outside(dest) -> list:
    return sorted(os.listdir(os.path.join(os.path.dirname(dest.path), "outside")))


def test_a_symlinked_folder_on_the_way_is_never_entered(dest):
    os.symlink("../outside", os.path.join(dest.path, "d"))
    with pytest.raises(Blocked) as exc:
        dest.open("d/sub/deeper/x", os.O_WRONLY | os.O_CREAT, create_parents=True)
    assert (exc.value.rel, exc.value.at, exc.value.why, exc.value.target) == (
        "d/sub/deeper/x", "d", "is a symlink", "../outside")
    for act in (lambda: dest.write_atomic("d/x", b"1"), lambda: dest.symlink("t", "d/l"),
                lambda: dest.lstat("d/x"), lambda: dest.dir("d/sub", create=True)):
        with pytest.raises(Blocked):
            act()
    assert _outside(dest) == []


def test_a_file_on_the_way_is_not_a_folder(dest):
    open(os.path.join(dest.path, "f"), "w").close()
    with pytest.raises(Blocked) as exc:
        dest.dir("f/x", create=True)
    assert exc.value.why == "is not a folder"


def test_a_link_made_after_the_folder_was_cached_is_still_refused(dest):
    os.close(dest.dir("a/b", create=True))
    os.rename(os.path.join(dest.path, "a"), os.path.join(dest.path, "a.old"))
    os.symlink("../outside", os.path.join(dest.path, "a"))
    dest.forget()
    with pytest.raises(Blocked):
        dest.write_atomic("a/b/x", b"1")
    assert _outside(dest) == []


def test_the_last_component_is_never_followed(dest):
    os.symlink("../outside/t", os.path.join(dest.path, "l"))
    with pytest.raises(OSError):
        dest.open("l", os.O_WRONLY | os.O_CREAT)
    dest.write_atomic("l", b"replaces the link itself")
    assert not os.path.islink(os.path.join(dest.path, "l")) and _outside(dest) == []


def test_replace_moves_inside_dest_and_replaces_a_link_rather_than_its_target(dest):
    dest.write_atomic("p/x", b"data")
    os.symlink("../outside/victim", os.path.join(dest.path, "y"))
    dest.replace("p/x", "y")
    with open(os.path.join(dest.path, "y"), "rb") as fh:
        assert fh.read() == b"data"
    assert _outside(dest) == []


def test_deep_paths_need_no_recursion_and_few_descriptors(dest):
    deep = "/".join(["d"] * 1500)
    try:
        dest.write_atomic(deep + "/x", b"1")
        assert dest.lstat(deep + "/x").st_size == 1
        assert len(os.listdir("/proc/self/fd")) < 200 if os.path.isdir("/proc/self/fd") else True
        dest.remove_empty_dirs("d")     # not empty: nothing removed, nothing raised
        assert dest.lstat(deep + "/x") is not None
    finally:
        # pytest's own clean-up of old temp folders recurses and would die on 1500 levels.
        subprocess.run(["rm", "-rf", os.path.join(dest.path, "d")], check=False)


def test_remove_empty_dirs_removes_folders_only_and_empty_only(dest):
    os.close(dest.dir("p/a/b", create=True))
    dest.write_atomic("p/c/keep", b"1")
    os.symlink("../outside", os.path.join(dest.path, "p", "link"))
    dest.remove_empty_dirs("p")
    assert sorted(os.listdir(os.path.join(dest.path, "p"))) == ["c", "link"]


@pytest.mark.parametrize("rel", ["", "/etc", "a//b", "./a", "a/..", "a/../b", "a\0b"])
def test_paths_that_could_climb_out_are_not_paths(rel):
    with pytest.raises(ValueError):
        split(rel)
