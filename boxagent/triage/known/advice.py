"""What the known failures add to a cause: the nearest cases as evidence, a class where no
rule named one, a runner-up that means something, and a note where they disagree with a rule.

advise(cause, facts) is the last step of diagnose(). A cause a rule is certain of (confidence
high: a box fact, a definitive vocabulary line, the user's rule) is returned as it is, and the
index is never read. Otherwise the log's tail (the last lines and the lines the rules hit) is
searched (index.py), and:
  - `similar` lists up to 3 neighbours {source, url, class, why, fix, score}, and the evidence
    says "like <source>: <why>, fixed by <fix> (similarity 0.62)";
  - where no rule decided (undecided(): a bare nonzero_exit, or a crash read from the log's
    shape alone) and the nearest five agree (weighted by similarity, one class holds 60 % of
    the weight and its best case is 0.35 similar; or three of the five, 75 % of the weight),
    their class becomes the cause at confidence low, with its runner-up, decided_by
    "retrieval: like <source>" and the rules' answer in `overruled`. On the field corpus, each
    case with its own ecosystem hidden, these thresholds alone name a class for 188 of the 277
    failure logs, 95 % of them right;
  - where the runner-up is nonzero_exit or none, the best-supported other class among the
    neighbours becomes it, with the check that tells the two apart;
  - where a rule decided and the neighbours agree on another class, the rule stands and
    `overruled` says so.
A class only neighbours gave never makes a run retryable: a guess does not start a retry.
Innocent neighbours (class "none") are no vote for any failure, and retrieval never runs on a
run that succeeded (diagnose() is only asked about failures).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from boxagent.triage.builtin_rules import REMEDIATION, SUMMARY
from boxagent.triage.causes import NATIVE_CRASH
from boxagent.triage.confidence import TELL_APART
from boxagent.triage.text import clip

NEAREST = 5          # neighbours that vote
WIDER = 10           # neighbours a runner-up may come from
SHOWN = 3            # neighbours a cause lists
FLOOR = 0.15         # a neighbour less similar than this is no evidence
DECIDE = 0.35        # the best neighbour of a class that decides is at least this similar
SHARE = 0.6          # ... and its class holds at least this share of the neighbours' weight;
AGREE = 3            # or at least this many of the nearest five are of it,
AGREE_SHARE = 0.75   # ... holding this share of the weight,
AGREE_FLOOR = FLOOR  # ... the best of them at least this similar
RUNNER = 0.15        # a runner-up's best neighbour is at least this similar
# A class is given only for a tail with this many distinct words: a one-line log such as
# docker inspect's `"OOMKilled": false` is wholly "like" a Kubernetes OOMKilled case, yet says
# nothing of the failure; its neighbours are still shown, and may give the runner-up.
DECIDE_TERMS = 8
# What no log resembles: facts of the stage, or no failure at all.
NO_VOTE = frozenset(("none", "nonzero_exit", "cancelled", "preflight_failed", "machine_restart",
                     "expect_missing", "success_pattern_missing"))
# The check that confirms a class, for a runner-up the pair table (confidence.TELL_APART) lacks.
CHECK = {
    "cuda_oom": "`nvidia-smi` while it runs: GPU memory at its limit (a smaller batch passes)",
    "cgroup_oom": "`dmesg -T | grep -i -e oom -e killed`, and the cgroup's oom_kill counter",
    "disk_full": "`df -h` on the paths it writes: 100% used",
    "inodes_full": "`df -i` on the paths it writes: IUse% at 100",
    "code_error": "the traceback's innermost frame in the job's own code or config; the "
                  "identical command fails the same way again",
    "nccl": "rerun with NCCL_DEBUG=INFO: the transport names the peer or collective that failed",
    "network_transient": "`curl -sI` the URL or host it fetched, from the box; a rerun passes",
    "gpu_hardware": "`dmesg -T | grep -i xid` and `nvidia-smi -q -d ECC`",
    "torch_arch_mismatch": "`python -c 'import torch; print(torch.cuda.get_arch_list(), "
                           "torch.cuda.get_device_capability())'`: the GPU's sm_XY is missing",
    "driver_too_old": "`nvidia-smi` (the driver's CUDA version) against the CUDA the job's "
                      "libraries were built for",
    "truncated_checkpoint": "`ls -l` the file it loads against the size it should have",
    "crlf_script": "`file SCRIPT`: 'with CRLF line terminators'",
    "divergence": "`grep -n -i -m1 nan` the log: a NaN loss before the failure",
    "killed": "who sent the signal: the provider's event log, `journalctl`, a scheduler",
    "hangup": "whether it ran in a terminal or ssh session that closed (tmux/nohup keep it)",
    "timeout": "the time limit of the stage or the scheduler against its duration",
    "preempted": "the provider's console or event log: the instance stopped or was preempted",
    "node_failure": "`sinfo -R` and `scontrol show node`: the node's state",
    "nonzero_exit": "run the command by hand and read its last lines: no error of its own "
                    "means a native crash or a kill, not this class",
}
Near = List[Tuple[Any, float]]
# A tail is searched only when a line of it reads like a failure in any library's words: the
# words of a quiet log ("copying shards") are the job's own, and a known case that shares one
# of them ("Loading checkpoint shards", then "Killed") says nothing about it.
_ERRORISH = re.compile(r"(?i)error|exception|fail|fatal|abort|killed|panic|traceback|denied|"
                       r"refused|unable|cannot|can't|could not|invalid|exhausted|timed? ?out|"
                       r"not found|no such|out of memory|segmentation|assert|terminate|"
                       r"exit(ed)? (with )?(code|status)|errno|no space|unreachable|reset by|"
                       r"\boom|oomkill|\bxid\b|\bnan\b|crash|died|sig(kill|segv|abrt|bus|term)")


def advise(cause: Dict[str, Any], facts: Dict[str, Any]) -> Dict[str, Any]:
    if cause.get("confidence") == "high" or cause.get("decided_by_fact") or facts.get("spawn_error"):
        return cause
    text = query_text(facts)
    if not _ERRORISH.search(text):      # a quiet tail: its words are the job's, not a failure's
        return cause
    from boxagent.triage.known import index          # read only here: never for a certain cause
    wider = index.search(text, WIDER)
    near = wider[:NEAREST]           # the best by BM25 vote, weak ones too: they dilute
    # an innocent run is no example of a failure: it dilutes the vote, it is never shown
    shown = sorted((ds for ds in wider if ds[1] >= FLOOR and ds[0].cls != "none"),
                   key=lambda ds: -ds[1])[:SHOWN]
    if not shown:
        return cause
    cause["similar"] = [entry(d, s) for d, s in shown]
    votes = tally(near)
    winner = _decider(votes)
    if winner is not None and winner != cause["class"] and undecided(cause) and _said_enough(text) \
            and not _as_like_an_innocent_run(wider, winner):
        cause = _decided(cause, winner, votes, near)
    elif winner is not None and winner != cause["class"]:
        cause.setdefault("overruled", []).append(
            "the nearest known cases say %s (%s): the rules' deciding evidence stands; a "
            "neighbour's thread is a hint, not a verdict" % (winner, like(_best(near, winner))))
    _evidence(cause, shown)
    if cause.get("runner_up") in (None, "nonzero_exit"):
        _runner_up(cause, tally(wider))
    return cause


def undecided(cause: Dict[str, Any]) -> bool:
    """No rule named the failure: a bare nonzero_exit, or a crash read from the log's shape (a
    C++ exception, an assertion, a traceback cut above its header) whose runner-up is
    nonzero_exit. A native crash (a crash line or signal, `Segmentation fault`) is a rule's
    answer, how the process died; so is an error line a rule matched ("log line 6: …"): there
    the neighbours give the runner-up and, where they disagree, a note, never the class. (Torch
    prints the same hints under every CUDA error: a device-side assert's neighbours are failing
    GPUs' ECC errors.)"""
    if cause["class"] == "nonzero_exit":
        # a launcher's report of how its child ended ("failed (exitcode: 1)") is the rules'
        # answer too: the neighbours' ChildFailedErrors ended -9, and the tokens drop the number
        return cause.get("remediation") != NATIVE_CRASH and \
            not str(cause.get("decided_by") or "").startswith("log line")
    # a tool's own error line read when no row named it (confidence medium) is a rule's answer
    if cause.get("confidence") == "medium":
        return False
    # a row with a remediation of its own ("the image holds the driver files the toolkit
    # mounts") named the failure: that is a rule's answer, not a bare crash
    return cause["class"] == "code_error" and cause.get("runner_up") in (None, "nonzero_exit") \
        and not str(cause.get("decided_by") or "").startswith("log line") \
        and cause.get("remediation") in (None, REMEDIATION["code_error"])


def _said_enough(text: str) -> bool:
    from boxagent.triage.known.tokens import counts
    return len(counts(text)) >= DECIDE_TERMS


def query_text(facts: Dict[str, Any]) -> str:
    """The log's tail as the rules kept it: the lines they hit, then the last lines."""
    hits = [str(h.get("line") or "") for h in facts.get("hits") or []
            if isinstance(h, dict) and h.get("severity") in ("critical", "warning")]
    seen, out = set(), []
    for line in hits + [str(x) for x in facts.get("last_lines") or []]:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return "\n".join(out)


def tally(near: Near) -> Dict[str, Tuple[float, float, int]]:
    """{class: (share of the neighbours' weight, its best similarity, neighbours)}: the weight
    is the similarity; innocent neighbours weigh in the whole, for no class."""
    total = sum(s for _, s in near) or 1.0
    out: Dict[str, Tuple[float, float, int]] = {}
    for d, s in near:
        if d.cls in NO_VOTE:
            continue
        share, best, n = out.get(d.cls, (0.0, 0.0, 0))
        out[d.cls] = (share + s / total, max(best, s), n + 1)
    return out


def _as_like_an_innocent_run(wider: Near, cls: str) -> bool:
    """An innocent run among the wider neighbours at least as similar as the best of the class:
    a tail of "0 NaN values found" and "error_rate: 0.000" reads as much like a run that finished
    fine as like a diverged one, and the words alone cannot tell which it is."""
    innocent = max((s for d, s in wider if d.cls == "none"), default=0.0)
    return innocent >= _best(wider, cls)[1]


def _decider(votes: Dict[str, Tuple[float, float, int]]) -> Optional[str]:
    if not votes:
        return None
    cls, (share, best, n) = max(votes.items(), key=lambda kv: kv[1][0])
    if (share >= SHARE and best >= DECIDE) or (n >= AGREE and share >= AGREE_SHARE and best >= AGREE_FLOOR):
        return cls
    return None


def _best(near: Near, cls: str) -> Tuple[Any, float]:
    """The most similar neighbour of the class."""
    return max(((d, s) for d, s in near if d.cls == cls), key=lambda ds: ds[1])


def like(ds: Tuple[Any, float]) -> str:
    d, s = ds
    return "like %s, similarity %.2f" % (d.source or d.key, s)


def fix_of(d: Any) -> Optional[str]:
    return d.fix or REMEDIATION.get(d.cls)


def entry(d: Any, s: float) -> Dict[str, Any]:
    return {"source": clip(d.source or d.key, 200), "url": d.url, "class": d.cls,
            "why": d.why, "fix": fix_of(d), "score": round(s, 2)}


def _evidence(cause: Dict[str, Any], near: Near) -> None:
    d, s = next(((d, s) for d, s in near if d.cls == cause["class"]), near[0])
    fix = fix_of(d)
    line = "like %s (%s): %s%s (similarity %.2f)" % (
        clip(d.source or d.key, 120), d.cls, clip(d.why, 160),
        ", fixed by: %s" % clip(fix, 90) if fix else "", s)
    ev = list(cause.get("evidence") or [])
    if str(cause.get("decided_by", "")).startswith("retrieval"):
        cause["evidence"] = ([line] + ev)[:12]          # what decided comes first
    else:
        cause["evidence"] = (ev[:11] + [line])          # what supports it comes after


def _runner_up(cause: Dict[str, Any], votes: Dict[str, Tuple[float, float, int]]) -> None:
    # the closest other class, not the most frequent: one near case says more than three far
    others = [(v[1], c) for c, v in votes.items() if c != cause["class"] and v[1] >= RUNNER]
    if not others:
        return
    runner = max(others)[1]
    cause["runner_up"] = runner
    cause["tell_apart"] = tell_apart(cause["class"], runner)


def tell_apart(cls: str, runner: str) -> str:
    pair = TELL_APART.get((cls, runner))
    if pair:
        return pair
    check = CHECK.get(runner)
    return ("for %s: %s" % (runner, check)) if check else \
        "read the log's last lines (`rgt-client logs`) around the deciding line"


def _decided(cause: Dict[str, Any], cls: str, votes: Dict[str, Tuple[float, float, int]],
             near: Near) -> Dict[str, Any]:
    """The neighbours' class, at confidence low, in place of the rules' bare answer."""
    best = _best(near, cls)
    others = sorted(((v[0], c) for c, v in votes.items() if c != cls), reverse=True)
    runner = others[0][1] if others else cause["class"]
    new = dict(cause)
    new.update({"class": cls, "retryable": False, "confidence": "low", "runner_up": runner,
                "tell_apart": tell_apart(cls, runner),
                "remediation": fix_of(best[0]) or REMEDIATION["nonzero_exit"],
                "summary": "most likely %s (%s; no rule named it): %s" % (
                    SUMMARY.get(cls, cls), like(best), cause["summary"]),
                "decided_by": "retrieval: %s" % like(best),
                "overruled": list(cause.get("overruled") or []) + [
                    "the rules' answer %s (%s) set aside: no rule named the failure, the nearest "
                    "known cases do" % (cause["class"], clip(str(cause.get("summary")), 160))]})
    return new
