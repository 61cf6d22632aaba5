"""`rgt-client ray up HEAD WORKER...` / `rgt-client ray down HEAD WORKER...`: a Ray cluster formed
on the user's boxes through each box's agent (`rgt-agent ray-node`), for jobs with
`backend = "ray"` (docs/ray.md).

`up` first proves that every box reaches every other on the pinned ports: each box listens on its
ports for a moment, and each box's agent connects to every other box's. A port another process
holds, or a pair that cannot connect (NAT: most vast.ai containers, RunPod pods without a private
network), refuses the whole cluster with the pairs named; Ray is started only when all pairs
connect, the head first, and a start that fails stops what was started: never a half-formed
cluster. `down` stops what `up` started (the processes each agent recorded) and nothing else.
"""
from __future__ import annotations

import json
import secrets
from typing import Any

import click

from rgt_client import exitcodes, options
from rgt_client.box import agentcall
from rgt_client.box.transport import Target
from rgt_client.errors import ClientError
from rgt_client.ray import addrs as rayaddrs

DEFAULT_BASE = 26379
NAT_HINT = ("Ray needs every box to reach every other on these ports: put the boxes on one private "
            "network (one provider's VPC or private network, your own LAN), open the ports between "
            "them in the firewall, or pick free ones with --port-base. Containers behind NAT "
            "(most vast.ai offers, RunPod pods without a private network) cannot form a cluster: "
            "run one sweep per box there instead.")


def _ports(base: int, head: bool) -> list[int]:
    # The agent's layout, mirrored (the client reaches the agent only through boxagent.api): the
    # ports the other nodes connect to, the worker range by its two ends.
    ports = [base + 10, base + 11, base + 20, base + 60]
    return sorted(ports + ([base, base + 1] if head else []))


def _ssh_hostname(ctx: click.Context, host: str) -> str:
    """The box's HostName as the user's ssh config says (the route toward it picks the source
    address the other box offers first)."""
    from rgt_client.box.sshresolve import resolve
    got = resolve(host, (ctx.obj or {}).get("ssh_config"))
    return got.hostname if got else host


@click.group("ray")
def ray() -> None:
    """Form or stop a Ray cluster on your boxes (for jobs with backend = "ray")."""


@ray.command("up")
@click.argument("head")
@click.argument("workers", nargs=-1, required=True)
@click.option("--ip", "ips", multiple=True, metavar="HOST=ADDR",
              help="How the other boxes reach HOST, overriding the address `up` finds: without it each "
                   "box's agent offers its addresses and the one every other box reaches is used.")
@click.option("--port-base", type=int, default=DEFAULT_BASE, show_default=True,
              help="The first pinned port (GCS); the others follow it.")
@click.option("--port-step", type=int, default=0, hidden=True,
              help="Box i uses port-base + i x step (several 'boxes' on one machine, in tests).")
