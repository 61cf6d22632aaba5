"""The field goals, per corpus: the public tails (field/index.toml) from the log alone, the
held-out fifth of them on its own, and the captured real-library runs with the facts the
daemon has at a stage's end (the cgroup's oom_kill counter, statvfs of the path): two of them
cannot be told from their log (the ENOSPC wording is the same for bytes and inodes; a worker
killed mid-handshake surfaces as ConnectionResetError), as their index says."""
from __future__ import annotations

from typing import Any, Dict

from boxagent.triage import diagnose, success_warnings
from tests.triage.field import figures as F
from tests.triage.field import score as S
from tests.triage.field.test_field_corpus import GOAL_OVERALL, GOAL_PER_CLASS


def _assert_goals(result: Dict[str, Any]) -> None:
    low = {cls: c["accuracy"] for cls, c in result["classes"].items() if c["accuracy"] < GOAL_PER_CLASS}
    assert result["total"]["accuracy"] >= GOAL_OVERALL and not low, S.render(result)
    assert result["innocent_called_failed"] == [], S.render(result)


def test_the_public_field_corpus_meets_the_goals_from_the_log_alone():
    """the cases the rules were developed against; the held-out wave-3 cases are measured
    by field/test_field_heldout.py"""
    _assert_goals(S.score([S.INDEX], added="wave1-2"))


def test_the_held_out_cases_meet_the_overall_goal_on_their_own():
    """a fifth of the corpus was only scored after the engine was built on the rest"""
    result = S.score([S.INDEX], split="holdout")
    assert result["total"]["cases"] >= 15
    assert result["total"]["accuracy"] >= GOAL_OVERALL, S.render(result)


def _box_facts(case: Dict[str, Any]) -> Dict[str, Any]:
    return S.box_facts(case, S.triage_case(dict((k, v) for k, v in case.items()
                                                if k not in ("oom_kill_delta", "disk_path"))))


def test_the_captured_runs_with_the_daemons_facts():
    cases = S.load_cases([S.CAPTURED_INDEX]) if S.CAPTURED_INDEX.is_file() else []
    wrong = []
    for case in cases:
        facts = _box_facts(case)
        if case["exit_code"] == 0:
            cause, warned = None, bool(success_warnings(facts))
        else:
            cause, warned = diagnose(facts), False
        if case.get("outcome") == S.WARNED:
            right = cause is None and warned
        elif case["class"] == S.INNOCENT:
            right = cause is None
        else:
            right = cause is not None and cause["class"] == case["class"]
        if not right:
            wrong.append("%s: expected %s, got %s" % (case["file"], case["class"],
                                                      cause["class"] if cause else "none"))
    assert cases and not wrong, "\n".join(wrong)


# What an answer tells a person, scored with retrieval leave-one-source-out (score.triage_case):
# before the known failures, 9 of 277 failure cases were a bare nonzero_exit and 16 of 28
# code_error answers named nonzero_exit as their runner-up; with them, none.
BARE_NONZERO_EXIT_MAX = 0.05
CODE_ERROR_RUNNER_UP_NONZERO_MAX = 0.05
RETRIEVAL_DECIDED_RIGHT_MIN = 0.6      # of the classes the neighbours gave (2 of 3 here)


def test_answers_name_a_cause_or_a_runner_up_a_person_would_consider():
    result = S.score()
    figures = F.figures(result["results"])
    bare = figures["bare_nonzero_exit"]
    assert bare["rate"] <= BARE_NONZERO_EXIT_MAX, bare["files"]
    crashes = [r for r in result["results"] if r["got"] == "code_error"]
    vague = [r["file"] for r in crashes if r["runner_up"] == "nonzero_exit"]
    assert len(vague) <= CODE_ERROR_RUNNER_UP_NONZERO_MAX * len(crashes), vague
    assert figures["confidently_wrong"]["rate"] <= 0.02, figures["confidently_wrong"]["files"]
    assert figures["innocent_called_failed"]["cases"] == 0
    by_retrieval = figures["decided_by_retrieval"]
    assert by_retrieval["cases"] and \
        by_retrieval["right"] >= RETRIEVAL_DECIDED_RIGHT_MIN * by_retrieval["cases"], by_retrieval
