"""The held-out measure: the wave-3 field cases (index key added = "wave3") were collected after
the triage rules were frozen and are never read by whoever tunes them, so triage's score on
them is how it does on logs it was not written against (figures.py says how each figure is
computed). These tests hold the corpus to the breadth the issue asks for, hold the scorer's
arithmetic to its definitions, and hold the engine to the figures it reached when the corpus
was built, so a change that loses ground on unseen logs fails here."""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from tests.triage.field import figures as F
from tests.triage.field import loeo
from tests.triage.field import score as S

# What triage reaches on the held-out cases (`python -m tests.triage.field.score --by all`;
# main's engine when they were collected: LOEO mean 0.648, pooled 0.698, LOSO pooled 0.706,
# confidently wrong 0.231). The issue's goals are a leave-one-ecosystem-out accuracy of at
# least 0.92 and at most 0.03 confidently wrong: raise these floors as the engine gets there,
# never lower them.
# With the known failures the agent ships (boxagent/triage/known/), each case scored with its
# own thread hidden from the index (score.triage_case): 0.982, 0.972, 0.973, 0.
HELD_OUT_LOEO_MEAN = 0.97     # mean over ecosystems of the held-out accuracy (0.982)
HELD_OUT_POOLED = 0.97        # all held-out cases together (0.972)
HELD_OUT_LOSO_POOLED = 0.97   # held-out cases from repositories never developed against (0.973)
CONFIDENTLY_WRONG_MAX = 0.02  # of all failure cases (0.0)
# The same with each ecosystem scored without the vocabulary rows only its own cases led to,
# and with its cases hidden from the known-failure index (loeo.py): what the rows read from
# sources and the other ecosystems' cases bring to an ecosystem they were not looked up for.
# Rules alone: 0.82 / 0.868 (184 of 212); with retrieval: 0.851 / 0.896 (190 of 212); with the
# structure read for whole families (platform notices before a SIGTERM, CR in any tool's words,
# relayed CUDA memory words, time-limit and memory-kill words, ...): 0.956 / 0.967 (205 of 212).
MECHANICAL_LOEO_MEAN = 0.93   # (0.956)
MECHANICAL_LOEO_POOLED = 0.95  # (0.967)

MIN_CASES, MIN_ECOSYSTEMS, MIN_INNOCENT, MIN_PER_CLASS = 300, 15, 30, 8
# classes the field has plenty of; the rare ones (preempted, node_failure, killed ...) are in
# the corpus but public trackers hold few pastes of them
CLASSES_WITH_MANY_PASTES = ("cgroup_oom", "code_error", "crlf_script", "cuda_oom", "disk_full",
                            "divergence", "driver_too_old", "gpu_hardware", "nccl",
                            "network_transient", "torch_arch_mismatch", "truncated_checkpoint")


@pytest.fixture(scope="module")
def result() -> Dict[str, Any]:
    """The corpus these floors were set on: index.toml and the captured runs (wave4's sets, from
    ecosystems the corpus barely had, have floors of their own below)."""
    return S.score([p for p in S.default_indexes() if p.parent.name not in S.WAVE_SETS])


# With wave4's sets (143 blind cases from containers, serving runtimes, new GPU toolchains, Ray,
# JAX, Megatron/NeMo, Horovod, SkyPilot, serverless and CI runners, R, Julia, Go tools) among the
# held-out cases, after the rows their sources gave: held out pooled 0.955 (339 of 355),
# leave-one-source-out pooled 0.954, mechanical leave-one-ecosystem-out mean 0.82 / pooled 0.86,
# confidently wrong 1 of 408; with the family structure, mechanical mean 0.912 / pooled 0.932
# (331 of 355).
WITH_WAVE4_HELD_OUT_POOLED = 0.95
WITH_WAVE4_MECHANICAL_POOLED = 0.92


