"""runs/<run>/HANDBOOK.md: what to type, for a human who reconnects days later (or a new
teammate): check, resume, pull, where every marker and log is. Exact commands, no prose to decode.
"""
from __future__ import annotations

import shlex
from typing import Any, Dict, List

from boxagent.base.fsutil import atomic_write_text
from boxagent.base.home import Home


def agent_command(home: Home) -> str:
    """How to call the agent on this box (the installed single file, with this state directory)."""
    return "python3 %s --home %s" % (shlex.quote(home.pyz), shlex.quote(home.root))


def render(home: Home, spec: Dict[str, Any], config: Dict[str, Any]) -> str:
    run = spec["name"]
    host = config.get("host") or "HOST"
    agent = agent_command(home)
    q = shlex.quote(run)
    lines: List[str] = [
        "# Run %s — handbook" % run, "",
        "First command on reconnect (from your laptop):", "",
        "    rgt-client status %s" % host, "",
        "## Check it (on the box)", "",
        "    %s status --run %s" % (agent, q),
        "    %s logs %s            # the current stage's log (add --stage NAME, -n 200)" % (agent, q),
        "    tail -f %s/logs/*.log" % shlex.quote(home.run_dir(run)), "",
        "## Resume it after a failure, a preemption or a machine restart", "",
        "    %s start              # the daemon, if it is not running (idempotent)" % agent,
        "    %s resume %s          # stages with a marker are skipped" % (agent, q),
        "", "From your laptop: `rgt-client resume %s %s`." % (host, run), "",
    ] + _slurm_lines(spec) + [
        "## Stop it", "",
        "    %s cancel %s" % (agent, q), "",
        "## Pull the results (from your laptop)", "",
        "    rgt-client pull %s %s     # copies the declared artifacts, then verifies sha256" % (host, run),
        "", "Only a verified pull says it is safe to tear the box down. rgt never stops or destroys it.", "",
        "## Where things are", "",
        "- workdir: `%s`" % spec["workdir"],
        "- state: `%s` (written by the daemon only)" % home.run_state(run),
        "- job as accepted: `%s`" % home.run_spec(run),
        "- manifest of artifacts: `%s`" % home.manifest(run),
        "- events: `%s`" % home.events, "",
        "| stage | kind | marker (exists only after success) | log of attempt 1 |",
        "|---|---|---|---|",
    ]
    for st in spec["stage"]:
        kind = "wait" if "wait" in st else "run"
        log = home.stage_log(run, st["name"], 1) if kind == "run" else (st["wait"].get("log") or "-")
        lines.append("| %s | %s | `%s` | `%s` |" % (st["name"], kind, home.marker(run, st["name"]), log))
    lines += ["", "Stage commands:", ""]
    for st in spec["stage"]:
        what = st.get("run") or "wait for %s" % ", ".join("%s=%s" % kv for kv in sorted(st["wait"].items()))
        lines.append("- `%s`: `%s`" % (st["name"], what.replace("`", "'")))
    return "\n".join(lines) + "\n"


def _slurm_lines(spec: Dict[str, Any]) -> List[str]:
    """A Slurm run: its stages are jobs named rgt:<run>:<stage>, which Slurm runs without us."""
    if spec.get("backend") != "slurm":
        return []
    names = ",".join("rgt:%s:%s" % (spec["name"], st["name"]) for st in spec["stage"] if "wait" not in st)
    return ["## On the cluster", "",
            "Each stage is one Slurm job (afterok on the one before); Slurm runs the chain with or",
            "without the agent, and a restarted agent picks it up from the job ids it saved.", "",
            "    squeue --user=\"$USER\" --states=all --name=%s" % shlex.quote(names),
            "    scontrol show job JOBID        # the job ids: `status --run` (slurm_job_id)", ""]


def write(home: Home, spec: Dict[str, Any], config: Dict[str, Any]) -> str:
    path = home.handbook(spec["name"])
    atomic_write_text(path, render(home, spec, config))
    return path
