"""DEST, the folder a pull writes into, opened once and never left.

Paths below DEST come from the box's manifest, and a compromised box chooses them. A path
string handed to open()/makedirs()/replace() is resolved by the kernel through every symlink
on the way, so one symlink inside DEST (`d -> /home/me`, recorded by an earlier pull, or made
by this one) turns `d/sub/x` into a write outside DEST, and a check done first (realpath) is
already stale when the write happens. So nothing here takes a path string below DEST: each
component is opened relative to its parent's descriptor with O_DIRECTORY|O_NOFOLLOW, and
every create, move and link is done with dir_fd= on the last one. A symlink or a non-folder
on the way raises Blocked naming it; the kernel refuses to follow, whatever happened since
any earlier check.

DEST itself is the user's choice and may be a symlink (`~/data -> /mnt/big`): it is followed
once, when opened.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat as stat_mod
from collections import OrderedDict
from typing import Iterator, List, Optional, Tuple

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC
CACHE = 64          # open folder descriptors kept (a pull writes thousands of files per folder)


class Blocked(Exception):
    """A component of a path below DEST is a symlink or not a folder: nothing goes through it."""

    def __init__(self, rel: str, at: str, why: str, target: Optional[str] = None):
        super().__init__("%s: %s %s" % (rel, at, why))
        self.rel, self.at, self.why, self.target = rel, at, why, target


def split(rel: str) -> List[str]:
    """A relative POSIX path's components; ValueError for anything that could climb out."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise ValueError("not a plain relative path: %r" % rel)
    return parts