# wave5's sets (109 blind cases from fine-tuning stacks and apps, other accelerators, MPI and the
# fabrics, object stores and trackers) were scored blind twice before any row was written for
# them: against the engine they were collected under, 84 of 109 (0.77); after the vocabularies
# read from those ecosystems' sources and the family structure (neither writer read the sets),
# 96 of 109 (0.88), confidently wrong 0 of 97, no innocent run called failed. After the rows
# their misses led to (earlyoom's, fsspec's, ggml's CUDA check: each found_via its case), 99 of
# 109 (0.91); the figure below is leave-one-ecosystem-out, which keeps the index blind to each
# ecosystem's own cases.
WAVE5_BLIND_POOLED = 0.88


@pytest.fixture(scope="module")
def result_wave5() -> Dict[str, Any]:
    return S.score([p for p in S.default_indexes() if p.parent.name == "wave5"])


def test_on_the_fifth_waves_blind_sets_the_figures_hold(result_wave5):
    rs = result_wave5["results"]
    assert sum(1 for r in rs if r.get("added") == "wave5") >= 100
    f = F.figures(rs)
    assert f["leave_one_ecosystem_out"]["pooled_accuracy"] >= WAVE5_BLIND_POOLED, F.render(f, "ecosystem")
    assert f["confidently_wrong"]["rate"] <= CONFIDENTLY_WRONG_MAX
    assert f["innocent_called_failed"]["cases"] == 0


# wave6's set (46 blind cases from 36 ecosystems no set held: simulation codes, cryo-EM,
# protein folding, renderers, RL simulators, graph learning, RAPIDS/dask, hashcat, FFmpeg) was
# scored once before any row was written for it: 31 of 46 (0.67), confidently wrong 1 of 43.
# After the families its misses belong to (hand-written CUDA checks, the driver's PTX JIT log,
# cuew's words in Blender, OpenMM's NaN particles, NumPy's full-disk write, ucx-py's endpoint
# errors, c10d's socket timeout, PhysX's allocator and error format, AWS Batch's host
# termination): 46 of 46, an in-sample figure.
# The floor is the mechanical leave-one-ecosystem-out, which switches off in each fold the rows
# only that ecosystem's cases led to: 36 of 46 (0.78).
# Its second set, f.toml (30 blind cases from 27 more ecosystems: video generation, image apps,
# quantisation, RLHF, Mamba, medical imaging, speech), scored before any row: 28 of 30 (0.93),
# confidently wrong 0 of 28; after Winsock's numbers and the NCCL watchdog's relayed CUDA
# error: 30 of 30 in-sample, mechanical 29 of 30. Both sets together: 65 of 76 (0.86).
WAVE6_MECHANICAL_POOLED = 0.75


@pytest.fixture(scope="module")
def result_wave6() -> Dict[str, Any]:
    return S.score([p for p in S.default_indexes() if p.parent.name == "wave6"])


def test_on_the_sixth_waves_blind_set_the_figures_hold(result_wave6):
    rs = result_wave6["results"]
    assert sum(1 for r in rs if r.get("added") == "wave6") >= 40
    f = F.figures(rs)
    assert f["confidently_wrong"]["rate"] <= CONFIDENTLY_WRONG_MAX
    assert f["innocent_called_failed"]["cases"] == 0


@pytest.mark.slow
def test_on_the_sixth_waves_blind_set_the_mechanical_leave_one_ecosystem_out_holds(result_wave6):
    m = loeo.mechanical(result_wave6["results"])
    assert m["pooled_accuracy"] >= WAVE6_MECHANICAL_POOLED, loeo.render(m)


@pytest.fixture(scope="module")
def result_with_wave4() -> Dict[str, Any]:
    """wave4's floors stand on the corpus they were set on; later waves' sets are scored blind
    first and get their floors after the rows their misses lead to."""
    return S.score([p for p in S.default_indexes() if p.parent.name not in ("wave5", "wave6")])


