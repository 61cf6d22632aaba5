"""`install HOST`: the one-line bootstrap, in two ssh round trips.

1. upload: the agent file streams over the ssh exec channel's stdin (no scp/sftp/rsync: RunPod's
   proxied SSH has none); the box checks its sha256, replaces the old copy atomically, writes
   agent.sha256, optionally pip-installs the extras (time-bounded), and answers with `probe --json`.
2. start: with the profile chosen from that probe, `configure` (config JSON on stdin),
   `notify-set` (secrets on stdin, never argv), `stop` + `start` (running stages are re-adopted).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from boxagent import api
from rgt_client import exitcodes
from rgt_client.box import build_cache, hosts
from rgt_client.errors import ClientError
from rgt_client.box.remote_scripts import START, UPLOAD, parse_result
from rgt_client.box.transport import Target, run_python

UPLOAD_TIMEOUT_S = 600.0
ANSWER_MAX = 4 << 20     # the probe and the start steps' answers: a few KiB from an honest box


@dataclass
class InstallOptions:
    profile: str | None = None
    deps: bool = False
    deps_timeout_s: float = 120.0
    notify_file: str | None = None
    notify: dict[str, Any] | None = None       # secrets.json form, given directly (demo, tests)
    sample_every: float | None = None
    max_parallel: int | None = None      # runs with gpus = 0 at once (the box's default: its GPU count)
    cost: dict[str, Any] | None = None         # the cost flags as a patch (costopts.cost_patch)
    remember: bool = True
    extra_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class InstallReport:
    target: Target
    sha256: str
    upload: dict[str, Any]
    start: dict[str, Any]
    profile: dict[str, Any]
    profile_reason: str
    warnings: list[str]
    upload_s: float
    start_s: float


def install(target: Target, opts: InstallOptions, say: Callable[[str], None] = lambda s: None) -> InstallReport:
    """Install or upgrade the agent on target; raise ClientError on anything that stops it."""
    profile = _explicit_profile(opts.profile)          # bad input fails before the box is touched
    notify = opts.notify if opts.notify is not None else _notify_config(opts.notify_file)
    data, sha = build_cache.agent_bytes()
    t0 = time.monotonic()
    args = [sha, str(len(data)), "1" if opts.deps else "0", "%.3f" % opts.deps_timeout_s]
    # the box's sha256 first: an unchanged agent is not uploaded again (one round trip, no data)
    res = run_python(target, UPLOAD, args + ["check"], timeout=UPLOAD_TIMEOUT_S + opts.deps_timeout_s,
                     max_out=ANSWER_MAX)
    up = parse_result(res.text, "the upload on %s" % target.host, res.err)
    if up.get("need_upload"):
        say("uploading rgt-agent.pyz (%d KB, sha256 %s) to %s" % (len(data) // 1024, sha[:12], target.host))
        res = run_python(target, UPLOAD, args, stdin=data, timeout=UPLOAD_TIMEOUT_S + opts.deps_timeout_s,
                         max_out=ANSWER_MAX)
        up = parse_result(res.text, "the upload on %s" % target.host, res.err)
    upload_s = time.monotonic() - t0
    if up.get("error"):
        raise ClientError("install on %s failed: %s" % (target.host, up["error"]),
                          "run the install again; if it repeats, check the disk on the box")
    reason = "chosen with --profile"
    if profile is None:
        probe = up.get("probe")
        profile, reason = _detect_profile(probe if isinstance(probe, dict) else {}, target)
    config = _config(target, profile, opts)
    t1 = time.monotonic()
    res = run_python(target, START, stdin=json.dumps({"config": config, "notify": notify}).encode(),
                     timeout=300, max_out=ANSWER_MAX)
    started = parse_result(res.text, "the start on %s" % target.host, res.err)
    report = InstallReport(target, sha, up, started, profile, reason, [], upload_s, time.monotonic() - t1)
    _check_started(report, notify is not None)
    if opts.remember:
        # The resolved interpreter, not "python3": later calls skip PATH shims (pyenv, conda) and
        # always use the Python the daemon was started with.
        # `local`'s home is never remembered: it is --home, else $RGT_HOME, else ~/.rgt (hosts.py)
        hosts.remember(target.host, home=None if target.is_local else _str(up.get("home")),
                       python=_str(up.get("python")) or target.python, sha256=sha,
                       profile=profile.get("name"), installed_at=_now_iso())
    return report


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v and "\n" not in v else None


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _explicit_profile(name: str | None) -> dict[str, Any] | None:
    if not name:
        return None
    from rgt_client.profiles import catalog
    try:
        prof = catalog.load_profile(name)
    except ClientError as exc:
        raise ClientError(exc.message, exc.hint or "list them: rgt-client profiles", exitcodes.USAGE)
    except (OSError, ValueError, KeyError) as exc:
        raise ClientError("profile %s: %s" % (name, exc), "list them: rgt-client profiles", exitcodes.USAGE)
    return dict(prof, name=prof.get("name") or name)


def _detect_profile(probe: dict[str, Any], target: Target) -> tuple[dict[str, Any], str]:
    from rgt_client.profiles import catalog
    try:
        name, reason = catalog.detect(probe)
        if target.is_local and name == catalog.FALLBACK:
            name, reason = "local", "the `local` host is this machine (no platform marker found)"
        prof = catalog.load_profile(name)
    except Exception as exc:  # noqa: BLE001 - detection is a guess; a bad guess must not stop install
        return {"name": "generic-ssh"}, "detection failed (%s); using generic-ssh" % exc
    return dict(prof, name=prof.get("name") or name), reason


def _notify_config(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from rgt_client.notify.cmd import load_notify_file
    try:
        return load_notify_file(path)
    except ClientError as exc:
        raise ClientError(exc.message, exc.hint, exitcodes.USAGE)


def _config(target: Target, profile: dict[str, Any], opts: InstallOptions) -> dict[str, Any]:
    config: dict[str, Any] = {"profile": profile, "host": target.host}
    if opts.sample_every is not None:
        config["sample_every"] = opts.sample_every
    if opts.max_parallel is not None:
        config["max_parallel"] = opts.max_parallel
    if opts.cost is not None:
        config["cost"] = opts.cost           # the box lays it over its own (only the flags given)
    config.update(opts.extra_config)
    return config


def _after(text: str, prefix: str) -> str | None:
    """The agent's `Error:`/`Hint:` line (box text: sanitised where it is printed)."""
    lines = [ln[len(prefix):].strip() for ln in text.splitlines() if ln.startswith(prefix)]
    return lines[-1] if lines else None


