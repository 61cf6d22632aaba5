"""`demo`: the whole product on this machine in under a minute, nothing to set up.

A `local` box in a temp home, the real built agent file installed into it, a real 3-stage job
(a small training script printing epochs and writing checkpoints, eval, aggregate) in a temp
workdir, a file:// notification sink shown live, the final status, then pull + verify where
this client has them. The daemon is stopped at the end; everything stays on disk to look at.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import click

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line
from rgt_client.box.transport import Target, run_agent

COMMANDS: list = []
DEMO_PRICE = 2.49          # per hour, USD: what a rented GPU box might cost
DEMO_IDLE_S = 2

TRAIN = '''import json, os, sys, time
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 5

def save(path, obj):  # checkpoints written atomically: tmp -> fsync -> rename
    with open(path + ".tmp", "w") as fh:
        json.dump(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(path + ".tmp", path)

os.makedirs("ckpt", exist_ok=True)
loss = 2.0
for epoch in range(1, epochs + 1):
    time.sleep(0.6)
    loss *= 0.62
    save("ckpt/epoch_%d.pt" % epoch, {"epoch": epoch, "loss": round(loss, 4)})
    save("ckpt/best.pt", {"epoch": epoch, "loss": round(loss, 4)})
    print("epoch %d/%d loss %.4f" % (epoch, epochs, loss), flush=True)
print("Training completed")
'''
EVAL = '''import json, os
ck = json.load(open("ckpt/best.pt"))
os.makedirs("results", exist_ok=True)
metrics = {"epoch": ck["epoch"], "loss": ck["loss"], "accuracy": round(1 - ck["loss"] / 2, 4)}
json.dump(metrics, open("results/metrics.json", "w"))
print("eval: accuracy %.4f" % metrics["accuracy"])
'''
AGG = '''import json
m = json.load(open("results/metrics.json"))
open("results/report.md", "w").write("# demo run\\n\\naccuracy %.4f after %d epochs\\n" % (m["accuracy"], m["epoch"]))
print("report written: results/report.md")
'''


def write_workdir(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for name, text in (("train.py", TRAIN), ("eval.py", EVAL), ("aggregate.py", AGG)):
        (work / name).write_text(text)


def demo_job(work: Path, epochs: int) -> dict[str, Any]:
    py = shlex.quote(sys.executable)
    return {
        "name": "demo",
        "workdir": str(work),
        "stage": [
            {"name": "train", "run": "%s train.py %d" % (py, epochs), "expect": ["ckpt/best.pt"],
             "success_pattern": "Training completed", "metrics_pattern": r"loss (?P<loss>[0-9.]+)", "timeout": "5m"},
            {"name": "eval", "run": "%s eval.py" % py, "expect": ["results/metrics.json"], "timeout": "2m"},
            {"name": "aggregate", "run": "%s aggregate.py" % py, "expect": ["results/report.md"],
             "timeout": "2m"},
        ],
        "artifacts": {"include": ["ckpt/best.pt", "results/**"]},
    }


def run_demo(base: Path, epochs: int = 5, max_wait_s: float = 90.0,
             say: Callable[[str], None] = click.echo) -> int:
    from rgt_client.install.bootstrap import InstallOptions, install
    from rgt_client.jobs.submit import submit
    from rgt_client.status.fetch import fetch_status
    from rgt_client.status.render import render_status
    home, work, sink = base / "box-home", base / "work", base / "notifications.jsonl"
    write_workdir(work)
    target = Target("local", home=str(home))
    say("== rgt demo in %s" % base)
    say("-- install the agent into a local box (home %s)" % home)
    # A price, so the status and the messages say what the box costs; a short idle delay, so the
    # idle warning shows before the demo ends (a real box waits 30 min: docs/cost.md).
    rep = install(target, InstallOptions(profile="local", sample_every=1.0, remember=False,
                                         notify={"notify": [{"url": "file://%s" % sink}]},
                                         cost={"price_per_hour": DEMO_PRICE, "idle_alert_after_s": DEMO_IDLE_S}),
                 say=say)
    say("   agent sha256 %s, daemon started" % rep.sha256[:16])
    try:
        say("-- submit a 3-stage job: train (%d epochs) -> eval -> aggregate" % epochs)
        submit(target, demo_job(work, epochs))
        state = _follow(target, sink, max_wait_s, say)
        say("-- final status")
        hs = fetch_status(target, events=5)
        say(render_status(hs.status, hs.client) if hs.status else "   no status: %s" % (hs.error.message if hs.error else "?"))
        _show_idle_warning(sink, say)
        _pull_and_verify(target, base, say)
        _write_report(target, base, say)
    finally:
        run_agent(target, ["stop"], timeout=60)
    say("-- done; the daemon is stopped. Everything is still there:")
    for label, path in (("box home", home), ("workdir", work), ("notifications", sink), ("report", base / "report.html"),
                        ("stage logs", home / "runs" / "demo" / "logs")):
        say("   %-14s %s" % (label, path))
    return exitcodes.OK if state == "succeeded" else exitcodes.RUN_FAILED


def _follow(target: Target, sink: Path, max_wait_s: float, say: Callable[[str], None]) -> str | None:
    """Stage transitions, stage output and notification lines as they happen, until the run ends."""
    from rgt_client.status.fetch import fetch_status
    from rgt_client.status.statusdata import find_run
    seen: dict[str, str] = {}
    logs: dict[str, int] = {}
    offset, state, deadline = 0, None, time.monotonic() + max_wait_s
    while time.monotonic() < deadline:
        # Only the notifications already sent when the status is read are shown after it: the
        # run's end message, sent between that read and this turn's printing, came out before
        # the last stage's "succeeded" (a full test run under load saw it).
        sent = _size(sink)
        hs = fetch_status(target, events=0)
        run = find_run(hs.status or {}, "demo") or {}
        for st in run.get("stages") or []:
            if st.get("state") in ("pending", None):
                continue
            changed = seen.get(st.get("name")) != st.get("state")
            if changed and st.get("state") == "running":
                say("   stage %-10s %s" % (st.get("name"), st.get("state")))
            if st.get("log"):  # output first, so a stage's last lines come before "succeeded"
                logs[st["log"]] = _show_log(st["name"], st["log"], logs.get(st["log"], 0), say)
            if changed and st.get("state") != "running":
                say("   stage %-10s %s" % (st.get("name"), st.get("state")))
            seen[st.get("name")] = st.get("state")
        # Notifications after the stages' output: a message about the run's end printed before
        # the last stage's lines read as if the demo finished before its eval ran.
        offset = _show_notifications(sink, offset, say, sent)
        state = run.get("state")
        if state in ("succeeded", "failed", "cancelled", "interrupted"):
            time.sleep(0.5)  # let the last notification reach the sink
            _show_notifications(sink, offset, say)
            return state
        time.sleep(0.3)
    say("   the demo run did not finish within %ds" % max_wait_s)
    return state


def _size(path: "str | Path") -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _new_lines(path: "str | Path", offset: int, upto: int | None = None) -> "tuple[list[str], int]":
    """Complete lines appended to `path` since `offset`, up to byte `upto` (the box is this
    machine: read it directly)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read() if upto is None else fh.read(max(0, upto - offset))
    except OSError:
        return [], offset
    complete = data[: data.rfind(b"\n") + 1]
    return complete.decode("utf-8", "replace").splitlines(), offset + len(complete)


