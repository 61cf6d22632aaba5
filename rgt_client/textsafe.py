"""The one sanitiser for text a box sent, before it reaches a human's terminal.

A rented box can be compromised, and everything it sends (paths in a manifest, symlink targets,
log lines, error text, notifier names) ends up printed here. Raw control characters in that
text are instructions to the terminal, not text: `ESC ] 52` writes the clipboard, `ESC [ 2 J`
clears the screen, a CSI cursor move or a bare CR paints a fake "OK" over a real error, and a
Unicode bidi override (U+202E) shows `gpj.exe` as `exe.jpg`. So every such character is shown
as a visible escape (`\\x1b`, `\\r`, `\\u202e`) instead of being sent.

    safe(text)       multi-line text (logs, HANDBOOK.md): newlines, tabs and CRLF line ends kept
    safe_line(text)  one-line fields (a path, a host, a run name): newlines and tabs shown too
    s(value)         a box-supplied field of any type for one line of text ("-" when absent)
    StreamSafe       the same rules for a byte stream read in chunks (`logs --follow`)

Only human-readable output goes through here: `--json` stays exact (json.dumps escapes every
control character itself). Bytes are decoded as UTF-8; undecodable bytes are shown as `\\xNN`.
"""
from __future__ import annotations

import codecs
import re
from typing import Any, Union

Text = Union[str, bytes, bytearray]

# C0 controls except TAB and LF, DEL, C1 (U+0080-U+009F: a terminal in 8-bit mode takes U+009B
# as CSI), the bidi embeddings/overrides/isolates and marks, the Unicode line and paragraph
# separators (they split lines in editors and str.splitlines but not on a terminal), and lone
# surrogates (from surrogateescape decoding: printing one raises UnicodeEncodeError mid-output).
# Then the invisible ones (Unicode's default-ignorable code points): a log line a human reads as
# `epoch 3 loss 0.12` carried an instruction for the model in tag characters (U+E0000-E007F),
# and a zero-width space inside `hf_…` hid a token from redaction. Zero-width (U+200B-200D,
# U+2060-2064), soft hyphen, BOM, variation selectors, Hangul and Mongolian fillers, the
# deprecated format controls, tags and the variation selector supplement are shown as escapes
# too (an emoji's ZWJ or VS16 among them: a log's emoji reads a little less pretty). So are the
# Private Use Areas: most terminals and chat UIs draw them as nothing, and `hf_…` split by a
# U+E000 read as one token to a human and as two to redaction (a powerline glyph in a log
# reads as its escape). And the other format characters (Unicode's Cf outside that set: Arabic
# number signs, the Syriac abbreviation mark, Kaithi and Egyptian hieroglyph format controls):
# drawn as nothing, a learned secret split by U+13430 came back unredacted.
_INVISIBLE_CHARS = ("\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U0001343f"
                    "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2065"
                    "\u206a-\u206f\u3164\ue000-\uf8ff\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
                    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
                    "\U000f0000-\U000ffffd\U00100000-\U0010fffd")
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff" + _INVISIBLE_CHARS
_INVISIBLE = re.compile("[%s]" % _INVISIBLE_CHARS)
# what _show writes for a character: \xNN, \uNNNN, \UNNNNNNNN
SHOWN_ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
# A CR directly before LF only ends a line (Windows logs): harmless, kept in multi-line text.
_MULTI = re.compile("\r(?!\n)|[%s]" % _CONTROLS.replace("\x0b-\x1f", "\x0b\x0c\x0e-\x1f"))
_LINE = re.compile("[\t\n%s]" % _CONTROLS)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _show(m: "re.Match[str]") -> str:
    ch = m.group(0)
    named = _NAMED.get(ch)
    if named:
        return named
    n = ord(ch)
    return "\\x%02x" % n if n < 0x100 else "\\u%04x" % n if n < 0x10000 else "\\U%08x" % n


def _text(text: Text) -> str:
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "backslashreplace")
    return text if isinstance(text, str) else str(text)


def safe(text: Text) -> str:
    """Box text for a terminal, keeping its lines: every control character and escape sequence
    shown as a visible escape; LF, TAB and CRLF line ends kept."""
    return _MULTI.sub(_show, _text(text))


def safe_line(text: Text) -> str:
    """A one-line field from the box (a path, a symlink target, an error message): like safe(),
    and newlines, CR and tabs shown too, so it can never break out of its line or column."""
    return _LINE.sub(_show, _text(text))


def show_invisible(text: str) -> str:
    """Only the invisible and direction-changing characters shown as escapes, lines and tabs
    kept: for text that is already rgt's own shape (a model's whole answer), where a box's
    string may still hide in a field nobody escaped."""
    return _INVISIBLE.sub(_show, text)


def s(value: Any) -> str:
    """A box-supplied field for one line of text ("-" when absent)."""
    return "-" if value is None else safe_line(str(value))


class StreamSafe:
    """safe() for bytes arriving in chunks: a UTF-8 character or a CRLF split across two chunks
    is held back until the next one, so a chunk boundary never changes what is shown."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        self._cr = False

    def feed(self, data: bytes) -> str:
        text = self._decoder.decode(data)
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        return safe(text)

    def end(self) -> str:
        """What is still held back (a dangling CR, a cut-off UTF-8 character), shown."""
        text = self._decoder.decode(b"", final=True)
        if self._cr:
            text, self._cr = "\r" + text, False
        return safe(text)


__all__ = ["safe", "safe_line", "show_invisible", "SHOWN_ESCAPE", "StreamSafe"]
