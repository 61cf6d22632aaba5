"""What the submit host has for the Slurm backend: the commands on PATH, the cluster's name and
version, its partitions, and which sacct (if any) can answer for ended jobs.

On a box without Slurm this costs a few PATH lookups and starts no process. Every command is
bounded by a timeout; a controller that does not answer becomes an `errors` entry, never a hang.
"""
from __future__ import annotations

import shutil
from typing import Any, Callable, Dict, List, Optional

from boxagent.slurm.cmd import Result, run_command

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sacct", "sinfo")
REQUIRED = ("sbatch", "squeue", "scontrol", "scancel")
PROBE_TIMEOUT_S = 5.0
# What the client tools say when this host has no slurm.conf and no DNS SRV record for one.
UNCONFIGURED = ("Could not establish a configuration source", "Unable to process configuration file")
CONFIG_KEYS = {"ClusterName": "cluster_name", "SLURM_VERSION": "version",
               "AccountingStorageType": "accounting_storage", "JobCompType": "job_comp"}


def probe(runner: Callable[..., Result] = run_command, which: Callable[[str], Optional[str]] = shutil.which,
          timeout: float = PROBE_TIMEOUT_S) -> Dict[str, Any]:
    """{available, configured, commands{name: path|None}, cluster_name, version, accounting_storage, job_comp,
    partitions[{name, default}], sacct: "accounting"|"completion"|None, min_job_age_s, kill_wait_s,
    errors[]}."""
    commands = {name: which(name) for name in COMMANDS}
    out: Dict[str, Any] = {"available": all(commands[n] for n in REQUIRED), "configured": None, "commands": commands,
                           "cluster_name": None, "version": None, "accounting_storage": None,
                           "job_comp": None, "partitions": [], "sacct": None,
                           "min_job_age_s": None, "kill_wait_s": None, "errors": []}
    if not out["available"]:
        missing = [n for n in REQUIRED if not commands[n]]
        if len(missing) < len(REQUIRED):   # a partial install is worth a word; none at all is normal
            out["errors"].append("not on PATH: %s" % ", ".join(missing))
        return out
    res = runner([commands["scontrol"], "show", "config"], timeout)
    if res.rc != 0 and any(n in res.err for n in UNCONFIGURED):
        out["available"] = False     # the client package without a cluster: not a Slurm host
        out["configured"] = False
        return out
    if res.rc == 0:
        out["configured"] = True
        _config(out, parse_config(res.out), commands)
    else:
        out["errors"].append(res.why("scontrol show config"))
    if commands["sinfo"]:
        res = runner([commands["sinfo"], "--noheader", "--format=%P"], timeout)
        if res.rc == 0:
            out["partitions"] = parse_partitions(res.out)
        else:
            out["errors"].append(res.why("sinfo"))
    return out


def _config(out: Dict[str, Any], conf: Dict[str, str], commands: Dict[str, Optional[str]]) -> None:
    for key, name in CONFIG_KEYS.items():
        if key in conf:
            out[name] = conf[key]
    out["min_job_age_s"] = _seconds(conf.get("MinJobAge"))
    out["kill_wait_s"] = _seconds(conf.get("KillWait"))
    if commands["sacct"]:
        if conf.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none":
            out["sacct"] = "accounting"
        elif conf.get("JobCompType", "jobcomp/none") == "jobcomp/filetxt":
            out["sacct"] = "completion"    # `sacct --completion` reads the JobComp text log


def parse_config(text: str) -> Dict[str, str]:
    """`scontrol show config`: `Key   = value` lines (and a header line without "=")."""
    conf = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            conf[key.strip()] = value.strip()
    return conf


def parse_partitions(text: str) -> List[Dict[str, Any]]:
    """`sinfo -h -o %P`: one name a line, the default one marked with a trailing `*`."""
    out, seen = [], set()
    for line in text.split():
        name = line.rstrip("*")
        if name and name not in seen:
            seen.add(name)
            out.append({"name": name, "default": line.endswith("*")})
    return out


def _seconds(text: Optional[str]) -> Optional[int]:
    """"300 sec" -> 300."""
    try:
        return int((text or "").split()[0])
    except (ValueError, IndexError):
        return None
