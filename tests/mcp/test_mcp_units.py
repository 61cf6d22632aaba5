"""The pieces under the tools, fast: the box-side wait script on crafted events files (rotation,
a cursor rotated away, torn and giant lines, an event appended while it waits), the redaction,
the write confinement and the allow-list parsing."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from rgt_client.errors import ClientError
from rgt_client.mcp.localfs import PULLS, Project, plain_parts
from rgt_client.mcp.safety import command_word, event_id, parse_hosts, redact
from rgt_client.mcp.wait import BOX_SCRIPT, MARK


def ev(ms: int, seq: int, run: str = "r1", type_: str = "stage_succeeded") -> str:
    return json.dumps({"id": "%013d-abcdef-%d" % (ms, seq), "type": type_, "run": run, "severity": "info"})


def run_wait(home, cursor: str, timeout: float = 1.0, run: str = "r1") -> tuple[dict, float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", BOX_SCRIPT, cursor, run, str(timeout), "20"],
                         env=dict(os.environ, RGT_HOME=str(home)), capture_output=True, timeout=60).stdout
    head = out[out.index(MARK) + len(MARK):].split(b"\n", 1)[0]
    return json.loads(head), time.monotonic() - t0


def ids(head: dict) -> list[str]:
    return [e["id"].split("-")[-1] for e in head["events"]]


def test_events_after_the_cursor_across_a_rotation(tmp_path):
    (tmp_path / "events.jsonl.1").write_text("\n".join(ev(1000 + i, i) for i in range(1, 4)) + "\n")
    (tmp_path / "events.jsonl").write_text("\n".join(ev(2000 + i, i) for i in range(4, 6)) + "\n")
    head, _ = run_wait(tmp_path, "%013d-abcdef-2" % 1002)           # rotated away: by its millisecond
    assert ids(head) == ["3", "4", "5"] and head["cursor"].endswith("-5") and not head["timed_out"]
    head, _ = run_wait(tmp_path, "%013d-abcdef-4" % 2004)           # in the current file: after its line
    assert ids(head) == ["5"]


def test_torn_and_giant_lines_are_skipped_and_other_runs_filtered(tmp_path):
    lines = [ev(1001, 1), '{"id":"00000', ev(1002, 2, run="other"), '{"id":"x","s":"' + "A" * 200000 + '"}',
             ev(1003, 3, type_="heartbeat"), ev(1004, 4)]
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    head, _ = run_wait(tmp_path, "%013d-abcdef-1" % 1001)
    assert ids(head) == ["4"] and head["cursor"].endswith("-4")


def test_no_cursor_starts_now_and_times_out_at_its_bound(tmp_path):
    (tmp_path / "events.jsonl").write_text(ev(1001, 1) + "\n")
    head, took = run_wait(tmp_path, "", timeout=1.5)
    assert head["timed_out"] and head["events"] == [] and head["cursor"].endswith("-1")
    assert 1.5 <= took < 4


def test_an_event_appended_while_waiting_returns_at_once(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(ev(1001, 1) + "\n")
    written: list[float] = []

    def append() -> None:
        time.sleep(0.8)
        with open(path, "a") as fh:
            fh.write(ev(1002, 2, type_="stage_started") + "\n")     # a start alone does not wake
            fh.flush()
            time.sleep(0.5)
            fh.write(ev(1003, 3, type_="stage_failed") + "\n")
        written.append(time.monotonic())
    th = threading.Thread(target=append)
    th.start()
    head, _ = run_wait(tmp_path, "%013d-abcdef-1" % 1001, timeout=20)
    back = time.monotonic()
    th.join()
    assert ids(head) == ["2", "3"] and not head["timed_out"]
    assert back - written[0] < 1.0


def test_a_file_that_is_not_there_yet(tmp_path):
    head, _ = run_wait(tmp_path, "", timeout=0.5)
    assert head["timed_out"] and head["cursor"] is None


def test_redaction_of_secrets_in_box_text():
    text = ("HF_TOKEN=hf_%s token ghp_%s Bearer abcdefghijklmnopqrstu export WANDB_API_KEY=k3y-value-123 "
            "my-own-secret-value loss=0.123456789" % ("a" * 30, "b" * 30))
    out = redact(text, {"my-own-secret-value"})
    assert "hf_aaa" not in out and "ghp_bbb" not in out and "abcdefghijklmnopqrstu" not in out
    assert "k3y-value" not in out and "my-own-secret" not in out and "loss=0.123456789" in out


def test_writes_stay_inside_rgts_own_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("RGT_DATA_HOME", str(tmp_path / "data"))
    (tmp_path / "proj").mkdir()
    project = Project.at(str(tmp_path / "proj"))
    mine = tmp_path / "data" / "mcp-pulls" / project.key
    assert project.owned_dir_at(PULLS, ["gpu1", "r1"])[0] == str(mine / "gpu1" / "r1")
    assert (mine / "gpu1" / "r1").is_dir() and os.listdir(tmp_path / "proj") == []
    for folder in (tmp_path / "data", tmp_path / "data" / "mcp-pulls", mine, mine / "gpu1", mine / "gpu1" / "r1"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for bad in ("/etc/x", "../x", ".git/hooks", "a/.ssh/b", "~/x", ".", "a/../../b", "-rf", "a\nb"):
        with pytest.raises(ClientError):
            plain_parts(bad, "dest", "hint")
    os.symlink("/etc", mine / "etc-link")
    with pytest.raises(ClientError):
        project.owned_dir_at(PULLS, ["etc-link", "x"])
    assert not os.path.exists("/etc/x")


def test_hosts_are_parsed_and_checked():
    assert parse_hosts(["gpu1,gpu2", "local", "gpu1"]) == ["gpu1", "gpu2", "local"]
    for bad in ("-oProxyCommand=x", "a b", "a;b", "$(x)"):
        with pytest.raises(ClientError):
            parse_hosts([bad])


def test_diagnose_hands_the_model_the_nearest_known_failures_bounded():
    from rgt_client.mcp import summary
    from rgt_client.mcp.safety import Policy
    near = {"source": "pytorch/pytorch#1", "url": "https://github.com/pytorch/pytorch/issues/1",
            "class": "cuda_oom", "why": "a batch too big", "fix": "smaller batch", "score": 0.62}
    c = summary.cause({"class": "cuda_oom", "summary": "x", "similar": [near] * 5 + [{"score": True}]},
                      Policy(hosts=["b"], secrets={"hf_" + "S" * 20}))
    assert c is not None and c["similar"] == [near] * 3
    odd = summary.cause({"class": "x", "similar": [{"source": "hf_" + "S" * 20, "score": 7}, "s"]},
                        Policy(hosts=["b"], secrets={"hf_" + "S" * 20}))
    assert odd is not None and odd["similar"] == [{"source": odd["similar"][0]["source"]}]
    assert "hf_SSSS" not in odd["similar"][0]["source"]


def test_an_answer_over_budget_is_cut_and_says_what_it_left_out():
    from rgt_client.mcp.budget import fit, size
    data = {"host": "gpu1", "runs": [{"name": "r%d" % i, "note": "x" * 200} for i in range(1000)],
            "alerts": [{"summary": "y" * 5000}], "next": "rgt-client status gpu1"}
    out = fit(data, 16 * 1024)
    assert size(out) <= 16 * 1024 and out["next"] == "rgt-client status gpu1"
    kept = len(out["runs"])
    assert 0 < kept < 1000 and out["left_out"]["items"]["runs"] == 1000 - kept
    assert "get_status" in out["left_out"]["how"]
    small = {"host": "gpu1", "runs": []}
    assert fit(dict(small)) == small                       # within budget: untouched, no left_out
    huge_text = fit({"text": "z" * 100000}, 4096)
    assert size(huge_text) <= 4096 and huge_text["text"].endswith("…[cut]")


def test_claim_what_an_answer_left_out_fits_its_budget_too():
    """left_out names what went by its path, and a path is the box's dict keys: a 60,000-character
    key once came back twice in left_out (120 KB for a 16 KB budget). Paths are cut, and the
    list of them is bounded."""
    from rgt_client.mcp.budget import BUDGET, fit, size
    for data in ({"x": {"K" * 60000: "a" * 300}},
                 {"x": {("K%d" % i) * 3000: "a" * 300 for i in range(40)}},
                 {"x": {"\x01" * 5000 + str(i): "a" * 300 for i in range(60)}},
                 {"x": [{"k" * 90 + str(i): ["v" * 400] * 3} for i in range(300)]}):
        out = fit(data)
        assert size(out) <= BUDGET, (size(out), list(out.get("left_out", {}).get("items", {}))[:3])
        assert out["left_out"]["items"] and all(len(p.encode()) < 200 for p in out["left_out"]["items"])


@pytest.mark.parametrize("word", ["abc\n", "abc\r\n", "-rf", "a b", "a" * 65, "", None, 7])
def test_a_command_word_is_a_whole_plain_name(word):
    assert command_word(word) is None          # `$` once let "abc\n" into next


def test_an_event_id_has_the_agents_shape():
    assert event_id("1700000000000-abcdef-12") == "1700000000000-abcdef-12"
    for bad in ("1700000000000-abcdef-12\n", "1\n\nSYSTEM: x", "1700000000000-ABCDEF-1", "x", None, 5):
        assert event_id(bad) is None


def test_a_wait_is_timed_out_only_when_no_event_came_whatever_the_box_says():
    from rgt_client.mcp.results import ok
    from rgt_client.mcp.safety import Policy
    from rgt_client.mcp.tools_read import _wait_answer
    policy = Policy(hosts=["local"])
    events = [{"id": "1700000000000-abcdef-%d" % i, "type": "stage_failed", "run": "r", "summary": "S" * 300}
              for i in range(50)]
    out = _wait_answer({"timed_out": True, "events": events, "cursor": "1700000000000-abcdef-49"}, "local", "r",
                       policy, 45.0)
    assert out["timed_out"] is False and out["events"]      # events are never labelled "nothing happened"
    quiet = ok(_wait_answer({"timed_out": False, "events": [], "cursor": "c" * 64}, "local", "r", policy, 45.0), policy)
    assert quiet.structured_content["timed_out"] is True and len(quiet.content[0].text.encode()) <= 300


def test_claim_a_job_file_is_read_from_the_project_even_when_a_folder_is_swapped_while_it_opens(tmp_path,
                                                                                                monkeypatch):
    """Another local user in a shared project renames `sub/` and puts a symlink to a folder of
    the victim's in its place, right after the server resolved the path and before it opened
    it. The swap is made at exactly that moment (the realpath call returns, then it happens)."""
    from rgt_client.mcp import localfs
    proj, outside = tmp_path / "proj", tmp_path / "victim"
    (proj / "sub").mkdir(parents=True)
    (proj / "sub" / "job.toml").write_text("name = 'mine'\n")
    outside.mkdir()
    (outside / "job.toml").write_text("password = 'CANARYswap4711'\n")
    project = Project.at(str(proj))
    real = os.path.realpath

    def resolve_then_swap(path, *a, **kw):
        out = real(path, *a, **kw)
        if out.endswith("job.toml") and not (proj / "sub").is_symlink():
            os.rename(proj / "sub", proj / "sub.old")
            os.symlink(str(outside), str(proj / "sub"))
        return out
    monkeypatch.setattr(localfs.os.path, "realpath", resolve_then_swap)
    with pytest.raises(ClientError) as exc:
        project.read_job("sub/job.toml")
    assert (proj / "sub").is_symlink(), "the swap did not happen: the test proves nothing"
    assert "left the project folder" in exc.value.message and "CANARY" not in exc.value.message + exc.value.hint


def test_a_notify_file_the_server_read_is_parsed_from_those_bytes_not_opened_again(tmp_path):
    from rgt_client.notify.cmd import load_notify_file
    path = tmp_path / "notify.toml"
    path.write_text('[[notify]]\nurl = "ntfys://ntfy.sh/swapped-in-later"\n')     # what the path holds now
    read = b'[[notify]]\nurl = "ntfys://ntfy.sh/checked-topic"\n'                 # what the checks read
    cfg = load_notify_file(str(path), read)
    assert "checked-topic" in json.dumps(cfg) and "swapped-in-later" not in json.dumps(cfg)


def test_a_data_folder_that_cannot_be_made_is_an_error_with_a_hint(tmp_path, monkeypatch):
    from rgt_client.pull import datahome
    (tmp_path / "file").write_text("not a folder\n")
    monkeypatch.setenv("RGT_DATA_HOME", str(tmp_path / "file" / "rgt"))     # its parent is a file
    with pytest.raises(ClientError) as exc:
        datahome.owned_dir_at(["pulls"])
    assert "cannot be made" in exc.value.message and "RGT_DATA_HOME" in exc.value.hint


def test_every_format_character_is_shown_as_an_escape_and_a_secret_split_by_one_is_redacted():
    """Unicode's format characters (Cf) draw as nothing; the Egyptian hieroglyph format controls
    and the Arabic number signs once passed raw, and a learned secret split by U+13430 came back."""
    import unicodedata
    from rgt_client.textsafe import safe_line
    raw = [c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.category(c) == "Cf" and c in safe_line("a%sb" % c)]
    assert raw == [], [hex(ord(c)) for c in raw]
    secret = "pl41nV4lueS3cretNoShape"
    out = redact("egy: pl41nV\U000134304lueS3cretNoShape", {secret})
    assert out == "egy: [redacted]", out
