"""The one rule for the names a verb is given: job, sweep (group), run and stage names.

Names reach the agent from a laptop, a script or an AI model that read them off the box, and
the agent joins them into paths under runs/. Field findings: `logs okrun/../badrun` read
another run's files, and a run named `--help` was read as an option. A name is checked before
anything uses it, by the same rule the job file's names already follow (a letter or digit, then
letters, digits, `.`, `_`, `-`), so it can never be a path, an option or a shell word.
"""
from __future__ import annotations

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Callable

from boxagent.base.errors import UsageError

# The rule, without a regex: `re` (and the enum, functools and collections it imports) was the
# largest import of the box's one-round-trip `status`, and a name is this simple.
_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_REST = _FIRST | frozenset("._-")
# the longest name of each kind: a job's and a stage's as the job file allows it; a run's is a
# sweep's name plus "-N"
_LONGEST = {"run": 80, "stage": 64, "group": 64, "job": 64}


def valid(kind: str, value: object) -> bool:
    """A letter or digit, then letters, digits, '.', '_' or '-', at most the kind's length."""
    return (isinstance(value, str) and 0 < len(value) <= _LONGEST[kind] and value[0] in _FIRST
            and _REST.issuperset(value))


def check(kind: str, value: object) -> str:
    """`value` when it is a valid `kind` name; else a usage error that shows it escaped."""
    if valid(kind, value):
        return str(value)
    shown = ascii(value)[:80]
    raise UsageError("%s is not a %s name" % (shown, kind),
                     "a %s name is a letter or digit, then letters, digits, '.', '_' or '-' "
                     "(list them with `rgt-agent status`)" % kind)


def argtype(kind: str) -> Callable[[str], str]:
    """An argparse `type=` that refuses anything but a `kind` name (exit 2, Error + Hint)."""
    def parse(value: str) -> str:
        import argparse
        if valid(kind, value):
            return value
        raise argparse.ArgumentTypeError("%s is not a %s name (a letter or digit, then letters, digits, "
                                         "'.', '_' or '-')" % (ascii(value)[:80], kind))
    parse.__name__ = "%s name" % kind
    return parse
