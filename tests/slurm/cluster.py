"""A real one-node Slurm cluster for tests: munged, slurmctld and slurmd, all in one temp dir.

start_cluster(dir) writes slurm.conf (NodeName=localhost with the CPUs and RealMemory `slurmd -C`
reports, its own free ports, spool/state/log dirs in `dir`, SlurmUser/SlurmdUser root), a munge
key and a munged on its own socket (the client tools find it through AuthInfo=socket=...), starts
the three daemons in the foreground as our children and waits until `sinfo` says the node is idle.
Clients only need SLURM_CONF (cluster.env). stop() cancels the jobs, stops the daemons, kills any
process still carrying this cluster's SLURM_CONF (slurmstepd and job processes survive a stopped
slurmd) and removes the job cgroups slurmd made.

Memory enforcement (`cluster.mem_enforcement`): "cgroup" with task/cgroup + cgroup/v1 where the v1
memory controller is writable (the job ends OUT_OF_MEMORY); else "jobacct" (jobacct_gather's
OverMemoryKill polls RSS every second and kills the step: the job ends FAILED, signal 9, with
"exceeded memory limit" in its log); `mem_enforcement_reason` says why when it is not "cgroup".
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "sacct")
NODE = "localhost"
PARTITIONS = ("debug", "long", "urgent")   # urgent (PriorityTier=2) preempts jobs in the others
CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")
START_TIMEOUT_S = 20.0


class ClusterUnavailable(Exception):
    """The cluster cannot run here; the message is the exact reason (a skip reason)."""


def missing_binaries() -> List[str]:
    return [b for b in DAEMONS + CLIENTS if _which(b) is None]


def _which(name: str) -> Optional[str]:
    # munged/slurmd live in sbin, which a non-login PATH may lack
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/local/sbin")


def free_ports(n: int) -> List[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_hardware() -> Dict[str, str]:
    """`slurmd -C` as a dict (CPUs, Boards, SocketsPerBoard, ..., RealMemory)."""
    out = subprocess.run([_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True, timeout=20)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    fields = dict(tok.split("=", 1) for tok in first.split() if "=" in tok)
    if "CPUs" not in fields or "RealMemory" not in fields:
        raise ClusterUnavailable("`slurmd -C` printed no CPUs/RealMemory: %r %s" % (first, out.stderr.strip()))
    return fields


def cgroup_v1_memory() -> Optional[str]:
    """None when slurmd's task/cgroup (cgroup/v1) can enforce --mem here, else why not."""
    if os.geteuid() != 0:
        return "not root: slurmd cannot create job cgroups"
    if not (CGROUP_V1_MEMORY / "memory.limit_in_bytes").exists():
        return ("no cgroup v1 memory controller at %s (Slurm 22.05's cgroup/v2 needs systemd to "
                "delegate slurmd a cgroup)" % CGROUP_V1_MEMORY)
    if not os.access(str(CGROUP_V1_MEMORY), os.W_OK):
        return "%s is not writable" % CGROUP_V1_MEMORY
    return None


