"""The machinery of capture_torch.py: a scenario's work directory, a tmpfs, a memory cgroup,
running a command the way a stage runs (its output verbatim), and the index entry that
describes the result; plus what the machine says that a log cannot (statvfs, oom_kill)."""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

from tests.health import realcg  # the repository's own cgroup helper

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
URL = "tests/triage/field/capture/capture_torch.py#%s"
RUN_TIMEOUT_S = 300


class Skip(Exception):
    """A capability this scenario needs is missing here."""


class Ctx:
    def __init__(self, python: str, work: Path, mnt: Path, out: Path, about: Dict[str, str]):
        self.python, self.work, self.mnt, self.out, self.about = python, work, mnt, out, about

    # -- the pieces a scenario arranges
    def scenario_dir(self, name: str, *scripts: str) -> Path:
        d = self.work / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for s in scripts:
            shutil.copy(SCRIPTS / s, d / s)
        return d

    @contextmanager
    def tmpfs(self, name: str, options: str) -> Iterator[Path]:
        if os.geteuid() != 0:
            raise Skip("needs root to mount a tmpfs")
        path = self.mnt / name
        path.mkdir(parents=True, exist_ok=True)
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", options, name, str(path)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise Skip("cannot mount a tmpfs here: %s" % out.stderr.strip())
        try:
            yield path
        finally:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
            try:
                path.rmdir()
            except OSError:
                pass

    @contextmanager
    def memory_cgroup(self, limit_bytes: int) -> Iterator[realcg.ChildCgroup]:
        version, why = realcg.usable()
        if version is None:
            raise Skip(why)
        cg = realcg.ChildCgroup(version, limit_bytes)
        try:
            yield cg
        finally:
            cg.destroy()

    # -- the run itself
    def part(self, name: str) -> Path:
        """Where a run's output goes until case() accepts it: a failed or refused capture
        never replaces the log an index entry (and its sha256) describes."""
        return self.out / (name + ".log.part")

    def run(self, name: str, cwd: Path, command: str, cgroup: Optional[realcg.ChildCgroup] = None) -> int:
        """Run `bash -c command` (inside `cgroup` when given); its combined output, verbatim,
        is the scenario's log. Returns the exit status as a shell reports it (128 + N for a
        death by signal N)."""
        env = {"PATH": "%s:/usr/local/bin:/usr/bin:/bin" % self.shim_dir(), "HOME": str(Path.home()),
               "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        argv = ["bash", "-c", command]
        if cgroup is not None:
            # The shell joins the cgroup first, then becomes bash: nothing runs outside the limit.
            argv = ["sh", "-c", 'echo $$ > "$RGT_CG_PROCS" && exec bash -c "$RGT_CMD"']
            env.update(RGT_CG_PROCS=str(cgroup.procs_file), RGT_CMD=command)
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.part(name), "wb") as log:
            proc = subprocess.run(argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
        rc = proc.returncode
        return 128 - rc if rc < 0 else rc

    def shim_dir(self) -> Path:
        """A bin/ whose `python` is the chosen interpreter, so a command reads as a person
        types it (`python train.py`) and tracebacks show the interpreter's real paths."""
        d = self.work / "bin"
        d.mkdir(parents=True, exist_ok=True)
        shim = d / "python"
        shim.write_text('#!/bin/sh\nexec "%s" "$@"\n' % self.python)
        shim.chmod(0o755)
        return d

    def log_text(self, name: str) -> str:
        return self.part(name).read_bytes().decode("utf-8", "replace")

    def case(self, name: str, cls: str, exit_code: int, command: str, why: str,
             must_show: str = "", **extra: Any) -> Dict[str, Any]:
        """The index entry; refuses a capture that did not show what the scenario is about."""
        text = self.log_text(name)
        if must_show and must_show not in text:
            raise RuntimeError("%s: the capture lacks %r (exit %d); last lines:\n%s"
                               % (name, must_show, exit_code, "\n".join(text.splitlines()[-8:])))
        data = self.part(name).read_bytes()
        os.replace(self.part(name), self.out / (name + ".log"))
        entry = {"file": name + ".log", "class": cls, "exit_code": exit_code,
                 "source": "captured: torch %s, Python %s, %s" % (
                     self.about["torch"], self.about["python"], self.about["os"]),
                 "url": URL % name, "why": why, "library": "torch %s" % self.about["torch"],
                 "python": self.about["python"],
                 "captured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                 "command": command,
                 "sha256": hashlib.sha256(data).hexdigest()}
        entry.update(extra)
        return entry


def disk_facts(path: Path) -> Dict[str, Any]:
    """statvfs of the filesystem after the run, as index keys: what the daemon reads at the
    stage's end to tell bytes from inodes (disks[] in the diagnosis facts)."""
    st = os.statvfs(str(path))
    b = round(100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks) if st.f_blocks else 0
    i = round(100.0 * (st.f_files - st.f_ffree) / st.f_files) if st.f_files else 0
    return {"observed": "after the run: bytes %d%% used, inodes %d%% used" % (b, i),
            "disk_path": str(path), "disk_bytes_used_pct": b, "disk_inodes_used_pct": i}


def oom_kills(cg: realcg.ChildCgroup) -> int:
    name, key = (("memory.oom_control", "oom_kill") if cg.version == "v1"
                 else ("memory.events", "oom_kill"))
    try:
        for line in (cg.dir / name).read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
    return -1


def about(python: str) -> Dict[str, str]:
    code = ("import json, platform, torch, tqdm; print(json.dumps({'torch': torch.__version__, "
            "'tqdm': tqdm.__version__, 'python': platform.python_version()}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit("Error: %s cannot import torch and tqdm\nHint: python -m tests.torchenv "
                         "prints (or makes) an interpreter that can" % python)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    info["os"] = os_name()
    return info


def os_name() -> str:
    fields = {}
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            k, _, v = line.partition("=")
            fields[k] = v.strip().strip('"')
    except OSError:
        return sys.platform
    return ("%s %s" % (fields.get("NAME", "Linux").split()[0], fields.get("VERSION_ID", ""))).strip()
