"""textsafe: box text reaches a terminal with every control character shown, never sent."""
from __future__ import annotations

import pytest

from rgt_client.textsafe import StreamSafe, safe, safe_line

# (what a hostile box sends, what the terminal must show instead)
ATTACKS = [
    ("\x1b[2J", "\\x1b[2J"),                          # CSI: clear the screen
    ("\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07"),   # OSC 52: write the clipboard
    ("\x1bP+q544e\x1b\\", "\\x1bP+q544e\\x1b\\"),       # DCS: a terminfo query that answers on stdin
    ("\x9b31m", "\\x9b31m"),                          # C1 CSI (8-bit terminals)
    ("\x07", "\\x07"), ("\x08\x08OK", "\\x08\\x08OK"), ("\x7f", "\\x7f"), ("\x00", "\\x00"),
    ("FAILED\rOK    ", "FAILED\\rOK    "),           # a bare CR paints over the line
    ("model\u202egp.exe", "model\\u202egp.exe"),     # bidi override: shows as model.exe.pg
    ("\u2066x\u2069", "\\u2066x\\u2069"), ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),
    ("a\u2028b", "a\\u2028b"),                        # a line separator splitting lines in editors
    ("bad \udcff byte", "bad \\udcff byte"),          # a lone surrogate would raise UnicodeEncodeError
]


@pytest.mark.parametrize("raw, shown", ATTACKS)
def test_each_control_character_is_shown_not_sent(raw, shown):
    assert safe(raw) == shown
    assert safe_line(raw) == shown


def test_multiline_text_keeps_its_lines_tabs_and_crlf():
    text = "epoch 1\tloss 0.5\nepoch 2\r\nünïcode 学习 ✓\n"
    assert safe(text) == text


def test_one_line_fields_show_newlines_tabs_and_cr():
    assert safe_line("ck/a\nOK 3/3 files\tb\r\n") == "ck/a\\nOK 3/3 files\\tb\\r\\n"


def test_safe_output_holds_no_control_character_at_all():
    every = "".join(chr(c) for c in range(0x20)) + "\x7f" + "".join(chr(c) for c in range(0x80, 0xa0))
    out = safe_line(every + "\u202e\u2066")
    assert all(0x20 <= ord(c) < 0x7f for c in out), out
    multi = safe(every)
    assert [c for c in multi if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0] == ["\t", "\n"]


def test_bytes_are_decoded_and_undecodable_bytes_shown():
    assert safe(b"ok \xff \x1b[0m \xe2\x80\xae") == "ok \\xff \\x1b[0m \\u202e"
    assert safe_line(bytearray(b"a\nb")) == "a\\nb"


def test_non_text_is_shown_as_its_str():
    assert safe_line(42) == "42" and safe_line(None) == "None"


def test_backslashes_of_real_text_pass_unchanged():
    assert safe("C:\\Users\\x") == "C:\\Users\\x"


@pytest.mark.parametrize("cut", range(1, 12))
def test_stream_shows_the_same_whatever_the_chunk_boundary(cut):
    data = "a\r\nb é\rc\x1b[1m\n".encode("utf-8")
    s = StreamSafe()
    got = s.feed(data[:cut]) + s.feed(data[cut:]) + s.end()
    assert got == safe(data) == "a\r\nb é\\rc\\x1b[1m\n"


def test_stream_end_shows_a_dangling_cr_and_a_cut_character():
    s = StreamSafe()
    assert s.feed(b"x\r") == "x"
    assert s.end() == "\\r"
    s = StreamSafe()
    assert s.feed(b"y\xc3") == "y"
    assert s.end() == "\\xc3"
