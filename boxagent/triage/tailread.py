"""The deciding error of a log tail that does not look like Python, and the code it points at.

A tail may hold an error no rule names, in a shape an engineer still reads at a glance:
  - a Python traceback cut above its header (a paste, a 20-line tail): `File "x.py", line 9,
    in main` frames, then the exception line;
  - a C++ exception thrown out of a library: `terminate called after throwing an instance of
    'c10::Error'` then `  what():  <the message>` (libstdc++'s verbose terminate handler);
  - an assertion: C's `prog: file.c:12: main: Assertion `x' failed.` (glibc assert.c), a CUDA
    kernel's `Loss.cu:242: nll_loss_forward...: block: [0,0,0], thread: [5,0,0] Assertion `t
    >= 0 && t < n_classes` failed.`, Lua's `lua: train.lua:57: assertion failed!` followed by
    `stack traceback:` (lua.c's msghandler);
  - an error glued to a progress bar (`100%|####| 50/50 [00:02<00:00]ValueError: bad`);
  - last, a tool's own error line near the end: `Error: …`, `ERROR: …`, `fatal: …`, Go's
    logrus `level=fatal msg=…`, docker's `Error response from daemon: …` (Go CLIs built on
    cobra, the container tools, R and Julia print their failure so, with no traceback), CMake's
    and a compiler's (`kernel.cu(12): error: …`, `x.c:3:5: error: …`); a launcher's or a CI
    runner's report of the exit (`Process completed with exit code 1`) is none;
  - a message framed by Open MPI's help rules at the end (opal/util/show_help.c and PRRTE's
    pmix_show_help print each help message between two lines of 74 dashes: mpirun's refusals
    to launch, "was unable to find the specified executable file", "has detected an attempt
    to run as root"); its first sentence is the tool's error, unless it is a warning or
    mpirun's report of a failed rank (launchers.py);
  - last of all, an exception line with its message and no frame near it
    (`DataLossError (see above for traceback): …`, a paste of the last line only).

native_error(lines) -> (index, the error text, shape) or None. innermost_frame(lines, index)
-> "eval.py:9 in main" (the frame nearest above the exception line). missing_command(lines)
-> the command bash said it could not find.
"""
from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

from boxagent.triage.launchers import launcher_of

_FRAME = re.compile(r'^\s*File "([^"]+)", line ([0-9]+)(?:, in (\S+))?')
_BAR = re.compile(r"^.*?[0-9:]+<[0-9:?]+,? *[^\]\n]*\]\s*")          # tqdm's [00:02<00:03, x]
_EXC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*\.)*_?[A-Z][A-Za-z0-9_]*(Error|Exception|Failure|"
                  r"Interrupt|Exit)(: .*|:?)$")
_WHAT = re.compile(r"^\s*what\(\):\s*(.*)$")
_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_ASSERT = re.compile(r"Assertion [`'].*[`'] failed|: Assertion .* failed\.|assertion failed!|"
                     r"Assertion failed:")
_LUA_TB = re.compile(r"^stack traceback:\s*$")
_NOT_FOUND = re.compile(r"^(?:.*?: )?(?:line [0-9]+: )?([^\s:]+): command not found$")
_PREFIX = re.compile(r"^(\[[^\]]{1,40}\]:?\s*)+")
# a message that goes on below: "Graph execution error:", TF 1.x's "2 root error(s) found."
_GOES_ON = re.compile(r":$|root error\(s\) found\.?$")
Found = Tuple[int, str, str]


def _clean(line: str) -> str:
    return _PREFIX.sub("", str(line or "")).rstrip()


def native_error(lines: List[str]) -> Optional[Found]:
    """The last error of a shape above in `lines` (a log's last lines), or None."""
    for find in (_cpp_exception, _assertion, _lua_error, _headless_exception, _glued_exception,
                 _tool_error, _framed_help, _bare_exception):
        found = find(lines)
        if found is not None:
            return found
    return None


