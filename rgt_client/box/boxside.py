"""What every script the client runs ON THE BOX uses to read the box's files: the same rules as
the agent's own readers (boxagent/base/safefile.py, boxjson.py), in stdlib-only Python 3.8 text
that is put in front of each script (the agent's modules are not importable there).

Three `watch` calls once left three processes on the box blocked in open() on a FIFO, and
`read_logs` waited 120 s and then blamed an "overloaded" box; one line of 1,000 nested `[` in
events.jsonl made `watch` print a traceback and every `wait_for_change` fail. So:
- open_regular(): O_NOFOLLOW|O_NONBLOCK, then a regular-file check on the open descriptor (a
  FIFO, a socket, a device, a symlink or a directory is an OSError, read as a missing file);
- loads(): any line is a value or None, whatever it raises (RecursionError, MemoryError,
  UnicodeError, ValueError), and a value deeper than MAX_DEPTH is None too;
- hard_deadline(): SIGALRM ends the script at its bound, with its own last word, whatever it
  waits on.
"""
from __future__ import annotations

SAFE_READ = r'''
import errno as _errno, json as _json, os as _os, signal as _signal, stat as _stat, sys as _sys
MAX_DEPTH = 100

def open_regular(path):
    fd = _os.open(path, _os.O_RDONLY | _os.O_NOFOLLOW | _os.O_NONBLOCK | getattr(_os, "O_CLOEXEC", 0))
    try:
        if not _stat.S_ISREG(_os.fstat(fd).st_mode):
            raise OSError(_errno.EINVAL, "not a regular file", path)
    except BaseException:
        _os.close(fd)
        raise
    return _os.fdopen(fd, "rb")

def _deeper_than(value, limit):
    if not isinstance(value, (dict, list)):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        kids = item.values() if isinstance(item, dict) else item
        stack.extend((k, depth + 1) for k in kids if isinstance(k, (dict, list)))
    return False

def loads(raw, max_bytes=64 << 20):
    if len(raw) > max_bytes:
        return None
    try:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        value = _json.loads(text)
    except (ValueError, RecursionError, MemoryError, UnicodeError, TypeError, OverflowError):
        return None
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        return None
    return value

def hard_deadline(seconds, last_word):
    def fire(signum, frame):
        try:
            last_word()
        finally:
            _os._exit(0)
    _signal.signal(_signal.SIGALRM, fire)
    _signal.alarm(max(1, int(seconds + 0.999)))
'''
