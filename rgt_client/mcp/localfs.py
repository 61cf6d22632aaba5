"""What a tool may read and write on this machine, and nothing else.

A tool's arguments come from a model, and a model does what a box's log line asks as readily as
what its user asks. So a path from a tool argument is never opened as given:

- reads: only a job file (`.toml`, a regular file of at most MAX_JOB_BYTES) inside the server's
  project folder, never through a hidden component (`.git`, `.env`, `~/.netrc` all are) and
  never through a symlink that leaves the folder. Asked for `~/.netrc` by an injected log
  line, submit_job once sent its lines back in a TOML error's hint;
- writes: only below rgt's own data folder, outside the project (pull/datahome.py:
  `mcp-pulls/PROJECT/`, `reports/PROJECT/`), every component a plain name, none a symlink, none
  hidden. `dest="src"` once let a box's manifest replace a package's `__init__.py`, and
  `dest="vendor/dep"` a nested repo's `.git/hooks`; inside the project, a pulled
  `eval/metrics.test.js` ran at the project's next `node --test`.

The project folder is the user's choice (the server's cwd at start, or `--project DIR`).
"""
from __future__ import annotations

import os
import re
import stat as stat_mod
from dataclasses import dataclass

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.pull import datahome
from rgt_client.textsafe import safe_line

PULLS = datahome.MCP_PULLS
REPORTS = datahome.REPORTS
MAX_JOB_BYTES = 1 << 20           # the agent refuses a bigger job (jobspec.MAX_JOB_BYTES)
_PLAIN = re.compile(r"[A-Za-z0-9_@+][A-Za-z0-9._@+-]{0,127}")
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,63}")


def _refuse(what: str, path: str, why: str, hint: str) -> ClientError:
    return ClientError("%s %s: %s" % (what, safe_line(path)[:200], why), hint, exitcodes.USAGE)


@dataclass(frozen=True)
class Project:
    """The server's project folder, resolved once at start."""
    root: str

    @property
    def key(self) -> str:
        """The project's folder below rgt's pulls/ and reports/."""
        return datahome.project_key(self.root)

    @classmethod
    def at(cls, path: str) -> "Project":
        root = os.path.realpath(path)
        if not os.path.isdir(root):
            raise ClientError("--project %s is not a folder" % safe_line(path), "name your project folder",
                              exitcodes.USAGE)
        if root == os.path.dirname(root):   # `/`: every non-hidden .toml on the machine would be "inside"
            raise ClientError("the project folder would be %s, the whole file system" % root,
                              "start the server in your project, or pass rgt-client mcp --project DIR",
                              exitcodes.USAGE)
        return cls(root)

    def read_job(self, path: str) -> bytes:
        return self.read_toml(path, "job file", "pass the job as TOML text, or a .toml file inside %s "
                              "(not hidden)" % self.root)

    def read_toml(self, path: str, what: str, hint: str) -> bytes:
        """The bytes of a .toml file inside the project; ClientError for anything else. The error
        names the path the model gave and why, never what the file holds."""
        _full, data = self.open_toml(path, what, hint)
        return data

    def open_toml(self, path: str, what: str, hint: str) -> tuple[str, bytes]:
        """(its real path, its bytes) of a .toml file inside the project."""
        rel = self._relative(path, what, hint)
        if not rel.endswith(".toml"):
            raise _refuse(what, path, "expected a .toml file", hint)
        full = os.path.join(self.root, rel)
        real = os.path.realpath(full)
        if self._relative_real(real) is None:
            raise _refuse(what, path, "leaves the project folder through a symlink", hint)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise _refuse(what, path, "cannot read it (%s)" % (exc.strerror or "error"), hint)
        try:
            # realpath, then open by that path: a folder on it renamed and replaced by a symlink
            # in between (another local user in a shared project) would open a file elsewhere.
            # The kernel's own name for what was opened settles it.
            opened = _opened_path(fd)
            if opened is not None and self._relative_real(opened) is None:
                raise _refuse(what, path, "left the project folder while it was opened (a folder on "
                              "its path was replaced)", hint)
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise _refuse(what, path, "not a regular file", hint)
            if st.st_nlink > 1:        # a hard link: its other name may be ~/.netrc (realpath cannot tell)
                raise _refuse(what, path, "a file with more than one name (a hard link)", hint)
            if st.st_size > MAX_JOB_BYTES:
                raise _refuse(what, path, "over the %d bytes a job may have" % MAX_JOB_BYTES, hint)
            data = os.read(fd, MAX_JOB_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_JOB_BYTES:
            raise _refuse(what, path, "over the %d bytes a job may have" % MAX_JOB_BYTES, hint)
        return real, data

    def _relative(self, path: str, what: str, hint: str) -> str:
        """path relative to the project, as given (before any symlink): inside, no hidden part."""
        if not isinstance(path, str) or not path or "\0" in path or path.startswith(("-", "~")):
            raise _refuse(what, str(path), "not a path inside the project", hint)
        full = os.path.normpath(os.path.join(self.root, path))
        rel = os.path.relpath(full, self.root)
        if rel == os.curdir or rel.split(os.sep)[0] == os.pardir:
            raise _refuse(what, path, "outside the project folder %s" % self.root, hint)
        given = [] if path.startswith("/") else path.split("/")    # `.git/../job.toml` walks through .git
        if any(p.startswith(".") and p != "." for p in given) or any(p.startswith(".") for p in rel.split(os.sep)):
            raise _refuse(what, path, "in a hidden folder or a hidden file", hint)
        return rel

    def _relative_real(self, real: str) -> str | None:
        rel = os.path.relpath(real, self.root)
        if rel == os.curdir or rel.split(os.sep)[0] == os.pardir or any(p.startswith(".") for p in rel.split(os.sep)):
            return None
        return rel

    def owned_dir(self, top: str, parts: list[str]) -> str:
        return self.owned_dir_at(top, parts)[0]

    def owned_dir_at(self, top: str, parts: list[str]) -> tuple[str, tuple[int, int]]:
        """DATA/top/PROJECT/parts..., made as needed, every component a real folder of this
        user's (never a symlink, never hidden, never another user's): the only folders a tool
        writes into, outside the project tree; with the last one's identity."""
        return datahome.owned_dir_at([top, self.key] + parts)


def _opened_path(fd: int) -> str | None:
    """The path the kernel holds for an open file (Linux); None where it does not say."""
    try:
        where = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return None
    return where if where.startswith("/") and not where.endswith(" (deleted)") else None


def plain_label(label: str, what: str, hint: str) -> str:
    """One plain word (letters, digits, `_+-`): a label, never a path, never hidden."""
    if not _LABEL.fullmatch(label or ""):
        raise _refuse(what, label, "expected one plain word (letters, digits, `_`, `+`, `-`), a label "
                      "added to the run's folder, never a path", hint)
    return label


def plain_parts(path: str, what: str, hint: str) -> list[str]:
    """A relative path of plain names (letters, digits, `._@+-`, none hidden, no `..`)."""
    parts = [p for p in (path or "").split("/") if p]
    if path.startswith("/") or not parts or len(parts) > 8 or not all(_PLAIN.fullmatch(p) for p in parts):
        raise _refuse(what, path, "expected plain names below rgt's folder (no hidden part, no `..`, "
                      "no absolute path)", hint)
    return parts
