"""pull: copy exactly a run's manifest to this machine, then verify it.

One ssh round trip asks the agent for everything at once (`pull-info`: refresh the manifest,
its exact bytes, whether the box has rsync, the profile's teardown facts). Then the copy:
rsync when both ends have it (`--files-from` the manifest, partial files kept in
`.rgt-partial/` so an interrupted pull resumes, the same bounded ssh options as every other
call), otherwise the agent's own byte stream (pull_stream.py). Then verify.py decides.

The box may be compromised: its answers are read within bounds (bounded.py), its manifest
checked field by field before anything is written (manifest_check.py), and every write lands
inside DEST by descriptor (destdir.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat as stat_mod
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from boxagent.api import dumps
from rgt_client import exitcodes
from rgt_client.box import agentcall, transport
from rgt_client.pull import manifest_check, node, owned
from rgt_client.box.bounded import AgentStream
from rgt_client.pull.destdir import Blocked, Dest
from rgt_client.pull import datahome
from rgt_client.errors import ClientError
from rgt_client.pull.rsync import SAFE_AGAINST_SENDER, local_rsync, misplaced, remote_rsync, rsync_pull
from rgt_client.pull.stream import blocked_error, check_parents, make_symlinks, stream_pull
from rgt_client.textsafe import safe_line
from rgt_client.pull.manifest_check import VERIFIED_NAME
from rgt_client.pull.verify import META_DIR, VerifyResult, manifest_path, verify

Progress = Callable[[int, int], None]
METHODS = ("auto", "rsync", "stream")


@dataclass
class PullInfo:
    head: Dict[str, Any]
    raw: bytes
    manifest: Dict[str, Any]
    where: str = ""             # where the files were read and the manifest built (node.py)


@dataclass
class PullResult:
    dest: str
    method: str
    bytes_moved: int
    info: PullInfo
    verify: VerifyResult
    elapsed_s: float


def default_dest(host: str, run: str) -> str:
    """Where a pull with no DEST goes: rgt's own data folder for the project this runs in, outside
    its tree (datahome.py), so none of the project's test runners ever walks into the box's files."""
    return datahome.pull_dir(os.getcwd(), host, run)


def _agent_error(res: transport.Result, what: str, host: str) -> ClientError:
    """The agent's own Error:/Hint: lines (sanitised: they are the box's text)."""
    # split at LF only: str.splitlines() also splits at CR, and what a CR hid would vanish
    lines = [safe_line(ln.rstrip("\r"))[:500] for ln in res.err.split("\n") if ln.strip()]
    msg = next((ln[7:] for ln in lines if ln.startswith("Error: ")), None)
    hint = next((ln[6:] for ln in lines if ln.startswith("Hint: ")), None)
    code = exitcodes.USAGE if res.rc == 2 else exitcodes.ERROR
    from rgt_client.box.agentcall import client_hint      # `rgt-agent status` said as the client's
    return ClientError(msg or "%s failed (exit %d): %s" % (what, res.rc, " ".join(lines[-2:])),
                       client_hint(hint, host) if hint else "that is the agent's answer on %s: `rgt-client status %s` shows the box"
                       % (host, shlex.quote(host)), code)


def fetch_info(target: transport.Target, run: str, force: bool = False, on_node: bool = False) -> PullInfo:
    """The manifest (refreshed on the box) and the box's capabilities, in one round trip, read
    within bounds: a header line of at most 64 KiB, then exactly the manifest bytes it
    announced (capped), then the end of the answer."""
    where = "the manifest from %s" % target.host
    # Generous: a first manifest of a few hundred GB hashes for minutes (ssh keepalives still
    # bound a dead link).
    agentcall.check_names(run)
    with AgentStream(target, ["pull-info", run] + (["--force"] if force else []) + (["--on-node"] if on_node else []),
                     timeout=3600) as s:
        line = s.line("a pull-info header")
        if not line.endswith(b"\n"):
            _no_info(target, s.finish(), line)
        head = manifest_check.check_head(line, target.host)
        size = head["manifest_bytes"]
        if size > manifest_check.max_bytes():
            raise manifest_check.too_big(where, size)
        raw = s.read(size)
        if len(raw) < size:
            _no_info(target, s.finish(), b"", "the manifest ended after %d of %d bytes" % (len(raw), size))
        if s.read(1):
            raise ClientError("%s sent more after the %d-byte manifest it announced; refused" % (target.host, size),
                              manifest_check.hint(target.host))
        res = s.finish()
        if res.rc != 0:
            raise _agent_error(res, "pull-info", target.host)
    if hashlib.sha256(raw).hexdigest() != head["manifest_sha256"]:
        raise ClientError("%s does not match the sha256 its header announced" % where, manifest_check.hint(target.host))
    return PullInfo(head, raw, manifest_check.parse(raw, where, host=target.host))


def _no_info(target: transport.Target, res: transport.Result, got: bytes, what: str = "") -> None:
    """pull-info ended early: the agent's own error, or what went missing."""
    if res.rc == 2 and "invalid choice: 'pull-info'" in res.err:
        raise ClientError("the agent on %s is too old for pull" % target.host,
                          "update it: rgt-client install %s" % target.host)
    if res.rc != 0:
        raise _agent_error(res, "pull-info", target.host)
    raise ClientError("%s answered pull-info with %s" % (target.host, what or (
        "an unfinished header line: %s" % safe_line(got[:80]) if got else "nothing")),
                      "is the agent on the box current? rgt-client install %s" % target.host)


