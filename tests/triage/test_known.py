"""The known failures triage ships (boxagent/triage/known/): the tokenizer, BM25 on a tiny
index, leave-one-source-out, what a cause gains from its neighbours, the index never read when
a rule is certain, the committed index current against the corpus and the vocabulary, and the
index inside the real .pyz under a bare interpreter."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from boxagent.triage import diagnose
from boxagent.triage.known import advice, index as K
from boxagent.triage.known.tokens import counts
from tests.triage.field import build_known
from tests.triage.field import score as S


# -- tokens
def test_tokens_drop_what_differs_between_boxes():
    toks = counts("[rank3]: 2024-05-01T12:00:01Z E0325 20:57:27.62 2606 api.py:869] at 0x7f3a9c "
                  "/home/alice/envs/py38/lib/python3.8/site-packages/torch/nn/module.py pid 7fa3bc00 "
                  "sm_90a C:\\Users\\bob\\AppData\\train.py")
    assert "alice" not in toks and "bob" not in toks and "site" not in toks      # paths
    assert "rank" not in toks                                                       # rank prefix
    assert not [t for t in toks if any(ch.isdigit() for ch in t)]                   # numbers
    assert "fa" not in toks and "bc" not in toks and "x" not in toks                # hex
    assert "sm" in toks and "api" in toks and "pid" in toks


def test_tokens_match_across_spellings():
    """glibc, Go and Python spell ENOSPC and an OOM differently; the words they share remain."""
    glibc = counts("cp: error writing '/data/x.bin': No space left on device")
    go = counts("write /var/lib/docker/tmp/x: no space left on device")
    py = counts("OSError: [Errno 28] No space left on device: '/ckpt/model.pt'")
    assert {"no", "space", "left", "device"} <= set(glibc) & set(go) & set(py)
    assert {"out", "memory"} <= set(counts("torch.OutOfMemoryError: CUDA out of memory")) & \
        set(counts("CUDA_ERROR_OUT_OF_MEMORY")) & set(counts("OutOfMemoryError"))


# -- BM25 on a tiny index
def _doc(key: str, cls: str, text: str, source: str = "", found_via=()) -> K.Doc:
    return K.Doc({"k": key, "c": cls, "s": source or key, "w": "why " + key,
                  "t": K.encode_terms(counts(text)), "v": list(found_via)})


TINY = [("oom", "cuda_oom", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
        ("disk", "disk_full", "OSError: [Errno 28] No space left on device"),
        ("net", "network_transient", "requests.exceptions.ConnectionError: Max retries exceeded"),
        ("fine", "none", "epoch 3 done, loss 0.12, saving checkpoint")]


def _tiny() -> K.Index:
    return K.Index([_doc(k, c, t) for k, c, t in TINY])


def test_bm25_ranks_the_case_with_the_log_words_first():
    idx = _tiny()
    got = idx.nearest("step 100\nwrite /mnt/x: no space left on device\nexit status 1", 4)
    assert got[0][0].key == "disk" and got[0][1] > 0.5
    assert [d.key for d, _ in got].count("disk") == 1
    same = idx.nearest(TINY[0][2], 1)
    assert same[0][0].key == "oom" and same[0][1] == pytest.approx(1.0)
    assert idx.nearest("nothing in common here zzz", 3) == []


def test_a_hidden_document_is_never_found_nor_counted():
    idx = K.Index([_doc("a", "cuda_oom", "CUDA out of memory", source="o/r#1"),
                   _doc("b", "cuda_oom", "CUDA out of memory again", source="o/r#1"),
                   _doc("row", "cuda_oom", "out of memory", source="CUDA 12.4", found_via=("b",)),
                   _doc("c", "cuda_oom", "CUDA out of memory here", source="o/r#2")])
    hide = idx.hidden(frozenset(["o/r#1"]), frozenset())
    assert [d.key for d, _ in idx.nearest("CUDA out of memory", 4, hide)] == ["c"]
    assert {d.key for d, _ in idx.nearest("CUDA out of memory", 4)} == {"a", "b", "row", "c"}


def test_terms_encode_and_decode():
    terms = {"cuda": 1, "memory": 3}
    assert K.decode_terms(K.encode_terms(terms)) == terms


# -- leave-one-source-out on the packaged index
def _case(fragment: str) -> Dict[str, Any]:
    return next(c for c in S.load_cases() if fragment in c["path"])


def _text(case: Dict[str, Any]) -> str:
    with open(case["path"], encoding="utf-8", errors="replace") as fh:
        return fh.read()


def test_a_scored_case_never_retrieves_its_own_thread():
    case = _case("jax-788-local-client-replica-failed-wrapped")
    assert K.search(_text(case), 1)[0][0].source == case["source"]      # it would find itself
    with K.excluding([case["source"]]):
        found = K.search(_text(case), 10)
    assert found and all(d.source != case["source"] for d, _ in found)


def test_the_scorer_triages_each_case_with_its_thread_hidden(monkeypatch):
    seen: List[Any] = []
    real = K.Index.nearest

    def spy(self, text, k=5, hide=None):
        seen.append({self.docs[i].source for i in hide or ()})
        return real(self, text, k, hide)
    monkeypatch.setattr(K.Index, "nearest", spy)
    case = _case("jax-788-local-client-replica-failed-wrapped")
    S.triage_case(case)
    assert seen and all(case["source"] in hidden for hidden in seen)


def test_a_held_out_ecosystem_is_hidden_by_the_vocabularys_environment(monkeypatch):
    case = _case("jax-788-local-client-replica-failed-wrapped")
    key = str(build_known.Path(case["path"]).relative_to(build_known.HERE))
    monkeypatch.setenv("RGT_TRIAGE_VOCAB_HOLD_OUT", key)
    assert all(d.key != key for d, _ in K.search(_text(case), 10))


# -- what a cause gains
@pytest.fixture
def tiny_index(monkeypatch):
    idx = K.Index([_doc("oom%d" % i, "cuda_oom", "RuntimeError: CUDA out of memory. Tried to allocate",
                        source="o/oom#%d" % i) for i in range(3)] +
                  [_doc("fine", "none", "Tried to allocate nothing; training finished"),
                   _doc("disk", "disk_full", "OSError: [Errno 28] No space left on device")])
    monkeypatch.setattr(K, "_LOADED", [idx])
    return idx


def _facts(*lines: str, exit_code: int = 1) -> Dict[str, Any]:
    return {"exit_code": exit_code, "last_lines": list(lines), "hits": []}


def test_no_rule_names_it_the_neighbours_give_a_low_confidence_class(tiny_index):
    cause = diagnose(_facts("step 9", "Tried to allocate: CUDA out of memory (custom allocator)"))
    assert cause["class"] == "cuda_oom" and cause["confidence"] == "low"
    assert cause["decided_by"].startswith("retrieval: like o/oom#")
    assert cause["runner_up"] and cause["tell_apart"] and cause["retryable"] is False
    assert any("nonzero_exit" in o and "set aside" in o for o in cause["overruled"])
    assert any(e.startswith("like o/oom#") and "fixed by" in e for e in cause["evidence"])
    assert 1 <= len(cause["similar"]) <= 3
    assert set(cause["similar"][0]) == {"source", "url", "class", "why", "fix", "score"}


def test_innocent_neighbours_decide_nothing(monkeypatch):
    monkeypatch.setattr(K, "_LOADED", [K.Index([_doc("f%d" % i, "none", "training finished, all good")
                                                for i in range(5)])])
    cause = diagnose(_facts("training finished, all good, exit code 1"))
    # the rules' own runner-up for a bare exit (code_error) stays; innocents give none
    assert cause["class"] == "nonzero_exit" and cause.get("runner_up") in (None, "code_error")
    assert not str(cause.get("decided_by") or "").startswith("retrieval")
    assert "similar" not in cause and not any(e.startswith("like ") for e in cause["evidence"])


def test_a_rule_that_disagrees_with_the_neighbours_stands_and_says_so(tiny_index):
    # a medium-confidence rule (a generic exception that mentions CUDA) against OOM neighbours
    cause = diagnose({"exit_code": 1, "last_lines": ["RuntimeError: CUDA error: unspecified launch failure",
                                                     "Tried to allocate: CUDA out of memory"],
                      "hits": [{"class": "code_error", "severity": "critical", "line_no": 1,
                                "line": "RuntimeError: CUDA error: unspecified launch failure",
                                "source": "builtin"}]})
    assert cause["class"] == "code_error" and not cause["decided_by"].startswith("retrieval")
    assert any(o.startswith("the nearest known cases say cuda_oom") for o in cause["overruled"])


def test_a_runner_up_from_the_neighbours_replaces_nonzero_exit(tiny_index):
    cause = {"class": "cuda_oom", "summary": "CUDA out of memory", "evidence": ["log line 1: x"],
             "confidence": "medium", "runner_up": "nonzero_exit", "tell_apart": "t", "overruled": []}
    out = advice.advise(cause, _facts("Tried to allocate: CUDA out of memory",
                                      "OSError: [Errno 28] No space left on device"))
    assert out["class"] == "cuda_oom" and out["runner_up"] == "disk_full" and "df -h" in out["tell_apart"]


# -- costs nothing when a rule is certain
def test_the_index_is_never_read_when_a_rule_is_certain(monkeypatch):
    reads: List[int] = []
    monkeypatch.setattr(K, "_LOADED", [])
    monkeypatch.setattr(K, "read_data", lambda: reads.append(1) or None)
    certain = diagnose({"exit_code": 1, "last_lines": ["torch.OutOfMemoryError: CUDA out of memory."],
                        "hits": [{"class": "cuda_oom", "severity": "critical", "line_no": 1, "source": "builtin",
                                  "line": "torch.OutOfMemoryError: CUDA out of memory."}]})
    assert certain["confidence"] == "high" and "similar" not in certain and reads == []
    diagnose(_facts("something failed somewhere"))       # no rule: the index is read
    assert reads == [1]


# -- the committed index, and the agent that carries it
def test_the_committed_index_is_current_against_the_corpus_and_the_vocabulary():
    assert build_known.OUT.read_bytes() == build_known.build(), \
        "stale: python -m tests.triage.field.build_known"


def test_the_index_holds_every_case_and_every_vocabulary_example():
    idx = K.Index([K.Doc(d) for d in json.loads(__import__("zlib").decompress(build_known.build()))["docs"]])
    keys = {d.key for d in idx.docs}
    assert len([c for c in S.load_cases()]) == len([k for k in keys if not k.startswith("vocab/")])
    from boxagent.triage import vocab
    assert sum(len(m.ROWS) for _, m in vocab.TABLES) == len([k for k in keys if k.startswith("vocab/")])


def test_the_real_pyz_finds_a_known_failure_on_a_bare_interpreter(tmp_path, agent_pyz):
    case = _case("jax-788-local-client-replica-failed-wrapped")
    log = tmp_path / "train.log"
    log.write_text(_text(case))
    out = subprocess.run([sys.executable, "-S", str(agent_pyz), "triage", str(log), "--exit-code", "1",
                          "--json"], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 4, out.stderr
    cause = json.loads(out.stdout)["cause"]
    assert cause["decided_by"].startswith("retrieval: like %s" % case["source"])
    assert cause["similar"][0]["source"] == case["source"] and cause["similar"][0]["url"] == case["url"]
    text = subprocess.run([sys.executable, "-S", str(agent_pyz), "triage", str(log), "--exit-code", "1"],
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                          env={"PATH": "/usr/bin:/bin"}).stdout
    assert "like these known failures (a hint, not a verdict):" in text
    assert "    - %s (cuda_oom, similarity " % case["source"] in text


def test_a_plain_wheel_carries_the_index_as_package_data():
    """The wheel has no tests/ folder: the index it needs is the committed file, named in
    pyproject's package-data (a wheel build here is refused by this venv's setuptools for an
    unrelated license field, so the configuration is read instead)."""
    import fnmatch
    import tomllib
    cfg = tomllib.loads((build_known.REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "boxagent.triage.known" in cfg["packages"]
    patterns = cfg["package-data"]["boxagent.triage.known"]
    assert any(fnmatch.fnmatch(K.DATA, p) for p in patterns)
    from rgt_client.box import bundle
    assert any(fnmatch.fnmatch(K.DATA, p) for p in bundle.PACKAGE_DATA)     # and the .pyz
