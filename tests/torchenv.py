"""A Python interpreter with torch (CPU build), tqdm and numpy importable, for the tests marked
`torch`, and for tests/triage/field/capture/capture_torch.py.

torch never goes into the project's venv or its dependencies: the agent is stdlib-only and the
client has no use for it. The tests reach it as a separate interpreter, found in this order:

1. $RGT_TORCH_PYTHON: an interpreter the person chose (`none` turns the torch tests off);
2. a venv made once under ~/.cache/rgt-test-torch ($RGT_TORCH_CACHE moves it), reused after;
3. nothing: the tests skip and say why.

The venv is made only when pip's plan for the pinned torch takes the wheel from a local file and
brings no CUDA packages. A plain `pip install torch` on a fresh Linux machine pulls several GB of
CUDA wheels from the registry; a test run must never start that, so such a plan is refused.

    python -m tests.torchenv          # find or make it; prints the interpreter (exit 1: why not)
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

TORCH_PIN = "torch==2.13.0"
# numpy too: without it every `import torch` prints a "Failed to initialize NumPy" warning,
# which no real training log carries and which would pollute the captured logs.
PACKAGES = (TORCH_PIN, "tqdm", "numpy")
ENV_PYTHON = "RGT_TORCH_PYTHON"
ENV_CACHE = "RGT_TORCH_CACHE"
READY = ".rgt-ready"                 # written last: a venv without it is half made
CHECK = "import torch, tqdm, numpy; print(torch.__version__)"
# Names that mean "this plan downloads the CUDA stack" (each is hundreds of MB).
HEAVY_PREFIXES = ("nvidia-", "triton", "cuda-", "cupy")
INSTALL_TIMEOUT_S = 1200

_found: Optional[Tuple[Optional[str], str]] = None


def torch_python(base_python: str = sys.executable) -> Tuple[Optional[str], str]:
    """(interpreter, "") or (None, why not). Made at most once per process."""
    global _found
    if _found is None:
        _found = _find_or_make(base_python)
    return _found


def cache_dir() -> Path:
    return Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "rgt-test-torch")


def _find_or_make(base_python: str) -> Tuple[Optional[str], str]:
    chosen = os.environ.get(ENV_PYTHON, "").strip()
    if chosen.lower() == "none":
        return None, "%s=none: torch tests are turned off" % ENV_PYTHON
    if chosen:
        ok, why = importable(chosen)
        return (chosen, "") if ok else (None, "%s=%s: %s" % (ENV_PYTHON, chosen, why))
    return make_venv(cache_dir(), base_python)


def importable(python: str) -> Tuple[bool, str]:
    """Whether `python` imports torch, tqdm and numpy; else the last line of its error."""
    try:
        out = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, "cannot run it: %s" % exc
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
        return False, "cannot import torch/tqdm/numpy: %s" % last
    return True, ""


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def make_venv(cache: Path, base_python: str) -> Tuple[Optional[str], str]:
    """The cached venv's interpreter, made first if needed (under a lock: parallel test
    processes wait for one maker instead of racing pip into the same directory)."""
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / "venv"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / READY).is_file():
            ok, why = importable(str(venv_python(venv)))
            if ok:
                return str(venv_python(venv)), ""
        shutil.rmtree(venv, ignore_errors=True)
        why = _build(venv, base_python)
        if why:
            shutil.rmtree(venv, ignore_errors=True)
            return None, why
        (venv / READY).write_text("\n".join(PACKAGES) + "\n")
        return str(venv_python(venv)), ""


def _build(venv: Path, base_python: str) -> str:
    """"" when the venv is made, else why not (a refused plan, a failed command)."""
    out = _run([base_python, "-m", "venv", str(venv)], 300)
    if out:
        return "cannot make a venv with %s: %s" % (base_python, out)
    py = str(venv_python(venv))
    plan, why = pip_plan(py)
    if why:
        return why
    why = refuse_plan(plan)
    if why:
        return why
    out = _run([py, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check",
                "--progress-bar", "off", *PACKAGES], INSTALL_TIMEOUT_S)
    if out:
        return "pip install %s failed: %s" % (" ".join(PACKAGES), out)
    ok, why = importable(py)
    return "" if ok else "the new venv " + why


def pip_plan(python: str) -> Tuple[List[Dict[str, Any]], str]:
    """What `pip install PACKAGES` would install: [{name, version, url}], from `--dry-run
    --report` (resolves, downloads nothing big: metadata only)."""
    with tempfile.TemporaryDirectory(prefix="rgt-torch-plan-") as tmp:
        report = os.path.join(tmp, "plan.json")
        out = _run([python, "-m", "pip", "install", "--dry-run", "--quiet", "--no-input",
                    "--disable-pip-version-check", "--report", report, *PACKAGES], 600)
        if out:
            return [], "pip cannot plan %s: %s" % (" ".join(PACKAGES), out)
        with open(report) as fh:
            data = json.load(fh)
    plan = [{"name": i["metadata"]["name"].lower(), "version": i["metadata"]["version"],
             "url": i.get("download_info", {}).get("url", "")} for i in data.get("install", [])]
    return plan, ""


def refuse_plan(plan: List[Dict[str, Any]]) -> str:
    """Why this plan must not run ("" = fine): torch has to come from a local file, and
    nothing of the CUDA stack may come along."""
    heavy = sorted(p["name"] for p in plan if p["name"].startswith(HEAVY_PREFIXES))
    if heavy:
        return ("refused: installing %s here would download the CUDA stack (%s); give a CPU "
                "build through %s=/path/to/python" % (TORCH_PIN, ", ".join(heavy[:4]), ENV_PYTHON))
    torch = [p for p in plan if p["name"] == "torch"]
    if not torch:
        return "refused: pip's plan for %s holds no torch" % TORCH_PIN
    if not torch[0]["url"].startswith("file:"):
        return ("refused: %s would be downloaded (%s), not taken from a local file; give an "
                "interpreter through %s=/path/to/python" % (TORCH_PIN, torch[0]["url"], ENV_PYTHON))
    return ""


def _run(argv: List[str], timeout: float) -> str:
    """"" on success, else the last lines of what the command said."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if out.returncode == 0:
        return ""
    said = [ln for ln in (out.stderr + out.stdout).splitlines()
            if ln.strip() and "is ignored: it is neither a file nor a directory" not in ln]
    return " | ".join(said[-3:]) or "exit %d" % out.returncode


def main() -> int:
    py, why = torch_python()
    if py is None:
        sys.stderr.write("Error: no torch interpreter: %s\n" % why)
        return 1
    sys.stdout.write(py + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
