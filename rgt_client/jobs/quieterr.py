"""An error about a local file, for a caller that must not see the file (an MCP tool: the model).

Built from the message's structure only: the file's name as the caller gave it, each problem's
key path (a part that is not a key of the format becomes `…`), the kind of problem in the
validator's own words (its fixed leading words only: cut at the first quote, `(`, `=`, `got` or
`:`, where a value would follow), and a line and column number. Every other word becomes `…`, whatever the
file holds: the file itself is never consulted. Masking the words found in the file let values
through whenever a validator showed them re-rendered (a PEM key's lines joined by `\\n` in a
table's repr, `\\u002d` decoded to `-`, 0xDEADBEEF shown as 3735928559, 1e5 as 100000.0).
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`[^`\n]*`")
# a quote left open (a value cut short) hides everything after it: nothing there is the format's
_OPEN = re.compile(r"[\"'`].*")
_GOT = re.compile(r"\bgot (?!nothing\b|a table\b|a list\b|an? \w+\b)[^\n,;()]+")
_QUOTE_IT = re.compile(r"(quote it: )[^\s=]+")                  # a key the path hid, named again
_WORD = re.compile(r"\w+")
# the slots where a notify validator names the file's own key or URL scheme, unquoted
_NAMED = re.compile(r"\b(unknown key|top-level key|slashes after|write it as) [^\s:/,]+(?:, [^\s:/,]+)*")
_PATH = re.compile(r"^(\s*)([^\s:]+): ")                       # `  stage[0].env.N: problem`
_ENTRY = re.compile(r"^notify entry \d+: ")
_PATH_SPLIT = re.compile(r"(\.|\[\d+\])")
# a problem's kind is the validator's fixed leading words: whatever it shows of the value follows
# one of these (a value shown cut short, its closing quote lost, once let a URL's words through)
_KIND_END = re.compile(r"[\"'`(=:]|\bgot\b")
# the only numbers kept: where (line, column, byte) and how many problems, never a value
_WHERE = re.compile(r"\b(?:line|column|byte|entry) \d+\b|\b\d+ problems\b")
_RUNS = re.compile(r"…(?:[^\w\s…]*…)+")                        # `…-…-…` tells a value's shape: one `…`
_ORIGIN = "\x00"            # the file's name, put back last: a value holding it must not split a quote
_SOURCES = ("boxagent", "rgt_client/jobs/jobfile.py", "rgt_client/notify/cmd.py")


def quiet(message: str, origin: str, keys: frozenset[str] = frozenset()) -> str:
    """`message` with nothing in it but `origin`, the format's words and `keys`, where-numbers
    and punctuation. `keys`: the key names of the file's format (shown in a key path)."""
    vocab = vocabulary() | keys
    text = message.replace(origin, _ORIGIN) if origin else message
    return _quiet_piece(text, vocab, keys).replace(_ORIGIN, origin)


def _quiet_piece(text: str, vocab: frozenset[str], keys: frozenset[str]) -> str:
    lines = []
    for line in text.split("\n"):
        line = _NAMED.sub(r"\1 …", line)
        named = _ORIGIN if line.startswith(_ORIGIN) else ""
        line = line[len(named):]
        lead = named + line[:len(line) - len(line.lstrip(": "))]   # `: ` after the file's name
        line = line[len(lead) - len(named):]
        entry = _ENTRY.match(line)
        if entry:
            lead, line = lead + entry.group(0), line[entry.end():]
        m = _PATH.match(line)
        if m and not _WHERE.fullmatch(m.group(2)):
            parts = _PATH_SPLIT.split(m.group(2))
            shown = "".join(p if not p or _PATH_SPLIT.fullmatch(p) or p in keys else "…" for p in parts)
            lead, line = lead + m.group(1) + shown + ": ", line[m.end():]
        if m or entry:
            line = _kind(line)
        line = _GOT.sub("got …", _QUOTE_IT.sub(r"\1…", _OPEN.sub("…", _QUOTED.sub("…", line))))
        out, at = [], 0
        for where in _WHERE.finditer(line):
            out += [_words(line[at:where.start()], vocab), where.group(0)]
            at = where.end()
        line = "".join(out) + _words(line[at:], vocab)
        lines.append(lead + _RUNS.sub("…", line))
    return "\n".join(lines)


def _kind(problem: str) -> str:
    """A problem's fixed leading words only (`not a valid regular expression`, `min_severity`)."""
    cut = _KIND_END.search(problem)
    kind = (problem[:cut.start()] if cut else problem).rstrip(" ,;.")
    return kind or "invalid value"


def _words(text: str, vocab: frozenset[str]) -> str:
    return _WORD.sub(lambda w: w.group(0) if w.group(0) in vocab else "…", text)


@functools.lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """Every word of every string literal of the validators' code: what a message says in its
    own words. Fixed by the code, never by a file."""
    import json.decoder
    root = Path(__file__).resolve().parents[2]
    words: set[str] = {"job", "file", "notify", "line", "column", "TOML", "JSON"}
    parsers = [Path(json.decoder.__file__)]
    try:
        import tomllib
        parsers.append(Path(tomllib.__file__).parent)       # its syntax errors' own words
    except ImportError:  # Python 3.10: tomli's
        import tomli
        parsers.append(Path(tomli.__file__).parent)
    for base in [root / src for src in _SOURCES] + parsers:
        for f in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            try:
                tree = ast.parse(f.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    words.update(w for w in _WORD.findall(node.value) if not w.isdigit())
    return frozenset(words)
