"""What `install` prints about the box, from the agent's `probe --json` (`rgt.probe/1`, owned by
health). Read defensively: a missing or mistyped field is skipped or shown as "-", never an
error, and every word the box sent goes through textsafe (its s())."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from boxagent.api import format_bytes
from rgt_client.cost.render import settings_line
from rgt_client.textsafe import s

if TYPE_CHECKING:
    from rgt_client.install.bootstrap import InstallReport


def install_summary(rep: "InstallReport") -> list[str]:
    """The block `install` prints: what was installed where, the box, the profile, the daemon."""
    up, status = rep.upload, _d(rep.start.get("status"))
    agent = _d(status.get("agent"))
    lines = ["rgt agent %s on %s: %s, sha256 %s" % (s(agent.get("version") or "?"), rep.target.host,
                                                    "installed" if up.get("replaced") else "unchanged",
                                                    rep.sha256[:16]),
             "  home     %s (%s)" % (s(up.get("home")), rep.target.home_from)]
    lines += box_summary(up)
    lines.append("  profile  %s (%s)" % (s(rep.profile.get("name")), s(rep.profile_reason)))
    state = agent.get("state") or ("running" if agent.get("running") else "stopped")
    if state == "running":
        lines.append("  daemon   running, pid %s" % s(agent.get("pid")))
    else:   # "started" here once hid a daemon that was not running after the restart
        lines.append("  daemon   %s after the restart: rgt-client status %s" % (s(state).upper(), rep.target.host))
    lines.append(settings_line(status.get("cost")))
    lines += notifier_lines(rep.start.get("notifiers"))
    lines += ["  warning  %s" % s(w) for w in rep.warnings]
    return lines


def notifier_lines(notifiers: Any) -> list[str]:
    """What `install --notify FILE` set, as `notify-set` says it (ids and redacted targets): the
    install said nothing, and a user could not tell which of the file's notifiers were taken."""
    if not isinstance(notifiers, list):
        return []
    rows = [n for n in notifiers if isinstance(n, dict)]
    lines = ["  notify   %d notifier%s set" % (len(rows), "" if len(rows) == 1 else "s")]
    lines += ["           %-10s %-13s %s" % (s(n.get("id")), s(n.get("format")), s(n.get("target"))) for n in rows[:20]]
    return lines


def box_summary(up: dict[str, Any]) -> list[str]:
    probe = _d(up.get("probe"))
    if not probe:
        return ["  python   %s (%s)" % (s(up.get("python_version")), s(up.get("python"))),
                "  probe    unavailable: %s" % s(up.get("probe_error") or "no answer")]
    lines = ["  python   %s (%s)%s" % (s(up.get("python_version")), s(up.get("python")), _deps(probe))]
    lines += _memory(probe) + _cpu(probe) + _gpus(probe) + _disks(probe) + _slurm(probe)
    klog = _d(probe.get("kernel_log"))
    if klog:
        faults = _list(klog.get("hard_faults_since_boot"))
        lines.append("  kernlog  %s%s" % ("readable (second Xid source)" if klog.get("readable")
                                          else "not readable (NVML events only)",
                                          "; %d hard GPU fault(s) since boot!" % len(faults) if faults else ""))
    for w in _list(probe.get("warnings")):
        lines.append("  note     %s" % s(w))
    return lines


def _pct(v: Any) -> str:
    return "%.0f%%" % v if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e30 else "-"


def _deps(probe: dict[str, Any]) -> str:
    deps = probe.get("deps")
    if not isinstance(deps, dict):
        return ""
    return "; " + ", ".join("%s %s" % (s(k), "yes" if v else "no") for k, v in sorted(deps.items()))


def _memory(probe: dict[str, Any]) -> list[str]:
    cg, system = _d(probe.get("cgroup")), _d(probe.get("system"))
    if not cg and not system:
        return []
    limit = _bytes(cg.get("max_bytes")) if cg.get("max_bytes") else "none"
    return ["  memory   cgroup %s, limit %s, host %s" % (s(cg.get("version") or "none"), limit,
                                                          _bytes(system.get("memory_total_bytes")))]


def _cpu(probe: dict[str, Any]) -> list[str]:
    cpu = _d(probe.get("cpu"))
    if not cpu:
        return []
    quota = "%s cores" % s(cpu["quota_cores"]) if cpu.get("quota_cores") else "none"
    return ["  cpu      quota %s, %s host cores" % (quota, s(cpu.get("host_cores", "?")))]


def _gpus(probe: dict[str, Any]) -> list[str]:
    gpu = _d(probe.get("gpu"))
    gpus = _dicts(gpu.get("gpus"))
    if not gpus:
        reason = gpu.get("unavailable_reason")
        return ["  gpus     none%s" % (" (%s)" % s(reason) if reason else "")]
    names: dict[str, int] = {}
    for g in gpus:
        names[s(g.get("name"))] = names.get(s(g.get("name")), 0) + 1
    what = ", ".join("%d x %s" % (n, name) for name, n in names.items())
    return ["  gpus     %s (driver %s, CUDA %s)" % (what, s(gpu.get("driver_version") or "?"),
                                                    s(gpu.get("cuda_version") or "?"))]


def _disks(probe: dict[str, Any]) -> list[str]:
    return ["  disk     %s (%s): %s of %s used, inodes %s" % (
        s(d.get("path")), s(d.get("role", "-")), _pct(d.get("bytes_used_pct")), _bytes(d.get("bytes_total")),
        _pct(d.get("inodes_used_pct"))) for d in _dicts(probe.get("disks"))]


def _slurm(probe: dict[str, Any]) -> list[str]:
    """A login node: the cluster, its partitions, and whether the four commands rgt runs are
    there. A plain box (none of them on PATH) gets no line."""
    sl = _d(probe.get("slurm"))
    commands = _d(sl.get("commands"))
    needed = ("sbatch", "squeue", "scontrol", "scancel")
    found = [c for c in needed if commands.get(c)]
    if not found:
        return []
    if not sl.get("available"):
        missing = [c for c in needed if not commands.get(c)]
        why = "not on PATH: %s" % ", ".join(missing) if missing else \
            "; ".join(s(e) for e in _list(sl.get("errors"))) or "not configured"
        return ["  slurm    not usable for backend = \"slurm\" (%s)" % why]
    parts = ", ".join(s(p.get("name")) + ("*" if p.get("default") else "") for p in _dicts(sl.get("partitions")))
    return ["  slurm    cluster %s (Slurm %s), partitions %s; %s found" % (
        s(sl.get("cluster_name") or "?"), s(sl.get("version") or "?"), parts or "none seen", " ".join(found))]


def _bytes(v: Any) -> str:
    return format_bytes(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e30 else "-"


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _dicts(v: Any) -> list[dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []
