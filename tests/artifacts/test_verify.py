"""`rgt-client verify` and the `local` host: set equality, sizes, sha256, PULL_VERIFIED.json."""
from __future__ import annotations

import json
import os

import pytest

from boxagent.artifacts import build_manifest
from boxagent.base.home import Home
from rgt_client.errors import ClientError
from rgt_client.pull.destdir import Dest
from rgt_client.pull.rsync import adopt_rsync_temps
from rgt_client.pull.verify import check_manifest, verify


@pytest.fixture
def pulled(box, rgt_local, tmp_path):
    """A verified pull from the `local` host (rsync when installed, else the stream)."""
    box.write("ck/a.pt", os.urandom(50_000))
    box.write("ck/b c ü.pt", os.urandom(20_000))
    box.write("metrics.json", '{"acc": 0.9}')
    os.symlink("a.pt", box.work / "ck" / "best.pt")
    run = box.run("r1", ["ck/**", "*.json"])
    dest = tmp_path / "pulled"
    res = rgt_local("pull", "local", run, str(dest), "--home", str(box.home))
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("OK 3/3 files") and (dest / "PULL_VERIFIED.json").exists()
    return dest


def test_local_host_pull_copies_and_verifies(pulled, box):
    assert (pulled / "ck" / "b c ü.pt").read_bytes() == (box.work / "ck" / "b c ü.pt").read_bytes()
    assert os.readlink(pulled / "ck" / "best.pt") == "a.pt"


def test_flipped_byte_is_named_and_the_old_proof_moved_aside(pulled, rgt_local):
    p = pulled / "ck" / "a.pt"
    data = bytearray(p.read_bytes())
    data[25_000] ^= 0x01
    st = os.stat(p)
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))    # same size and mtime: only the hash tells
    res = rgt_local("verify", str(pulled))
    assert res.exit_code == 4
    assert "CHANGED    ck/a.pt" in res.stdout and "FAILED 1 problem(s) (1 sha256)" in res.stdout
    assert "NOT safe to tear down" in res.stdout
    assert not (pulled / "PULL_VERIFIED.json").exists()
    assert (pulled / ".rgt" / "PULL_VERIFIED.stale.json").exists()


def test_extra_and_missing_files_are_named(pulled, rgt_local):
    (pulled / "ck" / "b c ü.pt").unlink()
    (pulled / "notes.txt").write_text("mine")
    (pulled / "metrics.json").write_text("{}")
    res = rgt_local("verify", str(pulled), "--json")
    assert res.exit_code == 4
    out = json.loads(res.stdout)
    got = sorted((p["kind"], p["path"]) for p in out["problems"])
    assert got == [("extra", "notes.txt"), ("missing", "ck/b c ü.pt"), ("size", "metrics.json")]
    assert out["safe_to_tear_down"] is False


def test_a_replaced_symlink_is_named(pulled):
    (pulled / "ck" / "best.pt").unlink()
    os.symlink("b c ü.pt", pulled / "ck" / "best.pt")
    res = verify(str(pulled))
    assert [(p.kind, p.path) for p in res.problems] == [("symlink", "ck/best.pt")]


def test_verify_without_a_manifest_is_a_usage_error(rgt_local, tmp_path):
    res = rgt_local("verify", str(tmp_path))
    assert res.exit_code == 2 and "Error: cannot read the manifest" in res.stderr and "Hint:" in res.stderr


def test_check_load_says_when_torch_is_missing(pulled, rgt_local):
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed here; the skip message cannot be shown")
    except ImportError:
        pass
    res = rgt_local("verify", str(pulled), "--check-load")
    assert res.exit_code == 0
    assert "load ck/a.pt: skipped: torch is not installed here" in res.stdout


@pytest.mark.parametrize("bad", [
    {"path": "../.bashrc", "bytes": 1, "mtime_ns": 0, "sha256": "x"},
    {"path": "/etc/passwd", "bytes": 1, "mtime_ns": 0, "sha256": "x"},
    {"path": "PULL_VERIFIED.json", "bytes": 1, "mtime_ns": 0, "sha256": "x"},
    {"path": "link/inside", "bytes": 1, "mtime_ns": 0, "sha256": "x"},
])
def test_a_manifest_that_would_write_outside_dest_is_refused(bad):
    m = {"schema": "rgt.manifest/1", "files": [bad], "symlinks": [{"path": "link", "target": "/etc"}]}
    with pytest.raises(ClientError):
        check_manifest(m, "test")


