"""The platform profile as the agent sees it, shipped by `install` inside config.json.

config.json = {"profile": {<the profile TOML as a dict, with "name">}, ...}. The client
validated it (client/profiles.py, docs/profile-schema.md); the agent still reads it defensively,
because config.json can be edited by hand on the box: a bad field is ignored, never a crash.

Also `detect_facts()`: which platform-marker paths exist and which platform variables are set,
for `probe --json` ("platform_facts"); the client's detect() turns it into a profile name.
"""
from __future__ import annotations

import glob
import os
import signal
import subprocess
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from boxagent.base.fsutil import read_json
from boxagent.base.home import Home

# Every marker a shipped profile's [detect] names (tests/profiles checks the two agree).
PROBE_PATHS = (
    "/root/autodl-tmp", "/root/autodl-fs", "/etc/network_turbo",
    "/lambda/nfs", "/storage", "/notebooks", "/hy-tmp", "/hy-netdisk",
    "/home/featurize", "/cloud", "/mnt", "/home/user/datadisk", "/workspace",
    "/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf",
    "/var/run/secrets/kubernetes.io/serviceaccount",
)
PROBE_ENV = ("RUNPOD_POD_ID", "VAST_CONTAINERLABEL", "SLURM_JOB_ID", "SLURM_CLUSTER_NAME",
             "KUBERNETES_SERVICE_HOST")
PROBE_ENV_PREFIXES = ("PAPERSPACE_",)
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy",
              "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
SEVERITIES = ("info", "warning", "critical")


def load(home: Home) -> Dict[str, Any]:
    cfg = read_json(home.config, {}) or {}
    prof = cfg.get("profile") if isinstance(cfg, dict) else None
    return prof if isinstance(prof, dict) else {"name": "generic-ssh"}


def name(profile: Dict[str, Any]) -> str:
    return str(profile.get("name") or profile.get("platform") or "generic-ssh")


def _str(profile: Mapping[str, Any], key: str) -> Optional[str]:
    v = profile.get(key)
    return v if isinstance(v, str) and v.strip() else None


def _table(profile: Mapping[str, Any], key: str) -> Dict[str, Any]:
    v = profile.get(key)
    return v if isinstance(v, dict) else {}


def expand(path: str) -> Optional[str]:
    """~ and $VARS expanded; None when a variable is unset (e.g. $TMPDIR outside a Slurm job):
    a literal "$TMPDIR" directory must never be watched or created."""
    out = os.path.expandvars(os.path.expanduser(path))
    return None if "$" in out else out


def _existing_dirs(pattern: str) -> List[str]:
    path = expand(pattern)
    if path is None:
        return []
    # Lambda mounts its filesystem at /lambda/nfs/<name>: profiles may name a glob.
    found = sorted(glob.glob(path)) if any(c in path for c in "*?[") else [path]
    return [p for p in found if os.path.isdir(p)]


def watched_dirs(profile: Dict[str, Any]) -> List[Tuple[str, str]]:
    """[(path, role)] for the profile's data/durable/extra dirs that exist on this box.
    Roles: data, durable, extra. A directory named twice keeps its first role."""
    wanted: List[Tuple[str, str]] = []
    for key, role in (("data_dir", "data"), ("durable_dir", "durable")):
        p = _str(profile, key)
        if p:
            wanted.append((p, role))
    extra = profile.get("watch")
    for p in extra if isinstance(extra, list) else []:
        if isinstance(p, str) and p.strip():
            wanted.append((p, "extra"))
    out: List[Tuple[str, str]] = []
    seen: Set[str] = set()
    for pattern, role in wanted:
        for path in _existing_dirs(pattern):
            if path not in seen:
                seen.add(path)
                out.append((path, role))
    return out


def inode_caps(profile: Dict[str, Any]) -> Dict[str, int]:
    """{path: cap}: the platform's file-count limit on a mount, which statvfs may not show
    (AutoDL's autodl-fs is NFS reporting millions of inodes, yet refuses files near 200K)."""
    out: Dict[str, int] = {}
    for path, cap in _table(profile, "inode_caps").items():
        full = expand(path) if isinstance(path, str) else None
        if full and isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
            out[full] = cap
    return out


def thresholds(profile: Dict[str, Any], override: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The profile's alert-threshold overrides (numbers only); `override` (config.json's own
    "thresholds") wins over the profile's."""
    out: Dict[str, Any] = {}
    for source in (_table(profile, "thresholds"), override or {}):
        for key, value in source.items():
            if isinstance(key, str) and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = value
    return out


def state_dir(profile: Dict[str, Any]) -> Optional[str]:
    """Where the profile wants RGT_HOME (a tier that survives the platform's stop verb), or
    None when it names none or the folder above it does not exist on this box."""
    p = _str(profile, "state_dir")
    path = expand(p) if p else None
    if not path:
        return None
    path = os.path.abspath(path)
    return path if os.path.isdir(os.path.dirname(path)) else None


