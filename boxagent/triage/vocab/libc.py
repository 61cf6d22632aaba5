"""The C library's own report of a failed assert() before it aborts: the program's own check
failed, a bug or bad input in the code (code_error), whatever exit code the shell then shows
(134, SIGABRT)."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

GLIBC = ("glibc 2.36 assert/assert.c __assert_fail_base "
         "(\"%s%s%s:%u: %s%sAssertion `%s' failed.\\n%n\")")

ROWS = found_via(
    ("captured_libs/c_assert.log",),
    rx("code_error", r":[0-9]+: ([^ ]+: )?Assertion `.*' failed\.",
       "labels: labels.c:11: main: Assertion `labels[i] < n_classes' failed.", GLIBC,
       ("Assertion `",), "glibc"),
)
