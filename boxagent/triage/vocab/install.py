"""A dependency that failed to install (pip, conda/mamba): every later ImportError follows
from it. Not transient: the same requirements fail the same way (pip's resolver says so
after the network has been tried)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit

PIP = "pip 24.2 src/pip/_internal/resolution/resolvelib/factory.py and exceptions.py"
PIP_W = "pip 24.2 src/pip/_internal/wheel_builder.py and exceptions.py (InstallationSubprocessError)"
CONDA = "conda 24.7 conda/exceptions.py"
MAMBA = "conda-libmamba-solver 24.7 conda_libmamba_solver/exceptions.py / mamba 1.5"

FIX = ("a dependency failed to install, so everything after it fails too: read pip's/conda's "
       "first ERROR above; pin versions that exist for this Python, platform and CUDA; keep the "
       "image's torch (install the rest with `pip install --no-deps` or a constraints file)")

_S = False


def _i(text, example, source, emitter, definitive=True):
    return lit("code_error", text, example, source, emitter, definitive)._replace(fix=FIX)


ROWS = (
    _i("Could not find a version that satisfies the requirement",
       "ERROR: Could not find a version that satisfies the requirement torch==2.1.0+cu121 (from "
       "versions: 2.2.0, 2.2.1)", PIP, "pip"),
    _i("No matching distribution found for", "ERROR: No matching distribution found for "
       "torch==2.1.0+cu121", PIP, "pip"),
    _i("ResolutionImpossible", "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/"
       "latest/topics/dependency-resolution/#dealing-with-dependency-conflicts", PIP, "pip"),
    _i("because these package versions have conflicting dependencies",
       "ERROR: Cannot install -r requirements.txt (line 3) and torch==2.0.1 because these package "
       "versions have conflicting dependencies.", PIP, "pip"),
    _i("Failed building wheel for", "  ERROR: Failed building wheel for flash-attn", PIP_W, "pip"),
    _i("Could not build wheels for", "ERROR: Could not build wheels for flash-attn, which is "
       "required to install pyproject.toml-based projects", PIP_W, "pip"),
    _i("Failed to build installable wheels for some pyproject.toml based projects",
       "ERROR: Failed to build installable wheels for some pyproject.toml based projects (flash-attn)",
       PIP_W, "pip"),
    _i("error: subprocess-exited-with-error", "error: subprocess-exited-with-error", PIP_W, "pip",
       _S),
    _i("error: externally-managed-environment", "error: externally-managed-environment", PIP,
       "pip"),
    _i("PackagesNotFoundError", "PackagesNotFoundError: The following packages are not available "
       "from current channels:", CONDA, "conda"),
    _i("UnsatisfiableError", "UnsatisfiableError: The following specifications were found to be "
       "incompatible with each other:", CONDA, "conda"),
    _i("ResolvePackageNotFound", "ResolvePackageNotFound: ", CONDA, "conda"),
    _i("LibMambaUnsatisfiableError", "conda_libmamba_solver.exceptions.LibMambaUnsatisfiableError: "
       "Encountered problems while solving:", MAMBA, "conda"),
    _i("Could not solve for environment specs", "Could not solve for environment specs", MAMBA,
       "conda"),
    # conda's HTTP failure: the channel or the path to it, not the environment spec
    lit("network_transient", "CondaHTTPError", "CondaHTTPError: HTTP 000 CONNECTION FAILED for url "
        "<https://conda.anaconda.org/conda-forge/linux-64/current_repodata.json>", CONDA, "conda"),
    lit("network_transient", "CondaSSLError", "CondaSSLError: Encountered an SSL error. Most likely "
        "a certificate verification issue.", CONDA, "conda", _S),
)
