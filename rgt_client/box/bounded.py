"""Agent answers read as they come, within bounds: pull-info's exact byte count, pull-stream's
frames.

`subprocess.run(capture_output=True)` holds the whole answer in memory: a compromised box that
answers with an endless line or a 1 GB "manifest" takes the laptop's memory with it (a 1 GB
header line sent `pull` to 2.1 GB RSS). An AgentStream reads the agent's stdout as a stream,
line by line with a cap, or an exact byte count the caller has checked first; it keeps only
the last ERR_TAIL bytes of stderr and hangs up past ERR_FLOOD; and on any refusal it hangs up
on the box (kills the ssh client, whose end then gets SIGHUP and EPIPE) instead of draining
what is left. (Answers read whole, like `status --json`, are the transport's to cap.)
"""
from __future__ import annotations

import subprocess
import threading
from typing import IO, Callable, List, Optional

from rgt_client import exitcodes
from rgt_client.box import transport
from rgt_client.errors import ClientError

MAX_LINE = 64 << 10        # a JSON header line: a few KB from a real agent
ERR_TAIL = 64 << 10        # stderr kept: the agent's Error:/Hint: lines come last
ERR_FLOOD = 16 << 20       # stderr in all before we hang up: an agent writes a few lines


def drain_tail(stream, keep: bytearray, cap: int = ERR_TAIL, limit: Optional[int] = None,
               on_flood: Optional[Callable[[], None]] = None) -> None:
    """Read stream to its end, keeping only its last cap bytes in keep (a thread's body: a
    process's stderr must be read, or it blocks once the pipe is full). Past `limit` bytes in
    all, on_flood() is called once (to hang up)."""
    total = 0
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            return
        total += len(chunk)
        keep += chunk
        if len(keep) > cap:
            del keep[:len(keep) - cap]
        if on_flood is not None and limit is not None and total > limit:
            on_flood()
            on_flood = None


class AgentStream:
    """`rgt-agent.pyz ARGS` on the box with its stdout read as a bounded stream.

    with AgentStream(target, ["pull-info", run], timeout=3600) as s:
        head = s.line("the pull-info header")
        ...
        res = s.finish()        # exit code and stderr tail, as a transport.Result
    """

    def __init__(self, target: transport.Target, args: List[str], stdin: Optional[bytes] = None,
                 timeout: Optional[float] = None):
        self.target = target
        self.timed_out = False
        self.flooded = False
        self.connected = False
        self._tail = bytearray()
        self.proc = transport.spawn(target, transport.agent_command(target, args),
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stderr is not None   # both are pipes
        self.out: IO[bytes] = self.proc.stdout
        self.err: IO[bytes] = self.proc.stderr
        self._threads = [threading.Thread(target=self._drain, daemon=True)]
        if stdin is not None:
            # A thread: a box that answers before it reads would otherwise leave us blocked on
            # a full stdin pipe while its answer fills the other one.
            self._threads.append(threading.Thread(target=self._feed, args=(stdin,), daemon=True))
        for t in self._threads:
            t.start()
        self._timer = threading.Timer(timeout, self._expire) if timeout else None
        if self._timer:
            self._timer.daemon = True
            self._timer.start()

    def _drain(self) -> None:
        # The remote preamble's first stderr line says ssh got through: kept apart, so the
        # tail of a long stderr cannot lose it (an unreachable box never sends it).
        first = self.err.readline(len(transport.CONNECTED))
        if first == transport.CONNECTED:
            self.connected = True
        else:
            self._tail += first
        drain_tail(self.err, self._tail, limit=ERR_FLOOD, on_flood=self._flood)

    def _flood(self) -> None:
        self.flooded = True
        self.hang_up()

    def _feed(self, data: bytes) -> None:
        assert self.proc.stdin is not None     # a pipe whenever there is data to feed
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except OSError:     # the box hung up or never read: its answer says why
            pass

    def _expire(self) -> None:
        self.timed_out = True
        self.hang_up()

    def hang_up(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass

    def line(self, what: str, cap: int = MAX_LINE) -> bytes:
        """One line (with its newline); b"" at the end of the answer, or a last line without
        one. ClientError when it runs past cap: the rest is never read."""
        line = self.out.readline(cap + 1)
        if len(line) > cap:
            self.hang_up()
            raise ClientError("%s sent %s longer than %d KiB; refused" % (self.target.host, what, cap >> 10),
                              "the box answered something no rgt agent sends: check the box "
                              "(`rgt-client install %s` puts the real agent back)" % self.target.host)
        return line

    def read(self, n: int) -> bytes:
        """Exactly n bytes (fewer only at the end of the answer); the caller bounds n."""
        return self.out.read(n)

    def finish(self, hang_up: bool = False) -> transport.Result:
        """Wait for the agent (or hang up on it first); its exit code and stderr tail. Raises
        ClientError(UNREACHABLE) when the timeout fired, and for ssh's own failures."""
        if hang_up:
            self.hang_up()
        try:
            self.out.close()
        except OSError:
            pass
        rc = self.proc.wait()
        for t in self._threads:
            t.join(5)
        if self._timer:
            self._timer.cancel()
        if self.flooded:
            raise ClientError("%s sent more than %d MiB of error output; refused"
                              % (self.target.host, ERR_FLOOD >> 20),
                              "no rgt agent says that much: check the box, and put the real agent back "
                              "with `rgt-client install %s`" % self.target.host)
        if self.timed_out:
            raise ClientError("%s did not finish answering in time" % self.target.host,
                              "check the network and the box, then run the same command again",
                              exitcodes.UNREACHABLE)
        return transport.check_reach(self.target, transport.Result(rc, b"", bytes(self._tail), 0.0, self.connected))

    def __enter__(self) -> "AgentStream":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.proc.returncode is None:
            self.hang_up()
            self.out.close()
            self.proc.wait()
        if self._timer:
            self._timer.cancel()


__all__ = ["AgentStream", "drain_tail", "MAX_LINE", "ERR_TAIL"]