def _show_log(stage: str, path: str, offset: int, say: Callable[[str], None]) -> int:
    lines, offset = _new_lines(path, offset)
    for line in lines:
        say("     %s | %s" % (safe_line(stage), safe_line(line)))
    return offset


def _show_notifications(sink: Path, offset: int, say: Callable[[str], None], upto: int | None = None) -> int:
    lines, offset = _new_lines(sink, offset, upto)
    for line in lines:
        say("   notify > %s" % safe_line(_one_line(line)))
    return offset


def _one_line(line: str) -> str:
    """A sink line as a phone would show it: the message's first line."""
    try:
        msg = json.loads(line)
    except ValueError:
        return line[:160]
    if not isinstance(msg, dict):
        return line[:160]
    text = msg.get("title") or (msg.get("text") or "").split("\n")[0]
    return "[%s] %s" % (msg.get("severity", "-"), text or msg.get("type") or line[:120])


def _pull_and_verify(target: Target, base: Path, say: Callable[[str], None]) -> None:
    """Pull the run's artifacts and verify them against the box's manifest, as `rgt-client pull` does."""
    from rgt_client.pull.transfer import pull
    from rgt_client.pull.cmd import render_verify
    dest = base / "pulled"
    say("-- pull the artifacts to %s and verify them against the box's manifest" % dest)
    try:
        res = pull(target, "demo", str(dest))
    except ClientError as exc:
        say("   pull failed: %s" % exc.message)
        return
    say("   %s (%s, %d bytes moved)" % (render_verify(res.verify).replace("\n", "\n   "), res.method,
                                       res.bytes_moved))
    if res.verify.ok:
        from rgt_client.pull.mark import record_on_box
        note = record_on_box(target, "demo", res.verify.manifest_sha256)
        say("   %s" % (note or "recorded on the box: its idle warning now says the results are safe off it"))


def _show_idle_warning(sink: Path, say: Callable[[str], None], wait_s: float = 10.0) -> None:
    """The box now does nothing and bills for it: its idle warning, as a phone shows it."""
    say("-- the box is idle now, and a rented box bills for that: its warning after %ds" % DEMO_IDLE_S)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        lines, _ = _new_lines(sink, 0)
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("type") == "box_idle":
                for text in str(msg.get("text") or "").splitlines():
                    say(("   notify > %s" % safe_line(text)).rstrip())
                return
        time.sleep(0.3)
    say("   (no idle warning within %ds)" % wait_s)


def _write_report(target: Target, base: Path, say: Callable[[str], None]) -> None:
    """The run's report: one HTML file to open in a browser (rgt-client report)."""
    from rgt_client.report.cmd import write_report
    pulled = base / "pulled"
    try:
        path = write_report(target, "demo", str(base / "report.html"),
                            str(pulled) if (pulled / "PULL_VERIFIED.json").exists() else None)
    except ClientError as exc:
        say("-- report: %s" % exc.message)
        return
    say("-- the run's report (stage timeline, events, charts; one offline HTML file): %s" % path)


@COMMANDS.append
@click.command()
@click.option("--dir", "base_dir", type=click.Path(file_okay=False), help="Where to put the demo (default: a new temp dir).")
@click.option("--epochs", type=click.IntRange(1, 50), default=5, show_default=True)
def demo(base_dir: str | None, epochs: int) -> None:
    """Run the whole thing on this machine: local agent, 3-stage job, live notifications."""
    base = Path(base_dir).resolve() if base_dir else Path(tempfile.mkdtemp(prefix="rgt-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    raise SystemExit(run_demo(base, epochs))
