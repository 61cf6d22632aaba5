"""The client's side of cost over the real loopback sshd: install's cost flags (only what they
name changes; bad values stop before the box is touched; a budget with no price left is the box's
Error + Hint, exit 2), the status and patrol lines, and a verified pull recorded on the box."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt_client import exitcodes
from tests.client.conftest import Cli, read_status, stop_daemon, wait_for

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def box(sshd, tmp_path_factory):
    """One box installed with a price and a budget, a run with artifacts run to its end."""
    base = tmp_path_factory.mktemp("cost")
    home, work = base / "box home", base / "work"
    work.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RGT_CLIENT_CONFIG_DIR", str(base / "client-config"))
        mp.delenv("RGT_HOME", raising=False)
        rgt = Cli(sshd.config)
        first = rgt("install", "rgt-box", "--home", str(home), "--sample-every", "0.5s", "--price", "2.49",
                    "--budget", "50", "--currency", "eur")
        config = json.loads((home / "config.json").read_text())
        job = base / "job.toml"
        job.write_text('name = "r1"\nworkdir = %s\n[[stage]]\nname = "train"\nrun = "echo w > model.pt"\n'
                       '[artifacts]\ninclude = ["model.pt"]\n' % json.dumps(str(work)))
        rgt("run", "rgt-box", str(job), "--home", str(home))
        wait_for(lambda: any(r.get("state") == "succeeded" for r in read_status(home).get("runs") or []), 30)
        yield {"rgt": rgt, "home": home, "base": base, "install": first, "config": config}
    stop_daemon(home)


def test_install_sets_and_shows_the_price(box):
    assert box["install"].exit_code == 0, box["install"].output
    assert "  cost     2.49 EUR/h; idle warning after 30m; budget 50.00 EUR" in box["install"].stdout
    assert box["config"]["cost"] == {"price_per_hour": 2.49, "budget": 50.0, "currency": "EUR"}


@pytest.mark.slow
def test_install_with_only_a_price_changes_only_the_price(box):
    rgt, home = box["rgt"], box["home"]
    res = rgt("install", "rgt-box", "--home", str(home), "--sample-every", "0.5s", "--price", "3")
    assert res.exit_code == 0, res.output
    after = json.loads((home / "config.json").read_text())
    assert after == dict(box["config"], cost=dict(box["config"]["cost"], price_per_hour=3.0))
    assert "  cost     3.00 EUR/h; idle warning after 30m; budget 50.00 EUR" in res.stdout
    # an install with no cost flag keeps every cost setting; everything else is install's as before
    again = rgt("install", "rgt-box", "--home", str(home), "--sample-every", "0.5s")
    assert again.exit_code == 0, again.output
    assert json.loads((home / "config.json").read_text()) == after
    restored = rgt("install", "rgt-box", "--home", str(home), "--sample-every", "0.5s", "--price", "2.49")
    assert restored.exit_code == 0 and json.loads((home / "config.json").read_text()) == box["config"]


def test_a_budget_left_without_a_price_is_refused_by_the_box(box):
    rgt, home = box["rgt"], box["home"]
    before = (home / "config.json").read_text()
    res = rgt("install", "rgt-box", "--home", str(home), "--price", "0")
    assert res.exit_code == exitcodes.USAGE, res.output
    assert "Error: install on rgt-box: config.cost.budget needs a price" in res.stderr
    assert "Hint: set both: rgt-client install HOST --price 2.49 --budget 50" in res.stderr
    assert (home / "config.json").read_text() == before
    assert read_status(home)["agent"]["running"] is True


@pytest.mark.parametrize("flag, value, word", [("--price", "abc", "--price: expected an amount"),
                                               ("--stop-deadline", "next week", "--stop-deadline"),
                                               ("--currency", "euros", "--currency")])
def test_bad_cost_flags_stop_before_the_box_is_touched(rgt, client_config, flag, value, word):
    res = rgt("install", "no-such-host.invalid", flag, value)
    assert res.exit_code == exitcodes.USAGE, res.output
    assert res.stderr.startswith("Error: %s" % word) and "\nHint: " in res.stderr
    assert "cannot reach" not in res.output and "uploading" not in res.output


def test_status_and_patrol_show_what_the_box_costs(box):
    rgt, home = box["rgt"], box["home"]
    res = rgt("status", "rgt-box", "--home", str(home))
    assert res.exit_code == 0, res.output
    cost_line = next(ln for ln in res.stdout.splitlines() if ln.startswith("  cost    "))
    assert " paid since " in cost_line and "EUR at 2.49 EUR/h · budget 50.00 EUR (" in cost_line
    assert any(ln.startswith("  cost      ") and " paid, " in ln and ln.endswith(" EUR")
               for ln in res.stdout.splitlines())          # the run's own cost
    data = json.loads(rgt("status", "rgt-box", "--home", str(home), "--json").stdout)
    assert data["cost"]["price_per_hour"] == 2.49 and data["runs"][0]["cost"]["hours"] >= 0
    patrol = rgt("patrol", "rgt-box", "--home", str(home))
    assert " EUR" in patrol.stdout, patrol.output


def test_a_verified_pull_is_recorded_on_the_box(box):
    rgt, home, dest = box["rgt"], box["home"], box["base"] / "pulled"
    res = rgt("pull", "rgt-box", "r1", str(dest), "--home", str(home), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["recorded_on_box"] is True
    rec = json.loads((home / "runs" / "r1" / "pull_verified.json").read_text())
    sha = json.loads((dest / "PULL_VERIFIED.json").read_text())["manifest_sha256"]
    assert rec["manifest_sha256"] == sha and rec["matches_box_manifest"] is True
    (home / "runs" / "r1" / "pull_verified.json").unlink()
    # `verify` alone records it too, on the host the pull came from (what install remembered)
    ver = rgt("verify", str(dest), "--json")
    assert ver.exit_code == 0 and json.loads(ver.stdout)["recorded_on_box"] is True, ver.output
    assert (home / "runs" / "r1" / "pull_verified.json").exists()


def test_a_box_that_cannot_record_never_fails_the_verify(box, tmp_path):
    dest = box["base"] / "pulled"
    meta = dest / ".rgt" / "pull.json"
    facts = json.loads(meta.read_text())
    copy = tmp_path / "copy"
    import shutil
    shutil.copytree(dest, copy)
    (copy / ".rgt" / "pull.json").write_text(json.dumps(dict(facts, host="no-such-host.invalid")))
    res = box["rgt"]("verify", str(copy))
    assert res.exit_code == 0, res.output
    assert "note: the verified pull was not recorded on no-such-host.invalid" in res.stderr
    assert Path(copy / "PULL_VERIFIED.json").exists()
