"""Where `pull` takes a run's files from: the box you named, or — for a Ray run whose files live
on the node that ran it (`[ray] files = "node"`) — that node's own agent, reached through the ssh
host `rgt-client ray up` recorded for it. The box's word on where is untrusted: the node must be
a box installed from this machine (hosts.json), named plainly, and the pull from it goes through
every check a pull from the box does (the same code). It reads the run from the shared RGT_HOME,
at the path the box you named uses (the Ray backend keeps RGT_HOME at one path on every node)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from rgt_client import exitcodes
from rgt_client.box import agentcall, hosts
from rgt_client.box.transport import Target
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line

_HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,199}$")


@dataclass
class Source:
    target: Target          # whose agent serves the manifest and the files
    on_node: bool
    said: str               # which, in words: "on the shared filesystem", "on node ... (ssh host ...)"


# The agent's own words when pull-info is asked on a box that does not hold the run's files.
ELSEWHERE = "files are on the Ray node that ran it"


def elsewhere(exc: ClientError) -> bool:
    return exc.code == exitcodes.USAGE and ELSEWHERE in exc.message


def said(where: Any, host: str) -> str:
    """Where pull-info on the box itself read the files (from its header's `where`)."""
    if isinstance(where, dict) and where.get("files") == "shared":
        return "on the shared filesystem of the Ray cluster (read by %s's agent)" % host
    return ""


def source(box: Target, run: str) -> Source:
    """Asked only once the box said the files are not there (a shared pull stays one round trip)."""
    ans = agentcall.ok(box, ["pull-where", run], "pull-where")
    where = agentcall.json_of(ans, "pull-where")
    if where.get("files") != "node":
        return Source(box, False, said(where, box.host))
    node = _text(where.get("host")) or _text(where.get("node")) or "?"
    ssh = where.get("ssh_host")
    if not isinstance(ssh, str) or not ssh:
        raise ClientError("run %s's files are on its Ray node (%s), and no ssh host is known for it" % (run, node),
                          "form the cluster with `rgt-client ray up` (it records each node's box), or copy "
                          "the files back in the job's last stage and use [ray] files = \"shared\"",
                          exitcodes.ERROR)
    if not _HOST.match(ssh) or not hosts.get(ssh):
        raise ClientError("%s says run %s's files are on %s, which is not a box installed from here; refused"
                          % (box.host, run, safe_line(ssh)[:80]),
                          "the node must be one of the boxes `rgt-client ray up` formed the cluster on "
                          "(installed with `rgt-client install`)", exitcodes.ERROR)
    folder = _node_folder(where.get("node_home"), hosts.target_for(ssh, box.ssh_config).home)
    if folder is not None:
        # The node kept the run's spec and its attempts in rgt's folder there (a task of rgt's
        # driver): that box's agent reads the run from it, no shared filesystem needed.
        node_box = hosts.target_for(ssh, box.ssh_config, folder)
        node_box.home_from = "rgt's folder on Ray node %s" % node
    elif where.get("node_home") is not None:
        raise ClientError("%s names %s as rgt's folder on Ray node %s, which is not one; refused"
                          % (box.host, safe_line(str(where.get("node_home")))[:120], node),
                          "rgt keeps a node's attempts in <that box's RGT_HOME>/ray-node/<tag> (set by "
                          "`rgt-client ray up`); check the head's agent", exitcodes.ERROR)
    else:
        node_box = hosts.target_for(ssh, box.ssh_config, box.home or _home(where.get("home")))
        node_box.home_from = "the shared RGT_HOME of %s" % box.host
    return Source(node_box, True, "on Ray node %s (ssh host %s)" % (node, ssh))


def _node_folder(v: Any, node_home: str | None) -> str | None:
    """rgt's folder on the node as the head names it, only where it is one: an absolute plain
    path `.../ray-node/<tag>`, inside the node box's own RGT_HOME where that is known here (the
    head is a box: it may not point the node's agent at any other folder)."""
    folder = _home(v)
    if folder is None or os.path.normpath(folder) != folder:
        return None
    parent, tag = os.path.split(folder)
    # fullmatch: `$` also matched before a last newline, and `<tag>\n` passed as a folder
    if os.path.basename(parent) != "ray-node" or not re.fullmatch(r"[0-9a-f]{12}", tag):
        return None
    # The node box's RGT_HOME unknown here: nothing says the folder is rgt's, so it is not taken
    # (any `/x/ray-node/<tag>`, in a /tmp another user writes, passed).
    if not node_home or os.path.dirname(parent) != os.path.normpath(node_home):
        return None
    return folder


def _home(v: Any) -> str | None:
    """The head's RGT_HOME as its agent said (where the client knows none): the shared path."""
    ok = isinstance(v, str) and v.startswith("/") and len(v) < 1000 and re.fullmatch(r"[A-Za-z0-9._/@+-]+", v)
    return v if ok else None


def _text(v: Any) -> str:
    return safe_line(v)[:80] if isinstance(v, str) else ""
