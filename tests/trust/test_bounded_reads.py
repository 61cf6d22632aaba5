"""A compromised box cannot exhaust the laptop's memory through pull, nor turn a malformed
answer into an internal error: 1 GB answers generated on the hostile box, the real client as
a real process, its peak RSS measured."""
from __future__ import annotations

import json

import pytest

from tests.hostile import END, frame, huge, raw, run_client

pytestmark = pytest.mark.ssh
GB = 1 << 30
RSS_LIMIT = 100 << 20


def _manifest(box) -> bytes:
    return json.dumps(box.manifest({"a.txt": b"sixsix"})).encode()


def _header_line_of_1gb(box):
    box.answer("pull-info", stdout=huge(GB, b"{"))


def _manifest_of_1gb(box):
    box.pull_info("r1", huge(GB, b" "), manifest_sha256="0" * 64)   # (refused before any hashing)


def _1gb_after_the_announced_manifest(box):
    box.pull_info("r1", _manifest(box), trailer=huge(GB))


def _frame_header_line_of_1gb(box):
    box.pull_info("r1", _manifest(box))
    box.pull_stream(huge(GB, b"x"))


def _frame_of_1gb_for_a_6_byte_entry(box):
    box.pull_info("r1", _manifest(box))
    box.pull_stream(frame("a.txt", huge(GB)), END)


def _stderr_of_1gb(box):
    box.answer("pull-info", stderr=[huge(GB, b"E"), raw(b"\nError: out of luck\n")], rc=1)


def _manifest_of_60mb_zeros(box):
    box.pull_info("r1", [raw(b"["), huge(60 << 20, b"0,"), raw(b"0]")])


@pytest.mark.slow
@pytest.mark.parametrize("attack, says", [
    (_header_line_of_1gb, "rgt-box sent a pull-info header longer than 64 KiB; refused"),
    (_manifest_of_1gb, "the manifest from rgt-box is 1024 MiB, over the 64 MiB a manifest may have"),
    (_1gb_after_the_announced_manifest, "rgt-box sent more after the"),
    (_frame_header_line_of_1gb, "rgt-box sent a frame header longer than 64 KiB; refused"),
    (_frame_of_1gb_for_a_6_byte_entry, "1073741824 bytes from offset 0 for a.txt, whose manifest entry has 6"),
    (_stderr_of_1gb, "Error: rgt-box sent more than 16 MiB of error output; refused"),
    (_manifest_of_60mb_zeros, "the manifest from rgt-box is not shaped like a manifest"),
], ids=lambda v: v.__name__.strip("_") if callable(v) else "")
def test_1gb_answers_are_refused_in_under_100mb(hostile, tmp_path, attack, says):
    attack(hostile)
    res = run_client(["pull", hostile.alias, "r1", str(tmp_path / "dest"), *hostile.args()],
                     ssh_config=hostile.ssh_config, timeout=300)
    print("peak RSS %-40s %6.1f MiB in %5.1fs" % (attack.__name__, res.maxrss_bytes / 2 ** 20, res.elapsed_s))
    assert res.rc == 1, res.err_text
    assert says in res.err_text and "Hint:" in res.err_text, res.err_text[-2000:]
    assert "internal error" not in res.err_text
    assert res.maxrss_bytes < RSS_LIMIT, "peak RSS %d MiB" % (res.maxrss_bytes >> 20)


def _pull(rgt, box, dest):
    return rgt("pull", box.alias, "r1", str(dest), *box.args())


def _bent(box, key, value):
    m = box.manifest({"a.txt": b"abc"}, write=False)
    if key.startswith("files[0]."):
        m["files"][0][key[9:]] = value
    else:
        m[key] = value
    return m


