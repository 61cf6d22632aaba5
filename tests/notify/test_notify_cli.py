"""`rgt-agent notify-set / notify-test` as real subprocesses, and the client's commands over `local`."""
from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
from click.testing import CliRunner

SECRET_TOPIC = "topic-Zq8secret"


def _set(agent, entries, **kw):
    return agent("notify-set", stdin=json.dumps({"notify": entries}).encode(), **kw)


def test_notify_set_writes_0600_and_shows_only_redacted(agent, rgt_home):
    res = _set(agent, [{"url": "ntfys://tk_tok123@ntfy.sh/%s" % SECRET_TOPIC, "deadman": "20m"}])
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert "ntfys://ntfy.sh/***" in out and SECRET_TOPIC not in out and "tk_tok123" not in out
    path = rgt_home / "secrets.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["notify"][0]["url"].endswith(SECRET_TOPIC) and data["notify"][0]["id"].startswith("n")


def test_notify_set_keeps_ids_for_unchanged_urls(agent, rgt_home):
    a, b = {"url": "ntfy://127.0.0.1:9/aaaa"}, {"url": "ntfy://127.0.0.1:9/bbbb"}
    _set(agent, [a])
    first = json.loads((rgt_home / "secrets.json").read_text())["notify"][0]["id"]
    _set(agent, [b, a])
    ids = [e["id"] for e in json.loads((rgt_home / "secrets.json").read_text())["notify"]]
    assert ids[1] == first and ids[0] != first


@pytest.mark.parametrize("payload,needle", [
    (b"not json", "not JSON"),
    (json.dumps({"notify": [{"url": "weird://x"}]}).encode(), "Apprise"),
    (json.dumps({"notify": [{"url": "ntfy://h/t", "min_severity": "loud"}]}).encode(), "min_severity"),
    (json.dumps({"notify": [{"url": "ntfy://h/t", "colour": "red"}]}).encode(), "unknown key colour"),
    (json.dumps({"notify": [{"url": "https://example.com/x"}]}).encode(), "cannot tell the service"),
    (json.dumps({"notify": [{"url": "tgram://tok/1/2"}]}).encode(), "one chat"),
])
def test_notify_set_refuses_bad_input_and_writes_nothing(agent, rgt_home, payload, needle):
    res = agent("notify-set", stdin=payload)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert err.startswith("Error: ") and "\nHint: " in err and needle in err
    assert "Traceback" not in err
    assert not (rgt_home / "secrets.json").exists()


def test_notify_test_reports_each_notifier(agent, receiver, receiver2):
    receiver2.default = (404, {}, b"no such hook")
    _set(agent, [{"url": "ntfy://127.0.0.1:%d/%s" % (receiver.port, SECRET_TOPIC)},
                 {"url": "json://127.0.0.1:%d/hook-%s" % (receiver2.port, SECRET_TOPIC)}])
    res = agent("notify-test", "--json")
    assert res.returncode == 1
    data = json.loads(res.stdout)
    assert [r["ok"] for r in data["results"]] == [True, False]
    assert data["results"][1]["status"] == 404 and "no such hook" in data["results"][1]["error"]
    assert SECRET_TOPIC not in res.stdout.decode() + res.stderr.decode()
    text = agent("notify-test").stdout.decode()
    assert text.splitlines()[0].startswith("ok ") and text.splitlines()[1].startswith("FAIL")


def test_notify_test_under_a_bare_interpreter_uses_urllib(agent, receiver):
    _set(agent, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port}])
    res = agent("notify-test", "--json", bare=True)          # python -S: no requests importable
    assert res.returncode == 0, res.stderr
    assert receiver.wait_for(1)[0].headers["User-Agent"].startswith("Python-urllib")


def test_notify_test_without_notifiers_says_how(agent):
    res = agent("notify-test")
    assert res.returncode == 2
    assert b"rgt-client notify-set" in res.stderr


# -- the client ---------------------------------------------------------------------------------
@pytest.fixture
def local_box(rgt_home, agent_pyz, monkeypatch, tmp_path):
    shutil.copy(agent_pyz, rgt_home / "rgt-agent.pyz")
    monkeypatch.setenv("RGT_HOME", str(rgt_home))
    monkeypatch.setenv("RGT_CLIENT_CONFIG_DIR", str(tmp_path / "client-config"))
    return rgt_home


def _toml(tmp_path, text):
    p = tmp_path / "notify.toml"
    p.write_text(text)
    return str(p)