def _d(v: Any) -> dict[str, Any]:
    """A box-sent object, or {} when the box sent something else (it may be compromised)."""
    return v if isinstance(v, dict) else {}


def _check_started(report: InstallReport, want_notify: bool) -> None:
    steps, host = _d(report.start.get("steps")), report.target.host
    refused = _d(steps.get("configure"))
    if report.start.get("error") and refused.get("rc") == api.EXIT_USAGE:
        # the box refused the settings (a budget with no price left on it): nothing was written
        err = str(refused.get("err") or "")
        raise ClientError("install on %s: %s" % (host, _after(err, "Error: ") or err[-300:]),
                          _after(err, "Hint: "), exitcodes.USAGE)
    if report.start.get("error"):
        raise ClientError("install on %s failed: %s" % (host, report.start["error"]),
                          "look at the daemon's log on the box: %s/daemon.log" % report.target.home_shown())
    start = _d(steps.get("start"))
    if start.get("rc") != 0:
        raise ClientError("the daemon on %s did not start: %s" % (host, start.get("err") or "exit %s" % start.get("rc")),
                          "look at %s/daemon.log on the box" % report.upload.get("home"))
    if want_notify and _d(steps.get("notify-set")).get("rc") != 0:
        raise ClientError("notifications were not set on %s: %s" % (host, _d(steps.get("notify-set")).get("err")),
                          "check the file, then: rgt-client notify-set %s FILE" % host)
    box_sha = _d(_d(report.start.get("status")).get("agent")).get("build_sha256")
    if isinstance(box_sha, str) and box_sha != report.sha256:
        report.warnings.append("the daemon reports build %s, not the one just installed (%s)"
                               % (box_sha[:12], report.sha256[:12]))
    pre = _d(steps.get("precompile"))
    if pre and pre.get("rc") != 0:
        report.warnings.append("the agent's bytecode cache was not filled (every call compiles it; "
                               "slower, nothing else): %s" % str(pre.get("err") or "")[-200:])
    deps = _d(report.upload.get("deps_install"))
    if deps and not deps.get("ok"):
        report.warnings.append("pip install of psutil/requests/watchdog failed (the agent works "
                               "without them): %s" % str(deps.get("detail") or "")[-200:])