class Dest:
    """DEST by descriptor: dir(), lstat(), open(), replace(), symlink(), write_atomic()..."""

    def __init__(self, path: str, create: bool = False):
        if create:
            os.makedirs(path, exist_ok=True)
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._dirs: "OrderedDict[str, int]" = OrderedDict()

    def close(self) -> None:
        self.forget()
        os.close(self.fd)

    def __enter__(self) -> "Dest":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def forget(self) -> None:
        """Drop cached folder descriptors (after folders were removed)."""
        while self._dirs:
            os.close(self._dirs.popitem()[1])

    def _cached(self, parts: List[str], create: bool) -> int:
        """The descriptor of DEST/parts, owned by the cache (callers dup it). Walks down from
        the deepest folder already open (no recursion: a manifest path may be deep)."""
        n = len(parts)
        while n and "/".join(parts[:n]) not in self._dirs:
            n -= 1
        fd = self._dirs[("/".join(parts[:n]))] if n else self.fd
        for i in range(n, len(parts)):
            key = "/".join(parts[:i + 1])
            fd = self._open_dir(fd, parts[i], key, create)
            self._dirs[key] = fd
        if parts:
            self._dirs.move_to_end("/".join(parts))
        while len(self._dirs) > CACHE:   # the newest (fd, and its parent while walking) stay
            os.close(self._dirs.popitem(last=False)[1])
        return fd

    def _open_dir(self, parent: int, name: str, key: str, create: bool) -> int:
        try:
            return os.open(name, _DIR, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            raise self._blocked(parent, name, key, exc)
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            pass            # made meanwhile: opened below, with the same refusal to follow
        try:
            return os.open(name, _DIR, dir_fd=parent)
        except OSError as exc:
            raise self._blocked(parent, name, key, exc)

    def _blocked(self, parent: int, name: str, key: str, exc: OSError) -> Exception:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return exc
        if stat_mod.S_ISLNK(st.st_mode):
            return Blocked(key, key, "is a symlink", os.readlink(name, dir_fd=parent))
        if not stat_mod.S_ISDIR(st.st_mode):
            return Blocked(key, key, "is not a folder")
        return exc

    def dir(self, rel: str = "", create: bool = False) -> int:
        """A new descriptor of the folder DEST/rel (the caller closes it); create=True makes the
        missing folders on the way. Blocked when a component is a symlink or a file;
        FileNotFoundError when one is missing and create is False."""
        parts = split(rel) if rel else []
        try:
            return os.dup(self._cached(parts, create))
        except Blocked as b:
            raise Blocked(rel, b.at, b.why, b.target) from None

    def parent(self, rel: str, create: bool = False) -> Tuple[int, str]:
        """(a new descriptor of rel's folder, rel's last component)."""
        parts = split(rel)
        try:
            return self.dir("/".join(parts[:-1]), create), parts[-1]
        except Blocked as b:
            raise Blocked(rel, b.at, b.why, b.target) from None

    def lstat(self, rel: str) -> Optional[os.stat_result]:
        """rel's own stat (a symlink is not followed); None when it or a folder on the way is
        missing. Blocked when a folder on the way is a symlink or a file."""
        try:
            fd, name = self.parent(rel)
        except FileNotFoundError:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(fd)

    def open(self, rel: str, flags: int, mode: int = 0o644, create_parents: bool = False) -> int:
        """os.open of DEST/rel, never through a symlink (its own last component included)."""
        fd, name = self.parent(rel, create_parents)
        try:
            return os.open(name, flags | _FILE, mode, dir_fd=fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str, create_parents: bool = True) -> None:
        """Move DEST/src to DEST/dst (an existing file or symlink at dst is replaced, never
        followed)."""
        sfd, sname = self.parent(src)
        try:
            dfd, dname = self.parent(dst, create_parents)
            try:
                os.replace(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)

    def symlink(self, target: str, rel: str) -> None:
        fd, name = self.parent(rel, create=True)
        try:
            os.symlink(target, name, dir_fd=fd)
        finally:
            os.close(fd)

    def remove_entry(self, rel: str) -> None:
        """Remove DEST/rel itself, never what it points to: a symlink or a file is unlinked, a
        folder removed only when empty (OSError otherwise)."""
        fd, name = self.parent(rel)
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat_mod.S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        self.forget()

    def readlink(self, rel: str) -> str:
        fd, name = self.parent(rel)
        try:
            return os.readlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def read(self, rel: str, cap: int) -> bytes:
        """At most cap bytes of the regular file DEST/rel."""
        fd = self.open(rel, os.O_RDONLY)
        try:
            chunks, left = [], cap
            while left > 0:
                data = os.read(fd, min(left, 1 << 20))
                if not data:
                    break
                chunks.append(data)
                left -= len(data)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def write_atomic(self, rel: str, data: bytes, mode: int = 0o644) -> None:
        """tmp -> fsync -> replace, all inside rel's folder by descriptor: a reader never sees
        half a file, and the name written is never a symlink's target."""
        fd, name = self.parent(rel, create=True)
        tmp = ".%s.%s.tmp" % (name, secrets.token_hex(4))
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE, mode, dir_fd=fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view):]
                os.fsync(out)
            finally:
                os.close(out)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)

    def entries(self, rel: str = "") -> Iterator[Tuple[str, os.stat_result]]:
        """(name, own stat) of each entry of the folder DEST/rel, symlinks not followed."""
        fd = self.dir(rel)
        try:
            with os.scandir(fd) as it:
                for de in it:
                    try:
                        yield de.name, de.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
        finally:
            os.close(fd)

    def remove_empty_dirs(self, rel: str) -> None:
        """rmdir every empty folder below DEST/rel (and rel itself): folders only, empty only."""
        order, stack = [], [rel]
        while stack:                    # children are listed after their parent...
            cur = stack.pop()
            order.append(cur)
            stack += [cur + "/" + name for name, st in self._safe_entries(cur) if stat_mod.S_ISDIR(st.st_mode)]
        for cur in reversed(order):     # ...so removed before it
            try:
                fd, name = self.parent(cur)
            except (FileNotFoundError, Blocked):
                continue
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    raise
            finally:
                os.close(fd)
        self.forget()

    def _safe_entries(self, rel: str) -> List[Tuple[str, os.stat_result]]:
        try:
            return list(self.entries(rel))
        except (FileNotFoundError, Blocked):
            return []


__all__ = ["Dest", "Blocked", "split"]
