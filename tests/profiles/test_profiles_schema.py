"""Every shipped profile validates; malformed ones are refused with the path of the problem."""
from __future__ import annotations

import re

import pytest

from rgt_client import exitcodes
from rgt_client.profiles import catalog as P
from rgt_client.errors import ClientError

MINIMAL = 'platform = "Mine"\nkind = "ssh-rental"\nverified = false\n'

SHIPPED = ("autodl", "runpod", "vastai", "lambda", "paperspace", "matpool", "gpushare", "featurize",
           "lanrui", "generic-ssh", "slurm", "kubernetes", "local")


def test_all_thirteen_profiles_are_shipped():
    assert sorted(P.list_profiles()) == sorted(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_validates(name):
    prof = P.load_profile(name)
    assert prof["name"] == name
    assert prof["kind"] in P.KINDS
    assert prof.get("provenance"), "each profile says where its facts come from"
    if prof["kind"] != "local":
        assert prof.get("teardown"), "every rented kind names its stop verbs"
    assert prof.get("survival"), "every profile says what survives"


def test_only_autodl_is_field_verified():
    # ../shared/platform-facts.md: only AutoDL was confirmed on the platform.
    verified = [n for n in SHIPPED if P.load_profile(n)["verified"]]
    assert verified == ["autodl"]


def test_user_profile_by_path_gets_its_file_name(write_profile):
    prof = P.load_profile(write_profile(MINIMAL, name="my-box"))
    assert prof["name"] == "my-box" and prof["platform"] == "Mine"


BAD = [
    # (TOML text appended to MINIMAL or replacing it, expected "where: message")
    (MINIMAL + '[[teardown]]\nname = "stop"\nstops_billing = true\nirreversible = "yes"\ndestroys = []\n',
     "teardown[0].irreversible: expected true or false"),
    (MINIMAL + 'colour = "blue"\n', "colour: unknown key"),
    ('platform = "x"\nverified = true\n', "kind: missing (required)"),
    (MINIMAL.replace("ssh-rental", "ssh"), "kind: expected one of ssh-rental, cloud-api, slurm, kubernetes, local"),
    (MINIMAL + '[[danger_clock]]\nwhat = "released"\nafter = "15 days"\n',
     "danger_clock[0].after: expected a duration like 30s, 6h or 15d"),
    (MINIMAL + '[[rule]]\nclass = "disk_full"\npattern = "(unclosed"\nremediation = "x"\n',
     "rule[0].pattern: not a valid regular expression"),
    (MINIMAL + '[[rule]]\nclass = "Disk Full"\npattern = "x"\nremediation = "x"\n',
     "rule[0].class: expected a snake_case name"),
    (MINIMAL + '[inode_caps]\n"/root/autodl-fs" = "200K"\n',
     'inode_caps["/root/autodl-fs"]: expected a whole number above 0'),
    (MINIMAL + '[ssh]\nuser = "root"\nport = 22\n', "ssh.port: unknown key"),
    (MINIMAL + '[[survival]]\ntier = "disk"\npath = "/"\nsurvives_stop = true\n',
     "survival[0].survives_destroy: missing (required)"),
    (MINIMAL + 'watch = "/data"\n', "watch: expected a list of strings"),
    (MINIMAL + '[thresholds]\ndisk_warn_pct = "90"\n', "thresholds.disk_warn_pct: expected a number"),
    (MINIMAL + '[proxy.env]\n"bad name" = "x"\n', 'proxy.env["bad name"]: expected an environment variable name'),
    (MINIMAL + '[spot]\ngrace_s = 5\n', "spot.signal: missing (required)"),
    (MINIMAL + 'verified = true\n', "not valid TOML"),  # a duplicate key is a TOML error
]


@pytest.mark.parametrize("text,problem", BAD, ids=[b[1].split(":")[0] for b in BAD])
def test_malformed_profile_refused_with_the_path_of_the_problem(write_profile, text, problem):
    path = write_profile(text)
    with pytest.raises(ClientError) as info:
        P.load_profile(path)
    assert info.value.message.startswith(path + ": ")
    assert problem in info.value.message
    assert info.value.hint


def test_shipped_profile_error_names_profiles_dir(tmp_path, monkeypatch):
    (tmp_path / "x.toml").write_text(MINIMAL + '[[teardown]]\nname = "a"\nstops_billing = true\n'
                                     'irreversible = 1\ndestroys = []\n')
    monkeypatch.setenv("RGT_PROFILES_DIR", str(tmp_path))
    with pytest.raises(ClientError) as info:
        P.load_profile("x")
    # The exact form the docs promise.
    assert info.value.message == "profiles/x.toml: teardown[0].irreversible: expected true or false"


def test_table_after_array_of_tables_trap(write_profile):
    """A top-level key written after [[danger_clock]] belongs to that table in TOML: the
    strict schema catches it instead of silently dropping the user's conveniences."""
    text = MINIMAL + '[[danger_clock]]\nwhat = "x"\nafter = "1d"\n\nconveniences = ["tmux"]\n'
    with pytest.raises(ClientError, match=r"danger_clock\[0\]\.conveniences: unknown key"):
        P.load_profile(write_profile(text))


def test_an_unknown_threshold_is_refused_with_the_agents_own_names(write_profile):
    with pytest.raises(ClientError, match="thresholds.disk_low_pctt: unknown threshold"):
        P.load_profile(write_profile(MINIMAL + "[thresholds]\ndisk_low_pctt = 80\n"))


def test_unknown_profile_name_is_a_usage_error():
    with pytest.raises(ClientError) as info:
        P.load_profile("autodll")
    assert info.value.code == exitcodes.USAGE
    assert "autodl" in info.value.hint


def test_missing_profile_file_is_a_usage_error(tmp_path):
    with pytest.raises(ClientError) as info:
        P.load_profile(str(tmp_path / "nope.toml"))
    assert info.value.code == exitcodes.USAGE


def test_wrong_name_inside_shipped_file(tmp_path, monkeypatch):
    (tmp_path / "x.toml").write_text('name = "y"\n' + MINIMAL)
    monkeypatch.setenv("RGT_PROFILES_DIR", str(tmp_path))
    with pytest.raises(ClientError, match=re.escape('profiles/x.toml: name: expected "x"')):
        P.load_profile("x")


def test_schema_doc_names_every_key():
    """docs/profile-schema.md documents every key the validator accepts."""
    from pathlib import Path
    from rgt_client.profiles import schema as S
    doc = (Path(__file__).resolve().parents[2] / "docs" / "profile-schema.md").read_text(encoding="utf-8")
    tables = [S.TOP, S.SSH, S.SURVIVAL, S.TEARDOWN, S.DANGER, S.SPOT, S.RULE, S.PROXY, S.HF, S.DETECT]
    missing = sorted({k for t in tables for k in t if "`%s`" % k not in doc})
    assert not missing, "undocumented keys: %s" % missing


def test_schema_doc_example_validates(tmp_path):
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "profile-schema.md").read_text(encoding="utf-8")
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "lab.toml"
    path.write_text(example, encoding="utf-8")
    assert P.load_profile(str(path))["inode_caps"] == {"/data": 500000}
