"""Python scripts the client runs ON THE BOX (`python3 -c`, base64-wrapped by the transport).

They run under the box's interpreter, which may be Python 3.8 with nothing installed: stdlib
only, 3.8 syntax (tests run them under a real 3.8). Each prints one last line
`RGT-RESULT {json}` that the client parses; secrets arrive on stdin, never in argv.
"""
from __future__ import annotations

from typing import Any

from boxagent.api import box_json

from rgt_client.box.boxside import SAFE_READ
from rgt_client.errors import ClientError

RESULT_PREFIX = "RGT-RESULT "

_COMMON = r'''
import hashlib, json, os, subprocess, sys, tempfile
HOME = os.path.abspath(os.path.expanduser(os.environ["RGT_HOME"]))
PYZ = os.path.join(HOME, "rgt-agent.pyz")
OUT = {"home": HOME, "python": sys.executable,
       "python_version": "%d.%d.%d" % tuple(sys.version_info[:3])}

def done(**kw):
    OUT.update(kw)
    sys.stdout.write("\nRGT-RESULT " + json.dumps(OUT) + "\n")
    sys.stdout.flush()
    sys.exit(0)

def tail(b, n=800):
    return b.decode("utf-8", "replace")[-n:].strip()

def atomic(path, data, mode):
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=HOME)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

def agent(args, stdin=b"", timeout=60):
    try:
        p = subprocess.run([sys.executable, PYZ] + args, input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": None, "out": "", "err": "timed out after %ds" % timeout}
    return {"rc": p.returncode, "out": tail(p.stdout, 200000), "err": tail(p.stderr)}

def as_json(res):
    try:
        return json.loads(res["out"]) if res["rc"] == 0 else None
    except ValueError:
        return None
'''

# argv: sha256 size deps(0|1) deps_timeout_s [check] ; stdin: the agent file's bytes, or nothing
# with `check`: the box's copy is used when its sha256 is the one sent, else need_upload is the
# answer (an unchanged agent is not sent again over a far link: 369 KB for an "unchanged")
UPLOAD = _COMMON + r'''
def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def deps(timeout):
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        cmd.append("--user")  # a venv refuses --user; a system python needs it
    try:
        p = subprocess.run(cmd + ["psutil", "requests", "watchdog"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "detail": "pip did not finish within %ds" % timeout}
    except OSError as exc:
        return {"ok": False, "detail": str(exc)}
    return {"ok": p.returncode == 0, "detail": tail(p.stderr, 300)}

def main():
    sha, size, want_deps, deps_timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", float(sys.argv[4])
    if sys.version_info < (3, 8):
        done(error="python %s is too old: the agent needs >= 3.8" % OUT["python_version"])
    check_only = sys.argv[5:6] == ["check"]
    prev = sha_file(PYZ) if os.path.exists(PYZ) else None
    if check_only and prev != sha:
        done(ok=True, need_upload=True)
    data = None if check_only else sys.stdin.buffer.read()
    if data is not None:
        got = hashlib.sha256(data).hexdigest()
        if len(data) != size or got != sha:
            done(error="the agent file arrived damaged: %d bytes, sha256 %s (sent %d bytes, %s)"
                 % (len(data), got, size, sha))
    os.makedirs(HOME, exist_ok=True)
    os.chmod(HOME, 0o700)
    sha_path = os.path.join(HOME, "agent.sha256")
    if prev != sha:
        atomic(PYZ, data, 0o755)
    installed = sha_file(PYZ)  # the copy on disk, not the bytes in memory
    if installed != sha:
        done(error="the installed agent file has sha256 %s, expected %s" % (installed, sha))
    atomic(sha_path, (sha + "\n").encode(), 0o644)
    OUT["deps_install"] = deps(deps_timeout) if want_deps else None
    probe = agent(["probe", "--json"], timeout=90)
    OUT["probe"] = as_json(probe)
    if OUT["probe"] is None:
        OUT["probe_error"] = probe["err"] or "probe gave no JSON"
    done(ok=True, sha256=installed, previous_sha256=prev, replaced=prev != sha)

main()
'''

# stdin: {"config": {...}, "notify": {...} | null, "restart": bool}
START = _COMMON + r'''
def main():
    req = json.loads(sys.stdin.buffer.read().decode("utf-8") or "{}")
    steps = {}
    steps["configure"] = agent(["configure"], json.dumps(req.get("config") or {}).encode())
    if steps["configure"]["rc"] != 0:
        done(error="configure failed: " + (steps["configure"]["err"] or "exit %s" % steps["configure"]["rc"]),
             steps=steps)
    # compile the agent once for this Python into its bytecode cache (bundle._MAIN): every
    # later call (status above all) loads code instead of compiling it
    steps["precompile"] = agent(["--rgt-precompile"], timeout=120)
    if req.get("notify") is not None:
        res = agent(["notify-set", "--json"], json.dumps(req["notify"]).encode())
        steps["notify-set"] = {"rc": res["rc"], "out": "", "err": res["err"]}
        # the redacted targets the box set (ids, formats, no secrets), for install to list
        OUT["notifiers"] = (as_json(res) or {}).get("notifiers") if res["rc"] == 0 else None
    if req.get("restart", True):
        # stop leaves running stages alone: the new daemon re-adopts them (DESIGN: upgrades)
        steps["stop"] = agent(["stop"], timeout=90)
        steps["start"] = agent(["start"], timeout=60)
    status = agent(["status", "--json", "--events", "0"], timeout=30)
    OUT["status"] = as_json(status)
    for s in steps.values():
        s["out"] = s["out"][-300:]
    done(ok=True, steps=steps)

main()
'''

