"""Patterns that cannot freeze the loop: catastrophic user regexes are refused at submit (job,
profile, `triage --rules`), a spec from before the check never runs one, and a user pattern
sees at most USER_LINE_MAX characters of a line."""
from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

from boxagent.engine import jobspec
from boxagent.triage import StageWatch
from boxagent.triage.builtin_rules import BUILTIN_RULES
from boxagent.triage.regexsafe import unsafe_reason
from boxagent.triage.rules import build_rules, validate_rule
from boxagent.triage.text import USER_LINE_MAX
from tests.triage.conftest import watch_file

REPO = Path(__file__).resolve().parents[2]

ATTACKS = [
    ("nested_plus_anchored", r"^(a+)+$"),
    ("nested_star", r"(a*)*b"),
    ("identical_alternatives", r"(a|a)*b"),
    ("overlapping_alternatives", r"(a|b|ab)*c"),
    ("dot_star_bounded_20", r"(.*a){20}"),
    ("lazy_dot_bounded", r"(.*?,){11}P"),
    ("word_optional_space", r"(\w+\s?)+$"),
    ("number_with_optional_dot", r"(\d+\.?\d*)+x"),
    ("two_adjacent_plus", r"(x+x+)+y"),
    ("nested_group_repeat", r"((ab)+)+c"),
    ("bounded_inner_repeat", r"(a{1,2})+b"),
    ("space_then_word", r"(?:\s*\w+)+:"),
    ("backreference_in_repeat", r"(a+)\1+b"),
    ("inside_a_lookahead", r"x(?=(a+)+$)"),
    ("case_insensitive_overlap", r"(?i)(A+a)+$"),
]
SAFE = [r"(a|ab)*c", r"(a+b)+c", r"(?:[^\"\\]|\\.)*\"", r"(\S+\s+){3}", r"([^,]*,){5}",
        r"(?:\w+\.)*\w+Error", r"(.*a){2}", r"(\w|\d)+$", r"(a?)+b", r"(?:(?:\d+\.)+\d+)",
        r".*foo.*bar", r"(?i)fatal|error", r"Epoch (?P<done>\d+)/(?P<total>\d+)", r"(?:[a-z]+[0-9]+)+"]


@pytest.mark.parametrize("name,pattern", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_catastrophic_shape_is_refused(name, pattern):
    why = unsafe_reason(pattern)
    assert why is not None and why.startswith("can take exponential time") and "safer: " in why


@pytest.mark.parametrize("pattern", SAFE)
def test_safe_shape_is_accepted(pattern):
    assert unsafe_reason(pattern) is None


def test_the_freeze_from_the_field_is_refused_before_it_runs():
    """`^(a+)+$` on 40 a's and a "!" ran for hours in the daemon's loop; 24 a's already take a
    second here. The check itself is instant."""
    t0 = time.perf_counter()
    assert unsafe_reason(r"^(a+)+$") is not None
    assert time.perf_counter() - t0 < 0.05


def _patterns_in_tests():
    """Every string given as a *pattern key or argument in the test suite (ast, not regexes)."""
    out = []
    for p in (REPO / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            pairs = []
            if isinstance(node, ast.Dict):
                pairs = [(k.value, v) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)]
            elif isinstance(node, ast.Call):
                pairs = [(k.arg, k.value) for k in node.keywords]
            for key, value in pairs:
                if isinstance(key, str) and key.endswith("pattern") and isinstance(value, ast.Constant) \
                        and isinstance(value.value, str):
                    out.append((p.name, value.value))
    return out


def _patterns_in_examples_and_profiles():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    out = []
    files = [p for p in (REPO / "examples").rglob("*") if p.suffix in (".json", ".toml")]
    for p in sorted(files) + sorted((REPO / "profiles").glob("*.toml")):
        data = json.loads(p.read_text()) if p.suffix == ".json" else tomllib.loads(p.read_text())
        stack = [data]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                out += [(p.name, v) for k, v in x.items() if k.endswith("pattern") and isinstance(v, str)]
                stack += list(x.values())
            elif isinstance(x, list):
                stack += x
    return out


def test_builtin_rules_examples_profiles_and_test_patterns_are_accepted():
    found = ([("builtin", r["pattern"]) for r in BUILTIN_RULES] + _patterns_in_examples_and_profiles()
             + [x for x in _patterns_in_tests() if x[0] != "test_regexsafe.py"])
    assert len(found) > 40
    refused = [(where, p) for where, p in found if unsafe_reason(p) is not None]
    assert refused == []


def _job(**stage):
    return {"name": "j", "workdir": "/tmp/w", "stage": [dict({"name": "s", "run": "true"}, **stage)]}


@pytest.mark.parametrize("key", ["fail_pattern", "success_pattern", "progress_pattern"])
def test_job_pattern_with_a_nested_quantifier_names_its_key(key):
    pattern = r"^(?P<done>a+)+$" if key == "progress_pattern" else r"^(a+)+$"
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(_job(**{key: pattern}))
    assert ("stage[0].%s: the pattern" % key) in exc.value.message
    assert "exponential" in exc.value.message and "safer: " in exc.value.message


def test_wait_patterns_and_job_rules_are_checked():
    job = {"name": "j", "stage": [{"name": "w", "wait": {"log": "a.log", "pattern": r"(x+x+)+y",
                                                        "fail_pattern": r"(a|a)*"}}],
           "rule": [{"class": "mine", "pattern": r"(\w+\s?)+$"}]}
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(job)
    paths = [p.split(":")[0] for p in exc.value.problems]
    assert paths == ["stage[0].wait.pattern", "stage[0].wait.fail_pattern", "rule[0].pattern"]


def test_submit_refuses_the_freezing_fail_pattern_exit_2_nothing_written(box):
    out = box.submit(_job(fail_pattern=r"^(a+)+$"))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("Error: stdin: stage[0].fail_pattern: the pattern")
    assert "Hint: " in out.stderr and "Traceback" not in out.stderr
    assert not (box.home / "runs").exists() or list((box.home / "runs").iterdir()) == []
    assert not (box.home / "inbox").exists() or not list((box.home / "inbox").glob("*.json"))


def test_client_run_refuses_it_before_connecting(rgt_local, tmp_path, client_config):
    job = tmp_path / "job.toml"
    job.write_text('name = "j"\n[[stage]]\nname = "s"\nrun = "true"\nfail_pattern = \'^(a+)+$\'\n')
    res = rgt_local("run", "no-such-host", str(job))
    assert res.exit_code == 2
    assert "stage[0].fail_pattern: the pattern" in res.output and "Hint:" in res.output


def test_profile_rule_pattern_is_checked():
    from rgt_client.profiles.schema import validate
    from rgt_client.errors import ClientError
    profile = {"platform": "x", "kind": "ssh-rental", "verified": False,
               "rule": [{"class": "mine", "pattern": r"(a|b|ab)*c", "remediation": "r"}]}
    with pytest.raises(ClientError) as exc:
        validate(profile, "x.toml")
    assert "rule[0].pattern" in str(exc.value.message) and "exponential" in str(exc.value.message)


def test_triage_rules_file_is_checked(agent, tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"class": "mine", "pattern": r"^(a+)+$"}]))
    log = tmp_path / "x.log"
    log.write_text("a" * 40 + "!\n")
    out = agent("triage", str(log), "--rules", str(rules))
    assert out.returncode == 2 and b"exponential" in out.stderr and b"Traceback" not in out.stderr
    assert validate_rule({"class": "mine", "pattern": r"(a+)+$"}).startswith("`pattern` can take")


