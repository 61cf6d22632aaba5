"""diagnose(facts) -> cause {class, summary, remediation, retryable, evidence[], decided_by,
overruled[], confidence, runner_up?, tell_apart?, decided_by_fact?}: `decided_by` is the one
line or fact that decided the class ("log line 41: RuntimeError: …", "cgroup oom_kill counter
+1 during the stage"); `decided_by_fact` names the box's fact when one decided; `overruled`
says which other matches were set aside and why ("log line 12: ChildFailedError … is
torchrun's report of a failed rank: looked through to log line 9"); `confidence` says how
sure (confidence.py), with the runner-up class and the check that tells them apart.

Before any step, each log hit is read with its emitter (emitters.py: "out of memory" from a
host-RAM emitter is host memory), with its payload (payload.py: an exception carrying NaN is
divergence) and a launcher's report is marked as one (launchers.py).

The precedence (first that applies wins; each step names its deciding evidence first):
  1. cancelled                      the user asked
  2. preflight_failed               the stage never started
  2b. a Slurm end state             OUT_OF_MEMORY, TIMEOUT, PREEMPTED, NODE_FAIL, a cancel
                                    from outside (who/when from sacct and slurmstepd's line):
                                    Slurm says why it ended the job; COMPLETED/FAILED go on
  3. machine_restart                boot_id changed: never an OOM, never the code
  4. preempted                      SIGTERM to the agent (spot)
  5. gpu_hardware                   Xid 48/79/..., ECC, GPU lost during the stage: outranks
                                    the CUDA error it causes in the log
  6. timeout                        the stage ran past its timeout
  7. cgroup_oom                     the cgroup oom_kill counter went up: outranks "Killed"
  8. vanished (attach mode)         hangup / the log's own crash / OOM-looking kill / killed
  9. signals                        slurmstepd's "CANCELLED AT .. DUE TO" line -> timeout,
                                    preempted, node_failure; SIGHUP -> hangup;
                                    SIGKILL/SIGTERM/SIGINT -> killed, unless the
                                    tail holds the platform's notice (notices.py:
                                    a spot interruption, a preemption, a scancel)
                                    (a bare "Killed" line or a SIGKILL with no readable
                                    counter on the box -> killed, the OOM killer named as
                                    the likely sender, confidence low; offline -> cgroup_oom,
                                    low); crash signals -> the log
 10. the log                        decide.py: the failure episode (after the last progress
                                    line), job/profile rules, a GPU fault, then the LAST
                                    error (the FIRST one behind a launcher's report or across
                                    ranks); wrappers and crash lines looked through; a
                                    warning only without an error; disk_full vs inodes_full
                                    from the filesystems (or the log's own `df`)
 11. exit 0 but: fail_pattern, expect missing, success_pattern missing
 12. nonzero_exit                   nothing more specific is known
 then the known failures (known/advice.py), unless a rule is certain: the nearest cases as
 evidence, their class where no rule named one (confidence low), a runner-up

facts keys (all optional):
  exit_code, signal (int or name), kind (run|wait), timed_out, cancelled, preempted,
  boot_changed, vanished (attach mode: the process is gone, no exit status), hangup (SIGHUP
  seen / a foreground launch), expect_missing[paths], success_pattern, success_seen,
  fail_line, oom_kill_delta (None = counter unknown), gpu_faults[{type, code, gpu, at,
  source, hardware, summary, xid_class, pid, owner}], gpu_tenants[{gpu, pid, command,
  used_memory_bytes, visible}] (the GPU's processes rgt did not start; gpufacts.py), disks[{path, role, bytes_used_pct, inodes_used_pct, ...}],
  hits[] (StageWatch.hits: class, severity, line_no, line, source, remediation, retryable,
  tag, after_progress), last_lines[], duration_s, expected_duration_s, fast_ratio, log,
  spawn_error.
  Added by triage: previous_duration_s (the stage's last successful duration, used when
  expected_duration_s is absent), progress_line_no, preflight[failure strings or
  {summary}], timeout_s, workdir, probe_disks (statvfs the paths named in ENOSPC lines:
  the CLI only, never the daemon - an NFS mount may hang), assume_failed (the CLI without
  --exit-code when the log itself shows a critical failure).
  Added for Slurm: slurm (the job's record from boxagent/slurm/follow.py: job_id, state,
  reason, exit_code, signal, node, end_at, time_limit_s, cancelled_by_uid, source; or
  {job_id, state: None, gone: True}), no_exit_file (the shim wrote none: the node or the
  kill took it too), spawn_hint (sbatch's refusal: what to change).
  Added for Ray: ray (the job's record from boxagent/engine/rayrun.py: submission_id, status,
  message, error_type, node_id, node_ip, host, cuda_visible_devices, and for a failed job the
  node's {node_id, node_ip, state, state_message} from the State API), no_exit_file.
  Added for the box's words and offline triage: cgroup_version ("v1" | "v2" | None: the box's
  cgroup, so the cgroup_oom remediation names memory.max or memory.limit_in_bytes), offline
  (True from `triage LOG`: nothing on the box was looked at, so an unknown oom_kill counter
  is "not checked", never "not readable").
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.health import xidcatalog
from boxagent.triage import confidence, emitters, gpufacts, launchers, tailread
from boxagent.triage import evidence as E
from boxagent.triage import logcause, notices, payload, runnerups, senders
from boxagent.slurm import states as slurm_states
from boxagent.triage.builtin_rules import REMEDIATION, SLURM_REMEDIATION
from boxagent.triage.causes import NATIVE_CRASH, Cause, exit_ev, make_cause as _cause, tail_ev
from boxagent.triage.known.advice import advise
from boxagent.triage.success import fast_spec, success_warnings  # noqa: F401 (re-export)



def reread_hits(facts: Dict[str, Any]) -> Dict[str, Any]:
    """The facts with each hit read by its emitter (with the lines that continue its message)
    and its launcher."""
    lines = [str(x) for x in facts.get("last_lines") or []]
    hits = [_reread(h, lines, facts) if isinstance(h, dict) else h
            for h in facts.get("hits") or []]
    return dict(facts, hits=hits)


def _reread(h: Dict[str, Any], lines: List[str], facts: Dict[str, Any]) -> Dict[str, Any]:
    after = runnerups.detail(str(h.get("line") or ""), facts)
    return launchers.reread(payload.reread(emitters.reread(
        h, tailread.continuation(lines, h.get("line"))), after), after)


def diagnose(facts: Dict[str, Any]) -> Cause:
    facts = reread_hits(dict(facts or {}))
    steps: List[Callable[[Dict[str, Any]], Optional[Cause]]] = [
        _cancelled, _preflight, _slurm, _ray, _machine_restart, _preempted, _gpu_hardware, _timeout,
        _oom_counter, _spawn_error, _vanished, _signalled, _from_log, _exit_zero]
    cause = next((c for c in (step(facts) for step in steps) if c is not None), None) or _nonzero(facts)
    # the known failures last: evidence, and a class where no rule named one (known/advice.py)
    return advise(gpufacts.annotate(_explained(_in_box_words(cause, facts), facts), facts), facts)


def _explained(cause: Cause, f: Dict[str, Any]) -> Cause:
    """decided_by and overruled on every cause: a cause decided by a fact (a counter, a
    signal, the boot id) names it, and says so when it overrules what the log alone says."""
    d = E.decide(f)
    if "decided_by" in cause:
        same = d is not None and cause["decided_by"] == d.decided_by
        return confidence.calibrate(cause, f, d if same else None)
    ev = cause.get("evidence") or []
    cause["decided_by"] = ev[0] if ev else cause["summary"]
    cause["overruled"] = []
    if d is not None and d.kind != "noise" and d.hit.get("class") != cause["class"] \
            and not any(d.hit.get("line", "") in str(e) for e in ev):
        cause["overruled"].append("%s (%s) overruled: %s" % (
            d.decided_by, d.hit.get("class"), cause["decided_by"]))
    return confidence.calibrate(cause, f, None)


def _in_box_words(cause: Cause, f: Dict[str, Any]) -> Cause:
    """The cgroup_oom remediation names the limit file of the box's cgroup version."""
    if cause["class"] == "cgroup_oom" and cause["remediation"] == REMEDIATION["cgroup_oom"]:
        cause["remediation"] = E.cgroup_oom_remediation(f.get("cgroup_version"))
    return cause


