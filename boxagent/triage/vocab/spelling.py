"""One message, every spelling its sources print: the structure behind the errno rows.

The same errno reaches a log through many layers, each with its own spelling of it:
  glibc's strerror        `No space left on device`            (cp, tar, the JVM's IOException)
  Go's syscall.Errno      `write /x: no space left on device`  (docker, containerd, kubelet,
                                                                 ollama, the NVIDIA toolkit)
  CPython's OSError       `[Errno 28] No space left on device`  (any locale: the number)
  Rust's std::io::Error   `No space left on device (os error 28)`, `kind: StorageFull`
  Node's libuv            `Error: ENOSPC: no space left on device, write`
A vocabulary read from one of them matches that one only. errno_row() builds ONE row per
errno whose pattern holds every spelling, and whose keywords are the literals common to them
(the message without its first letter covers both cases), so the prefilter stays one search.
The words around it (`write X:`, `open X:`, quotes, `mkdir X:`) are not part of the row: it
matches the message wherever it sits in the line.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

from boxagent.triage.vocab.table import Row, escape

GO = "Go 1.22 src/syscall/zerrors_linux_amd64.go (errors table: lower-case strerror)"
RUST = "Rust 1.79 library/std/src/io/error.rs (Display: \"{msg} (os error {code})\"; ErrorKind)"
NODE = "libuv 1.48 src/uv-common.c uv_strerror, Node.js 20 `Error: ECODE: message, syscall`"


def cased(text: str) -> Tuple[str, Tuple[str, ...]]:
    """(pattern, keywords) matching `text` with its first letter in either case: glibc's
    `Connection refused` and Go's `connection refused`."""
    first = text[:1]
    if first.isalpha() and len(text) > 3:
        return "[%s%s]%s" % (first.upper(), first.lower(), escape(text[1:])), (text[1:],)
    return escape(text), (text,)


def spellings(num: int, name: str, msg: str, kind: Optional[str] = None,
              more: Iterable[str] = ()) -> Tuple[List[str], List[str]]:
    """(pattern alternatives, keywords) of one errno in every spelling."""
    pats: List[str] = []
    kws: List[str] = []

    def add(pattern: str, keys: Iterable[str]) -> None:
        pats.append(pattern)
        kws.extend(k for k in keys if k not in kws)

    add(*cased(msg))                                   # glibc, Go, the JVM, Rust's Display
    add(escape("[Errno %d]" % num), ("[Errno %d]" % num,))   # CPython, whatever the locale
    add(escape("(os error %d)" % num), ("(os error %d)" % num,))   # Rust
    # Node/libuv and Go's errno names (`ENOSPC: no space left on device, write`); a short
    # name only with its colon (`EIO: i/o error`), never inside another word
    add(escape(name if len(name) > 4 else name + ": "), (name if len(name) > 4 else name + ": ",))
    if kind:
        add(escape("kind: " + kind), ("kind: " + kind,))     # Rust's Debug of io::Error
    for extra in more:
        add(*cased(extra))
    return pats, kws


def errno_row(cls: str, num: int, name: str, msg: str, source: str, definitive: bool = True,
              kind: Optional[str] = None, more: Iterable[str] = ()) -> Row:
    """One row for errno `name` (= `num`, strerror `msg`) in all the spellings above."""
    pats, kws = spellings(num, name, msg, kind, tuple(more))
    example = "OSError: [Errno %d] %s: '/data/ckpt/model.pt'" % (num, msg)
    src = "%s (%s = %d); %s; %s; %s" % (source, name, num, GO, RUST, NODE)
    return Row(cls, "|".join("(%s)" % p if "|" in p else p for p in pats), example, src, "os",
               definitive, False, "critical", tuple(kws))


def forms(num: int, name: str, msg: str, kind: Optional[str] = None) -> List[str]:
    """The message as each layer prints it (what the test feeds the engine)."""
    out = ["cp: error writing '/data/x.bin': %s" % msg,                  # glibc (coreutils)
           "Error: write /var/lib/docker/tmp/x: %s" % msg.lower(),       # Go
           "OSError: [Errno %d] %s: '/data/x.bin'" % (num, msg),          # CPython
           "Error: %s (os error %d)" % (msg, num),                        # Rust Display
           "Error: %s: %s, write" % (name, msg.lower()),                   # Node
           "java.io.IOException: %s" % msg]                                 # the JVM
    if kind:
        out.append("Error: Os { code: %d, kind: %s, message: \"%s\" }" % (num, kind, msg))
    return out