def test_a_spec_from_before_the_check_never_runs_its_pattern(tmp_path):
    """A run submitted by an older agent may hold one: the watch refuses to run it (and says
    so); the rule table drops such a rule. The log is the attack line itself."""
    p = tmp_path / "s.log"
    p.write_bytes(b"a" * 40 + b"!\n")
    t0 = time.perf_counter()
    w = watch_file(p, fail_pattern=r"^(a+)+$", rules=build_rules(None, [
        {"class": "mine", "pattern": r"^(a+)+$", "severity": "critical"}]))
    assert time.perf_counter() - t0 < 1.0
    assert w.fail_line is None and w.hits == []
    assert w.pattern_errors and w.pattern_errors[0].startswith("fail_pattern can take exponential")


def test_a_user_pattern_sees_at_most_user_line_max_characters(tmp_path):
    p = tmp_path / "long.log"
    p.write_bytes(b"x" * 5000 + b"\n" + b"y" * 100 + b"\n")
    longer = r"(?s)^[^\n]{%d}" % (USER_LINE_MAX + 1)
    rs = build_rules(None, [{"class": "long_line", "pattern": longer, "severity": "critical"},
                            {"class": "short_line", "pattern": r"^y{100}$", "severity": "warning"}])
    w = watch_file(p, rules=rs, fail_pattern=r"x{%d}" % (USER_LINE_MAX // 2 + 1))
    assert [h["class"] for h in w.hits] == ["short_line"]
    assert w.fail_line is None                       # 2049 x in a row: the cut is in between
    w = watch_file(p, fail_pattern=r"x{%d}" % (USER_LINE_MAX // 2))
    assert w.fail_line_no == 1


def test_progress_pattern_of_the_triage_cli_is_checked(agent, tmp_path):
    log = tmp_path / "x.log"
    log.write_text("step 1\n")
    out = agent("triage", str(log), "--progress-pattern", r"(?P<done>\d+)(\d*)+x")
    assert out.returncode == 2 and b"exponential" in out.stderr
    w = StageWatch(str(log), progress_pattern=r"(?P<done>\d+)(\d*)+x")   # degrades, never runs it
    assert w.tracker.custom is None and "exponential" in w.progress_error