def test_rsync_temp_left_by_a_hard_kill_becomes_the_partial(tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / ".big.bin.Ab3dEf").write_bytes(b"x" * 100)
    (tmp_path / "ck" / ".other.bin.Ab3dEf").write_bytes(b"y")     # not a manifest file: left alone
    with Dest(str(tmp_path)) as dest:
        n = adopt_rsync_temps(dest, [{"path": "ck/big.bin", "bytes": 1000}])
    assert n == 1
    assert (tmp_path / "ck" / ".rgt-partial" / "big.bin").read_bytes() == b"x" * 100
    assert (tmp_path / "ck" / ".other.bin.Ab3dEf").exists()


@pytest.fixture
def ram_dir(tmp_path):
    """100,000 files are a metadata storm: on a tmpfs (/dev/shm) when there is one, so the test
    measures rgt, not the disk's journal."""
    import shutil
    import tempfile
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else str(tmp_path)
    d = tempfile.mkdtemp(prefix="rgt-100k-", dir=base)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
def test_manifest_of_100000_files_refreshes_and_verifies(box, ram_dir):
    for d in range(100):
        dd = "%s/shards/%02d" % (ram_dir, d)
        os.makedirs(dd)
        for i in range(1000):
            fd = os.open("%s/%04d.txt" % (dd, i), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"%d/%d" % (d, i))
            os.close(fd)
    box.work = type(box.work)(ram_dir)
    run = box.run("big", ["shards/**"])
    home = Home(str(box.home))
    spec = json.loads((box.home / "runs" / run / "spec.json").read_text())
    m = build_manifest(home, run, spec)
    assert m["totals"]["files"] == 100_000 and m["hashed"] == 100_000
    with open(ram_dir + "/shards/42/0042.txt", "wb") as fh:
        fh.write(b"changed")
    again = build_manifest(home, run, spec)
    assert again["hashed"] == 1          # the refresh hashes one file (bench: refresh < 1 s)
    assert [f for f in again["files"] if f["path"] == "shards/42/0042.txt"][0]["bytes"] == 7
    # verify the workdir itself against the manifest: 100,000 files, all present and equal
    res = verify(ram_dir, str(box.home / "runs" / run / "manifest.json"))
    assert res.ok and res.checked == 100_000


def test_an_empty_manifest_is_never_called_safe(box, rgt_local, tmp_path):
    box.write("checkpoints/a.pt", "w")
    run = box.run("r1", ["checkpoint/**"])          # the typo that empties the manifest
    out = box.agent("manifest", run)
    assert out.returncode == 0 and b"include pattern 'checkpoint/**' matched no file" in out.stdout
    res = rgt_local("pull", "local", run, str(tmp_path / "pulled"), "--home", str(box.home))
    assert res.exit_code == 4
    assert "EMPTY" in res.stdout and "NOT safe to tear down" in res.stdout
    assert "warning: include pattern 'checkpoint/**' matched no file" in res.stderr
    assert not (tmp_path / "pulled" / "PULL_VERIFIED.json").exists()


@pytest.mark.parametrize("head, here, method, want", [
    ({"rsync": "/usr/bin/rsync", "rsync_version": "3.2.7"}, "/usr/bin/rsync", "auto", "rsync"),
    ({"rsync": "/usr/bin/rsync", "rsync_version": "2.6.9"}, "/usr/bin/rsync", "auto", "stream"),
    ({"rsync": None, "rsync_version": None}, "/usr/bin/rsync", "auto", "stream"),
    ({"rsync": "/usr/bin/rsync", "rsync_version": "3.2.7"}, None, "auto", "stream"),
    ({"rsync": "/usr/bin/rsync", "rsync_version": "3.2.7"}, "/usr/bin/rsync", "stream", "stream"),
])
def test_rsync_only_when_both_ends_have_a_usable_one(head, here, method, want):
    from rgt_client.pull.transfer import choose_method
    from rgt_client.pull.rsync import remote_rsync
    assert choose_method(method, remote_rsync(head), here) == want


@pytest.mark.parametrize("size, want", [(300_000, "stream"), ((64 << 20) - 1, "stream"), (64 << 20, "rsync"),
                                        (None, "rsync")])
def test_auto_streams_a_small_copy_whose_cost_is_round_trips(size, want):
    from rgt_client.pull.transfer import choose_method
    assert choose_method("auto", "/usr/bin/rsync", "/usr/bin/rsync", size) == want
    assert choose_method("rsync", "/usr/bin/rsync", "/usr/bin/rsync", size) == "rsync"


def test_method_rsync_without_rsync_is_a_usage_error():
    from rgt_client.pull.transfer import choose_method
    with pytest.raises(ClientError) as exc:
        choose_method("rsync", None, "/usr/bin/rsync")
    assert exc.value.code == 2 and "--method stream" in exc.value.hint


FAKE_TORCH = """__version__ = %r
import json, os, sys
def load(path, map_location=None, **kw):
    # what a crafted pickle could do: run here, with this process's environment
    with open(%r, "w") as fh:
        json.dump({"pid": os.getpid(), "env": dict(os.environ), "kw": kw, "path": path}, fh)
"""