def _cpp_exception(lines: List[str]) -> Optional[Found]:
    for i in range(len(lines) - 1, -1, -1):
        m = _TERMINATE.search(_clean(lines[i]))
        if m is None:
            continue
        for j in range(i + 1, min(len(lines), i + 4)):
            w = _WHAT.match(_clean(lines[j]))
            if w:
                what = w.group(1).strip()
                if _GOES_ON.search(what):
                    # what() is "file.hpp(42):" and the error itself is on the next line
                    # (mallocMC's CUDA::error: "error: out of memory")
                    what = " ".join([what] + _next_lines(lines, j, 2))
                return j, "%s: %s" % (m.group(1), what), "C++ exception"
        return i, _clean(lines[i]), "C++ exception"
    return None


def _next_lines(lines: List[str], i: int, most: int) -> List[str]:
    """Up to `most` non-empty lines after lines[i], cleaned."""
    out: List[str] = []
    for nxt in lines[i + 1:]:
        clean = _clean(nxt).strip()
        if clean:
            out.append(clean)
        if len(out) >= most:
            break
    return out


def _assertion(lines: List[str]) -> Optional[Found]:
    for i in range(len(lines) - 1, -1, -1):
        text = _clean(lines[i])
        if _ASSERT.search(text):
            return i, text, "assertion"
    return None


def _lua_error(lines: List[str]) -> Optional[Found]:
    for i in range(len(lines) - 1, 0, -1):
        if _LUA_TB.match(_clean(lines[i])):
            return i - 1, _clean(lines[i - 1]), "Lua error"
    return None


def _headless_exception(lines: List[str]) -> Optional[Found]:
    """An exception line after a frame, with no `Traceback (most recent call last):` above."""
    for i in range(len(lines) - 1, 0, -1):
        text = _clean(lines[i]).strip()
        if _EXC.match(text) and launcher_of(text) is None and \
                any(_FRAME.match(_clean(x)) for x in lines[max(0, i - 4):i]):
            return i, text, "traceback"
    return None


_TOOL_ERROR = re.compile(r"^(?:Error|ERROR|error|FATAL|Fatal|fatal)(?:\[[^\]]*\])?: +\S|"
                         r"(?:^|\s)level=(?:error|fatal) |Error response from daemon: |"
                         r"^\[(?:ERROR|FATAL)\] +\S|^CMake Error|"
                         # a compiler's (gcc, clang, nvcc) own error line
                         r"^\S+(:[0-9]+(:[0-9]+)?:|\([0-9]+\):) (fatal )?error: ")
_TOOL_TAIL = 10         # non-empty lines from the end: an older error line is not the failure


def _last_line_like(lines: List[str], test: Any, why: str) -> Optional[Found]:
    """The last of the final _TOOL_TAIL non-empty lines that `test` accepts, not a launcher's."""
    seen = 0
    for i in range(len(lines) - 1, -1, -1):
        text = _clean(lines[i]).strip()
        if not text:
            continue
        seen += 1
        if seen > _TOOL_TAIL:
            return None
        if test(text) and launcher_of(text) is None:
            return i, text, why
    return None


def _tool_error(lines: List[str]) -> Optional[Found]:
    return _last_line_like(lines, _TOOL_ERROR.search, "a tool's error line")


# show_help.c's dash_line is exactly 74 dashes (torchrun's error report draws 60: its own
# report, a launcher's, never this)
_RULE = re.compile(r"^-{74}$")
_OPEN_BLOCK = 24        # lines of a block the paste ends inside (the longest help texts)
_AFTER_RULE = 3         # non-empty lines after the closing rule ("N more processes have sent
                        # help message ...", the orte_base_help_aggregate hint, a prompt)
_NOT_AN_ERROR = re.compile(r"^(WARNING|NOTE|INFO)\b|\bwarning\b", re.I)


def _framed_help(lines: List[str]) -> Optional[Found]:
    """The first sentence of the last help message framed by dash rules near the end: closed
    by its rule, or running to the log's end (a paste cut before the closing rule)."""
    text = [_clean(x).strip() for x in lines]
    rules = [i for i, t in enumerate(text) if _RULE.match(t)]
    if not rules:
        return None
    last = rules[-1]
    after = [t for t in text[last + 1:] if t]
    # the rules pair up, one message each: an odd count leaves the last one opening a block
    opening = len(rules) % 2 == 1
    if opening and after and len(after) <= _OPEN_BLOCK:
        start, body = last + 1, text[last + 1:]  # the paste ends inside the message
    elif not opening and len(after) <= _AFTER_RULE:
        start = rules[-2] + 1                    # a closed block: the text between its rules
        body = text[start:last]
    else:
        return None
    sentence: List[str] = []
    first = None
    for i, t in enumerate(body):
        if not t:
            if sentence:
                break
            continue
        if first is None:
            first = start + i
        sentence.append(t)
        if re.search(r"[.:!]$", t):
            break
    if first is None:
        return None
    said = re.split(r"(?<=[.!])\s", re.sub(r"\s+", " ", " ".join(sentence)))[0]
    if _NOT_AN_ERROR.search(said) or launcher_of(said) is not None:
        return None
    return first, said, "a tool's help message"


