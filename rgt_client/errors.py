"""One error type at the root of the client: printed as `Error:` + `Hint:`, never a traceback."""
from __future__ import annotations

from rgt_client import exitcodes


class ClientError(Exception):
    def __init__(self, message: str, hint: str | None = None, code: int = exitcodes.ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


class BoxTooSlow(ClientError):
    """The connection was up but the box did not answer in time: the box is slow, not gone
    (watch keeps going on it like on a network blip; patrol does not call the host unreachable)."""