# -- facts the daemon knows
def _cancelled(f: Dict[str, Any]) -> Optional[Cause]:
    if f.get("cancelled"):
        return _cause("cancelled", "cancelled on request", ["cancel requested"],
                      fact="a cancel was requested")
    return None


def _preflight(f: Dict[str, Any]) -> Optional[Cause]:
    fails = f.get("preflight") or []
    if not fails:
        return None
    ev = [x.get("summary", str(x)) if isinstance(x, dict) else str(x) for x in fails]
    return _cause("preflight_failed", "preflight failed: %s" % ev[0], ev, fact=ev[0])


def _slurm(f: Dict[str, Any]) -> Optional[Cause]:
    """The cause a Slurm end state names by itself (boxagent/slurm/states.py), with the fix in
    the job's [slurm] table; None for COMPLETED/FAILED (the exit code and the log decide)."""
    rec = f.get("slurm")
    if isinstance(rec, dict) and rec.get("gone") and f.get("no_exit_file"):
        return _cause("nonzero_exit", "Slurm job %s ended without the stage shim writing its exit file, and "
                      "Slurm no longer knows the job (purged after MinJobAge)" % rec.get("job_id"),
                      ["no exit file on the shared filesystem", "squeue does not know job %s" % rec.get("job_id")],
                      "read the stage log; with accounting (slurmdbd) `sacct -j %s` says how it ended"
                      % rec.get("job_id"))
    if not isinstance(rec, dict) or not rec.get("state"):
        return None
    line = slurm_states.cancel_line("\n".join(str(x) for x in f.get("last_lines") or []))
    c = slurm_states.end_cause(rec, cancelled_by_rgt=bool(f.get("cancelled")), log_line=line)
    if c is None:
        return None
    fix = SLURM_REMEDIATION.get(c["class"]) or REMEDIATION.get(c["class"], REMEDIATION["nonzero_exit"])
    if c["class"] == "killed" and "from outside rgt" not in c["summary"]:
        fix = REMEDIATION["killed"]
    return _cause(c["class"], c["summary"], c["evidence"], fix.replace("<node>", rec.get("node") or "<node>"),
                  c["retryable"], fact="Slurm job %s ended %s" % (rec.get("job_id"), rec.get("state")))


