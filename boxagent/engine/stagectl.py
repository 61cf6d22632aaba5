"""One stage attempt from start to end: launch (or re-adopt after a daemon restart), watch each
tick, stop (cancel, timeout, preemption), and finish (marker on success; diagnosis, retry or
failure otherwise). Owned by the Chain, which owns the transitions.
"""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Dict, Optional

from boxagent.engine import outcome, runner, shim
from boxagent.base import procs
from boxagent.base.fsutil import atomic_write_json
from boxagent.engine.runner import Active
from boxagent.daemon.services import log_line
from boxagent.engine.state import CANCELLED, FAILED, INTERRUPTED, PENDING, RUNNING, SUCCEEDED, stage_of
from boxagent.base.units import iso_utc

if TYPE_CHECKING:
    from boxagent.engine.chain import Chain


class StageControl:
    def __init__(self, chain: "Chain"):
        self.chain = chain
        self.home, self.roots, self.svc = chain.home, chain.roots, chain.svc
        self.rules: Dict[str, Any] = {}

    def _setting(self, name: str) -> float:
        return float(self.svc.settings[name])

    def spec_stage(self, act: Active) -> Dict[str, Any]:
        return next(s for s in self.chain.specs[act.run]["stage"] if s["name"] == act.stage)

    # -- start
    def start(self, run: Dict[str, Any], sspec: Dict[str, Any], st: Dict[str, Any], now: float) -> None:
        spec = self.chain.specs[run["name"]]
        attempt = st["attempt"] + 1
        log = self._log_path(run["name"], spec, sspec, attempt)
        st.update(attempt=attempt, tries=st.get("tries", 0) + 1, exit_code=None, signal=None, started_at=now,
                  ended_at=None, duration_s=None, cause=None, warnings=[], retry_at=None, log=log,
                  marker=None, progress=None, launched_at=now, boot_id=self.chain.boot_id,
                  oom_kill_at_start=self.svc.monitor_value("oom_kill_count"), proc=None)
        wait_pid = (sspec.get("wait") or {}).get("pid")
        if wait_pid:
            # pid + start ticks, never the pid alone: a reused pid must not look like the waited one
            st["proc"] = {"wait_pid_ticks": self.roots.process_start_ticks(wait_pid)}
        # Persisted BEFORE the launch: a daemon killed right after Popen finds the attempt on restart
        # and re-adopts it (the shim's O_EXCL claim keeps it from ever running twice).
        self.chain.change_stage(run, st, RUNNING, now, attempt=attempt, log=log)
        act = Active(self.home, self.roots, run["name"], st["name"], attempt, st["kind"])
        act.watch = self._watch(spec, sspec, log, now)
        self.chain.active[run["name"]] = act
        if st["kind"] == "run":
            self._launch(act, spec, sspec)
        elif wait_pid:
            act.wait_pid_ticks = st["proc"]["wait_pid_ticks"]

    def _log_path(self, run: str, spec: Dict[str, Any], sspec: Dict[str, Any], attempt: int) -> Optional[str]:
        if "wait" not in sspec:
            return self.home.stage_log(run, sspec["name"], attempt)
        log = sspec["wait"].get("log")
        if not log:
            return None
        return log if os.path.isabs(log) else os.path.join(spec["workdir"], log)

    def _watch(self, spec: Dict[str, Any], sspec: Dict[str, Any], log: Optional[str], now: float) -> Any:
        if not log:
            return None
        if spec["name"] not in self.rules:
            self.rules[spec["name"]] = self.svc.rules(spec)
        wait = sspec.get("wait") or {}
        success = wait.get("pattern") if wait else sspec.get("success_pattern")
        fail = wait.get("fail_pattern") if wait else sspec.get("fail_pattern")
        return self.svc.stage_watch(log, self.rules[spec["name"]], success, fail,
                                    sspec.get("progress_pattern"), now)

    def _launch(self, act: Active, spec: Dict[str, Any], sspec: Dict[str, Any]) -> None:
        quota = self.svc.monitor_value("cpu_quota_cores")
        env = runner.stage_env(spec, sspec, act.run, act.attempt, quota, self.svc.env_hints(), self.home)
        try:
            act.popen = runner.launch(self.home, act.run, sspec, act.attempt, spec["workdir"], env)
        except OSError as exc:
            # Cannot even start the shim (no python? fd limit?): the attempt fails with the reason.
            atomic_write_json(self.home.stage_exit(act.run, act.stage, act.attempt),
                              {"exit_code": shim.SPAWN_FAILED, "signal": None, "ended_at": time.time(),
                               "error": "cannot start the stage shim: %s" % exc})

    # -- re-adopt after a daemon restart
    def adopt(self, run: Dict[str, Any], sspec: Dict[str, Any], st: Dict[str, Any], now: float) -> None:
        spec = self.chain.specs[run["name"]]
        act = Active(self.home, self.roots, run["name"], st["name"], st["attempt"], st["kind"])
        act.watch = self._watch(spec, sspec, st.get("log"), st.get("started_at") or now)
        if st["kind"] == "wait" and "pid" in sspec["wait"]:
            act.wait_pid_ticks = (st.get("proc") or {}).get("wait_pid_ticks")
        self.chain.active[run["name"]] = act
        boot = self.chain.boot_id
        if st.get("boot_id") and boot and st["boot_id"] != boot:
            self.finish(act, None, now, boot_changed=True)
            return
        log_line("run %s: re-adopted stage %s attempt %d" % (run["name"], st["name"], st["attempt"]))

    # -- every fast tick
    def check(self, act: Active, now: float, mono: float) -> None:
        for spec in self.svc.watch_call(act.watch, "poll", now, default=[]) or []:
            self._emit_spec(spec, act)
        act.escalate(mono)
        run = self.chain.runs[act.run]
        st = stage_of(run, act.stage)
        sspec = self.spec_stage(act)
        if act.kind == "wait":
            self._check_wait(act, sspec, st, now)
            return
        info = act.exit_info()
        if info is None:
            info = self._no_exit_file(act, run, sspec, st, now, mono)
            if info is None:
                return
        self.finish(act, info, now, vanished=bool(info.get("vanished")))

    def _no_exit_file(self, act: Active, run: Dict[str, Any], sspec: Dict[str, Any], st: Dict[str, Any],
                      now: float, mono: float) -> Optional[Dict[str, Any]]:
        """None while the attempt still runs; else what we know about how it ended."""
        if act.popen is None and not act.claimed():
            if now - (st.get("launched_at") or 0) > self._setting("launch_grace"):
                # The daemon died between saving `running` and the shim claiming the attempt:
                # nothing ran, so launching the same attempt now runs it exactly once.
                log_line("run %s: stage %s attempt %d never started; launching it" % (act.run, act.stage, act.attempt))
                st["launched_at"] = now
                self._launch(act, self.chain.specs[act.run], sspec)
            return None
        if act.shim_alive():
            self._check_timeout(act, sspec, st, now, mono)
            return None
        if act.popen is not None and act.popen.returncode == shim.EXIT_CLAIMED:
            act.popen = None      # an earlier shim owns this attempt: follow that one
            return None
        info = act.exit_info()    # the shim writes it just before exiting
        if info is not None:
            return info
        if act.load_pidinfo() is None and act.claimed() and self._claim_age(act) < self._setting("launch_grace"):
            return None           # claimed, the pid file is on its way
        if act.command_alive():
            self._check_timeout(act, sspec, st, now, mono)
            return None           # the shim was killed but the command still runs: keep watching it
        if act.stop_reason:
            return {"exit_code": None, "signal": 9 if act.killed else 15, "ended_at": now}
        return {"exit_code": None, "signal": None, "ended_at": now, "vanished": True}

    def _claim_age(self, act: Active) -> float:
        try:
            return time.time() - os.stat(self.home.stage_claim(act.run, act.stage, act.attempt)).st_mtime
        except OSError:
            return 0.0

    def _check_timeout(self, act: Active, sspec: Dict[str, Any], st: Dict[str, Any], now: float, mono: float) -> None:
        timeout = sspec.get("timeout")
        if timeout and act.stop_reason is None and now - (st.get("started_at") or now) > timeout:
            log_line("run %s: stage %s ran past its timeout (%ss); stopping it" % (act.run, act.stage, timeout))
            self.stop(act, "timeout", mono)

    def _check_wait(self, act: Active, sspec: Dict[str, Any], st: Dict[str, Any], now: float) -> None:
        wait = sspec["wait"]
        done = act.stop_reason is not None
        if not done and "log" in wait:
            done = bool(getattr(act.watch, "success_seen", False) or getattr(act.watch, "fail_line", None))
        elif not done and "file" in wait:
            path = wait["file"]
            done = os.path.exists(path if os.path.isabs(path) else os.path.join(self.chain.specs[act.run]["workdir"], path))
        elif not done and "pid" in wait:
            done = not procs.alive(self.roots, wait["pid"], act.wait_pid_ticks)
        if not done and sspec.get("timeout") and now - (st.get("started_at") or now) > sspec["timeout"]:
            act.stop_reason = "timeout"
            done = True
        if done:
            self.finish(act, None, now)

    def stop(self, act: Active, reason: str, mono: float) -> None:
        if act.kind == "wait":
            act.stop_reason = act.stop_reason or reason    # nothing of ours to signal
        else:
            act.terminate(reason, self._setting("stop_grace"), mono)

    def _emit_spec(self, spec: Dict[str, Any], act: Active) -> None:
        if isinstance(spec, dict):
            spec = dict(spec)
            spec.setdefault("run", act.run)
            spec.setdefault("stage", act.stage)
            self.svc.emit(spec)

    # -- the end of an attempt
    def finish(self, act: Active, info: Optional[Dict[str, Any]], now: float,
               vanished: bool = False, boot_changed: bool = False) -> None:
        self.chain.active.pop(act.run, None)
        act.kill_leftovers()
        if act.popen is not None and act.popen.poll() is None:
            self.chain.reap.append(act.popen)   # it exits right after its exit file
        run = self.chain.runs[act.run]
        st = stage_of(run, act.stage)
        sspec = self.spec_stage(act)
        self.svc.watch_call(act.watch, "finish", now)
        self.svc.watch_call(act.watch, "close")
        facts = outcome.build_facts(
            sspec, st, self.chain.specs[act.run]["workdir"], info, act.watch, now, act.stop_reason,
            vanished, boot_changed, self.svc.monitor_value("oom_kill_count"),
            self.svc.monitor_value("gpu_faults_since", st.get("started_at") or now, default=[]), self.svc.disks())
        st.update(exit_code=facts["exit_code"], signal=facts["signal"],
                  progress=(self.svc.watch_call(act.watch, "status_block", default={}) or {}).get("progress"))
        if outcome.succeeded(facts):
            self._succeeded(run, st, facts, now)
            return
        cause = self.svc.diagnose(facts) or outcome.fallback_cause(facts)
        st["cause"] = cause
        if act.stop_reason in ("cancel", "preempt") or boot_changed:
            new = CANCELLED if act.stop_reason == "cancel" else INTERRUPTED
            self.chain.change_stage(run, st, new, now, cause=cause, attempt=st["attempt"])
            self.chain.fail_run(run, st, cause, now, new=new)
            return
        self._failed(run, sspec, st, facts, cause, now)

    def _succeeded(self, run: Dict[str, Any], st: Dict[str, Any], facts: Dict[str, Any], now: float) -> None:
        warnings = self.svc.success_warnings(facts)
        marker = self.home.marker(run["name"], st["name"])
        atomic_write_json(marker, {"run": run["name"], "stage": st["name"], "attempt": st["attempt"],
                                   "succeeded_at": iso_utc(now), "duration_s": facts["duration_s"],
                                   "exit_code": facts["exit_code"], "spec_sha256": run.get("spec_sha256")})
        st.update(marker=marker, warnings=warnings, last_success_s=facts["duration_s"])
        self.chain.change_stage(run, st, SUCCEEDED, now, attempt=st["attempt"], duration_s=facts["duration_s"],
                                warnings=warnings, severity="warning" if warnings else None)
        fast = self.svc.fast_spec(facts)
        if fast is not None:
            fast.setdefault("run", run["name"])
            fast.setdefault("stage", st["name"])
            self.svc.emit(fast)
        self.chain.advance(run, now)      # the next stage starts in this same tick

    def _failed(self, run: Dict[str, Any], sspec: Dict[str, Any], st: Dict[str, Any], facts: Dict[str, Any],
                cause: Dict[str, Any], now: float) -> None:
        extra = {"cause": cause, "attempt": st["attempt"], "duration_s": facts["duration_s"],
                 "last_lines": facts["last_lines"][-outcome.LAST_LINES:], "log": st.get("log"),
                 "evidence": cause.get("evidence") or []}
        if cause.get("retryable") and st.get("tries", 1) <= sspec.get("retries", 0):
            backoff = self._setting("retry_backoff") * (2 ** (st.get("tries", 1) - 1))
            st["retry_at"] = now + backoff
            self.chain.change_stage(run, st, PENDING, now, event="stage_retry", severity="warning",
                                    summary="stage %s failed (%s); retrying in %ds as attempt %d"
                                    % (st["name"], cause.get("class"), backoff, st["attempt"] + 1),
                                    next_attempt=st["attempt"] + 1, retry_in_s=backoff, **extra)
            return
        self.chain.change_stage(run, st, FAILED, now, summary="stage %s failed: %s"
                                % (st["name"], cause.get("summary", "")), **extra)
        self.chain.fail_run(run, st, cause, now)

    # -- preemption and stall checks
    def stop_all(self, reason: str, mono: float) -> None:
        for act in list(self.chain.active.values()):
            self.stop(act, reason, mono)

    def stall_checks(self, now: float, default_stall: Optional[float]) -> None:
        for act in list(self.chain.active.values()):
            spec = self.chain.specs[act.run]
            sspec = self.spec_stage(act)
            after = sspec.get("stall_after") or spec.get("stall_after") or default_stall
            if not after or act.watch is None:
                continue
            mtime = runner.newest_mtime(spec["workdir"], sspec.get("expect") or [])
            for ev in self.svc.watch_call(act.watch, "stall_check", now, after, mtime, self.svc.gpu_busy(),
                                          default=[]) or []:
                self._emit_spec(ev, act)

    def progress(self, run: str) -> Optional[Dict[str, Any]]:
        act = self.chain.active.get(run)
        if act is None or act.watch is None:
            return None
        return self.svc.watch_call(act.watch, "status_block", default=None)
