"""One error type at the root, and the agent's exit codes (documented in the README)."""
from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1          # something went wrong (Error: + Hint: on stderr)
EXIT_USAGE = 2          # bad input: malformed job, unknown run, bad arguments; nothing written
EXIT_NOT_RUNNING = 3    # the daemon is not running (status still prints what the files say)
EXIT_RUN_FAILED = 4     # a run failed (triage with a failing cause, etc.)


class AgentError(Exception):
    """An error a user sees as `Error: message` + `Hint: hint`, never as a traceback."""

    def __init__(self, message: str, hint: str | None = None, code: int = EXIT_ERROR):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


class UsageError(AgentError):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message, hint, EXIT_USAGE)
