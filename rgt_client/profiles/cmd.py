"""`rgt-client profiles` (a table) and `profiles show NAME|FILE [--json]`.

Thin click commands over rgt_client.profiles.catalog; the text rendering lives in functions here so
tests can call them directly. `--json` prints the validated profile dict as loaded.
"""
from __future__ import annotations

import json
import unicodedata
from typing import Any, Dict, List, Sequence

import click

from rgt_client.profiles import catalog as P


def _width(text: str) -> int:
    # CJK verbs (关机, 释放) take two terminal columns each.
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(_width(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for r in [header, *rows]:
        cells = [str(c) + " " * (w - _width(str(c))) for c, w in zip(r, widths)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def _short(text: str, n: int = 44) -> str:
    head = text.split(":")[0].strip()
    return head if len(head) <= n else head[:n - 1] + "…"


def _clocks(p: Dict[str, Any]) -> str:
    clocks = p.get("danger_clock") or []
    return "; ".join("%s: %s" % (c["after"], _short(c["what"])) for c in clocks) or "-"


def summary_row(p: Dict[str, Any]) -> Dict[str, Any]:
    """One line of `profiles`: the first (mildest) verb is "the stop verb"; the final one too."""
    verbs = p.get("teardown") or []
    first = verbs[0] if verbs else {}
    final = [t["name"] for t in verbs if t.get("irreversible")]
    return {"name": p["name"], "platform": p["platform"], "kind": p["kind"],
            "verified": bool(p.get("verified")), "stop_verb": first.get("name"),
            "irreversible": bool(first.get("irreversible")) if first else None,
            "still_bills": list(first.get("still_bills") or []),
            "irreversible_verbs": final, "danger_clocks": p.get("danger_clock") or []}


def render_list(profiles: List[Dict[str, Any]]) -> str:
    rows = []
    for p in profiles:
        s = summary_row(p)
        irrev = "-" if s["irreversible"] is None else ("YES" if s["irreversible"] else "no")
        rows.append((s["name"], s["platform"], "yes" if s["verified"] else "no",
                     s["stop_verb"] or "-", irrev, "YES" if s["still_bills"] else "-", _clocks(p)))
    head = ("NAME", "PLATFORM", "VERIFIED", "STOP VERB", "IRREVERSIBLE", "STILL BILLS", "DANGER CLOCKS")
    return table(head, rows) + "\n\nDetails: rgt-client profiles show NAME   (or a file: show ./my.toml)"


def _yn(v: Any) -> str:
    return "yes" if v else "NO"


def _places(p: Dict[str, Any]) -> List[str]:
    ssh = p.get("ssh") or {}
    hf = p.get("hf") or {}
    proxy = p.get("proxy") or {}
    pairs = [("ssh user", ssh.get("user")), ("python", p.get("python")),
             ("state dir", p.get("state_dir")), ("data dir", p.get("data_dir")),
             ("durable dir", p.get("durable_dir")), ("also watched", ", ".join(p.get("watch") or [])),
             ("inode caps", ", ".join("%s=%d" % kv for kv in (p.get("inode_caps") or {}).items())),
             ("thresholds", ", ".join("%s=%s" % kv for kv in (p.get("thresholds") or {}).items())),
             ("proxy hook", proxy.get("hook")), ("proxy env", ", ".join(proxy.get("env") or {})),
             ("HF_HOME", hf.get("home")), ("HF_ENDPOINT", hf.get("endpoint")),
             ("TensorBoard", p.get("tensorboard_dir"))]
    if ssh:
        pairs.append(("scp/sftp/rsync", "/".join(_yn(ssh.get(k, True)) for k in ("scp", "sftp", "rsync"))))
    if ssh.get("note"):
        pairs.append(("ssh note", ssh["note"]))
    return ["  %-15s %s" % (k, v) for k, v in pairs if v]


def _survival(p: Dict[str, Any]) -> List[str]:
    rows = [(r["tier"], r["path"], _yn(r["survives_stop"]), _yn(r["survives_destroy"]),
             "; ".join(x for x in (r.get("cap"), r.get("note")) if x)) for r in p.get("survival") or []]
    if not rows:
        return []
    body = table(("TIER", "PATH", "STOP", "DESTROY", "CAP / NOTE"), rows)
    return ["Survival (does it survive the stop verb / the final verb?)"] + ["  " + l for l in body.splitlines()]


def _teardown(p: Dict[str, Any]) -> List[str]:
    rows = [(t["name"], "yes" if t["stops_billing"] else "NO", "YES" if t["irreversible"] else "no",
             ", ".join(t["destroys"]) or "nothing", "; ".join(t.get("still_bills") or []) or "-")
            for t in p.get("teardown") or []]
    if not rows:
        return ["Teardown: nothing to tear down"]
    body = table(("VERB", "STOPS BILLING", "IRREVERSIBLE", "DESTROYS", "STILL BILLS"), rows)
    notes = ["  %s: %s" % (t["name"], t["note"]) for t in p.get("teardown") or [] if t.get("note")]
    return ["Teardown (rgt never runs these)"] + ["  " + l for l in body.splitlines()] + notes


def _extras(p: Dict[str, Any]) -> List[str]:
    out = ["Danger clocks"] + (["  after %s: %s" % (P.humanize_duration(c["after"]), c["what"])
                                for c in p.get("danger_clock") or []] or ["  none known"])
    spot = p.get("spot")
    if spot:
        out.append("Spot / preemption: %s, grace %ss%s" % (
            spot["signal"], spot["grace_s"], " (%s)" % spot["notice"] if spot.get("notice") else ""))
    if p.get("conveniences"):
        out += ["Conveniences"] + ["  - " + c for c in p["conveniences"]]
    if p.get("rule"):
        out += ["Extra triage rules"] + ["  /%s/ -> %s: %s" % (r["pattern"], r["class"], r["remediation"])
                                         for r in p["rule"]]
    return out


def render_show(p: Dict[str, Any]) -> str:
    trust = ("verified on the platform" if p.get("verified") else "NOT verified on the platform")
    lines = ["%s — profile %s (%s); %s; source: %s" % (p["platform"], p["name"], p["kind"], trust,
                                                       p.get("provenance", "unknown"))]
    if p.get("summary"):
        lines.append(p["summary"])
    lines += [""] + _places(p) + [""] + _survival(p) + [""] + _teardown(p) + [""] + _extras(p)
    lines += ["", "Checkpoints: " + P.checkpoint_advice(p)]
    return "\n".join(lines)


@click.group("profiles", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@click.pass_context
def profiles(ctx: click.Context, as_json: bool) -> None:
    """Platform profiles: what each rental keeps, destroys and charges for."""
    if ctx.invoked_subcommand is not None:
        return
    loaded = [P.load_profile(n) for n in P.list_profiles()]
    if as_json:
        click.echo(json.dumps([summary_row(p) for p in loaded], indent=1, ensure_ascii=False))
    else:
        click.echo(render_list(loaded))


@profiles.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the validated profile as JSON.")
def show(name: str, as_json: bool) -> None:
    """Survival matrix, teardown table, danger clocks and conveniences of NAME (or a .toml file)."""
    prof = P.load_profile(name)
    if as_json:
        click.echo(json.dumps(prof, indent=1, ensure_ascii=False))
    else:
        click.echo(render_show(prof))


COMMANDS: list = [profiles]