def test_with_the_new_ecosystems_the_held_out_figures_hold(result_with_wave4):
    f = F.figures(result_with_wave4["results"])
    assert sum(1 for r in result_with_wave4["results"] if r.get("added") == "wave4") >= 120
    assert f["leave_one_ecosystem_out"]["pooled_accuracy"] >= WITH_WAVE4_HELD_OUT_POOLED, F.render(f, "ecosystem")
    assert f["confidently_wrong"]["rate"] <= CONFIDENTLY_WRONG_MAX
    assert f["innocent_called_failed"]["cases"] == 0


@pytest.mark.slow
def test_with_the_new_ecosystems_the_mechanical_leave_one_ecosystem_out_holds(result_with_wave4):
    m = loeo.mechanical(result_with_wave4["results"])
    assert m["pooled_accuracy"] >= WITH_WAVE4_MECHANICAL_POOLED, loeo.render(m)


# Every set together (the corpus, wave4, wave5: 464 held-out cases), mechanically: 0.922 (428)
# after wave5's rows; with the structure for the families of its misses (a traceback the log
# ends in cut before its exception line, read by the code it stopped in, Python's format and
# rich's box; a network error before the cancel of the wait on it; Open MPI's framed help
# messages), 0.940 (436).
ALL_SETS_MECHANICAL_POOLED = 0.935


@pytest.mark.slow
def test_with_every_set_the_mechanical_leave_one_ecosystem_out_holds():
    # the sets it was set on: a later wave's set is scored blind first and floored after
    sets = [p for p in S.default_indexes()
            if not p.parent.name.startswith("wave") or p.parent.name in ("wave4", "wave5")]
    m = loeo.mechanical(S.score(sets)["results"])
    assert m["pooled_accuracy"] >= ALL_SETS_MECHANICAL_POOLED, loeo.render(m)


@pytest.fixture(scope="module")
def figures(result) -> Dict[str, Any]:
    return F.figures(result["results"])


def test_the_corpus_has_the_breadth_the_issue_asks_for(result):
    rs = result["results"]
    per_class: Dict[str, int] = {}
    for r in rs:
        per_class[r["class"]] = per_class.get(r["class"], 0) + 1
    thin = {c: per_class.get(c, 0) for c in CLASSES_WITH_MANY_PASTES if per_class.get(c, 0) < MIN_PER_CLASS}
    ecosystems = set(F.ecosystem_of(r) for r in rs)
    assert len(rs) >= MIN_CASES and per_class.get(S.INNOCENT, 0) >= MIN_INNOCENT and not thin, \
        (len(rs), per_class.get(S.INNOCENT), thin)
    assert len(ecosystems) >= MIN_ECOSYSTEMS, sorted(ecosystems)
    assert sum(1 for r in rs if F.added_of(r) == F.HELD_OUT) >= 200


def test_no_innocent_run_is_called_a_failure(figures):
    assert figures["innocent_called_failed"]["cases"] == 0, figures["innocent_called_failed"]


def test_the_held_out_figures_do_not_fall_below_what_main_reached(figures, result):
    loeo, loso = figures["leave_one_ecosystem_out"], figures["leave_one_source_out"]
    report = F.render(figures, "ecosystem") + S.render(S.score(added=F.HELD_OUT))
    assert loeo["mean_accuracy"] >= HELD_OUT_LOEO_MEAN, report
    assert loeo["pooled_accuracy"] >= HELD_OUT_POOLED, report
    assert loso["pooled_accuracy"] >= HELD_OUT_LOSO_POOLED, report
    assert figures["confidently_wrong"]["rate"] <= CONFIDENTLY_WRONG_MAX, \
        "\n".join(figures["confidently_wrong"]["files"])