# An exception line with its message and no frame at all near it: a paste of the last line
# only, a framework that prints its error type and message without the traceback
# (TensorFlow 1.x's session: "DataLossError (see above for traceback): Unable to open table
# file ..."), Python's own `python -c` summary. Only near the end, like a tool's error line,
# and only with words after it: `MeanSquaredError: 0.0512` is a metric a run printed.
_BARE_EXC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*\.)*_?[A-Z][A-Za-z0-9_]*(Error|Exception)"
                       r"( \(see above for traceback\))?: [A-Za-z'\"<]")


def _bare_exception(lines: List[str]) -> Optional[Found]:
    return _last_line_like(lines, _BARE_EXC.match, "an exception line")


def _glued_exception(lines: List[str]) -> Optional[Found]:
    for i in range(len(lines) - 1, -1, -1):
        seg = str(lines[i] or "").split("\r")[-1]
        m = _BAR.match(seg)
        rest = seg[m.end():].strip() if m else ""
        if rest and ":" in rest and _EXC.match(rest):
            return i, rest, "error glued to a progress bar"
    return None


def innermost_frame(lines: List[str], index: int) -> Optional[str]:
    """"eval.py:9 in main": the frame nearest above lines[index] (a traceback's last frame is
    the code that raised), or None."""
    for j in range(min(index, len(lines)) - 1, max(-1, index - 40), -1):
        m = _FRAME.match(_clean(lines[j]))
        if m:
            where = "%s:%s" % (m.group(1), m.group(2))
            return where + (" in %s" % m.group(3) if m.group(3) else "")
    return None


def frame_of(lines: List[str], line: str) -> Optional[str]:
    """The innermost frame above the last line of `lines` equal to `line` (a hit's text)."""
    target = str(line or "").rstrip()
    for i in range(len(lines) - 1, -1, -1):
        if str(lines[i] or "").rstrip() == target:
            return innermost_frame(lines, i)
    return None


def continuation(lines: List[str], line: Any, most: int = 4) -> str:
    """The lines that continue an exception message ending in ":" (TensorFlow's "Graph
    execution error:", XLA's status), read from `lines` (the log's last lines); "" if none."""
    text = str(line or "").rstrip()
    if not _GOES_ON.search(text) or _FRAME.match(_clean(text)):
        return ""
    for i in range(len(lines) - 1, -1, -1):
        if str(lines[i] or "").rstrip() == text:
            out = []
            for nxt in lines[i + 1:i + 1 + most + 1]:
                clean = _clean(nxt).strip()
                if _FRAME.match(_clean(nxt)) or clean.startswith("Traceback"):
                    break
                if clean:
                    out.append(clean)
                if len(out) >= most:
                    break
            return " ".join(out)
    return ""


def missing_command(lines: List[str]) -> Optional[str]:
    """The command bash could not find (`train.sh: line 3: python: command not found`)."""
    for line in reversed(lines):
        m = _NOT_FOUND.match(_clean(line).strip())
        if m:
            return m.group(1)
    return None


def command_hint(cmd: str) -> str:
    """What to do about a command that is not on the box's PATH."""
    if cmd == "python":
        return ("`python` is not on this box's PATH: many images have only `python3`: call "
                "`python3`, or activate the env first (`conda activate ENV`, `source "
                ".venv/bin/activate`)")
    if cmd in ("python3", "pip", "pip3", "conda", "torchrun", "accelerate", "deepspeed"):
        return ("`%s` is not on this box's PATH: activate the env that has it first (`conda "
                "activate ENV`, `source .venv/bin/activate`), or call it by its full path" % cmd)
    return ("`%s` is not installed or not on PATH on this box: install it, or call it by its "
            "full path" % cmd)