@click.pass_context
def up(ctx: click.Context, head: str, workers: tuple[str, ...], ips: tuple[str, ...], port_base: int,
       port_step: int) -> None:
    """Start Ray on HEAD and the WORKERS through their agents, after checking every pair connects."""
    hosts = [head] + list(workers)
    if len(set(hosts)) != len(hosts):
        raise ClientError("a box is named twice: %s" % " ".join(hosts), "name each box once", exitcodes.USAGE)
    named = rayaddrs.given(ips, hosts)
    targets = {h: options.target(ctx, h) for h in hosts}
    base = {h: port_base + i * port_step for i, h in enumerate(hosts)}
    ports = {h: _ports(base[h], h == head) for h in hosts}
    cands: dict[str, list[str]] = {}
    for h in hosts:
        if h in named:
            cands[h] = [named[h]]
        else:
            toward = [_ssh_hostname(ctx, o) for o in hosts if o != h]
            cands[h] = rayaddrs.from_box(agentcall.json_of(agentcall.ok(
                targets[h], ["ray-node", "addrs", "--toward"] + toward, "ray-node addrs"), "ray-node addrs"))
    problems: list[str] = []
    listening: list[str] = []
    # Each box its own nonce: a connection proves it reached THAT box's listener, not the dialler's
    # own (a bridge address every box has, or loopback, reaches the dialler itself).
    nonce = {h: secrets.token_hex(8) for h in hosts}
    addr: dict[str, str] = {}
    try:
        for h in hosts:
            said = agentcall.json_of(agentcall.ok(targets[h], ["ray-node", "listen", "--ports",
                                                               ",".join(str(p) for p in ports[h]), "--for", "60",
                                                               "--token", nonce[h]],
                                                  "ray-node listen"), "ray-node listen")
            for t in said.get("taken") or []:
                problems.append("port %s on %s is taken by another process (%s)" % (t.get("port"), h, t.get("why")))
            if said.get("listening"):
                listening.append(h)
        if not problems:
            reached: rayaddrs.Reached = {}
            for a in hosts:
                for b in hosts:
                    if a == b:
                        continue
                    want = {c: ["%s:%d" % (c, p) for p in ports[b]] for c in cands[b]}
                    said = agentcall.json_of(agentcall.ok(
                        targets[a], ["ray-node", "reach", "--expect", nonce[b], "--to"] + sum(want.values(), []),
                        "ray-node reach", timeout=60.0), "ray-node reach")
                    reached[(a, b)] = {c: ["%s (%s)" % (t.rpartition(":")[2], said.get(t)) for t in ts
                                           if said.get(t) != "ok"] for c, ts in want.items()}
            addr, more = rayaddrs.pick(hosts, cands, reached, named)
            problems += more
    finally:
        for h in listening:
            agentcall.call(targets[h], ["ray-node", "listen", "--stop"])
    if problems:
        unnamed = [h for h in hosts if h not in named and h not in addr]
        raise ClientError("cannot form a Ray cluster: %s" % "; ".join(problems), (
            "%s Where a box has an address the others reach that it did not offer, name it: --ip %s=ADDR."
            % (NAT_HINT, unnamed[0])) if unnamed else NAT_HINT)
    for h in hosts:
        if h not in named:
            click.echo("%s: reached by every other box at %s" % (h, addr[h]))
    started: list[str] = []
    node_ids: dict[str, str] = {}      # Ray's node id -> the box as the user calls it (status shows it)
    auth = secrets.token_hex(32)       # Ray's auth token: every node's and the daemons' (stdin, 0600 files)
    try:
        for h in hosts:
            args = ["ray-node", "start", "--role", "head", "--base", str(base[h]), "--ip", addr[h]]
            if h != head:
                args = ["ray-node", "start", "--role", "worker", "--base", str(base[h]), "--ip", addr[h],
                        "--head", "%s:%d" % (addr[head], base[head])]
            said = agentcall.json_of(agentcall.ok(targets[h], args + ["--token-stdin"], "ray-node start", timeout=240.0,
                                                  stdin=auth.encode()), "ray-node start")
            started.append(h)
            if isinstance(said.get("node_id"), str):
                node_ids[said["node_id"]] = h
            click.echo("%s: Ray %s, %s GPU(s)%s" % (h, "head" if h == head else "worker", said.get("gpus"),
                                                   ", dashboard %s" % said["dashboard"] if said.get("dashboard") else ""))
        agentcall.ok(targets[head], ["ray-node", "hosts"], "ray-node hosts", stdin=json.dumps(node_ids).encode())
    except ClientError:
        for h in reversed(started):
            agentcall.call(targets[h], ["ray-node", "stop"])
        raise
    click.echo('Ray cluster up. In a job: backend = "ray" and [ray] address = "http://%s:%d"'
               % (addr[head], base[head] + 1))


def _stop(t: Target) -> Any:
    return agentcall.json_of(agentcall.ok(t, ["ray-node", "stop"], "ray-node stop"), "ray-node stop")


@ray.command("down")
@click.argument("hosts", nargs=-1, required=True)
@click.pass_context
def down(ctx: click.Context, hosts: tuple[str, ...]) -> None:
    """Stop the Ray that `ray up` started on each box (workers first), and nothing else."""
    for h in reversed(hosts):
        said = _stop(options.target(ctx, h))
        click.echo("%s: %s" % (h, said.get("note") or "stopped %s process(es)" % said.get("stopped")))


COMMANDS: list = [ray]
