"""rgt's folder on a Ray node: the head is a box (untrusted), and the node is shared with other
local users. The folder the head names for a pull is taken only where it is provably rgt's own
(`<the node box's RGT_HOME>/ray-node/<12 hex>`), and the node makes its folder only from a plain
12-hex tag, never one that climbs out of `RGT_NODE_HOME` into a folder another user owns."""
from __future__ import annotations

import os

import pytest

from boxagent.engine import raycell
from rgt_client.pull.node import _home, _node_folder
from tests.localuser import as_user, other_user, shared_tmp

NODE = "/home/u/.rgt"
OWN = NODE + "/ray-node/0123456789ab"


@pytest.mark.parametrize("said, why", [
    (OWN + "\n", "a tag with a newline after it (a regex `$` let it by)"),
    (NODE + "/ray-node/0123456789ab/..", "a climb back out"),
    (NODE + "/x/../ray-node/0123456789ab", "a path that is not plain"),
    ("/tmp/evil/ray-node/0123456789ab", "a folder outside the node box's RGT_HOME"),
    (NODE + "/ray-node/0123456789AB", "a tag that is not lowercase hex"),
    (NODE + "/ray-node/0123456789a", "a tag of 11 digits"),
])
def test_a_head_naming_a_folder_that_is_not_rgts_own_on_the_node_is_refused(said, why):
    assert _node_folder(said, NODE) is None, why


def test_a_head_naming_a_node_folder_where_the_node_box_home_is_unknown_is_refused():
    """Without the node box's RGT_HOME (hosts.json holds none) nothing shows the folder is rgt's:
    `/tmp/evil/ray-node/<tag>`, made by another user on the node, used to be taken."""
    assert _node_folder("/tmp/evil/ray-node/0123456789ab", None) is None
    assert _node_folder(OWN, NODE) == OWN


def test_a_shared_home_with_a_newline_after_it_is_not_taken():
    assert _home(NODE + "\n") is None and _home(NODE) == NODE


@pytest.mark.root
def test_a_node_tag_climbing_into_another_users_folder_is_refused(tmp_path, monkeypatch):
    """`../../<their folder>/x` as the tag: makedirs made x (ours, 0700) inside a folder another
    user (`nobody`, a real second uid) owns, the check of x alone passed, and that user could
    swap x for their own folder before the launch record (the stage's env, tokens) was written."""
    other = other_user()
    with shared_tmp() as shared:
        theirs = shared / "theirs"

        def make_theirs() -> None:
            os.mkdir(theirs, 0o777)
            os.chmod(theirs, 0o777)
        as_user(other, make_theirs)
        base = tmp_path / "node"
        base.mkdir(mode=0o700)
        monkeypatch.setenv("RGT_NODE_HOME", str(base))
        climb = os.path.relpath(theirs / "x", base)
        for tag in (climb, "../" + "0123456789ab", "0123456789ab/", "", None):
            with pytest.raises(RuntimeError, match="is not 12 hex digits"):
                raycell.node_home(tag)
        assert not (theirs / "x").exists()
        assert raycell.node_home("0123456789ab") == str(base / "0123456789ab")