# `auto` takes rsync only for copies this big. Below it a copy costs its round trips, not its
# bytes: rsync's own start and file-list exchange are round trips the stream does not make (at
# 150 ms a 300 KB pull by rsync took 3.12 s when it opened its own connection, the stream 1.16 s).
# Above it rsync's resumable partial files and delta transfer are worth their round trips.
AUTO_RSYNC_FROM = 64 << 20


def choose_method(method: str, remote_rsync: Optional[str], here: Optional[str],
                  size: Optional[int] = None) -> str:
    """The copy's method; `size` is the bytes the run's files hold (None: not known, as if big)."""
    if method not in METHODS:
        raise ClientError("unknown --method %r" % method, "use auto, rsync or stream", exitcodes.USAGE)
    both = bool(remote_rsync) and bool(here)
    if method == "rsync" and not both:
        raise ClientError("no usable rsync (3.1 or newer here, 3.0 or newer on the box) on %s"
                          % ("this machine" if not here else "the box"),
                          "install rsync there, or use --method stream", exitcodes.USAGE)
    if method == "auto":
        return "rsync" if both and (size is None or size >= AUTO_RSYNC_FROM) else "stream"
    return method


def rsync_here(method: str, make_links: bool) -> Optional[str]:
    """This machine's rsync for a pull. The box is rsync's sender, and before 3.4.0 a malicious
    sender can write outside the receiver's folder (CVE-2024-12086/12087/12088): a method rgt
    picks itself (auto), and every pull nobody watches (MCP), takes it only from 3.4.0. An rsync
    3.1-3.3 serves only a person's explicit `--method rsync` (a distribution may have patched it)."""
    if make_links and method == "rsync":
        return local_rsync()
    return local_rsync(SAFE_AGAINST_SENDER)