# argv: run stage n max_wait_s poll_s [resume] ; streams the run's stage logs until it ends, in frames
# (follow.py reads them); resume: the `st` of the last frame the client got, its offsets cut to its last byte
FOLLOW = _COMMON + SAFE_READ + r'''
import base64, time

def done(**kw):  # the result goes to stderr here: stdout carries the log bytes, framed
    OUT.update(kw)
    sys.stdout.flush()
    sys.stderr.write("\nRGT-RESULT " + json.dumps(OUT) + "\n")
    sys.stderr.flush()
    sys.exit(0)
TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")

def read_status():
    try:
        with open_regular(os.path.join(HOME, "status.json")) as fh:
            return loads(fh.read(64 << 20))
    except OSError:
        return None

def find_run(status, name):
    for run in (status or {}).get("runs") or []:
        if run.get("name") == name:
            return run
    return None

STATE = {"offsets": {}, "current": None, "printed": False}

def frame(data, **head):
    """One frame: a JSON line (what follows, and where the follow stands after it) and its bytes.
    The client resumes from the last byte it got after a broken link: nothing twice, nothing lost."""
    head.update(n=len(data), st=STATE)
    sys.stdout.buffer.write(json.dumps(head).encode("utf-8") + b"\n" + data)
    sys.stdout.flush()

def pump(path, offset):
    try:
        with open_regular(path) as fh:       # a FIFO at a log's path: no bytes, never a block
            fh.seek(offset)
            data = fh.read(1 << 20)
    except OSError:
        return offset
    if data:
        STATE["offsets"][path] = offset + len(data)
        STATE["printed"] = True
        frame(data, p=path, o=offset)
    return offset + len(data)

def start_offset(path, n):
    if n <= 0:       # -n 0: all of it
        return 0
    try:
        with open_regular(path) as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            lines = fh.read().split(b"\n")
    except OSError:
        return 0
    keep = b"\n".join(lines[-(n + 1):])
    return size - len(keep)

def stage_logs(run, only):
    out, heads = [], {}
    for st in run.get("stages") or []:
        log = st.get("log")
        if not log or (only and st.get("name") != only) or st.get("state") in ("pending", "skipped"):
            continue
        path = log if os.path.isabs(log) else os.path.join(HOME, log)
        out.append(path)
        heads[path] = "==> %s (attempt %s) <==" % (st.get("name"), st.get("attempt") or 1)
    return out, heads

def header(text, printed):
    """tail(1)'s header when the output moves to another stage's log: the chain moved on."""
    lead = b"" if not printed else b"\n"
    frame(lead + text.encode("utf-8", "replace") + b"\n", h=1)

def end_offset(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

def main():
    name, only, n, max_wait, poll = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    deadline, at = time.time() + max_wait, STATE     # at: offsets per log, current log, printed yet
    hard_deadline(max_wait + 30, lambda: done(state=None, gave_up=True))
    # base64: a JSON word with quotes and paths would meet the remote login shell (csh, fish)
    resume = json.loads(base64.b64decode(sys.argv[6]).decode("utf-8")) if len(sys.argv) > 6 else None
    if resume:   # after a broken link: where the client's last byte came from
        at.update(offsets=dict(resume["offsets"]), current=resume["current"], printed=bool(resume["printed"]))
    first, offsets = not resume, at["offsets"]
    if resume:
        frame(b"")           # the link is back: the client says so before any new log byte
    while True:
        run = find_run(read_status(), name)
        if run is None:
            done(error="no run %s" % name, state=None)
        state = run.get("state")
        logs, heads = stage_logs(run, only)
        if first and logs:
            # the last N lines of the stage running now; earlier stages' logs are history
            for log in logs[:-1]:
                offsets[log] = end_offset(log)
            offsets[logs[-1]] = start_offset(logs[-1], n)
            at["current"], first = logs[-1], False
            header(heads[logs[-1]], False)   # the first stage shown says which it is, as the later ones do
        for log in logs:
            if log not in offsets or (log != at["current"] and end_offset(log) > offsets[log]):
                at["current"] = log
                header(heads[log], at["printed"])
            offsets[log] = pump(log, offsets.get(log, 0))
        if state in TERMINAL:
            done(state=state)
        if time.time() >= deadline:
            done(state=state, gave_up=True)
        time.sleep(poll)

main()
'''


def parse_result(stdout: str, what: str, stderr: str = "") -> dict[str, Any]:
    """The `RGT-RESULT {json}` line of a box-side script; ClientError if it never came."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                result = box_json(line[len(RESULT_PREFIX):])
            except ValueError:      # BadJSON: too deep, too big, not JSON
                break
            if isinstance(result, dict):
                return result
            break
    from rgt_client.textsafe import safe_line
    detail = safe_line((stderr.strip().splitlines() or ["no output"])[-1][-300:])
    raise ClientError("%s gave no result: %s" % (what, detail),
                      "run again with --debug; check the box's python3 works")