RAY_NODE_FIX = ("Ray lost the node the stage ran on: rgt submits the identical stage again (Ray places it on "
                "a live node) while it has `retries` left; if nodes keep dying, look at that box (its "
                "raylet log: /tmp/ray/session_latest/logs/raylet.out) and resume from the last checkpoint")


def _ray(f: Dict[str, Any]) -> Optional[Cause]:
    """A Ray job that ended without its shim's exit file: Ray's record says why (a dead node,
    a stop from outside rgt, the job gone); with an exit file the exit status and the log decide."""
    rec = f.get("ray")
    if not isinstance(rec, dict) or not f.get("no_exit_file"):
        return None
    job = "Ray job %s" % rec.get("submission_id")
    said = "%s ended %s: %s" % (job, rec.get("status"), rec.get("message") or "no message")
    node: Dict[str, Any] = rec["node"] if isinstance(rec.get("node"), dict) else {}
    # Ray's own message may say the node died before the State API lists it DEAD (its health
    # check gives up a moment later): either is Ray's evidence of the node's loss.
    if node.get("state") == "DEAD" or "node has died" in str(rec.get("message") or ""):
        where = "node %s at %s is %s: %s" % (node.get("node_id") or rec.get("node_id"),
                                            node.get("node_ip") or rec.get("node_ip"), node.get("state") or "not listed",
                                            node.get("state_message") or "no state message")
        return _cause("node_failure", "the Ray node running the stage died (%s)" % (node.get("node_ip") or node.get("node_id")),
                      [said, where], RAY_NODE_FIX, True, fact=where)
    if rec.get("error_type") == "OwnerDiedError":
        return _cause("killed", "rgt's Ray driver ended while the stage ran", [said],
                      "nothing to do: rgt started its next driver, and the stage is retried per its `retries`",
                      True, fact=said)
    if rec.get("status") == "STOPPED" and not f.get("cancelled"):
        return _cause("killed", "%s was stopped from outside rgt" % job, [said],
                      "someone ran `ray job stop` (or the dashboard's stop): resume the run when ready", False,
                      fact=said)
    if rec.get("gone") or rec.get("status") == "FAILED":
        return _cause("nonzero_exit", "%s ended without the stage shim writing its exit file" % job,
                      [said, "no exit file under RGT_HOME (is it on a filesystem every node shares?)"],
                      "read Ray's job log (`ray job logs %s`) and the node's raylet log" % rec.get("submission_id"),
                      fact=said)
    return None


