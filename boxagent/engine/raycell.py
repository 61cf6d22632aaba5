"""The node side of rgt's Ray driver (raydriver.py): what one attempt's task does on the node Ray
picked. Run ONLY by the cluster's Python inside a Ray worker, shipped there by value with the
task (the node needs no rgt installed); nothing of the agent imports it.

Nothing here needs a filesystem shared with the box the user talks to. The node keeps the
attempt's own files in a folder of its own (`$RGT_NODE_HOME`, else `~/.rgt-node`, then one folder
per head home and cluster), laid out as an RGT_HOME: the launch record the driver sent, the
shim's claim, pid and exit files, the stage's log. The task starts the agent's usual shim there
and streams back, as they appear, the pid record, the log's new bytes and the exit record; the
driver writes them into the head's RGT_HOME, where the daemon, triage, `logs --follow`, watch,
the report and MCP read them unchanged.

Exactly once: the shim's O_EXCL claim is on the node's disk, and a spawn mark is written before
the shim starts. A driver that took over (the one before it ended, and its tasks with it) asks
the node, or every live node when it does not know which ran the attempt (`where`): a node with
the mark follows that shim to its end; only where no node has it is the attempt started.
"""
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

GRACE_S = 3.0           # the TERM -> KILL wait, as Ray's own job stop
POLL_S = 0.1
CHUNK = 1 << 20         # the most log bytes one streamed item carries
SPAWN_WAIT_S = 10.0     # a spawn mark without the shim's claim this long: the shim never ran
GONE_WAIT_S = 1.0       # the shim's process gone: this long for its exit file to land


def node_home(tag):
    """This node's folder for one head home and cluster: this user's own, private."""
    base = os.environ.get("RGT_NODE_HOME") or os.path.join(os.path.expanduser("~"), ".rgt-node")
    # The tag is one name, 12 hex (raytasks.py): `../..` in it made, and passed, this user's new
    # folder inside another user's, who could swap it for their own before the launch record.
    if not isinstance(tag, str) or len(tag) != 12 or tag.strip("0123456789abcdef"):
        raise RuntimeError("rgt's node folder tag %r is not 12 hex digits" % (tag,))
    path = os.path.join(base, tag)
    os.makedirs(path, mode=0o700, exist_ok=True)
    for folder in (base, path):
        st = os.lstat(folder)
        # Another local user's folder (or a link planted there) would get the stage's env,
        # tokens included, in its launch record.
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise RuntimeError("rgt's node folder %s is not this user's own private folder" % folder)
    return path