def stage_env_hints(profile: Dict[str, Any]) -> Dict[str, str]:
    """Env the profile suggests for stages (HF_HOME, HF_ENDPOINT) when the job sets none."""
    hf = _table(profile, "hf")
    out: Dict[str, str] = {}
    home = hf.get("home")
    if isinstance(home, str) and home.strip():
        full = expand(home)
        if full:
            out["HF_HOME"] = full
    endpoint = hf.get("endpoint")
    if isinstance(endpoint, str) and endpoint.strip():
        out["HF_ENDPOINT"] = endpoint
    return out


def rules(profile: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The profile's extra triage rules, defaults filled: [{class, pattern, severity,
    retryable, remediation}]. Malformed entries are dropped (the client validated them)."""
    out = []
    raw = profile.get("rule")
    for r in raw if isinstance(raw, list) else []:
        if not isinstance(r, dict):
            continue
        cls, pattern = r.get("class"), r.get("pattern")
        if not (isinstance(cls, str) and isinstance(pattern, str) and pattern):
            continue
        sev = r.get("severity")
        out.append({"class": cls, "pattern": pattern,
                    "severity": sev if sev in SEVERITIES else "warning",
                    "retryable": r.get("retryable") is True,
                    "remediation": str(r.get("remediation") or "")})
    return out


def proxy_env(profile: Dict[str, Any], timeout: float = 5.0) -> Dict[str, str]:
    """Proxy variables for notifications: what the profile's hook exports (AutoDL:
    `source /etc/network_turbo`; Slack/Telegram/Discord need it from CN), then its
    url/http/https/no_proxy keys, then its [proxy.env] table (later wins)."""
    proxy = _table(profile, "proxy")
    out: Dict[str, str] = {}
    hook = proxy.get("hook")
    if isinstance(hook, str) and hook.strip():
        out.update(hook_env(hook, timeout))
    for key, names in (("url", ("http_proxy", "https_proxy")), ("http", ("http_proxy",)),
                       ("https", ("https_proxy",)), ("no_proxy", ("no_proxy",))):
        value = proxy.get(key)
        if isinstance(value, str) and value.strip():
            out.update((n, value) for n in names)
    env = proxy.get("env")
    for key, value in (env.items() if isinstance(env, dict) else []):
        if isinstance(key, str) and isinstance(value, str):
            out[key] = value
    return out


def hook_env(hook: str, timeout: float = 5.0) -> Dict[str, str]:
    """Source the hook in bash (once, at start) and keep the proxy variables it exports.
    A missing file, no bash, or a hung hook gives {}: notifications then go direct."""
    path = hook.strip()
    for prefix in ("source ", ". "):
        if path.startswith(prefix):
            path = path[len(prefix):].strip()
    path = expand(path) or ""
    if not os.path.isfile(path):
        return {}
    # A clean env: whatever proxy variable shows up was set by the hook, not inherited.
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    stdout = _run_bounded(["bash", "-c", '. "$1" >/dev/null 2>&1; env -0', "rgt-proxy-hook", path],
                          base, timeout)
    out = {}
    for item in stdout.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key in PROXY_VARS and value:
            out[key] = value
    return out


def _run_bounded(argv: List[str], env: Dict[str, str], timeout: float) -> bytes:
    """stdout of argv, or b"" on any failure. Own session, killed as a group on timeout:
    subprocess.run(timeout=) would then wait for a backgrounded grandchild holding the pipe."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError:
        return b""
    try:
        out, _err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return b""
    return out if proc.returncode == 0 else b""


def _pid1_env_names(proc_root: str) -> Set[str]:
    """Variable NAMES of pid 1 (the container's init): RunPod and vast.ai set theirs there,
    and a non-interactive ssh session does not inherit them. Values are never read out:
    PAPERSPACE_API_KEY and friends are secrets."""
    try:
        with open(os.path.join(proc_root, "1", "environ"), "rb") as fh:
            raw = fh.read()
    except OSError:
        return set()
    return {item.split(b"=", 1)[0].decode("ascii", "replace") for item in raw.split(b"\0") if b"=" in item}


def _wanted_env(names: Iterable[str]) -> Dict[str, bool]:
    return {n: True for n in sorted(set(names))
            if n in PROBE_ENV or any(n.startswith(p) for p in PROBE_ENV_PREFIXES)}


def detect_facts(root: str = "/", environ: Optional[Mapping[str, str]] = None,
                 proc_root: str = "/proc") -> Dict[str, Any]:
    """{"paths": {marker path: exists}, "env": {platform variable name: true}} for the client's
    detect(). `root` and `proc_root` are seams for tests (fixture trees)."""
    paths = {p: os.path.exists(os.path.join(root, p.lstrip("/"))) for p in PROBE_PATHS}
    names = set(os.environ if environ is None else environ) | _pid1_env_names(proc_root)
    return {"paths": paths, "env": _wanted_env(names)}
