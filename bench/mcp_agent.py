"""MCP benchmark: an AI coding agent babysitting a 3-stage job through `rgt-client mcp`, counted
against the shell approaches of the remote-GPU playbook.

  python bench/mcp_agent.py                 # 10 s stages (a scaled-down 10-minute job), ~1-2 min
  python bench/mcp_agent.py --stage-s 30    # longer stages

Driven with the SDK's own MCP client exactly as an agent would: submit_job, then
wait_for_change with the cursor it returns until the run fails at stage 2, diagnose, the fix (a
file the agent writes with its own editor: not an rgt call), resume_run, wait_for_change until
the run succeeded, pull_artifacts (verified). Counted: tool calls, and the bytes the model
receives (each result's text block plus its structuredContent, as JSON).

The job is scaled down: stages of --stage-s seconds instead of minutes, on a `local` box with a
real daemon. The references are computed for the same job duration D from real outputs:
  ssh + grep poll   every 60 s `ssh box 'tail -n 50 LOG | grep -iE "epoch|loss|error|traceback"'`
                    (its bytes measured on this job's logs) plus the agent's own actions: submit
                    (nohup), read the failure (tail -n 50), relaunch, scp, sha256sum compare.
  status --json     every 60 s `rgt-client status HOST --json` (its bytes measured on this box
                    mid-run), plus submit, logs, resume and pull.
And the same three for the nominal 10-minute job (each stage run 150 s: the measured times
scaled): the MCP side then needs one more wait per 45 s of quiet (an MCP client's ~60 s tool
timeout bounds a call), each a timed-out answer of measured size.
Goal: at most 10 tool calls and under 40 KB returned (the scaled-down job).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from mcp.client import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

FAST_ENV = {"RGT_TICK": "0.2", "RGT_SAMPLE_EVERY": "2", "RGT_HEARTBEAT_EVERY": "3600"}
CLIENT = [sys.executable, "-c", "from rgt_client.cli import main; main()"]
GREP = "tail -n 50 %s | grep -iE 'epoch|loss|error|traceback'"
POLL_S = 60.0
WAIT_S = 45.0
NOMINAL_STAGE_S = 150.0     # 4 stage runs (one failed, resumed) of 150 s: the 10-minute job


def job_toml(work: Path, stage_s: float) -> str:
    train = ("for i in $(seq 1 5); do echo \"epoch $i/5 loss 0.$((9-i))\"; sleep %.2f; done; "
             "mkdir -p ckpt; echo weights > ckpt/best.pt" % (stage_s / 5))
    evaluate = ("sleep %.2f; test -f fixed || { echo 'Traceback (most recent call last):'; "
                "echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1; }; "
                "echo eval-ok > metrics.txt" % stage_s)
    return ('name = "bench"\nworkdir = %s\n[[stage]]\nname = "train"\nrun = %s\nexpect = ["ckpt/best.pt"]\n'
            '[[stage]]\nname = "eval"\nrun = %s\nexpect = ["metrics.txt"]\n[[stage]]\nname = "aggregate"\n'
            'run = "sleep %.2f; cat metrics.txt"\n[artifacts]\ninclude = ["ckpt/best.pt", "metrics.txt"]\n'
            % (json.dumps(str(work)), json.dumps(train), json.dumps(evaluate), stage_s))


class Agent:
    def __init__(self, session: ClientSession):
        self.s, self.calls, self.bytes, self.text_bytes = session, [], 0, 0
        self.latency: list[float] = []
        self.gaps: list[float] = []          # seconds each wait_until spent, wake to wake

    async def call(self, name: str, **args):
        res = await self.s.call_tool(name, args)
        text = "".join(getattr(c, "text", "") for c in res.content)
        n = len(text.encode()) + len(json.dumps(res.structured_content or {}, ensure_ascii=False).encode())
        self.calls.append((name, n))
        self.bytes += n
        self.text_bytes += len(text.encode())
        if res.is_error:
            raise SystemExit("%s failed: %s" % (name, text))
        return res.structured_content

    async def wait_until(self, run: str, cursor: str, want: str) -> str:
        while True:
            t0 = time.monotonic()
            w = await self.call("wait_for_change", host="local", run=run, cursor=cursor, timeout_s=WAIT_S)
            back = time.time()
            self.gaps.append(time.monotonic() - t0)
            cursor = w.get("cursor") or cursor
            for e in w["events"]:
                if e["type"] in ("stage_succeeded", "stage_failed"):
                    at = datetime.strptime(e["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
                    self.latency.append(back - at.timestamp())
            if any(e["type"] == want for e in w["events"]):
                return cursor


async def drive(base: Path, env: dict, stage_s: float) -> dict:
    work = base / "work"
    params = StdioServerParameters(command=sys.executable, args=CLIENT[1:] + ["mcp", "--hosts", "local"],
                                   env=env, cwd=str(base))
    with open(base / "server.log", "w") as err:
        async with stdio_client(params, errlog=err) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                a = Agent(s)
                t0 = time.monotonic()
                sub = await a.call("submit_job", host="local", job=job_toml(work, stage_s))
                cursor = await a.wait_until("bench", sub["cursor"], "run_failed")
                diag = await a.call("diagnose", host="local", run="bench")
                (work / "fixed").write_text("batch size halved\n")          # the agent's own edit
                res = await a.call("resume_run", host="local", run="bench")
                await a.wait_until("bench", res["cursor"], "run_succeeded")
                status_json = measure_status_json(env)
                pulled = await a.call("pull_artifacts", host="local", run="bench")    # rgt's data folder: pulls/PROJECT/local/bench
                duration = time.monotonic() - t0
                quiet = await s.call_tool("wait_for_change", {"host": "local", "run": "bench", "timeout_s": 1})
                a.quiet_bytes = len(quiet.content[0].text.encode()) + len(
                    json.dumps(quiet.structured_content, ensure_ascii=False).encode())
    return {"agent": a, "duration_s": duration, "cause": diag["cause"]["class"], "verified": pulled["verified"],
            "status_json_bytes": status_json}


def measure_status_json(env: dict) -> int:
    out = subprocess.run(CLIENT + ["status", "local", "--json"], env=env, capture_output=True, timeout=120)
    return len(out.stdout)


def grep_poll_bytes(home: Path) -> int:
    logs = sorted((home / "runs" / "bench" / "logs").glob("*.log"))
    out = subprocess.run(["sh", "-c", GREP % logs[0]], capture_output=True)
    return len(out.stdout) + 60            # + the ssh command line the agent writes


def tail_bytes(home: Path) -> int:
    logs = sorted((home / "runs" / "bench" / "logs").glob("eval.*.log"))
    return len(subprocess.run(["tail", "-n", "50", str(logs[0])], capture_output=True).stdout)


def references(duration: float, grep_b: int, tail_b: int, status_b: int) -> dict:
    polls = max(1, math.ceil(duration / POLL_S))
    # actions besides polling: submit (nohup ... &), read the failure, relaunch, scp, sha256sum x2
    shell_actions, shell_action_bytes = 6, 200 + tail_b + 200 + 400 + 2 * 300
    # rgt CLI without MCP: run, logs, resume, pull (--json answers)
    cli_actions, cli_action_bytes = 4, 400 + tail_b + 300 + 1500
    return {"ssh + grep poll": (polls + shell_actions, polls * grep_b + shell_action_bytes),
            "status --json poll": (polls + cli_actions, polls * status_b + cli_action_bytes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stage-s", type=float, default=10.0)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rgt-bench-mcp-"))
    (base / "work").mkdir()
    home = base / "home"
    env = dict(os.environ, RGT_HOME=str(home), RGT_CLIENT_CONFIG_DIR=str(base / "cc"), RGT_DATA_HOME=str(base / "data"),
               **FAST_ENV)
    env.pop("RGT_SSH_CONFIG", None)
    subprocess.run(CLIENT + ["install", "local", "--home", str(home)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = anyio.run(drive, base, env, args.stage_s)
    finally:
        subprocess.run([sys.executable, str(home / "rgt-agent.pyz"), "stop"], env=env, capture_output=True)
    a: Agent = r["agent"]
    grep_b, tail_b = grep_poll_bytes(home), tail_bytes(home)
    scale = NOMINAL_STAGE_S / args.stage_s
    extra_waits = sum(math.ceil(g * scale / WAIT_S) - 1 for g in a.gaps)
    print("MCP agent, 3 stages of %.0f s (stage 2 fails once, resumed), measured on a local box:" % args.stage_s)
    print("  run took %.1f s; cause %s; pull verified: %s" % (r["duration_s"], r["cause"], r["verified"]))
    print("  calls: %s" % ", ".join("%s %d B" % c for c in a.calls))
    print("  stage end -> tool answer: %s s" % ", ".join("%.2f" % x for x in a.latency))
    print("  a timed-out wait (nothing happened): %d B" % a.quiet_bytes)
    rows = [("rgt MCP (measured)", len(a.calls), a.bytes)]
    for name, (calls, nbytes) in references(r["duration_s"], grep_b, tail_b, r["status_json_bytes"]).items():
        rows.append((name + " (computed, 60 s)", calls, nbytes))
    nominal = r["duration_s"] * scale
    rows.append(("rgt MCP, %.0f-min job (computed, 45 s waits)" % (nominal / 60), len(a.calls) + extra_waits,
                 a.bytes + extra_waits * a.quiet_bytes))
    for name, (calls, nbytes) in references(nominal, grep_b, tail_b, r["status_json_bytes"]).items():
        rows.append((name + ", %.0f-min job (computed)" % (nominal / 60), calls, nbytes))
    print("\n  %-44s %6s %10s" % ("approach", "calls", "bytes"))
    for name, calls, nbytes in rows:
        print("  %-44s %6d %10d" % (name, calls, nbytes))
    print("\n  goal: <= 10 calls and < 40960 bytes: %s (%d calls, %d bytes; text blocks alone %d bytes)"
          % ("MET" if len(a.calls) <= 10 and a.bytes < 40960 else "NOT MET", len(a.calls), a.bytes, a.text_bytes))


if __name__ == "__main__":
    main()