@pytest.mark.parametrize("key, value, says", [
    ("files[0].bytes", 10 ** 30, "files[0].bytes: 1000000000000000000000000000000 is out of range"),
    ("files[0].bytes", -6, "files[0].bytes: -6 is out of range"),
    ("files[0].bytes", "3", "files[0].bytes: expected a whole number, got '3'"),
    ("files[0].bytes", True, "files[0].bytes: expected a whole number, got true"),
    ("files[0].mtime_ns", 1.5, "files[0].mtime_ns: expected a whole number, got 1.5"),
    ("files[0].mtime_ns", 10 ** 19, "files[0].mtime_ns: 10000000000000000000 is out of range"),
    ("files[0].path", 123, "files[0].path: 123: expected a non-empty string"),
    ("files[0].path", ["a"], 'files[0].path: ["a"]: expected a non-empty string'),
    ("files[0].sha256", "zz" * 32, "files[0].sha256: expected 64 lowercase hex digits, got 'zzzz"),
    ("files[0].sha256", None, "files[0].sha256: expected 64 lowercase hex digits, got null"),
    ("files", "a.txt", "files: expected a list, got 'a.txt'"),
    ("symlinks", {"a": 1}, 'symlinks: expected a list, got {"a": 1}'),
    ("skipped", 3, "skipped: expected a list, got 3"),
    ("schema", "rgt.manifest/9", "schema: not an rgt manifest (schema rgt.manifest/1)"),
])
def test_malformed_manifest_fields_are_named_with_the_host(rgt, hostile, tmp_path, key, value, says):
    hostile.pull_info("r1", _bent(hostile, key, value))
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1
    assert "Error: the manifest from rgt-box: " + says in res.stderr, res.stderr
    assert "Hint: no rgt agent sends that" in res.stderr and "rgt-client install rgt-box" in res.stderr


def test_manifest_files_entry_that_is_not_an_object(rgt, hostile, tmp_path):
    m = hostile.manifest({}, write=False)
    m["files"] = [5]
    hostile.pull_info("r1", m)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1 and "files[0]: expected an object, got 5" in res.stderr


def test_a_5000_digit_integer_is_not_an_internal_error(rgt, hostile, tmp_path):
    body = json.dumps(hostile.manifest({"a.txt": b"abc"}, write=False)).replace('"bytes": 3', '"bytes": ' + "9" * 5000)
    hostile.pull_info("r1", body.encode())
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1
    assert "Error: the manifest from rgt-box " in res.stderr and "internal error" not in res.stderr


@pytest.mark.parametrize("head, says", [
    ({"manifest_bytes": "12"}, "manifest_bytes: expected a whole number, got '12'"),
    ({"manifest_bytes": -1}, "manifest_bytes: -1 is out of range"),
    ({"manifest_sha256": 7}, "manifest_sha256: expected 64 lowercase hex digits, got 7"),
    ({"root": 5}, "root: expected an absolute path, got 5"),
    ({"root": "relative/dir"}, "root: expected an absolute path"),
    ({"rsync_version": ["3.2.7"]}, "rsync_version: expected a line of text"),
    ({"run_state": "ok\nError: fake"}, "run_state: expected a line of text"),
    ({"profile": "autodl"}, "profile: expected an object, got 'autodl'"),
])
def test_malformed_pull_info_header_fields_are_named_with_the_host(rgt, hostile, tmp_path, head, says):
    hostile.pull_info("r1", hostile.manifest({"a.txt": b"abc"}, write=False), **head)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1
    assert "Error: the pull-info header from rgt-box: " + says in res.stderr, res.stderr


@pytest.mark.parametrize("answer, says", [
    (b"[1, 2]\n", "the pull-info header from rgt-box is not a JSON object: [1, 2]"),
    (b"\x1b[2J{\n", "is not a JSON object: \\x1b[2J{"),
    (b'{"manifest_bytes": 3', "rgt-box answered pull-info with an unfinished header line"),
    (b"", "rgt-box answered pull-info with nothing"),
])
def test_a_pull_info_answer_that_is_no_header(rgt, hostile, tmp_path, answer, says):
    hostile.answer("pull-info", stdout=answer)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1 and says in res.stderr, res.stderr


def test_a_manifest_shorter_than_announced_or_not_matching_its_sha256(rgt, hostile, tmp_path):
    body = json.dumps(hostile.manifest({"a.txt": b"abc"}, write=False)).encode()
    hostile.pull_info("r1", body, manifest_bytes=len(body) + 10)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1 and "the manifest ended after %d of %d bytes" % (len(body), len(body) + 10) \
        in res.stderr
    hostile.pull_info("r1", body, manifest_sha256="0" * 64)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 1 and "the manifest from rgt-box does not match the sha256 its header" in res.stderr


@pytest.mark.parametrize("teardown", [[{}], "destroy", [{"name": 5}], [["x"]], {"name": "x"}])
def test_malformed_teardown_facts_fall_back_to_the_generic_gate(rgt, hostile, tmp_path, teardown):
    hostile.pull_info("r1", hostile.manifest({"a.txt": b"abc"}),
                      profile={"name": "evil", "teardown": teardown, "danger_clock": None})
    hostile.pull_stream(frame("a.txt", b"abc"), END)
    res = _pull(rgt, hostile, tmp_path / "dest")
    assert res.exit_code == 0, res.stderr
    assert "Safe to tear down" in res.stdout and "internal error" not in res.stderr
