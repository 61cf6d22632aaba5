"""rgt's own data folder: where pulls and reports land, outside every project.

Pulled files are the box's. While they landed in `./rgt-pulls/` inside the project, the
project's own test runners walked into them: a box's `eval/metrics.test.js` ran at the next
`node --test`, and a pytest `testpaths = **/tests` glob loaded a box's `conftest.py`. Markers in
the folder only ever kept out the runners they were written for. Outside the project tree no
runner and no glob of the project reaches the files at all.

The root is `$RGT_DATA_HOME`, else `${XDG_DATA_HOME:-~/.local/share}/rgt`; below it
`pulls/PROJECT/...` (`rgt-client pull`), `mcp-pulls/PROJECT/...` (the MCP server's pulls, made to
its stricter rules) and `reports/PROJECT/...`, PROJECT being the project folder's name and a
short hash of its real path (two projects called `app` never share a folder). The root must be
a real folder (not a symlink), yours, and writable by you alone; a missing one is made 0700.
Every folder below it is made 0700 and walked by descriptor, never through a symlink.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat as stat_mod
from typing import List, Tuple

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line

ENV = "RGT_DATA_HOME"
PULLS = "pulls"
# MCP pulls get their own tree: a CLI pull keeps the box's symlinks and (with --keep-mode) exec
# bits, and once shared its folder with the MCP pull of the same run, which then reported
# `verified` on a folder holding `notes.txt -> ~/.netrc` and named no link.
MCP_PULLS = "mcp-pulls"
REPORTS = "reports"
_ROOT_HINT = ("rgt keeps pulls and reports in a folder of yours alone: make %s a real folder you own "
              "(chmod 700), or set RGT_DATA_HOME to one")


def root_path() -> str:
    """Where rgt's data folder is (not checked, not made)."""
    own = os.environ.get(ENV)
    if own:
        return os.path.abspath(os.path.expanduser(own))
    xdg = os.environ.get("XDG_DATA_HOME")
    # the XDG spec: a relative XDG_DATA_HOME is invalid and is ignored
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "rgt")


def plain_word(word: str) -> str:
    """Any text as one plain folder name (letters, digits, `._@+-`; not hidden, not an option)."""
    w = re.sub(r"[^A-Za-z0-9._@+-]", "_", word).lstrip(".-")[:128]
    return w or "_"


def project_key(project: str) -> str:
    """PROJECT's folder below pulls/ and reports/: its plain name and a hash of its real path."""
    real = os.path.realpath(project)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return "%s-%s" % (plain_word(os.path.basename(real) or "root")[:48], digest)


def pull_dir(project: str, host: str, run: str) -> str:
    """The default folder of a pull of RUN from HOST made from PROJECT (its path; nothing made)."""
    return os.path.join(root_path(), PULLS, project_key(project), plain_word(host), plain_word(run))


def _refuse(path: str, why: str) -> ClientError:
    return ClientError("rgt's data folder %s %s; nothing was written" % (safe_line(path)[:300], why),
                       _ROOT_HINT % safe_line(path)[:300], exitcodes.USAGE)


def _chain(path: str) -> List[str]:
    """"/", "/a", "/a/b" for "/a/b"."""
    out, here = [], path
    while True:
        out.append(here)
        up = os.path.dirname(here)
        if up == here:
            return out[::-1]
        here = up


def _unsafe_above(root: str) -> Tuple[str, str] | None:
    """A folder above the root that another local user could rename or replace it through, the
    way OpenSSH judges the folders above a key file: each one (as written, and as it resolves)
    must be yours or root's, and not writable by others unless sticky (/tmp)."""
    me = os.geteuid()
    above = os.path.dirname(root)
    for path in dict.fromkeys(_chain(above) + _chain(os.path.realpath(above))):
        try:
            st = os.lstat(path)
        except OSError:
            continue                    # missing: made below, 0700
        if st.st_uid not in (0, me):
            return path, "belongs to another user (uid %d)" % st.st_uid
        if not stat_mod.S_ISLNK(st.st_mode) and st.st_mode & (stat_mod.S_IWGRP | stat_mod.S_IWOTH) \
                and not st.st_mode & stat_mod.S_ISVTX:
            return path, "is writable by others (mode %04o)" % stat_mod.S_IMODE(st.st_mode)
    return None


def _open_root(root: str) -> int:
    """The root's descriptor, after the checks a folder that holds the box's files must pass."""
    unsafe = _unsafe_above(root)
    if unsafe is not None:
        raise _refuse(root, "is inside %s, which %s" % (safe_line(unsafe[0])[:300], unsafe[1]))
    if not os.path.lexists(root):
        try:
            # ~/.local/share may not exist yet on a fresh machine; the XDG spec makes it 0700
            os.makedirs(os.path.dirname(root), 0o700, exist_ok=True)
        except OSError as exc:          # FileExistsError too: a file stands where a folder should
            raise _refuse(root, "cannot be made (%s)" % (exc.strerror or "error")) from None
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _refuse(root, "cannot be made (%s)" % (exc.strerror or "error")) from None
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise _refuse(root, "is a symlink or not a folder") from None
    st = os.fstat(fd)
    why = None
    if st.st_uid != os.geteuid():
        why = "belongs to another user (uid %d)" % st.st_uid
    elif st.st_mode & (stat_mod.S_IWGRP | stat_mod.S_IWOTH):
        why = "is writable by others (mode %04o)" % stat_mod.S_IMODE(st.st_mode)
    if why:
        os.close(fd)
        raise _refuse(root, why)
    return fd


def owned_dir_at(parts: List[str]) -> Tuple[str, Tuple[int, int]]:
    """ROOT/parts..., made 0700 as needed, every component a real folder of this user's (never a
    symlink, never another user's; one of ours that others may write in is made ours alone), with
    the last one's (st_dev, st_ino): the writer checks that the folder it opens later is this one."""
    root = root_path()
    fd = _open_root(root)
    try:
        for i, name in enumerate(parts):
            where = os.path.join(root, *parts[:i + 1])
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise ClientError("cannot make %s: %s" % (safe_line(where)[:300], exc.strerror or "error"),
                                  "free some space, or set RGT_DATA_HOME to a folder of yours", exitcodes.USAGE) from None
            try:
                nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                raise ClientError("%s is a symlink or not a folder; rgt writes only into real folders it made"
                                  % safe_line(where)[:300], "remove it (rgt makes it again), or name another "
                                  "folder", exitcodes.USAGE) from None
            os.close(fd)
            fd = nxt
            st = os.fstat(fd)
            if st.st_uid != os.geteuid():
                raise ClientError("%s belongs to another user; rgt writes only into folders that are yours "
                                  "alone" % safe_line(where)[:300], "remove it (rgt makes it again), or name "
                                  "another folder", exitcodes.USAGE)
            if st.st_mode & 0o077:
                os.fchmod(fd, stat_mod.S_IMODE(st.st_mode) & 0o700)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return os.path.join(root, *parts), (st.st_dev, st.st_ino)