def _fake_torch(tmp_path, monkeypatch, version):
    """A stand-in torch on sys.path (the foreign package is the seam; torch is not installed
    here) whose load records where it ran and with what environment."""
    lib, ran = tmp_path / "lib", tmp_path / "ran.json"
    (lib / "torch").mkdir(parents=True)
    (lib / "torch" / "__init__.py").write_text(FAKE_TORCH % (version, str(ran)))
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.setenv("RGT_TEST_LAPTOP_TOKEN", "ghp_" + "L" * 36)
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "m.pt").write_bytes(b"pickle")
    return ran


@pytest.mark.parametrize("version", ["2.5.1", "2.5.1+cu121", "1.13.0", "garbage",
                                     "2.6.0a0+git1234", "2.6.0.dev20241112", "2.6.0rc1"])
def test_check_load_never_hands_a_box_file_to_a_torch_older_than_2_6(tmp_path, monkeypatch, version):
    """torch <= 2.5.1 runs a crafted .pt's code even with weights_only=True (CVE-2025-32434):
    a compromised box's checkpoint would run on the laptop at pull --check-load."""
    from rgt_client.pull.verify import check_loads
    ran = _fake_torch(tmp_path, monkeypatch, version)
    out = check_loads(str(tmp_path / "dest"), ["m.pt"])
    assert not ran.exists()                              # load was never called
    assert out[0]["ok"] is None and "skipped: needs torch >= 2.6" in out[0]["detail"]
    assert "CVE-2025-32434" in out[0]["detail"]


def test_check_load_loads_with_torch_2_6_in_a_child_with_an_empty_environment(tmp_path, monkeypatch):
    import json
    import os
    from rgt_client.pull.verify import check_loads
    ran = _fake_torch(tmp_path, monkeypatch, "2.6.0")
    out = check_loads(str(tmp_path / "dest"), ["m.pt"])
    assert out == [{"path": "m.pt", "ok": True, "detail": "loaded with torch"}]
    seen = json.loads(ran.read_text())
    assert seen["pid"] != os.getpid() and seen["kw"] == {"weights_only": True}
    assert "RGT_TEST_LAPTOP_TOKEN" not in seen["env"] and set(seen["env"]) <= {"LC_CTYPE"}, seen["env"]


def test_check_load_never_imports_a_torch_the_box_wrote_into_dest(tmp_path, monkeypatch):
    """DEST holds the box's files: a `torch/` folder there must not be the torch that loads."""
    from rgt_client.pull.verify import check_loads
    ran = _fake_torch(tmp_path, monkeypatch, "2.6.0")
    box = tmp_path / "dest" / "torch"
    box.mkdir()
    (box / "__init__.py").write_text("__version__ = '9.9'\nopen(%r, 'w').write('box code ran')\n"
                                     % str(tmp_path / "boxran"))
    monkeypatch.syspath_prepend(str(tmp_path / "dest"))
    out = check_loads(str(tmp_path / "dest"), ["m.pt"])
    assert not (tmp_path / "boxran").exists()
    assert out[0]["ok"] is True and ran.exists()


@pytest.mark.parametrize("version", ["2.6.0+cu124", "2.6.1", "2.7.0.dev20250301", "3.0.0"])
def test_check_load_loads_with_the_2_6_release_and_anything_after_it(tmp_path, monkeypatch, version):
    from rgt_client.pull.verify import check_loads
    ran = _fake_torch(tmp_path, monkeypatch, version)
    assert check_loads(str(tmp_path / "dest"), ["m.pt"])[0]["ok"] is True and ran.exists()


def test_an_rsync_older_than_3_4_here_serves_only_an_explicit_method_rsync(tmp_path, monkeypatch):
    """The box is rsync's sender: before 3.4.0 a malicious sender writes outside the receiver's
    folder (CVE-2024-12086/12087/12088). `auto` (and MCP) never picks such an rsync here."""
    import shutil
    from rgt_client.pull.transfer import rsync_here
    real = shutil.which("rsync")
    if real is None:
        pytest.skip("no rsync on this machine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rsync"        # a real program answering as a distribution's rsync 3.2.7
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "rsync  version 3.2.7  protocol version 31"; '
                    'exit 0; }\nexec %s "$@"\n' % real)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    assert rsync_here("auto", make_links=True) is None
    assert rsync_here("rsync", make_links=False) is None            # MCP
    assert rsync_here("rsync", make_links=True) == str(fake)         # a person asked for it
    fake.write_text('#!/bin/sh\necho "rsync  version 3.4.1  protocol version 32"\n')
    assert rsync_here("auto", make_links=True) == str(fake)