def test_load_notify_file_validates_locally(tmp_path):
    from rgt_client.errors import ClientError
    from rgt_client.notify.cmd import load_notify_file
    ok = load_notify_file(_toml(tmp_path, '[[notify]]\nurl = "ntfys://ntfy.sh/t1"\nmin_severity = "warning"\n'
                                          'events = ["run_succeeded", "stage_failed"]\nheartbeat = "1h"\n'
                                          'deadman = "20m"\n\n[[notify]]\nurl = "pover://user@token"\n'))
    assert [e["url"] for e in ok["notify"]] == ["ntfys://ntfy.sh/t1", "pover://user@token"]   # Apprise: the box decides
    for text, needle in [("[[notify]]\nurl = 3\n", "no url"), ("x = 1\n", "top-level"),
                         ("[notify\n", "not valid TOML"), ("", "no [[notify]]"),
                         ('[[notify]]\nurl = "slack://a/b/c"\ndeadman = "5m"\n', "deadman")]:
        with pytest.raises(ClientError) as exc:
            load_notify_file(_toml(tmp_path, text))
        assert needle in exc.value.message and exc.value.code == 2


def test_client_notify_set_and_test_over_local(local_box, tmp_path, receiver):
    from rgt_client.cli import cli
    path = _toml(tmp_path, '[[notify]]\nurl = "ntfy://127.0.0.1:%d/%s"\n' % (receiver.port, SECRET_TOPIC))
    runner = CliRunner()
    res = runner.invoke(cli, ["notify-set", "local", path], obj={})
    assert res.exit_code == 0, res.output
    assert "1 notifier set" in res.output and "ntfy://127.0.0.1:%d/***" % receiver.port in res.output
    assert SECRET_TOPIC not in res.output
    res = runner.invoke(cli, ["notify-test", "local"], obj={})
    assert res.exit_code == 0, res.output
    assert res.output.startswith("ok ")
    assert receiver.wait_for(1)[0].path == "/" + SECRET_TOPIC


def test_client_notify_test_failure_exit_code(local_box, tmp_path, receiver):
    from rgt_client.cli import cli
    receiver.default = (500, {}, b"boom")
    path = _toml(tmp_path, '[[notify]]\nurl = "ntfy://127.0.0.1:%d/t"\n' % receiver.port)
    runner = CliRunner()
    assert runner.invoke(cli, ["notify-set", "local", path], obj={}).exit_code == 0
    res = runner.invoke(cli, ["notify-test", "local", "--json"], obj={})
    assert res.exit_code == 1
    assert json.loads(res.output)["results"][0]["status"] == 500


def test_client_notify_set_bad_file_touches_nothing(local_box, tmp_path):
    from rgt_client.cli import cli
    path = _toml(tmp_path, '[[notify]]\nurl = "ntfy://h/t"\nmin_severity = "loud"\n')
    res = CliRunner().invoke(cli, ["notify-set", "local", path], obj={})
    assert res.exit_code == 2
    assert "Error: " in res.output and "Hint: " in res.output
    assert not (local_box / "secrets.json").exists()


def _python38():
    import glob
    import subprocess
    for cand in glob.glob("/root/.pyenv/versions/3.8*/bin/python3.8") + [shutil.which("python3.8") or ""]:
        try:   # a pyenv shim exists but may not run
            if cand and subprocess.run([cand, "-c", "pass"], capture_output=True, timeout=10).returncode == 0:
                return cand
        except (OSError, subprocess.SubprocessError):
            continue
    return None


@pytest.mark.skipif(not _python38(), reason="no Python 3.8 interpreter on this machine")
def test_notify_test_on_python38_bare(agent, rgt_home, receiver):
    import subprocess
    from tests.conftest import REPO
    _set(agent, [{"url": "ntfy://127.0.0.1:%d/t" % receiver.port},
                 {"url": "json://127.0.0.1:%d/h" % receiver.port, "secret": "k"}])
    res = subprocess.run([_python38(), "-S", "-m", "boxagent", "notify-test", "--json"], capture_output=True,
                         env=dict(os.environ, RGT_HOME=str(rgt_home), PYTHONPATH=str(REPO)), timeout=60)
    assert res.returncode == 0, res.stderr
    assert [r["ok"] for r in json.loads(res.stdout)["results"]] == [True, True]
    assert len(receiver.wait_for(2)) == 2


def test_notify_set_without_apprise_refuses_other_schemes_and_says_how(agent, rgt_home):
    # python -S: no site-packages, so no Apprise, as on a bare box.
    res = _set(agent, [{"url": "mailto://user:pw@gmail.com"}], bare=True)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert "Apprise is not installed here" in err and "Hint: pip install apprise" in err
    assert "pw@" not in err and not (rgt_home / "secrets.json").exists()
