"""`rgt-client mcp`: the MCP server over stdio, for AI coding agents (docs/agents.md)."""
from __future__ import annotations

import os
import shlex
import sys

import click

from rgt_client import DISTRIBUTION, exitcodes
from rgt_client.errors import ClientError

COMMANDS: list = []


def install_line() -> str:
    """The one command that adds the SDK to the Python this client runs under: this checkout's
    extra when the client runs from a source checkout, else this project's distribution by its
    own name (the index's `rgt` is someone else's project, and its mcp extra was what got installed)."""
    py = shlex.quote(sys.executable)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.exists(os.path.join(root, "pyproject.toml")) and os.path.exists(os.path.join(root, "install.sh")):
        return "%s -m pip install -e %s" % (py, shlex.quote(root + "[mcp]"))
    return "%s -m pip install '%s[mcp]'" % (py, DISTRIBUTION)


def _sdk() -> None:
    try:
        from mcp.server import MCPServer  # noqa: F401 - only checking it is there (and 2.x)
    except ImportError as exc:
        raise ClientError("the MCP server needs the `mcp` Python SDK (2.x), which is not installed (%s)" % exc,
                          install_line(), exitcodes.USAGE)


@COMMANDS.append
@click.command("mcp")
@click.option("--hosts", "hosts", multiple=True, metavar="H1,H2",
              help="Hosts the server may reach (ssh aliases; `local` too only if named). Required, "
                   "or --hosts-file.")
@click.option("--hosts-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The allow-list from a file: one host per line, or {\"hosts\": [...]}.")
@click.option("--project", "project", type=click.Path(file_okay=False, exists=True), default=None, metavar="DIR",
              help="The project folder: tools read job files only inside it, and write pulls and reports "
                   "only into rgt's own data folder for it, outside the project ($RGT_DATA_HOME, else "
                   "~/.local/share/rgt; default: the folder the server starts in).")
@click.option("--read-only", is_flag=True, help="Expose only the read tools (status, wait, logs, "
                                                "diagnose, platforms): nothing on a box changes.")
@click.option("--ssh-config", "ssh_config", type=click.Path(dir_okay=False), metavar="FILE",
              help="The ssh config the server uses (as rgt-client --ssh-config): an MCP client that starts "
                   "the server with a minimal environment drops RGT_SSH_CONFIG.")
@click.pass_context
def mcp_command(ctx: click.Context, hosts: tuple[str, ...], hosts_file: str | None, project: str | None,
                read_only: bool, ssh_config: str | None = None) -> None:
    """Serve rgt to an AI coding agent over MCP (stdio): bounded waits, causes, verified pulls.
    Claude Code: `claude mcp add rgt -- rgt-client mcp --hosts gpu1`."""
    from rgt_client.mcp.localfs import Project
    from rgt_client.mcp.safety import Policy, env_secrets, load_hosts_file, parse_hosts
    allowed = parse_hosts(list(hosts) + (load_hosts_file(hosts_file) if hosts_file else []))
    if not allowed:
        raise ClientError("no host allowed: the server would refuse every call",
                          "name them: rgt-client mcp --hosts gpu1,gpu2 (add `local` for this machine)",
                          exitcodes.USAGE)
    _sdk()
    from rgt_client.mcp.server import build
    if ssh_config:
        ssh_config = os.path.abspath(os.path.expanduser(ssh_config))
    policy = Policy(hosts=allowed, read_only=read_only, ssh_config=ssh_config or (ctx.obj or {}).get("ssh_config"),
                    secrets=env_secrets(), project=Project.at(project or os.getcwd()))
    build(policy).run("stdio")
