"""make_report's file: below rgt's reports/PROJECT/ (pull/datahome.py, outside the project),
replacing only a report rgt wrote there.

rgt keeps a record of each report it wrote (RECORD: name -> sha256 of what it wrote). A file
at the chosen name that is not in the record, or changed since, is the user's: refused, never
replaced. The write goes through the folder's descriptor (tmp, fsync, rename), so the name is
never followed if it is a symlink.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat as stat_mod

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.mcp import calls
from rgt_client.mcp.localfs import REPORTS, Project, plain_parts
from rgt_client.pull.datahome import plain_word
from rgt_client.textsafe import safe_line

RECORD = ".rgt-written.json"
RECORD_MAX = 1 << 20


def write(project: Project, t: calls.Target, run: str, out: str | None) -> str:
    """Render the run's report and write it; its path."""
    hint = "name an .html file below rgt's reports folder, e.g. %s-%s.html (or leave out out)" % (plain_word(t.host), run)
    parts = plain_parts(out, "report file", hint) if out else ["%s-%s.html" % (plain_word(t.host), run)]
    if not parts[-1].endswith(".html"):
        raise ClientError("report file %s: expected an .html file" % safe_line(out or "")[:200], hint,
                          exitcodes.USAGE)
    rel = "/".join(parts)
    folder, folder_id = project.owned_dir_at(REPORTS, parts[:-1])
    top, top_id = project.owned_dir_at(REPORTS, [])
    record = _read_record(top)
    _check_replace(folder, parts[-1], record.get(rel), rel, hint)
    data = calls.render_report(t, run).encode("utf-8")
    _write_at(folder, parts[-1], data, folder_id)
    record[rel] = hashlib.sha256(data).hexdigest()
    _write_at(top, RECORD, (json.dumps(record, indent=1) + "\n").encode("utf-8"), top_id)
    return os.path.join(folder, parts[-1])


def _check_replace(folder: str, name: str, recorded: str | None, rel: str, hint: str) -> None:
    """A file already at name may be replaced only when it is the report rgt wrote there."""
    try:
        st = os.lstat(os.path.join(folder, name))
    except FileNotFoundError:
        return
    same = False
    if stat_mod.S_ISREG(st.st_mode) and recorded and st.st_size < (256 << 20):
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            same = hashlib.sha256(fh.read()).hexdigest() == recorded
    if not same:
        raise ClientError("report file %s exists and is not a report rgt wrote there; not replaced" % rel,
                          hint, exitcodes.USAGE)


def _read_record(top: str) -> dict[str, str]:
    try:
        fd = os.open(os.path.join(top, RECORD), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as fh:
        try:
            rec = json.loads(fh.read(RECORD_MAX).decode("utf-8"))
        except ValueError:
            return {}
    return {k: v for k, v in rec.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(rec, dict) else {}


def _write_at(folder: str, name: str, data: bytes, ident: tuple[int, int]) -> None:
    """name in folder, atomically, only when folder is still the one owned_dir checked (another
    local user may have swapped a folder on the path while the box rendered the report)."""
    swapped = ClientError("%s is no longer the folder rgt checked; the report was not written" % folder,
                          "check what else writes in rgt's data folder, then ask again")
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise swapped from None
    tmp = ".%s.%s.tmp" % (name, secrets.token_hex(4))
    try:
        st = os.fstat(dfd)
        if (st.st_dev, st.st_ino) != ident:
            raise swapped
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        os.close(dfd)
