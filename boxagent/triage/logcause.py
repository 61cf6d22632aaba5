"""The cause the log gives (decide.py's deciding line), with what the box knows about it.

from_log(f): the deciding line's class; where the log holds no deciding error, a traceback
the log ends in before its exception line, read by the code it stopped in (cuttrace.py), the
shapes a person still reads (tailread.py: a C++ exception, an assertion, a traceback cut above
its header, Open MPI's framed help message), then the box's filesystems (boxfacts.py: a silent stage on a full disk), then what
the exit code alone says (127: the command bash did not find).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.triage import boxfacts, cuttrace, emitters, launchers, tailread
from boxagent.triage import evidence as E
from boxagent.triage.builtin_rules import SUMMARY
from boxagent.triage.causes import NATIVE_CRASH, Cause, exit_ev, make_cause, tail_ev
from boxagent.triage.text import clip, strip_prefixes


def log_cause(f: Dict[str, Any], d: E.Decision, prefix: str = "",
              killed_line: Any = None) -> Cause:
    hit = d.hit
    cls = hit["class"]
    ev = E.class_evidence(f, hit)
    fact, at = None, 1
    if cls == "disk_full":
        lines = [str(h.get("line", "")) for h in E.hits_of(f) if h.get("class") == "disk_full"]
        cls, disk_ev = E.disk_verdict(f, lines)
        ev, at = ev[:1] + disk_ev + ev[1:], 1 + len(disk_ev)
        full = boxfacts.full_disk(f)
        fact = full[1] if full is not None and full[0] == cls else None
    elif hit.get("emitter"):
        ev.insert(1, "said by %s: %s, not %s" % (hit["emitter"], SUMMARY.get(cls, cls), hit.get("was")))
        if hit.get("detail"):
            ev.insert(2, "its message goes on: %s" % clip(hit["detail"], 200))
    elif cls == "cgroup_oom" and hit.get("source") == "builtin" and killed_line is not None \
            and not host_memory_exception(hit):
        return killed_line(f, hit, "killed", d)
    elif cls in ("code_error", "truncated_checkpoint") and boxfacts.io_words(hit.get("line", "")):
        full = boxfacts.full_disk(f)        # a write that failed on a full volume
        if full is not None:
            cls, fact = full
            ev, at = ev[:1] + [full[1]] + ev[1:], 2
    frame = tailread.frame_of([str(x) for x in f.get("last_lines") or []], hit.get("line", ""))
    if frame:
        ev.insert(at, "raised in the code at %s" % frame)
    sig, how = E.signal_of(f)
    if how:
        ev.append(how)
    elif isinstance(f.get("exit_code"), int):
        ev.append("exit code %d" % f["exit_code"])
    summary = SUMMARY.get(cls, cls)
    if cls == "cgroup_oom" and (hit.get("emitter") or host_memory_exception(hit)):
        # the process said it ran out (numpy, the JVM, V8, R): nobody killed it
        summary = "host memory ran out: %s" % clip(strip_prefixes(hit.get("line", "")), 140)
    elif cls == "code_error" or cls not in SUMMARY or hit.get("source") != "builtin" or \
            ("Slurm" in SUMMARY[cls] and "slurm" not in hit.get("line", "").lower()):
        # (a time limit or a preemption another platform reports is not Slurm's)
        summary = "%s: %s" % ("crashed" if cls == "code_error" else cls,
                              clip(strip_prefixes(hit.get("line", "")), 160))
    remediation = hit.get("remediation") if cls == hit["class"] else None
    retry = hit.get("retryable") if cls == hit["class"] and hit.get("source") != "builtin" else None
    missing = tailread.missing_command([hit.get("line", "")]) if cls == "code_error" else None
    if missing:
        summary, remediation = "command not found: %s" % missing, tailread.command_hint(missing)
    where = " in %s" % frame if frame else ""
    return make_cause(cls, "%s%s (log line %s%s)" % (prefix, summary, hit.get("line_no"), where),
                      ev, remediation, retry, d, fact=fact)


def host_memory_exception(hit: Dict[str, Any]) -> bool:
    """A host-RAM emitter raising its own out-of-memory error (numpy's _ArrayMemoryError,
    std::bad_alloc, MemoryError, ENOMEM: the vocabulary's cgroup_oom rows): the process said
    it ran out, nobody killed it, so no SIGKILL reading applies. The kernel's and Slurm's own
    OOM-kill lines are kills, whoever prints them."""
    from boxagent.triage.confidence import said_oom
    who = emitters.emitter_of(str(hit.get("line") or ""))
    return who is not None and who[1] == "host_memory" and not said_oom(hit)


def failed_run(f: Dict[str, Any]) -> bool:
    if f.get("assume_failed"):
        return True
    ec, sig = f.get("exit_code"), E.signal_of(f)[0]
    return bool(sig) or (isinstance(ec, int) and ec != 0)


def from_log(f: Dict[str, Any], killed_line: Any = None) -> Optional[Cause]:
    if not failed_run(f) and not f.get("fail_line"):
        return None
    d = E.decide(f)
    if d is not None and d.kind in ("error", "warning", "noise"):
        return log_cause(f, d, killed_line=killed_line)
    if not failed_run(f):
        return None
    cut = _cut_traceback(f)
    if cut is not None:
        return cut
    native = _native(f)
    if native is not None:
        return native
    full = boxfacts.full_disk(f)
    if full is not None:
        return _silent_full(f, full, d)
    if d is not None:                      # a launcher's report or a crash line, alone
        return _child_failed(f, d) if d.kind == "wrapper" else _crash_line(f, d)
    return _by_exit_code(f)


def _native(f: Dict[str, Any]) -> Optional[Cause]:
    """An error in a shape no rule names (tailread.py): the job's own failure, in its words."""
    lines = [str(x) for x in f.get("last_lines") or []]
    found = tailread.native_error(lines)
    if found is None:
        return None
    i, text, shape = found
    read = emitters.reread({"class": "code_error", "line": text, "severity": "critical"})
    if read["class"] != "code_error":            # numpy's _ArrayMemoryError: host RAM
        what = "GPU memory" if read["class"] == "cuda_oom" else "host memory"
        return make_cause(read["class"], "%s ran out: %s (said by %s)" % (
            what, clip(text, 140), read["emitter"]), ["the log's last lines: %s" % clip(text, 200)] +
            exit_ev(f), confidence="medium", runner_up="code_error")
    frame = tailread.innermost_frame(lines, i)
    ev = ["the log's last lines: %s (%s)" % (clip(text, 200), shape)] + \
        (["raised in the code at %s" % frame] if frame else []) + exit_ev(f)
    return make_cause("code_error", "crashed: %s (%s%s)" % (clip(text, 160), shape,
                                                          " in %s" % frame if frame else ""),
                      ev, confidence="medium")


def _cut_traceback(f: Dict[str, Any]) -> Optional[Cause]:
    """The log ends in a traceback cut before its exception line (cuttrace.py): when the code
    it stopped in is the network stack, the network's failure; when it is rich's box, the job's
    own crash in the frame it stopped in. (Python's own format in other code is the traceback
    step below.)"""
    lines = [str(x) for x in f.get("last_lines") or []]
    found = cuttrace.cut_traceback(lines)
    if found is None:
        return None
    frame, role = found
    if role is not None:
        return make_cause("network_transient", "a network error: the log ends in a traceback cut "
                          "before its exception line, raised in %s (%s)" % (role, frame),
                          ["the log ends in a traceback with no exception line; its innermost "
                           "frame is in %s: %s" % (role, frame)] + tail_ev(f) + exit_ev(f),
                          confidence="medium", runner_up="code_error")
    if cuttrace.cut_frames(lines):
        return None
    return make_cause("code_error", "crashed: the log ends in a traceback cut before its "
                      "exception line, in %s" % frame,
                      ["the log ends in a traceback (rich's box) with no exception line; its "
                       "innermost frame: %s" % frame] + tail_ev(f) + exit_ev(f),
                      confidence="medium")


def _silent_full(f: Dict[str, Any], full: Any, d: Optional[E.Decision]) -> Cause:
    cls, fact = full
    what = "the disk" if cls == "disk_full" else "the filesystem's inodes"
    return make_cause(cls, "%s filled up: the stage failed with %s and its workdir's filesystem "
                      "was full when it ended" % (what, "no error of its own" if d is None else
                                                  "only a launcher's report or a crash line"),
                      [fact] + exit_ev(f) + tail_ev(f), fact=fact)


def _by_exit_code(f: Dict[str, Any]) -> Optional[Cause]:
    tbs = E.tracebacks(f)
    ec = f.get("exit_code")
    if tbs:
        return make_cause("code_error", "the job crashed with a Python traceback (log line %s)"
                          % tbs[-1].get("line_no"), [E.hit_line(tbs[-1])] + tail_ev(f) + exit_ev(f))
    if ec == 127:
        cmd = tailread.missing_command([str(x) for x in f.get("last_lines") or []])
        if cmd:
            return make_cause("code_error", "command not found: %s (exit code 127)" % cmd,
                              exit_ev(f) + tail_ev(f), tailread.command_hint(cmd))
        return make_cause("code_error", "command not found (exit code 127)", exit_ev(f) + tail_ev(f),
                          "a command of the stage is not installed or not on PATH on this box: "
                          "read the log's last lines for its name")
    if ec == 126:
        return make_cause("code_error", "the command is not executable (exit code 126)",
                          exit_ev(f) + tail_ev(f), "chmod +x the script, or run it with bash/python")
    return None


def _child_failed(f: Dict[str, Any], d: E.Decision) -> Cause:
    """Only a launcher's report (torchrun's ChildFailedError, accelerate's CalledProcessError):
    the child died without an error of its own in the log."""
    lines = [str(x) for x in f.get("last_lines") or []]
    first = launchers.root_cause(lines).get("exitcode")      # torchrun's "first observed failure"
    status = E.child_status(["exitcode: %d" % first] if first is not None else
                            [d.hit.get("line", "")] + lines)
    return make_cause("nonzero_exit", "the launcher reports its child failed%s; the child printed "
                      "no error of its own (log line %s)" % (" (%s)" % status if status else "",
                                                           d.hit.get("line_no")),
                      [E.hit_line(d.hit)] + tail_ev(f) + exit_ev(f), NATIVE_CRASH if
                      status and "crash" in status else None, decision=d)


def _crash_line(f: Dict[str, Any], d: E.Decision) -> Cause:
    return make_cause("nonzero_exit", "crashed: %s (log line %s) - a native crash: an extension, "
                      "a library or the driver" % (clip(d.hit.get("line", ""), 120), d.hit.get("line_no")),
                      [E.hit_line(d.hit)] + tail_ev(f) + exit_ev(f), NATIVE_CRASH, decision=d)