def _machine_restart(f: Dict[str, Any]) -> Optional[Cause]:
    if not f.get("boot_changed"):
        return None
    ev = ["boot_id changed while the stage ran"]
    last = (f.get("last_lines") or [""])[-1]
    crit = E.top_hit(f)
    ev.append("the log ends cleanly: %s" % last if crit is None else
              "last log evidence before the restart: " + E.hit_line(crit))
    return _cause("machine_restart", "the machine restarted during the stage", ev, fact=ev[0])


def _preempted(f: Dict[str, Any]) -> Optional[Cause]:
    if f.get("preempted"):
        return _cause("preempted", "stopped by preemption (SIGTERM to the agent)",
                      ["the agent got SIGTERM and stopped the stage"],
                      fact="the agent got SIGTERM (preemption)")
    return None


def _gpu_fault_is_hw(g: Dict[str, Any]) -> bool:
    if g.get("hardware") or g.get("type") == "gpu_lost":
        return True
    code = g.get("code")
    if g.get("type") != "gpu_xid" or code is None:
        return False
    try:
        return xidcatalog.is_hardware(int(code))
    except (TypeError, ValueError):
        return False


def _gpu_hardware(f: Dict[str, Any]) -> Optional[Cause]:
    faults = [g for g in f.get("gpu_faults") or [] if isinstance(g, dict) and _gpu_fault_is_hw(g)]
    if not faults:
        return None
    ev = [g.get("summary") or "%s %s on GPU %s (%s)" % (g.get("type"), g.get("code", ""),
                                                      g.get("gpu"), g.get("source"))
          for g in faults[:4]]
    hit = E.top_hit(f)
    if hit is not None:
        ev.append("explains " + E.hit_line(hit))
    return _cause("gpu_hardware", "GPU hardware fault during the stage: %s" % ev[0], ev, fact=ev[0])


def _timeout(f: Dict[str, Any]) -> Optional[Cause]:
    if not f.get("timed_out"):
        return None
    ev = ["ran past its timeout" + (" of %ss" % f["timeout_s"] if f.get("timeout_s") else "")]
    last = (f.get("last_lines") or [])
    if last:
        ev.append("last line: %s" % last[-1])
    return _cause("timeout", "the stage ran past its timeout", ev, fact=ev[0])


def _oom_counter(f: Dict[str, Any]) -> Optional[Cause]:
    delta = f.get("oom_kill_delta")
    if not isinstance(delta, int) or delta <= 0:
        return None
    ev = ["cgroup oom_kill counter +%d during the stage" % delta]
    sig, how = E.signal_of(f)
    if how:
        ev.append(how)
    hit = E.top_hit(f, ("cgroup_oom",))
    if hit is not None:
        ev.append(E.hit_line(hit))
    return _cause("cgroup_oom", "killed by the cgroup OOM killer (memory limit)", ev, fact=ev[0])


def _spawn_error(f: Dict[str, Any]) -> Optional[Cause]:
    if f.get("spawn_error"):
        return _cause("nonzero_exit", "the stage could not start: %s" % f["spawn_error"],
                      [f["spawn_error"]], f.get("spawn_hint") or "check python3 on the box, the workdir and fd limits")
    return None