@pytest.mark.slow
def test_the_mechanical_leave_one_ecosystem_out_holds_its_floor(result, figures):
    m = loeo.mechanical(result["results"], [p for p in S.default_indexes() if p.parent.name not in S.WAVE_SETS])
    loeo_all = figures["leave_one_ecosystem_out"]
    assert m["cases"] == loeo_all["cases"] and m["right"] <= loeo_all["right"], m
    assert m["mean_accuracy"] >= MECHANICAL_LOEO_MEAN, loeo.render(m)
    assert m["pooled_accuracy"] >= MECHANICAL_LOEO_POOLED, loeo.render(m)


def _r(cls: str, got: str, eco: str = "e", added: str = F.HELD_OUT, source: str = "o/r#1",
       confidence: str = "high", outcome: str = "") -> Dict[str, Any]:
    r = {"class": cls, "got": got, "right": cls == got, "ecosystem": eco, "added": added,
         "source": source, "file": "%s-%s" % (cls, got), "confidence": confidence}
    if outcome:
        r["outcome"] = outcome
    return r


def test_the_figures_are_computed_as_defined():
    rs = [_r("cuda_oom", "cuda_oom", eco="a"), _r("cuda_oom", "code_error", eco="a"),
          _r("nccl", "nccl", eco="b", source="p/q#2"),
          _r("nccl", "network_transient", eco="b", confidence="low"),      # wrong, not confident
          _r("disk_full", "none", eco="b"),                                # no cause: not confident
          _r("none", "none", eco="c", added=F.DEVELOPED, source="p/q#3"),
          _r("none", "cuda_oom", eco="c"),                                 # innocent called failed
          _r("divergence", "none", eco="c", outcome="warning")]
    rs[-1]["right"] = True
    f = F.figures(rs)
    assert f["confidently_wrong"]["cases"] == 1 and f["confidently_wrong"]["failure_cases"] == 5
    assert f["innocent_called_failed"] == {"cases": 1, "innocent_cases": 2}
    loeo = f["leave_one_ecosystem_out"]
    # a: 1/2, b: 1/3, c: 1/2 (the wave1-2 innocent case is not held out)
    assert loeo["groups"] == 3 and loeo["cases"] == 7 and loeo["right"] == 3
    assert abs(loeo["mean_accuracy"] - (0.5 + 1 / 3 + 0.5) / 3) < 1e-9
    # p/q has a developed-against case, so only o/r's held-out cases count as unseen
    assert f["leave_one_source_out"]["groups"] == 1 and f["leave_one_source_out"]["cases"] == 6
    pr = f["by_class"]
    assert pr["cuda_oom"]["precision"] == 0.5 and pr["cuda_oom"]["recall"] == 0.5
    assert pr["none"]["called"] == 2 and pr["none"]["right"] == 1 and "divergence" not in pr


def test_a_cause_without_confidence_counts_as_high():
    assert F.confidently_wrong(dict(_r("nccl", "network_transient"), confidence="high"))
    no_field = _r("nccl", "network_transient")
    del no_field["confidence"]
    assert F.confidently_wrong(no_field)
    assert S.judge({"class": "nccl"}, {"cause": {"class": "network_transient"}})["confidence"] == "high"


def test_the_cli_prints_json_and_refuses_bad_arguments(tmp_path, capsys):
    index = tmp_path / "index.toml"
    log = S.HERE / "cases" / "none" / "novae-27-early-stop-epoch-9.log"
    index.write_text('[[case]]\nfile = "%s"\nclass = "none"\nexit_code = 0\nsource = "o/r#1"\n'
                     'url = "https://example.org"\nwhy = "w"\necosystem = "x"\nadded = "wave3"\n' % log)
    assert S.main(["--json", str(index)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"]["cases"] == 1 and out["leave_one_ecosystem_out"]["pooled_accuracy"] == 1.0
    assert S.main(["--by", "nowhere", str(index)]) == 2
    assert S.main([str(tmp_path / "missing.toml")]) == 2
    assert "Error:" in capsys.readouterr().err
