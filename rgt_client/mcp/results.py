"""How a tool answers: structured content (checked against its output schema) plus the same
JSON as compact text for clients that read only text; a refusal or bad input is an isError
result carrying the CLI's `Error:` / `Hint:` lines. Blocking client calls run in a worker
thread, so progress notifications keep flowing while ssh waits."""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, TypeVar

import anyio
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from rgt_client.mcp import budget as budgets
from rgt_client.mcp.calls import ClientError, exitcodes
from rgt_client.mcp.safety import Policy, scrub

T = TypeVar("T")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
# submit: a second identical submit is a no-op on the box ("already there with this exact job")
CREATE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
# cancel/resume change a run's state; cancel kills the stage's processes (its work since the last
# marker is lost), so both are marked destructive: a client asks the user first
CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
# pull/report write files here, only below rgt's own folders, and replace only files an earlier
# pull or report of rgt wrote there: destructive (a pull replaces that earlier copy), not idempotent
# (the box's files may have changed since), and a client asks the user first.
LOCAL_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                              open_world_hint=True)
ERROR_MAX = 1000            # an error's message or hint, in characters


def ok(data: dict[str, Any], policy: Policy, budget: int = budgets.BUDGET) -> CallToolResult:
    data = budgets.fit(scrub(data, policy.secrets), budget)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def fail(exc: ClientError, policy: Policy) -> CallToolResult:
    from rgt_client.textsafe import safe_line
    message = scrub(safe_line(exc.message)[:ERROR_MAX], policy.secrets)
    hint = scrub(safe_line(exc.hint or "")[:ERROR_MAX], policy.secrets)
    msg = "Error: %s" % message + ("\nHint: %s" % hint if hint else "")
    data = {"error": message, "hint": hint, "exit_code": exc.code}
    return CallToolResult(content=[TextContent(type="text", text=msg)], structured_content=data, is_error=True)


async def blocking(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


async def answer(work: Callable[[], Awaitable[dict[str, Any]]], policy: Policy,
                 budget: int = budgets.BUDGET) -> CallToolResult:
    """Run a tool's body: its dict as the result, a ClientError as an isError result; both
    redacted, the result held to its byte budget."""
    try:
        return ok(await work(), policy, budget)
    except ClientError as exc:
        return fail(exc, policy)
    except (OSError, ValueError) as exc:   # a bad value: said, never a traceback
        return fail(ClientError("%s: %s" % (type(exc).__name__, exc), "check the arguments", exitcodes.USAGE),
                    policy)