class SlurmCluster:
    def __init__(self, base: Path):
        self.dir = base
        self.conf = base / "slurm.conf"
        self.logs = base / "log"
        self.munge_dir = _short_dir(base / "munge")
        # slurmstepd makes its socket in the spool dir (`localhost_<job>.4294967291`, ~30 bytes):
        # under pytest-xdist's deeper temp dirs (`popen-gwN/`) the path passed the 108-byte
        # limit, slurmstepd could not start, and the job sat PENDING launch_failed_requeued_held
        self.spool = base / "spool" if len(str(base / "spool")) + 40 < 100 else \
            Path(tempfile.mkdtemp(prefix="rgt-spool-"))
        self.munge_socket = self.munge_dir / "munge.sock"
        self.node = NODE
        self.partitions = PARTITIONS
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        for var in [k for k in self.env if k.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))]:
            if var != "SLURM_CONF":   # a test run inside a real allocation must not leak into ours
                del self.env[var]
        self.procs: Dict[str, subprocess.Popen] = {}
        self.mem_enforcement: Optional[str] = None
        self.mem_enforcement_reason = ""
        self.start_s: Optional[float] = None
        self.hardware: Dict[str, str] = {}
        self.first_job_id = 1000 + int.from_bytes(os.urandom(3), "big")   # < 16.8M, far below MaxJobId

    # -- helpers for tests
    def run(self, *argv: str, timeout: float = 30, check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=timeout, cwd=str(self.dir))
        if check and proc.returncode != 0:
            raise AssertionError("%s exited %d: %s" % (" ".join(argv), proc.returncode, proc.stderr.strip()))
        return proc

    def sbatch(self, argv: Sequence[str]) -> str:
        """Run a full sbatch argv (with --parsable) and return the job id."""
        out = self.run(*argv, check=True).stdout.strip().splitlines()
        return out[-1].split(";")[0]

    def job(self, job_id: str) -> Dict[str, str]:
        """`scontrol show job -o ID` as a flat dict (values without spaces only: enough here)."""
        out = self.run("scontrol", "show", "job", "-o", str(job_id)).stdout
        return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)

    def wait_state(self, job_id: str, states: Sequence[str], timeout: float = 60) -> Dict[str, str]:
        deadline = time.monotonic() + timeout
        rec: Dict[str, str] = {}
        while time.monotonic() < deadline:
            rec = self.job(job_id)
            if rec.get("JobState") in states:
                return rec
            time.sleep(0.2)
        raise AssertionError("job %s not in %s after %ss: %s (reason %s)" % (job_id, states, timeout, rec.get("JobState"),
                                                                          rec.get("Reason")))

    def log_tail(self, n: int = 15) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log", "slurmctld.out", "slurmd.out", "munged.out"):
            path = self.logs / name
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-n:]
                parts.append("--- %s\n%s" % (name, "\n".join(lines)))
        return "\n".join(parts)

    # -- lifecycle
    def start(self) -> "SlurmCluster":
        t0 = time.monotonic()
        for d in ("state", "log"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.hardware = node_hardware()
        why_not = cgroup_v1_memory()
        self.mem_enforcement = "cgroup" if why_not is None else "jobacct"
        self.mem_enforcement_reason = why_not or ""
        self._start_munge()
        try:
            self._start_slurm()
        except ClusterUnavailable:
            if self.mem_enforcement != "cgroup":
                raise
            # task/cgroup refused (a read-only or foreign cgroup tree): the cluster still runs
            # without it, and memory is then enforced by jobacct_gather's OverMemoryKill.
            reason = "slurmd did not come up with task/cgroup:\n" + self.log_tail(5)
            self._stop_slurm()
            self.mem_enforcement, self.mem_enforcement_reason = "jobacct", reason
            self._start_slurm()
        self.start_s = time.monotonic() - t0
        return self

    def _spawn(self, name: str, argv: List[str]) -> subprocess.Popen:
        out = open(str(self.logs / (name + ".out")), "ab")
        try:
            proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd=str(self.dir),
                                    preexec_fn=_die_with_parent)
        finally:
            out.close()
        self.procs[name] = proc
        return proc

    def _start_munge(self) -> None:
        self.munge_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(str(self.munge_dir), 0o755)   # munged wants the socket dir reachable by clients
        key = self.munge_dir / "munge.key"
        fd = os.open(str(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
        os.write(fd, os.urandom(1024))
        os.close(fd)
        # -f: munged refuses a socket under a world-writable temp dir without it; this key is test-only.
        proc = self._spawn("munged", [_which("munged") or "munged", "-F", "-f", "--num-threads=2",
                                      "--socket=%s" % self.munge_socket, "--key-file=%s" % key,
                                      "--pid-file=%s" % (self.munge_dir / "munged.pid"),
                                      "--log-file=%s" % (self.logs / "munged.log"),
                                      "--seed-file=%s" % (self.munge_dir / "munged.seed")])
        deadline = time.monotonic() + 10
        while not self.munge_socket.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ClusterUnavailable("munged did not start (exit %s):\n%s" % (proc.poll(), self.log_tail(5)))
            time.sleep(0.02)

    def _start_slurm(self) -> None:
        last = None
        for _attempt in range(3):    # a free port taken between bind and slurmctld's bind: new ports
            self.conf.write_text(self.config_text(*free_ports(2)))
            if self.mem_enforcement == "cgroup":
                (self.dir / "cgroup.conf").write_text(CGROUP_CONF)
            self._spawn("slurmctld", [_which("slurmctld") or "slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._spawn("slurmd", [_which("slurmd") or "slurmd", "-D", "-N", NODE, "-f", str(self.conf)])
            try:
                self._wait_idle()
                return
            except ClusterUnavailable as exc:
                last = exc
                if "Address already in use" not in self.log_tail(40):
                    raise
                self._stop_slurm()
        raise last  # type: ignore[misc]

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            for name in ("slurmctld", "slurmd"):
                if self.procs[name].poll() is not None:
                    raise ClusterUnavailable("%s exited with %s:\n%s" % (name, self.procs[name].returncode, self.log_tail()))
            out = self.run("sinfo", "-h", "-n", NODE, "-o", "%T", timeout=10)
            state = out.stdout.strip()
            if set(state.split()) == {"idle"}:     # one line per partition
                return
            time.sleep(0.1)
        raise ClusterUnavailable("node %s not idle after %ss (sinfo: %r):\n%s" % (NODE, START_TIMEOUT_S, state, self.log_tail()))

    def config_text(self, ctld_port: int, slurmd_port: int) -> str:
        hw = " ".join("%s=%s" % (k, v) for k, v in self.hardware.items() if k not in ("NodeName", "UpTime"))
        d = self.dir
        lines = [
            "ClusterName=rgttest", "SlurmctldHost=%s(127.0.0.1)" % NODE,
            "SlurmctldPort=%d" % ctld_port, "SlurmdPort=%d" % slurmd_port,
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % self.munge_socket,
            "StateSaveLocation=%s/state" % d, "SlurmdSpoolDir=%s" % self.spool,
            "SlurmctldPidFile=%s/slurmctld.pid" % d, "SlurmdPidFile=%s/slurmd.pid" % d,
            "SlurmctldLogFile=%s/log/slurmctld.log" % d, "SlurmdLogFile=%s/log/slurmd.log" % d,
            "ProctrackType=proctrack/linuxproc", "MpiDefault=none", "ReturnToService=2",
            # batch_sched_delay=0: a released dependency starts within ~1 s (the 3 s default
            # made a 3-stage chain test wait ~6 s on nothing). Real clusters keep their default.
            "SchedulerType=sched/builtin", "SchedulerParameters=batch_sched_delay=0",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "JobCompType=jobcomp/filetxt", "JobCompLoc=%s/log/jobcomp.txt" % d,
            "AccountingStorageType=accounting_storage/none",
            # KillWait: SIGTERM -> SIGKILL on cancel/timeout (default 30 s): short, tests wait on it.
            # MinJobAge: ended jobs stay visible to squeue/scontrol for 5 minutes (the default).
            "KillWait=2", "MinJobAge=300", "InactiveLimit=0", "DefMemPerCPU=512",
            # Two sessions' clusters on one machine share the node name, so task/cgroup's
            # slurm_localhost/uid_0/job_<id> dirs: distinct job ids keep their jobs apart.
            "FirstJobId=%d" % self.first_job_id,
            "NodeName=%s NodeAddr=127.0.0.1 %s State=UNKNOWN" % (NODE, hw),
            # Preemption only happens when a job in `urgent` needs the CPUs: the other tests never use it.
            "PreemptType=preempt/partition_prio", "PreemptMode=CANCEL",
            "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP PriorityTier=1" % (PARTITIONS[0], NODE),
            "PartitionName=%s Nodes=%s MaxTime=INFINITE State=UP PriorityTier=1" % (PARTITIONS[1], NODE),
            "PartitionName=%s Nodes=%s MaxTime=INFINITE State=UP PriorityTier=2" % (PARTITIONS[2], NODE),
        ]
        if self.mem_enforcement == "cgroup":
            lines += ["TaskPlugin=task/cgroup", "JobAcctGatherType=jobacct_gather/linux"]
        else:
            lines += ["TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/linux",
                      "JobAcctGatherFrequency=task=1", "JobAcctGatherParams=OverMemoryKill"]
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self._cancel_all()
        self._stop_slurm()
        _kill_carriers(str(self.conf))
        proc = self.procs.pop("munged", None)
        if proc is not None:
            _terminate(proc)
        if self.mem_enforcement == "cgroup":
            _remove_job_cgroups(NODE)
        if self.spool.parent != self.dir:
            shutil.rmtree(self.spool, ignore_errors=True)

    def _cancel_all(self) -> None:
        try:
            ids = self.run("squeue", "-h", "-o", "%i", timeout=10).stdout.split()
            if ids:
                self.run("scancel", *ids, timeout=10)
                deadline = time.monotonic() + 8
                while time.monotonic() < deadline and self.run("squeue", "-h", "-t", "running,completing",
                                                               "-o", "%i", timeout=10).stdout.strip():
                    time.sleep(0.2)
        except (subprocess.TimeoutExpired, OSError):
            pass   # stopping must go on: the sweep below kills what is left

    def _stop_slurm(self) -> None:
        for name in ("slurmd", "slurmctld"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                _terminate(proc)


CGROUP_CONF = """CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
CgroupAutomount=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
"""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, even by SIGKILL (a killed
    pytest must not leave daemons holding their ports and the node's cgroups)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _short_dir(path: Path) -> Path:
    # A unix socket path holds at most 107 bytes; deep pytest temp dirs can exceed it.
    if len(str(path / "munge.sock")) < 100:
        return path
    return Path(tempfile.mkdtemp(prefix="rgt-munge-"))


def _terminate(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _kill_carriers(conf: str) -> None:
    """SIGKILL every process whose environment names this cluster's slurm.conf: slurmstepd and
    the jobs' processes outlive a stopped slurmd and would hold CPUs for the rest of the session."""
    needle = ("SLURM_CONF=%s\0" % conf).encode()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as fh:
                if needle in fh.read() + b"\0":
                    os.kill(int(entry), signal.SIGKILL)
        except OSError:
            continue


def _remove_job_cgroups(node: str) -> None:
    """rmdir the (empty, once the jobs are gone) slurm_<node> trees task/cgroup made, deepest first."""
    for ctrl in Path("/sys/fs/cgroup").iterdir() if Path("/sys/fs/cgroup").is_dir() else ():
        top = ctrl / ("slurm_%s" % node)
        if not top.is_dir():
            continue
        for _ in range(20):
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]
            try:
                for d in dirs:
                    d.rmdir()
                break
            except OSError:
                time.sleep(0.1)   # a killed task is still leaving the cgroup


def start_cluster(base: Path) -> SlurmCluster:
    """Start it or raise ClusterUnavailable with the reason; nothing is left running on failure."""
    missing = missing_binaries()
    if missing:
        raise ClusterUnavailable("Slurm/munge binaries not found: %s (Debian: apt-get install slurmctld "
                                 "slurmd slurm-client munge)" % ", ".join(missing))
    if os.geteuid() != 0:
        raise ClusterUnavailable("needs root: this test cluster runs slurmctld/slurmd with SlurmUser=root")
    cluster = SlurmCluster(base)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise

