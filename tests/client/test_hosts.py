"""The client remembers each host's home and python; parallel installs never lose an entry."""
from __future__ import annotations

import threading

from rgt_client.box import hosts


def test_remember_then_target_uses_it_and_flags_win():
    hosts.remember("box1", home="/data/rgt", python="/opt/py/bin/python3")
    t = hosts.target_for("box1", "/cfg")
    assert (t.home, t.python, t.ssh_config) == ("/data/rgt", "/opt/py/bin/python3", "/cfg")
    t = hosts.target_for("box1", None, home="/other", python="python3.9")
    assert (t.home, t.python) == ("/other", "python3.9")
    assert hosts.target_for("never-seen").home is None


def test_parallel_remember_keeps_every_host():
    threads = [threading.Thread(target=hosts.remember, args=("h%d" % i,), kwargs={"home": "/h%d" % i})
               for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(hosts.load_all()) == sorted("h%d" % i for i in range(16))


def test_local_uses_rgt_home_env(monkeypatch):
    monkeypatch.setenv("RGT_HOME", "/tmp/x-home")
    assert hosts.target_for("local").local_home() == "/tmp/x-home"


def test_corrupt_hosts_file_is_ignored(client_config):
    client_config.mkdir(parents=True, exist_ok=True)
    (client_config / "hosts.json").write_text("{not json")
    assert hosts.get("box") == {}
    hosts.remember("box", home="/r")
    assert hosts.get("box")["home"] == "/r"


def test_local_home_is_flag_then_env_then_default_never_the_remembered_one(monkeypatch, tmp_path):
    """A home remembered by an earlier `install local --home X` once won over ~/.rgt with RGT_HOME
    unset: commands reached another agent than the one the docs promise."""
    monkeypatch.setenv("HOME", str(tmp_path))
    hosts.remember("local", home="/somewhere/else", python="/usr/bin/python3")
    t = hosts.target_for("local")
    assert (t.local_home(), t.home_from) == (str(tmp_path / ".rgt"), "the default ~/.rgt")
    monkeypatch.setenv("RGT_HOME", str(tmp_path / "env-home"))
    t = hosts.target_for("local")
    assert (t.local_home(), t.home_from) == (str(tmp_path / "env-home"), "$RGT_HOME")
    t = hosts.target_for("local", home=str(tmp_path / "flag"))
    assert (t.local_home(), t.home_from) == (str(tmp_path / "flag"), "--home")


def test_every_write_says_which_home_and_why(monkeypatch, tmp_path):
    from tests.clirunner import Cli
    monkeypatch.setenv("HOME", str(tmp_path))
    job = tmp_path / "j.toml"
    job.write_text('name = "r1"\n[[stage]]\nname = "s"\nrun = "true"\n')
    for cmd in (["run", "local", str(job)], ["cancel", "local", "r1"], ["resume", "local", "r1"]):
        res = Cli()(*cmd)
        assert "local: home %s (the default ~/.rgt)" % (tmp_path / ".rgt") in res.stderr, (cmd, res.stderr)
        assert res.exit_code == 3 and "not installed on local (home %s)" % (tmp_path / ".rgt") in res.stderr