# -- the process is gone without an exit status (attach mode)
def _vanished(f: Dict[str, Any]) -> Optional[Cause]:
    if not f.get("vanished"):
        return None
    if f.get("hangup"):
        return _cause("hangup", "the process vanished with its terminal (SIGHUP)",
                      ["SIGHUP seen / launched in the foreground of a session that ended"])
    d = E.decide(f)
    hit = d.hit if d is not None and d.kind != "noise" else None
    if hit is not None and hit["class"] == "hangup":
        return _cause("hangup", "the process vanished after a hangup", [E.hit_line(hit)],
                      decision=d)
    if hit is not None and hit["class"] == "cgroup_oom":
        return _killed_line(f, hit, "the process vanished: killed", d)
    if d is not None and d.kind == "error":
        return _log_cause(f, d, prefix="the process vanished; ")
    ev = ["the process is gone without an exit status", "boot_id unchanged"]
    delta = f.get("oom_kill_delta")
    ev.append("cgroup oom_kill unchanged" if delta == 0 else E.oom_unknown(f))
    ev.append("no hangup seen")
    last = f.get("last_lines") or []
    if last:
        ev.append("the log ends: %s" % last[-1])
    if delta == 0:
        return _cause("killed", "the process vanished: killed from outside (no reboot, no OOM "
                      "kill, no hangup seen)", ev, fact="cgroup oom_kill counter unchanged")
    return _cause("killed", "the process vanished: killed from outside (no reboot, no hangup "
                  "seen); the OOM killer is the likely sender", ev, confidence="low",
                  runner_up="cgroup_oom")


def _killed_line(f: Dict[str, Any], hit: Optional[Dict[str, Any]], what: str,
                 d: Optional[E.Decision] = None) -> Cause:
    """A SIGKILL (a "Killed" line, exit 137, torchrun's exitcode -9). The kernel's own OOM
    line or a moved cgroup counter says memory; a counter that did not move says someone
    else. With no counter to read, a person's kill -9 and the OOM killer leave the same trace:
    on the box the cause stays `killed` with the OOM killer named as the likely sender (a
    guess is never shown as a fact); offline (`triage LOG`, a pasted log) the memory killer
    stays the class, as the far more common sender, both with confidence low."""
    sig, how = E.signal_of(f)
    ev = (E.class_evidence(f, hit) if hit is not None else []) + ([how] if how else [])
    if hit is not None and confidence.said_oom(hit):
        return _cause("cgroup_oom", "%s by the OOM killer (memory)" % what, ev, decision=d)
    if f.get("oom_kill_delta") == 0:
        ev.append("cgroup oom_kill counter did not move: not the OOM killer")
        return _cause("killed", "%s by SIGKILL from outside (not the OOM killer: the cgroup "
                      "oom_kill counter did not move)" % what, ev, decision=d,
                      fact="cgroup oom_kill counter did not move")
    checks = E.oom_checks(f)
    ev.append("%s: the OOM killer is the likely sender; check %s" % (E.oom_unknown(f), checks))
    if not f.get("offline"):
        c = _cause("killed", "%s by SIGKILL; the sender is unknown (%s): most likely the OOM "
                   "killer" % (what, E.oom_unknown(f)), ev,
                   "find the sender: %s; if it was the OOM killer: %s" % (
                       checks, E.cgroup_oom_remediation(f.get("cgroup_version"))),
                   decision=d, confidence="low", runner_up="cgroup_oom")
    else:
        c = _cause("cgroup_oom", "%s, most likely by the OOM killer (memory limit): %s"
                   % (what, E.oom_unknown(f)), ev,
                   "confirm it: %s; then: %s" % (checks, E.cgroup_oom_remediation(
                       f.get("cgroup_version"))), decision=d, confidence="low", runner_up="killed")
    c["tell_apart"] = "check %s" % checks
    return c


# -- death by signal
SLURM_ENDS = ("timeout", "preempted", "node_failure")


