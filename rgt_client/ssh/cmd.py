"""`rgt-client ssh-close HOST`: end rgt's shared ssh connection to a box now (it also ends by
itself a minute after the last call; rgt_client/sshmux.py)."""
from __future__ import annotations

import click

from rgt_client import options
from rgt_client.box import sshmux


@click.command("ssh-close")
@click.argument("hosts", nargs=-1, required=True)
@click.pass_context
def ssh_close(ctx: click.Context, hosts: tuple[str, ...]) -> None:
    """End rgt's shared ssh connection to HOST (ControlMaster; RGT_SSH_MULTIPLEX=0 turns it off)."""
    for host in hosts:
        t = options.target(ctx, host)
        if t.is_local:
            click.echo("%s: no ssh (it is this machine)" % host)
        elif sshmux.close(t.host, t.ssh_config, t.extra_ssh):
            click.echo("%s: shared ssh connection closed" % host)
        elif not sshmux.options(t.host, t.ssh_config):
            click.echo("%s: no shared connection (your ssh config manages Control*, or RGT_SSH_MULTIPLEX=0)" % host)
        else:
            click.echo("%s: no shared connection was open" % host)


COMMANDS: list = [ssh_close]