def save_meta(dest: Dest, target: transport.Target, info: PullInfo, method: str, now: float) -> None:
    dest.write_atomic(META_DIR + "/manifest.json", info.raw)
    head = info.head
    dest.write_atomic(META_DIR + "/pull.json", (dumps({
        "schema": "rgt.pull/1", "host": target.host, "run": head.get("run"), "root": head.get("root"),
        "box": head.get("host"), "run_state": head.get("run_state"), "method": method, "where": info.where,
        "manifest_sha256": head.get("manifest_sha256"), "profile": head.get("profile") or {},
        "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}) + "\n").encode("utf-8"))


def _no_links_standing(d: Dest, host: str, m: Dict[str, Any]) -> None:
    """A pull that makes no symlink (MCP) refuses a folder where one of the manifest's links
    already stands: made by an earlier `rgt-client pull` into the same folder, it would be
    reported as the verified copy (`notes.txt -> ~/.netrc`), and a model reads through it."""
    standing = []
    for s in m.get("symlinks") or []:
        try:
            st = d.lstat(s["path"])
        except Blocked:
            continue            # check_parents named it
        if st is not None and stat_mod.S_ISLNK(st.st_mode):
            standing.append(safe_line(s["path"])[:200])
    if standing:
        raise ClientError("%s in %s %s a symlink (the manifest of %s lists it as one); a pull through MCP makes "
                          "none and reports on none: refused, nothing was changed"
                          % (", ".join(standing[:3]), d.path, "is" if len(standing) == 1 else "are", host),
                          "an rgt-client pull into this folder made it: remove it, or pull with rgt-client from a shell",
                          exitcodes.USAGE)


def _unchanged(d: Dest, dest: str, info: PullInfo, check_load: bool, workers: Optional[int],
               links: bool) -> Optional[VerifyResult]:
    """The verify of a copy already verified against this very manifest, when it still holds;
    None otherwise (then the copy runs as always). A copy that stopped matching loses its
    PULL_VERIFIED.json here, and the pull puts it right."""
    try:
        before = json.loads(d.read(VERIFIED_NAME, 1 << 20).decode("utf-8"))
    except (OSError, ValueError, Blocked):
        return None
    if not isinstance(before, dict) or before.get("manifest_sha256") != info.head["manifest_sha256"]:
        return None
    st = os.fstat(d.fd)
    res = verify(dest, manifest_path(dest), check_load=check_load, workers=workers, links=links,
                 expect_dir=(st.st_dev, st.st_ino))
    return res if res.ok else None


def pull(target: transport.Target, run: str, dest: Optional[str] = None, force: bool = False,
         method: str = "auto", bwlimit_kbps: Optional[int] = None, progress: Optional[Progress] = None,
         check_load: bool = False, workers: Optional[int] = None,
         on_info: Optional[Callable[[PullInfo, str], None]] = None, keep_mode: bool = False,
         make_links: bool = True, expect_dir: Optional[Tuple[int, int]] = None) -> PullResult:
    """Fetch the manifest, copy exactly its files into dest, verify; never deletes anything and
    never replaces a file that no earlier pull of this run wrote (owned.py).

    make_links=False (the MCP server) makes no symlink at all: the manifest's links are recorded
    in .rgt/manifest.json and counted as not made. Whether a link leaves its folder cannot be
    judged from its text: `s -> ../../..` inside `a/b/c/` plus `keys -> a/b/c/s/../../../../.ssh`
    both read as "inside" and together reached ~/.ssh."""
    t0 = time.monotonic()
    if target.host.startswith("-"):  # would reach ssh and rsync as an option, not a host
        raise ClientError("%r is not a host" % target.host, "name an ssh destination or `local`",
                          exitcodes.USAGE)
    agentcall.check_names(run)
    if dest is None:        # rgt's own folder: made 0700 by descriptor, and written only if still that one
        dest, expect_dir = datahome.owned_dir_at([datahome.PULLS, datahome.project_key(os.getcwd()),
                                                  datahome.plain_word(target.host), datahome.plain_word(run)])
    dest = os.path.abspath(dest)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise ClientError("%s exists and is not a directory" % dest, "name another DEST", exitcodes.USAGE)
    # A Ray run's files may live on the node that ran it: then its agent builds the manifest
    # and serves the files; `target` stays the box named (the folder's label, the record).
    try:
        info = fetch_info(target, run, force)
        src = node.Source(target, False, node.said(info.head.get("where"), target.host))
    except ClientError as exc:
        if not node.elsewhere(exc):
            raise
        src = node.source(target, run)
        info = fetch_info(src.target, run, force, src.on_node)
    info.where = src.said
    here = rsync_here(method, make_links)
    m = info.manifest
    # a local copy makes no round trips: its size says nothing about which method is cheaper
    how = choose_method(method, remote_rsync(info.head) if not src.target.is_local else here, here,
                        None if src.target.is_local else sum(f["bytes"] for f in m["files"]))
    with Dest(dest, create=expect_dir is None) as d:
        st = os.fstat(d.fd)
        if expect_dir is not None and (st.st_dev, st.st_ino) != expect_dir:
            # another local user swapped a folder on the path while the box was asked
            raise ClientError("%s is no longer the folder rgt checked before asking %s; refused, nothing "
                              "was written" % (dest, target.host),
                              "check who or what else writes in its parent folder, then pull again")
        try:
            # before a byte moves: a manifest path under a symlink in DEST (an earlier pull's)
            check_parents(d, target.host, [f["path"] for f in m["files"]] + [s["path"] for s in m.get("symlinks") or []])
            if not make_links:
                _no_links_standing(d, target.host, m)
            record = owned.load(d)
            if expect_dir is not None:      # rgt's own folder: one host's one run, never shared
                owned.check_one_run(d, target.host, run, record)
            owned.check(d, target.host, run, m, record)
            owned.save(d, target.host, run, m, record)
            save_meta(d, target, info, how, time.time())
            again = _unchanged(d, dest, info, check_load, workers, make_links)
            if again is not None:     # re-pull of an unchanged run: no copy, no more round trips
                owned.done(d, target.host, run, m, record)
                if on_info:
                    on_info(info, "nothing (this copy is verified against the same manifest)")
                return PullResult(dest, "none", 0, info, again, time.monotonic() - t0)
            if on_info:
                on_info(info, how)
            if how == "rsync":
                moved, known = rsync_pull(src.target, info.head, m, d, progress, bwlimit_kbps, here or "rsync", keep_mode)
            else:
                moved, known = stream_pull(src.target, run, m, d, progress, bwlimit_kbps)
            wrong = misplaced(d, m["files"])
            for rel in wrong:
                known.pop(rel, None)
            if make_links:
                make_symlinks(d, target.host, m.get("symlinks") or [])
            owned.done(d, target.host, run, m, record)
        except Blocked as b:
            raise blocked_error(target.host, b.rel, b, dest)
    res = verify(dest, manifest_path(dest), check_load=check_load, known=known, workers=workers, links=make_links,
                 expect_dir=(st.st_dev, st.st_ino))
    for p in res.problems:
        if p.path in wrong and p.kind in ("missing", "type"):
            p.kind, p.detail = "type", "arrived as a symlink or folder, not the file the manifest lists; removed"
    return PullResult(dest, how, moved, info, res, time.monotonic() - t0)