def cell(req, agent):
    """The task of one attempt: start its shim on this node, then stream its files back."""
    import ray
    home = node_home(req["tag"])
    rel = req["rel"]
    yield {"start": {"start_time": int(time.time() * 1000), "driver_node_id": ray.get_runtime_context().get_node_id(),
                     "node_ip": ray.util.get_node_ip_address(), "host": socket.gethostname(),
                     "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "node_home": home}}
    for key in ("launch", "log", "claim"):
        os.makedirs(os.path.dirname(os.path.join(home, rel[key])), mode=0o700, exist_ok=True)
    if req.get("spec") and req.get("spec_rel"):
        # The run's spec beside its attempts: this box's agent serves a pull of the run's files
        # from here (`[ray] files = "node"`), as any box serves its own runs.
        _write(os.path.join(home, req["spec_rel"]), req["spec"])
    launch = dict(req["launch"], log=os.path.join(home, rel["log"]))
    launch["env"] = dict(launch.get("env") or {}, RGT_HOME=home)
    _write(os.path.join(home, rel["launch"]), launch)
    argv, env = _shim(req, agent, home)
    _write(os.path.join(home, rel["claim"]) + ".spawn", {"at": time.time(), "sid": req["sid"]})
    # sh starts the shim in the background and exits: its parent is init, not this worker. Ray
    # kills a worker's children when the worker ends, and the worker ends with its driver: the
    # shim must outlive both to finish the stage and write its exit file.
    out = subprocess.run(["/bin/sh", "-c", '"$@" </dev/null >/dev/null 2>&1 & echo $!', "sh"] + argv,
                         env=dict(os.environ, **env), start_new_session=True, stdout=subprocess.PIPE, check=True)
    pid = int(out.stdout.split()[0])
    shim = {"pid": pid, "ticks": ticks(pid)}
    yield {"shim": shim}
    for item in follow(req, shim, 0, home):
        yield item


def _shim(req, agent, home):
    """The shim's argv and env: the agent's .pyz the driver sent (kept once per build), or the
    agent's source tree at the head's path (a checkout)."""
    python = req["python"] if req.get("python") and os.path.exists(req["python"]) else sys.executable
    if agent is not None:
        # One file per build for shims (zipimport reads the archive again at each import: a
        # running shim's file is never replaced), and `rgt-agent.pyz` for the node's pull.
        pyz = os.path.join(home, "rgt-agent-%s.pyz" % req["pyz_sha256"][:16])
        for path in (pyz, os.path.join(home, "rgt-agent.pyz")):
            if not _same(path, req["pyz_sha256"]):
                _write_bytes(path, agent, 0o700)
        argv, env = [python, "-S", pyz], {}
    else:
        argv, env = [python, "-S", "-m", "boxagent"], {"PYTHONPATH": req["source"]}
    return argv + ["exec-stage", "--home", home, "--run", req["run"], "--stage", req["stage"],
                   "--attempt", str(req["attempt"])], env


def follow(req, shim, offset, home=None):
    """Until the shim ends: its pid record (again whenever it changes), the log's bytes from
    `offset`, then its exit record. A cancel file in the node's folder TERMs the shim (it
    forwards TERM to its command's group), KILL after GRACE_S."""
    home = home or node_home(req["tag"])
    rel = req["rel"]
    pid_path, exit_path, log_path = (os.path.join(home, rel[k]) for k in ("pid", "exit", "log"))
    cancel = os.path.join(home, "cancel", req["sid"])
    pid, sent, stopped_at, gone_at = shim.get("pid"), None, None, None
    while True:
        rec = _read(pid_path)
        if rec and rec != sent:
            sent = rec
            yield {"pid": rec}
        chunk = _read_from(log_path, offset)
        if chunk:
            yield {"log": chunk, "at": offset}
            offset += len(chunk)
            continue
        done = _read(exit_path)
        if not done and (not pid or ticks(pid) != shim.get("ticks")):
            gone_at = gone_at or time.time()
            if time.time() - gone_at < GONE_WAIT_S:
                time.sleep(POLL_S)
                continue
            yield {"gone": True, "stopped": stopped_at is not None}
            return
        if done:
            yield {"exit": done, "stopped": stopped_at is not None}
            return
        if stopped_at is None and os.path.exists(cancel):
            stopped_at = time.time()
            _kill(pid, signal.SIGTERM, group=False)
        elif stopped_at is not None and time.time() - stopped_at > GRACE_S:
            for target in ((rec or {}).get("pid"), pid):
                _kill(target, signal.SIGKILL)
        time.sleep(POLL_S)


def where(req):
    """Whether this node ever started the attempt: its shim (from the pid record, or the spawn
    mark's wait for the claim), or None."""
    home = node_home(req["tag"])
    claim = os.path.join(home, req["rel"]["claim"])
    mark = _read(claim + ".spawn")
    if not mark:
        return None
    deadline = mark.get("at", 0) + SPAWN_WAIT_S
    while not os.path.exists(claim) and time.time() < deadline:
        time.sleep(POLL_S)
    if not os.path.exists(claim):
        return None
    rec = _read(os.path.join(home, req["rel"]["pid"]))
    pid = rec.get("shim_pid") or _claimed_by(claim)     # the claim holds the shim's pid from its first moment
    import ray
    return {"node_id": ray.get_runtime_context().get_node_id(), "node_home": home,
            "shim": {"pid": pid, "ticks": rec.get("shim_start_ticks") or ticks(pid)}}


def _claimed_by(claim):
    try:
        with open(claim) as fh:
            return int(fh.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def cancel(req):
    """The cancel file in the node's folder, where the attempt's follow sees it."""
    folder = os.path.join(node_home(req["tag"]), "cancel")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    _write(os.path.join(folder, req["sid"]), {"at": time.time()})


def ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError, TypeError):
        return None


def _kill(pid, sig, group=True):
    if not isinstance(pid, int) or pid <= 1:
        return
    try:
        if group:
            os.killpg(os.getpgid(pid), sig)
        else:
            os.kill(pid, sig)
    except OSError:
        pass


def _read_from(path, offset):
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(CHUNK)
    except OSError:
        return b""


def _same(path, sha):
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest() == sha
    except OSError:
        return False


def _write(path, data):
    _write_bytes(path, json.dumps(data).encode("utf-8"))


def _write_bytes(path, raw, mode=0o600):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    os.replace(tmp, path)


def _read(path):
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
