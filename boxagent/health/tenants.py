"""Who a GPU process is: one of rgt's stages, or a tenant rgt did not start.

Field failure (gotcha U11): a process rgt did not start held 20.6 GiB of the GPU; NVML listed its
pid and nothing else said so, and the next run's CUDA OOM got the generic "check for other jobs".
A process is one of rgt's stages only by facts it cannot forge (field attack: any process that
ran `env RGT_ATTEMPT_TOKEN=x RGT_RUN=victim …` had its own GPU faults written into the victim
stage's cause as "a bug in a kernel", raised no alert, and its 20 GiB of VRAM went unflagged):
- the attempt token's VALUE, one of the live (or recently ended) attempts' own secrets, which
  the daemon hands each stage (engine/contain.py); a name alone (RGT_RUN) proves nothing;
- the attempt's cgroup (a process inside it was put there by the shim or inherited it);
- the process tree: a descendant of the attempt's shim (pid and start time);
and in every case a process that started before the attempt's shim cannot be one of its
processes. Which run and stage it is comes from the daemon's own record, never from the
process's environment. Anything else is another tenant, whatever its environment says (and a
process that claims rgt's environment without these facts is named as such). A process whose
environ we may not read runs as another user: rgt's stages run as the daemon's user, so it is
not ours. A pid /proc does not list lives in another PID namespace (another container or the
host): named as such, never guessed at.

Owners are remembered by (pid, start time) for a while after the process ends, because the kernel
log's Xid line is often read after the faulting process has exited: "the stage that held that pid
when it ended".
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

# Another tenant holding more than this share of a GPU's memory is news: the slot scheduler
# hands such a GPU out last and says so; a job's [preflight] refuses it unless told otherwise.
SHARED_PCT = 10.0
_ENV_LIMIT = 256 << 10     # a huge environment is cut; RGT_* sits where the daemon put it
_CMD_LIMIT = 300
_SECRET_WORD = re.compile(r"(token|secret|passw|pwd|api[_-]?key|auth|credential|private)", re.I)
_URL_CREDS = re.compile(r"(\w+://)[^/@\s]+@")


def redact_argv(argv: List[str]) -> str:
    """A command line safe to show: the value of any secret-looking flag or NAME=value is
    replaced by *** (a foreign process's `--hf-token xyz` must not reach status.json)."""
    out: List[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        name, eq, _value = arg.partition("=")
        if eq and _SECRET_WORD.search(name):
            out.append(name + "=***")
            continue
        if arg.startswith("-") and _SECRET_WORD.search(arg):
            hide_next = True
        out.append(_URL_CREDS.sub(r"\1***@", arg))
    text = " ".join(out)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text[:_CMD_LIMIT]


def _read(path: str, limit: int) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _start_ticks(proc_root: str, pid: int) -> Optional[str]:
    raw = _read(os.path.join(proc_root, str(pid), "stat"), 4096)
    if raw is None:
        return None
    text = raw.decode("ascii", "replace")
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


Attempt = Dict[str, Any]      # {run, stage, token, cgroup, shim_pid, shim_start_ticks}
_ANCESTRY_LIMIT = 64          # deep enough for launchers (torchrun -> workers -> helpers)


def _stat_fields(proc_root: str, pid: int) -> Optional[List[str]]:
    raw = _read(os.path.join(proc_root, str(pid), "stat"), 4096)
    if raw is None:
        return None
    text = raw.decode("ascii", "replace")
    return text[text.rfind(")") + 2:].split()


def _ticks_int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _cgroup_paths(proc_root: str, pid: int) -> List[str]:
    """The cgroup paths of a process, as /proc/PID/cgroup names them (relative to each mount)."""
    raw = _read(os.path.join(proc_root, str(pid), "cgroup"), 16 << 10)
    if not raw:
        return []
    out = []
    for line in raw.decode("utf-8", "replace").splitlines():
        path = line.split(":", 2)[-1].strip()
        if path and path != "/":
            out.append(path)
    return out


def _in_cgroup(paths: List[str], cgroup: Any) -> bool:
    if not isinstance(cgroup, str) or not cgroup:
        return False
    leaf = cgroup.rstrip("/")
    return any(leaf.endswith(p.rstrip("/")) and p.rstrip("/").rsplit("/", 1)[-1] == leaf.rsplit("/", 1)[-1]
               for p in paths)


def _descends_from(proc_root: str, pid: int, shims: Dict[Tuple[int, int], Attempt]) -> Optional[Attempt]:
    """The attempt whose shim (pid and start time) is an ancestor of `pid`, if any."""
    seen = 0
    cur = pid
    while seen < _ANCESTRY_LIMIT and cur > 1:
        fields = _stat_fields(proc_root, cur)
        if not fields or len(fields) < 20:
            return None
        ticks = _ticks_int(fields[19])
        if ticks is not None and (cur, ticks) in shims and cur != pid:
            return shims[(cur, ticks)]
        cur = _ticks_int(fields[1]) or 0
        seen += 1
    return None


def _claims(env: Optional[bytes]) -> Dict[str, str]:
    found: Dict[str, str] = {}
    for item in (env or b"").split(b"\0"):
        if item.startswith(b"RGT_"):
            k, _, v = item.partition(b"=")
            found[k.decode("ascii", "replace")] = v.decode("utf-8", "replace")[:200]
    return found


def _match(proc_root: str, pid: int, start: Optional[int], env: Dict[str, str],
           attempts: List[Attempt]) -> Tuple[Optional[Attempt], str]:
    """(the attempt `pid` provably belongs to, by which fact) or (None, "")."""
    def not_older(a: Attempt) -> bool:
        shim_start = _ticks_int(a.get("shim_start_ticks"))
        return start is None or shim_start is None or start >= shim_start
    token = env.get("RGT_ATTEMPT_TOKEN")
    for a in attempts:
        if token and a.get("token") and token == a.get("token") and not_older(a):
            return a, "token"
    paths = _cgroup_paths(proc_root, pid)
    for a in attempts:
        if paths and _in_cgroup(paths, a.get("cgroup")) and not_older(a):
            return a, "cgroup"
    shims = {(a["shim_pid"], t): a for a in attempts
             if isinstance(a.get("shim_pid"), int) and (t := _ticks_int(a.get("shim_start_ticks"))) is not None}
    parent = _descends_from(proc_root, pid, shims) if shims else None
    if parent is not None:
        return parent, "process tree"
    return None, ""


def read_owner(proc_root: str, pid: int, self_pid: Optional[int] = None,
               attempts: Optional[List[Attempt]] = None) -> Dict[str, Any]:
    """{pid, visible, rgt, run, stage, command[, by, note]}; rgt None when it cannot be told.
    `attempts` are the daemon's live and recent attempts: the only source of run and stage."""
    base = os.path.join(proc_root, str(pid))
    owner: Dict[str, Any] = {"pid": pid, "visible": os.path.isdir(base), "rgt": None,
                             "run": None, "stage": None, "command": None}
    if not owner["visible"]:
        owner["rgt"] = False        # not in our PID namespace: another container or the host
        return owner
    cmd = _read(os.path.join(base, "cmdline"), 8192)
    if cmd:
        owner["command"] = redact_argv([a.decode("utf-8", "replace") for a in cmd.rstrip(b"\0").split(b"\0")])
    if pid == (self_pid if self_pid is not None else os.getpid()):
        owner.update(rgt=True, role="agent")
        return owner
    env = _read(os.path.join(base, "environ"), _ENV_LIMIT)
    if env is None:
        owner["rgt"] = False   # another user's process: not one of ours
        return owner
    claims = _claims(env)
    fields = _stat_fields(proc_root, pid)
    start = _ticks_int(fields[19]) if fields and len(fields) > 19 else None
    found, by = _match(proc_root, pid, start, claims, list(attempts or []))
    if found is not None:
        owner.update(rgt=True, run=found.get("run"), stage=found.get("stage"), by=by)
        return owner
    owner["rgt"] = False
    if "RGT_ATTEMPT_TOKEN" in claims or "RGT_RUN" in claims:
        owner["note"] = "carries rgt's stage environment but is none of its stages' processes"
    return owner


class PidBook:
    """Owners by pid, kept `keep_s` after the pid was last seen (the Xid line comes late)."""

    def __init__(self, proc_root: str, keep_s: float = 900.0, limit: int = 512,
                 attempts: Optional[Callable[[], List[Attempt]]] = None):
        self.proc_root = proc_root
        self.keep_s = keep_s
        self.limit = limit
        self._book: Dict[int, Tuple[Optional[str], Dict[str, Any], float]] = {}
        # the daemon's live attempts (engine views); ended ones are remembered as long as owners
        self.attempts = attempts
        self._known: Dict[str, Tuple[Attempt, float]] = {}

    def known_attempts(self, now: float) -> List[Attempt]:
        """The live attempts, and those that ended within keep_s (a helper may outlive its
        attempt by a moment, and the kernel's Xid line comes late)."""
        live: List[Attempt] = []
        if self.attempts is not None:
            try:
                live = [a for a in self.attempts() if isinstance(a, dict)]
            except Exception:  # noqa: BLE001 - the engine's view must never stop a health sample
                live = []
        for a in live:
            key = str(a.get("token") or a.get("shim_pid") or id(a))
            self._known[key] = (a, now)
        for key in [k for k, (_a, seen) in self._known.items() if now - seen > self.keep_s]:
            del self._known[key]
        return [a for a, _seen in self._known.values()]

    def owner(self, pid: int, now: float) -> Dict[str, Any]:
        """The owner of a live pid (re-read when the pid was reused), else the remembered one."""
        ticks = _start_ticks(self.proc_root, pid)
        known = self._book.get(pid)
        if ticks is None and known is not None:
            return dict(known[1], ended=True)
        if ticks is None:
            # gone before anyone looked (or never in our PID namespace): whose it was is unknown
            return {"pid": pid, "visible": False, "rgt": None, "run": None, "stage": None,
                    "command": None, "ended": True}
        if known is not None and known[0] == ticks and ticks is not None and known[1].get("rgt"):
            # one of ours stays ours for its life; any other answer is read again, because a
            # stage's process can be seen before the shim has recorded the attempt
            self._book[pid] = (ticks, known[1], now)
            return dict(known[1])
        owner = read_owner(self.proc_root, pid, attempts=self.known_attempts(now))
        if ticks is not None:
            self._book[pid] = (ticks, owner, now)
            self._trim(now)
        return dict(owner)

    def _trim(self, now: float) -> None:
        stale = [p for p, (_t, _o, seen) in self._book.items() if now - seen > self.keep_s]
        for p in stale:
            del self._book[p]
        if len(self._book) > self.limit:
            for p, _ in sorted(self._book.items(), key=lambda kv: kv[1][2])[:len(self._book) - self.limit]:
                del self._book[p]

    def annotate(self, gpus: List[Dict[str, Any]], now: float) -> None:
        """gpus[].processes[] gain rgt, run, stage and command (and keep pid, memory, visible)."""
        for g in gpus:
            for p in g.get("processes") or []:
                # NVML lists live processes: one /proc does not show is in another namespace
                o = self.owner(p["pid"], now) if p.get("visible") else read_owner(self.proc_root, p["pid"])
                p.update(rgt=bool(o.get("rgt")), run=o.get("run"), stage=o.get("stage"),
                         command=o.get("command"))
                if o.get("note"):
                    p["note"] = o["note"]
                if not p.get("visible"):
                    p["note"] = "not visible from this container (another container or the host)"


def foreign(gpu: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The processes on one GPU (a status.json gpus[] entry) that rgt did not start."""
    return [p for p in gpu.get("processes") or [] if p.get("rgt") is False]


def describe(p: Dict[str, Any]) -> str:
    """'pid 609 (python3 serve.py) holds 20.6 GiB' / 'pid 609, not visible from this container'."""
    from boxagent.base.units import format_bytes
    mem = p.get("used_memory_bytes")
    what = " (%s)" % p["command"] if p.get("command") else (
        ", not visible from this container" if not p.get("visible") else "")
    held = " holds %s" % format_bytes(mem) if isinstance(mem, int) else " holds GPU memory (amount unknown)"
    return "pid %s%s%s" % (p.get("pid"), what, held)
