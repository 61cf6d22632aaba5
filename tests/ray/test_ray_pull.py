"""A Ray run whose files live on the node that ran it (`[ray] files = "node"`): the box the user
talks to refuses to hash what IT sees at the workdir's path; `rgt-client pull HEAD RUN` asks it
where the files are and takes the manifest (built and hashed there) and the files from that node's
own agent, through the ssh host `ray up` recorded for the node, with every check of a pull.

Real parts: the session's two-node Ray cluster on loopback, a real daemon, the real sshd with two
"boxes" (aliases rgt-box and rgt-box2), ray-hosts.json as `ray up` writes it (each Ray node id ->
its box). Each node keeps rgt's attempt files in a folder of its own (`<box home>/ray-node/<tag>`,
as `ray up` sets it), and the daemon runs from the built agent, as on an installed box: the run's
spec and the agent reach the node through rgt's driver, and the node's agent, reached as its ssh
host, reads the run from that folder, builds and hashes the manifest there. On one machine both
nodes see one disk for the WORKDIR, so what is shown is which agent builds and serves the
manifest, and that a file on the node that no longer matches its manifest is refused."""
from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from tests.clirunner import Cli
from tests.realbox import job, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ssh, pytest.mark.xdist_group("ray")]

WRITE = 'sleep 3; mkdir -p out$A && head -c 200000 /dev/urandom > out$A/model.bin && echo "$A" > out$A/cell.txt'


@pytest.fixture
def cluster_box(box, sshd, agent_pyz, client_config, ray_cluster, tmp_path):
    """A daemon beside the head (its RGT_HOME the one every node shares), the two nodes as the
    boxes rgt-box (head) and rgt-box2 (worker), rgt-box2 installed with a home of its own."""
    box.env.update(RGT_RAY_POLL="0.2", RGT_RAY_EXIT_GRACE="1")
    box.home.mkdir(parents=True, exist_ok=True)
    shutil.copy(agent_pyz, box.home / "rgt-agent.pyz")
    own = ray_cluster.node_homes[ray_cluster.worker_name].parent      # the worker box's RGT_HOME
    client_config.mkdir(parents=True, exist_ok=True)
    (client_config / "hosts.json").write_text(json.dumps({"hosts": {
        "rgt-box": {"home": str(box.home), "python": sys.executable},
        "rgt-box2": {"home": str(own), "python": sys.executable}}}))
    (box.home / "ray-hosts.json").write_text(json.dumps({ray_cluster.head_id: "rgt-box",
                                                         ray_cluster.worker_id: "rgt-box2"}))
    box.cluster = ray_cluster
    box.daemon(pyz=box.home / "rgt-agent.pyz")
    return box


