"""The one module that runs an agent command on a box and reads what it answered: its exit code
(boxagent/base/errors.py) mapped onto the client's (exitcodes.py), its `Error:`/`Hint:` lines,
and its hints said in the client's words (`rgt-agent resume X` on the box is
`rgt-client resume HOST X` here).

Everything here is bounded: at most `max_out` bytes of an answer (transport), so a box that
sends a gigabyte gets an error naming it, not a laptop out of memory.
"""
from __future__ import annotations

TYPE_CHECKING = False   # annotations only: typing would add a few ms before a status's ssh call
if TYPE_CHECKING:
    from typing import Any, Callable

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.box.transport import Target, quote, run_agent

# A status answer holds every run's stages, the health history and the last events: a busy box
# sends a few hundred KiB. Four MiB leaves room and keeps the laptop's memory bounded.
STATUS_MAX = 4 << 20
ANSWER_MAX = 1 << 20          # submit, cancel, resume, notify-*: a few lines of JSON or text
TEXT_MAX = 16 << 20           # handbook and the like: text a human reads
DEFAULT_TIMEOUT_S = 120.0



def _client_code(agent_rc: int) -> int:
    """The agent's exit codes -> the client's (same numbers today; the map says it on purpose).
    boxagent.api is imported here, after the answer came: importing it first was a third of
    what the client did before `status` could start its ssh call."""
    from boxagent import api
    codes = {api.EXIT_OK: exitcodes.OK, api.EXIT_ERROR: exitcodes.ERROR,
             api.EXIT_USAGE: exitcodes.USAGE, api.EXIT_NOT_RUNNING: exitcodes.AGENT_DOWN,
             api.EXIT_RUN_FAILED: exitcodes.RUN_FAILED}
    return codes.get(agent_rc, exitcodes.ERROR)


class Answer:
    """What the agent answered: its exit code, stdout (bytes), stderr (text). A plain class: this
    module is imported before `status` starts its ssh call (prefetch.py)."""

    def __init__(self, target: Target, args: list[str], rc: int, stdout: bytes, stderr: str,
                 elapsed_s: float) -> None:
        self.target, self.args, self.rc = target, args, rc
        self.stdout, self.stderr, self.elapsed_s = stdout, stderr, elapsed_s

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def code(self) -> int:
        """The client's exit code for the agent's."""
        return _client_code(self.rc)

    @property
    def message(self) -> str | None:
        return _line_after(self.stderr, "Error: ")

    @property
    def hint(self) -> str | None:
        hint = _line_after(self.stderr, "Hint: ")
        return client_hint(hint, self.target.host) if hint else None

    @property
    def notes(self) -> list[str]:
        """The agent's `Note:` lines (the daemon is not running...), in the client's words."""
        return [client_hint(line[len("Note: "):].strip(), self.target.host)
                for line in self.stderr.splitlines() if line.startswith("Note: ")]

    def error(self, what: str) -> ClientError:
        """`WHAT on HOST failed: <the agent's Error:>` with its hint and exit code."""
        detail = self.message or _last_lines(self.stderr) or "exit %d" % self.rc
        return ClientError("%s on %s failed: %s" % (what, self.target.host, detail), self.hint, self.code)


def status_events(events: int | None, as_json: bool) -> int | None:
    """How many events `status` asks for: what --events says; else none for the text (it shows
    none: the agent need not read them) and the agent's default for --json (its structure)."""
    return events if (events is not None or as_json) else 0


def status_args(events: int | None, run: str | None, all_runs: bool = False) -> list[str]:
    """The agent's `status` arguments, built once for the call and for prefetch's head start.
    all_runs: the ended runs the box keeps out of status.json too (read from their files)."""
    if run is not None:
        check_names(run)
    return ["status", "--json"] + (["--events", str(events)] if events is not None else []) + \
        (["--run", run] if run else []) + (["--all"] if all_runs else [])


def call(target: Target, args: list[str], stdin: bytes | None = None, timeout: float = DEFAULT_TIMEOUT_S,
         max_out: int = ANSWER_MAX, on_out: Callable[[bytes], None] | None = None) -> Answer:
    """Run `rgt-agent ARGS` on the box. Transport failures (unreachable, no python, no agent,
    too slow, too big) raise ClientError; the agent's own exit code comes back in the Answer."""
    res = run_agent(target, args, stdin=stdin, timeout=timeout, max_out=max_out, on_out=on_out)
    return Answer(target, list(args), res.rc, res.stdout, res.err, res.elapsed_s)


def ok(target: Target, args: list[str], what: str, accept: tuple[int, ...] = (0,), **kw: Any) -> Answer:
    """call(), and an agent exit code outside `accept` becomes its ClientError."""
    ans = call(target, args, **kw)
    if ans.rc not in accept:
        raise ans.error(what)
    return ans


def json_of(ans: Answer, what: str) -> dict[str, Any]:
    """The answer's JSON object; anything else is an error naming the host."""
    from boxagent import api
    try:
        data = api.box_json(ans.stdout)
    except ValueError:      # BadJSON too: `[[[[…` nested 100 000 deep, a huge answer
        data = None
    if not isinstance(data, dict):
        detail = ans.message or _last_lines(ans.stderr) or "exit %d" % ans.rc
        raise ClientError("the agent on %s answered %s with something that is not JSON: %s"
                          % (ans.target.host, what, detail),
                          "reinstall the agent: rgt-client install %s" % quote(ans.target.host))
    return data


# The agent's hints name its own commands; a user here types the client's. Each rule names only
# options the client really has (tests/client/test_hints.py checks every one against click).
# Compiled when a hint is first read: `re` was 4 ms before `status` could start its ssh call.
_HINT_RULES = (
    (r"`rgt-agent (cancel|resume|handbook|logs|status|notify-test)( [^`]*)?`",
     lambda m, host: "`rgt-client %s %s%s`" % (m.group(1), host, m.group(2) or "")),
    (r"`rgt-agent start[^`]*`", lambda m, host: "`rgt-client install %s`" % host),
    (r"submit with --replace",
     lambda m, host: "submit it again with --replace (`rgt-client run %s … --replace`)" % host),
    (r"`rgt-client ([a-z-]+) HOST\b", lambda m, host: "`rgt-client %s %s" % (m.group(1), host)),
    (r"^rgt-client ([a-z-]+) HOST\b", lambda m, host: "rgt-client %s %s" % (m.group(1), host)),
)


def client_hint(hint: str, host: str) -> str:
    """An agent hint in the client's words, for HOST."""
    import re
    word = quote(host)
    for pattern, repl in _HINT_RULES:
        hint = re.sub(pattern, lambda m: repl(m, word), hint)   # called here, in this turn of the loop
    return hint


def _line_after(stderr: str, prefix: str) -> str | None:
    found = None
    for line in stderr.splitlines():
        if line.startswith(prefix):
            found = line[len(prefix):].strip()
    return found


def _last_lines(stderr: str, n: int = 2) -> str:
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return " ".join(lines[-n:])[-300:]


def check_names(run: str, stage: str | None = None) -> None:
    """Refuse a run or stage name that is not one (exit 2), before anything is sent."""
    from boxagent import api
    for kind, value in (("run", run), ("stage", stage)):
        if value is not None and not api.valid_name(kind, value):
            err = api.name_error(kind, value)
            raise ClientError(err.message, err.hint.replace("rgt-agent status", "rgt-client status HOST")
                              if err.hint else None, exitcodes.USAGE)


def stage_of(args: list[str]) -> str | None:
    return args[args.index("--stage") + 1] if "--stage" in args[:-1] else None
