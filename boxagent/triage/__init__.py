"""Failure triage: log tailing, rules, progress, stall, and the diagnosis."""
from boxagent.triage.watch import StageWatch  # noqa: F401
from boxagent.triage.diagnose import diagnose, success_warnings, fast_spec  # noqa: F401
from boxagent.triage.rules import build_rules  # noqa: F401