def test_a_run_on_the_worker_node_is_pulled_from_that_nodes_agent_and_verified(sshd, cluster_box, tmp_path):
    box = cluster_box
    spec = job("nf", box.workdir, {"name": "s", "run": WRITE}, backend="ray", gpus=4,
               ray={"address": box.cluster.dashboard, "files": "node"}, artifacts={"include": ["out*/**"]},
               matrix={"A": ["1", "2"]})
    assert box.submit(spec).returncode == 0
    placed = {}
    for name in ("nf-1", "nf-2"):
        assert box.wait_run(name, timeout=120)["state"] == "succeeded", box.diagnostics()
        placed[name] = wait_for(lambda: (lambda p: p if p.get("state") == "SUCCEEDED" else None)(
            (box.stage(name, "s").get("placement") or {})), 15, "Ray's end state in status")
    by_box = {p["ssh_host"]: name for name, p in placed.items()}
    assert sorted(by_box) == ["rgt-box", "rgt-box2"], placed        # one cell per node
    run = by_box["rgt-box2"]                                         # the cell the worker ran
    # The daemon did not hash what the head sees at the workdir's path.
    assert not (box.home / "runs" / run / "manifest.json").exists()
    done = next(e for e in box.events("run_succeeded") if e["run"] == run)
    assert any("files are on its Ray node" in ev for ev in done["evidence"]), done     # 0 files here, and why
    cli = Cli(sshd.config)

    # Asked directly, the head refuses to build a manifest of another disk, naming the node.
    direct = box.agent("pull-info", run)
    assert direct.returncode == 2 and "files are on the Ray node that ran it (rgt-box2)" in direct.stderr, direct.stderr

    dest = tmp_path / "pulled"
    res = cli("pull", "rgt-box", run, str(dest))
    assert res.exit_code == 0, res.output
    assert "on Ray node" in res.stderr and "(ssh host rgt-box2)" in res.stderr, res.stderr
    # (both cells' folders match out*/**: on this one machine the two nodes share one disk)
    assert res.stdout.startswith("OK 4/4 files") and "(verified on Ray node" in res.stdout, res.stdout
    n = run.rsplit("-", 1)[1]
    assert (dest / ("out%s" % n) / "model.bin").read_bytes() == (box.workdir / ("out%s" % n) / "model.bin").read_bytes()
    # built and hashed by the node's agent, in rgt's folder on that node (never on the head)
    assert not (box.home / "runs" / run / "manifest.json").exists()
    (on_node,) = box.cluster.node_homes[box.cluster.worker_name].glob("*/runs/%s/manifest.json" % run)
    manifest = json.loads(on_node.read_text())
    assert {"out%s/cell.txt" % n, "out%s/model.bin" % n} <= {f["path"] for f in manifest["files"]}
    assert json.loads((dest / ".rgt" / "pull.json").read_text())["where"].startswith("on Ray node")

    # A file on the node changed behind its manifest (same size, same mtime: the manifest keeps
    # its hash) is refused: nothing about the node is trusted more than a box.
    target = box.workdir / ("out%s" % n) / "model.bin"
    st = target.stat()
    data = bytearray(target.read_bytes())
    data[0] ^= 0xFF
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = cli("pull", "rgt-box", run, str(tmp_path / "again"))
    assert again.exit_code == 4, again.output
    assert "CHANGED" in again.stdout and "out%s/model.bin" % n in again.stdout, again.stdout
    assert "NOT safe to tear down" in again.stderr + again.stdout

    # The head is a box: it may not point the node's agent at a folder other than rgt's own
    # there (a planted spec elsewhere would name another workdir to read).
    pid_file = box.home / "runs" / run / "stages" / "s.1.pid"
    for planted in ("/etc", str(tmp_path / "elsewhere" / "ray-node" / "0123456789ab")):
        pid_file.write_text(json.dumps(dict(json.loads(pid_file.read_text()), node_home=planted)))
        refused = cli("pull", "rgt-box", run, str(tmp_path / "planted"))
        assert refused.exit_code == 1 and "which is not one; refused" in refused.stderr, refused.output
        assert not (tmp_path / "planted" / ("out%s" % n)).exists()


def test_a_node_that_is_not_a_box_installed_here_is_refused(sshd, cluster_box, tmp_path):
    box = cluster_box
    # the box's word on where the files are is untrusted: a node named as an unknown ssh host
    (box.home / "ray-hosts.json").write_text(json.dumps({box.cluster.head_id: "evil-host",
                                                         box.cluster.worker_id: "evil-host"}))
    spec = job("nx", box.workdir, {"name": "s", "run": "mkdir -p o && echo x > o/f"}, backend="ray", gpus=1,
               ray={"address": box.cluster.dashboard, "files": "node"}, artifacts={"include": ["o/**"]})
    assert box.submit(spec).returncode == 0
    assert box.wait_run("nx", timeout=120)["state"] == "succeeded", box.diagnostics()
    wait_for(lambda: (box.stage("nx", "s").get("placement") or {}).get("ssh_host"), 15, "the node's ssh host")
    res = Cli(sshd.config)("pull", "rgt-box", "nx", str(tmp_path / "p"))
    assert res.exit_code == 1, res.output
    assert "Error: rgt-box says run nx's files are on evil-host, which is not a box installed from here; refused" \
        in res.stderr, res.stderr
    assert "Hint: " in res.stderr and not (tmp_path / "p" / "o").exists()