def _signalled(f: Dict[str, Any]) -> Optional[Cause]:
    sig, how = E.signal_of(f)
    if sig is None or how is None:           # (signal_of gives both or neither)
        return None
    d = E.decide(f)
    if d is not None and d.kind == "error" and d.hit.get("class") in SLURM_ENDS:
        return _log_cause(f, d)                # slurmstepd's line says why it signalled the job
    if sig == "SIGHUP" or f.get("hangup"):
        hit = E.top_hit(f, ("hangup",))
        return _cause("hangup", "hung up (SIGHUP): the terminal or session it ran in went away",
                      [how or "SIGHUP"] + ([E.hit_line(hit)] if hit else []))
    if sig == "SIGKILL":
        d = E.decide(f)
        if d is not None and d.kind == "error" and (d.hit["class"] in ("killed", "hangup")
                                                    or senders.names_sender(d.hit)):
            return _log_cause(f, d)            # the log says who: a person, a launcher, the kubelet
        hit = E.top_hit(f, ("cgroup_oom",))
        # a spot VM's hard stop after its notice ends the job with SIGKILL too; the OOM
        # killer's own words, when the log has them, still decide
        noticed = None if hit is not None and confidence.said_oom(hit) else \
            _noticed(f, sig, how, trace=("killed", "hangup", "cgroup_oom"))
        return noticed or _killed_line(f, hit, "killed", d if hit is not None and d is not None
                                       and d.hit is hit else None)
    if sig in ("SIGTERM", "SIGINT", "SIGQUIT"):
        # a supervisor that kills for memory sends SIGTERM first (earlyoom's "low memory! at
        # or below SIGTERM limits" before "sending SIGTERM to process"): its own words say
        # why the job was stopped, as a notice does
        if d is not None and d.kind == "error" and d.hit.get("class") == "cgroup_oom" \
                and confidence.supervisor_killed_for_memory(d.hit):
            return _log_cause(f, d)
        return _noticed(f, sig, how) or _cause(
            "killed", "stopped by %s from outside" % sig, [how], fact=how,
            confidence="medium", runner_up="preempted")
    return None


def _noticed(f: Dict[str, Any], sig: str, how: str,
             trace: Tuple[str, ...] = ("killed", "hangup")) -> Optional[Cause]:
    """A signal the platform announced in the tail (a spot interruption, a preemption, a
    scancel): the announcement is the cause, the signal its consequence (notices.py).
    `trace`: the classes of the lines the signal itself leaves (bash's "Killed")."""
    d = E.decide(f)
    if d is not None and d.kind == "error" and d.hit.get("class") not in trace:
        return None                  # the job's own error: a notice never overrides it
    found = notices.notice([str(x) for x in f.get("last_lines") or []])
    if found is None:
        return None
    cls, _, line = found
    what = "preempted: the platform announced it, then stopped the job with %s" % sig \
        if cls == "preempted" else "cancelled from outside (scancel), then stopped with %s" % sig
    return _cause(cls, what, ["the log's notice: %s" % line, how], confidence="medium",
                  runner_up="killed")


# -- the log
def _log_cause(f: Dict[str, Any], d: E.Decision, prefix: str = "") -> Cause:
    return logcause.log_cause(f, d, prefix, killed_line=_killed_line)


def _from_log(f: Dict[str, Any]) -> Optional[Cause]:
    return logcause.from_log(f, killed_line=_killed_line)


# -- exit 0 and still a failure
def _exit_zero(f: Dict[str, Any]) -> Optional[Cause]:
    if f.get("fail_line"):
        return _cause("code_error", "fail_pattern matched: %s" % f["fail_line"],
                      ["fail_pattern matched: %s" % f["fail_line"]] + exit_ev(f))
    missing = f.get("expect_missing") or []
    if missing:
        disk = E.top_hit(f, ("disk_full",))
        ev = ["missing or empty: %s" % p for p in missing[:5]]
        if disk is not None:
            c = _log_cause(f, E.Decision.of(disk))
            c["evidence"] = (c["evidence"] + ev)[:12]
            return c
        return _cause("expect_missing", "expected outputs missing or empty: %s"
                      % ", ".join(missing[:3]), ev + exit_ev(f))
    if f.get("success_pattern") and not f.get("success_seen"):
        return _cause("success_pattern_missing", "success_pattern never appeared in the log",
                      ["pattern: %s" % f["success_pattern"]] + tail_ev(f) + exit_ev(f))
    return None


def _nonzero(f: Dict[str, Any]) -> Cause:
    sig, how = E.signal_of(f)
    if sig in E.CRASH_SIGNALS and how is not None:      # (signal_of gives both or neither)
        return _cause("nonzero_exit", "crashed with %s (a native crash: an extension, a "
                      "library or the driver)" % sig, [how] + tail_ev(f), NATIVE_CRASH)
    ec = f.get("exit_code")
    if isinstance(ec, int) and ec != 0:
        return _cause("nonzero_exit", "exited with code %d" % ec, exit_ev(f) + tail_ev(f))
    return _cause("nonzero_exit", "the stage failed", exit_ev(f) + tail_ev(f))
