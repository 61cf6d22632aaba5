"""The warnings built from profiles: install's first-contact block and verify's teardown gate."""
from __future__ import annotations

import pytest

from rgt_client.profiles import catalog as P


def test_autodl_first_contact_names_the_15_day_release():
    text = P.first_contact(P.load_profile("autodl"))
    assert "15 days" in text and "auto-released" in text
    assert "释放 release" in text and "IRREVERSIBLE" in text and "/root/autodl-tmp" in text
    assert "keep checkpoints in /root/autodl-fs" in text
    assert "verified on the platform" in text


def test_unverified_profile_says_so_in_first_contact():
    text = P.first_contact(P.load_profile("runpod"))
    assert "NOT verified" in text and "public RunPod docs" in text
    assert "no scp/sftp/rsync" in text  # the proxied-SSH trap


def test_vastai_gate_says_a_stopped_disk_still_bills():
    text = P.teardown_gate(P.load_profile("vastai"), True, None)
    assert text.startswith("Safe to tear down")
    assert "a stopped disk still bills" in text
    assert "destroy: stops billing; IRREVERSIBLE" in text


def test_gate_refuses_when_not_verified_and_names_the_irreversible_verb():
    text = P.teardown_gate(P.load_profile("autodl"), False, "2 files differ from the manifest")
    assert text.startswith("NOT safe to tear down: 2 files differ from the manifest.")
    assert "Do not 释放 release yet" in text
    assert "Safe to tear down" not in text


def test_lambda_has_no_stop_state():
    prof = P.load_profile("lambda")
    assert [t["name"] for t in prof["teardown"]] == ["terminate"]
    assert "no stop state" in P.first_contact(prof).lower()


def test_local_has_nothing_to_tear_down():
    assert P.teardown_gate(P.load_profile("local"), True) == "Nothing to tear down on this machine."


@pytest.mark.parametrize("name", P.list_profiles())
def test_every_profile_renders_both_texts(name):
    prof = P.load_profile(name)
    assert prof["platform"] in P.first_contact(prof) or name in P.first_contact(prof)
    P.teardown_gate(prof, True)
    P.teardown_gate(prof, False, None)


def test_checkpoint_advice_when_nothing_survives():
    advice = P.checkpoint_advice(P.load_profile("generic-ssh"))
    assert "nothing on this box is known to survive" in advice


def test_durations():
    assert P.humanize_duration("15d") == "15 days" and P.humanize_duration("1h") == "1 hour"
    assert P.duration_s("6h") == 21600 and P.duration_s("bad") == 0.0
