#!/usr/bin/env python3
"""Capture REAL non-torch failure output on a CPU machine for the triage field corpus: HDF5,
safetensors, numpy and pickle files cut short, HTTP clients refused by a port nobody listens
on, numpy's and Python's own out-of-memory errors under a memory limit, pip against an
unreachable index, a CRLF shell script, a C++ exception nothing catches, a C assert, and one
run that finishes fine while printing RuntimeWarnings and a metric named "nan...".

Each scenario runs the way a stage runs on a box (`bash -c COMMAND` in its own directory,
stdout and stderr into one file, PYTHONUNBUFFERED=1); a setup command that is not part of
the log prepares its files (writes a checkpoint, then truncates it). The log is kept byte
for byte as captured_libs/<scenario>.log, and captured_libs/index.toml gets one [[case]] per
log in the field corpus format plus where it came from (library, python, captured_at,
command, setup, sha256).

    python tests/triage/field/capture/capture_libs.py --python PATH [--out DIR] [SCENARIO ...]

PATH is an interpreter with numpy, h5py, safetensors and requests (a throwaway venv:
`python -m venv V && V/bin/pip install numpy h5py safetensors requests`); g++ and gcc build
the two native programs. Nothing here needs root, a GPU or the network.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))     # run as a script from anywhere

from tests.triage.field.capture import index_file  # noqa: E402

SCRIPTS = HERE / "scripts_libs"
DEFAULT_OUT = HERE.parent / "captured_libs"
URL = "tests/triage/field/capture/capture_libs.py#%s"
RUN_TIMEOUT_S = 120
HEADER = index_file.HEADER.replace(
    "capture/capture_torch.py\n# (torch, tqdm, the kernel's OOM killer, tmpfs limits)",
    "capture/capture_libs.py\n# (h5py, safetensors, numpy, pickle, requests, urllib, pip, bash, g++/gcc on a CPU)"
).replace("regenerate with capture/capture_torch.py", "regenerate with capture/capture_libs.py")

# name -> (class, setup command, logged command, must_show, library, why)
Scenario = Tuple[str, str, str, str, str, str]
SCENARIOS: Dict[str, Scenario] = {
    "h5_truncated": (
        "truncated_checkpoint", "python make_h5.py && truncate -s 300000 weights.h5",
        "python load_h5.py", "truncated file", "h5py",
        "an HDF5 weights file cut to 300 kB: h5py's 'Unable to synchronously open file "
        "(truncated file: eof = ..., stored_eof = ...)'"),
    "safetensors_truncated": (
        "truncated_checkpoint",
        "python make_safetensors.py && truncate -s 2000000 model-00001-of-00002.safetensors",
        "python load_safetensors.py", "Error", "safetensors",
        "a safetensors shard cut short (its header promises more bytes than the file has): "
        "the Rust loader's SafetensorError"),
    "npz_truncated": (
        "truncated_checkpoint", "python make_npz.py && truncate -s 1000000 optimizer_state.npz",
        "python load_npz.py", "BadZipFile", "numpy",
        "an .npz (a zip) cut short, so its central directory is gone: zipfile's BadZipFile "
        "from np.load"),
    "pickle_truncated": (
        "truncated_checkpoint", "python make_pickle.py && truncate -s 100000 replay.pkl",
        "python load_pickle.py", "pickle", "python",
        "a pickle cut short: the unpickler runs out of data mid-stream"),
    "requests_refused": (
        "network_transient", "true", "python fetch_requests.py", "Connection refused", "requests",
        "requests to a port nobody listens on: urllib3's NewConnectionError ... [Errno 111] "
        "Connection refused, wrapped as requests' ConnectionError (Max retries exceeded)"),
    "urllib_refused": (
        "network_transient", "true", "python fetch_urllib.py", "Connection refused", "python",
        "the stdlib's urlopen to a port nobody listens on: URLError <urlopen error [Errno 111] "
        "Connection refused> after the ConnectionRefusedError"),
    "numpy_memoryerror": (
        "cgroup_oom", "true", "ulimit -v 4000000; python numpy_big.py", "Unable to allocate", "numpy",
        "numpy cannot get 26.8 GiB of host memory under a 4 GB address-space limit: "
        "'numpy._core._exceptions._ArrayMemoryError: Unable to allocate ...'"),
    "python_memoryerror": (
        "cgroup_oom", "true", "ulimit -v 1500000; python grow_memory.py", "MemoryError", "python",
        "a RAM cache grows past a 1.5 GB address-space limit: Python's bare MemoryError"),
    "pip_offline_index": (
        "network_transient", "true",
        "python -m pip install --index-url http://127.0.0.1:9/simple/ --retries 2 --timeout 3 "
        "rgt-nonexistent-package", "No matching distribution", "pip",
        "pip against an index nobody serves: it retries on NewConnectionError (Connection "
        "refused), then reports no version found: the index was unreachable, not the package"),
    "crlf_script": (
        "crlf_script", "mkdir -p data && printf '#!/bin/bash\\r\\nset -e\\r\\ncd data\\r\\n"
        "python train.py --epochs 3\\r\\n' > train.sh", "bash train.sh", "\r", "bash",
        "a stage script saved with CRLF endings: bash reads 'set -e\\r' and 'cd data\\r', and "
        "every later error is a consequence"),
    "cpp_bad_alloc": (
        "cgroup_oom", "g++ -O0 -o loader loader.cpp", "bash run_loader.sh", "bad_alloc", "g++",
        "a C++ loader asks for 1 PiB: 'terminate called after throwing an instance of "
        "std::bad_alloc', then the shell's 'Aborted': host memory could not be had"),
    "c_assert": (
        "code_error", "gcc -O0 -o labels labels.c", "bash run_labels.sh", "Assertion", "gcc",
        "a C bounds check on labels: 'Assertion `labels[i] < n_classes' failed.' and 'Aborted': "
        "bad data or code, not the machine"),
    "warn_nan_metric": (
        "none", "true", "python warn_nan_metric.py", "training finished", "numpy",
        "a run that finishes (exit 0) while numpy prints RuntimeWarnings (divide by zero in "
        "log, invalid value in divide) and a metric named nan_ratio_skipped shows nan"),
}


def versions(python: str) -> Dict[str, str]:
    code = ("import sys, numpy, h5py, safetensors, requests, pip;"
            "print(sys.version.split()[0], numpy.__version__, h5py.__version__,"
            " h5py.version.hdf5_version, safetensors.__version__, requests.__version__,"
            " pip.__version__)")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    py, np_, h5, hdf5, st, rq, pip = out.split()
    tool = lambda argv: subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()[0]
    return {"python": py, "numpy": "numpy " + np_, "h5py": "h5py %s (HDF5 %s)" % (h5, hdf5),
            "safetensors": "safetensors " + st, "requests": "requests " + rq,
            "pip": "pip " + pip, "bash": tool(["bash", "--version"]), "g++": tool(["g++", "--version"]),
            "gcc": tool(["gcc", "--version"]), "os": os_name()}


def os_name() -> str:
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def run(python: str, cwd: Path, command: str, log: Path) -> int:
    """`bash -c command` with the chosen interpreter as `python`; its output verbatim into log.
    Returns the status as a shell reports it (128 + N for a death by signal N)."""
    bindir = cwd / ".bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "python").write_text('#!/bin/sh\nexec "%s" "$@"\n' % python)
    (bindir / "python").chmod(0o755)
    env = {"PATH": "%s:/usr/local/bin:/usr/bin:/bin" % bindir, "HOME": str(Path.home()),
           "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_CONFIG_FILE": os.devnull}
    with open(log, "wb") as fh:
        rc = subprocess.run(["bash", "-c", command], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                            stdout=fh, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S).returncode
    return 128 - rc if rc < 0 else rc


def capture(name: str, python: str, work: Path, out: Path, about: Dict[str, str]) -> Dict[str, Any]:
    cls, setup, command, must_show, lib, why = SCENARIOS[name]
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(SCRIPTS, d)
    if run(python, d, setup, d / ".setup.log") != 0:
        raise RuntimeError("%s: setup failed: %s" % (name, (d / ".setup.log").read_text()[-400:]))
    part = out / (name + ".log.part")
    rc = run(python, d, command, part)
    data = part.read_bytes()
    if must_show.encode() not in data or (cls == "none") != (rc == 0):
        raise RuntimeError("%s: exit %d, the capture lacks %r:\n%s" % (name, rc, must_show, data[-600:]))
    os.replace(part, out / (name + ".log"))
    return {"file": name + ".log", "class": cls, "exit_code": rc,
            "source": "captured: %s, Python %s, %s" % (about[lib] if lib != "python" else "CPython",
                                                        about["python"], about["os"]),
            "url": URL % name, "why": why, "library": about.get(lib, "CPython " + about["python"]),
            "python": about["python"],
            "captured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": command, "setup": setup, "ecosystem": "captured-cpu", "added": "wave3",
            "sha256": hashlib.sha256(data).hexdigest()}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="an interpreter with numpy, h5py, safetensors, requests")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("scenarios", nargs="*")
    args = ap.parse_args(argv)
    names = args.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error("unknown scenario %s (known: %s)" % (unknown[0], ", ".join(SCENARIOS)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    about = versions(args.python)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "rgt-capture-libs"
    fresh = {}
    for name in names:
        fresh[name] = capture(name, args.python, work, out, about)
        print("%-24s exit %3d  %s" % (name, fresh[name]["exit_code"], fresh[name]["class"]))
    index = out / "index.toml"
    entries = index_file.merge(index_file.read(index), fresh, list(SCENARIOS))
    index.write_text(index_file.render(entries).replace(index_file.HEADER, HEADER, 1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
