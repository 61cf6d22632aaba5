"""The diagnosis precedence, one rule per test, named after what it guards against."""
from __future__ import annotations

import os

from boxagent.triage import build_rules, diagnose
from tests.triage.conftest import corpus_facts, watch_file

XID79 = {"type": "gpu_xid", "code": 79, "gpu": 0, "at": 5.0, "source": "kmsg", "hardware": True,
         "summary": "Xid 79 on GPU 0 (PCI:0000:3b:00): GPU has fallen off the bus"}


def _log(tmp_path, text, name="stage.log"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def _facts(tmp_path, text, **extra):
    f = watch_file(_log(tmp_path, text)).facts()
    f.update(extra)
    return f


def test_xid79_outranks_the_cuda_error_it_causes():
    cause = diagnose(corpus_facts("gpu_hardware__unspecified_launch.log", exit_code=1, gpu_faults=[XID79]))
    assert cause["class"] == "gpu_hardware"
    assert cause["evidence"][0].startswith("Xid 79")
    assert any("explains log line 5: RuntimeError: CUDA error" in e for e in cause["evidence"])
    assert cause["retryable"] is False


def test_gpu_lost_from_nvml_is_gpu_hardware_even_without_a_hardware_flag():
    lost = {"type": "gpu_lost", "gpu": 1, "at": 1.0, "source": "nvml"}
    assert diagnose({"exit_code": 1, "gpu_faults": [lost]})["class"] == "gpu_hardware"


def test_application_xid_13_does_not_blame_the_gpu():
    x13 = {"type": "gpu_xid", "code": 13, "gpu": 0, "hardware": False, "source": "nvml"}
    cause = diagnose(corpus_facts("code_error__keyerror.log", exit_code=1, gpu_faults=[x13]))
    assert cause["class"] == "code_error"


def test_xid_with_hex_bus_id(tmp_path):
    # the trap: a monitor regex of [0-9:]+ misses bus ids with hex letters and the real Xid
    for bus in ("0000:3b:00", "0000:AF:00.0", "0000:e1:00"):
        facts = _facts(tmp_path, "NVRM: Xid (PCI:%s): 79, pid=1234, name=python, GPU has fallen "
                       "off the bus.\n" % bus, exit_code=1)
        assert [h["class"] for h in facts["hits"]] == ["gpu_hardware"], bus
        assert diagnose(facts)["class"] == "gpu_hardware"
    facts = _facts(tmp_path, "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception\n", exit_code=1)
    assert facts["hits"] == []            # Xid 13 is the application's error, not the hardware


def test_oom_kill_delta_outranks_a_killed_line():
    cause = diagnose(corpus_facts("cgroup_oom__bash_killed.log", exit_code=137, oom_kill_delta=2))
    assert cause["class"] == "cgroup_oom"
    assert cause["evidence"][0] == "cgroup oom_kill counter +2 during the stage"
    assert any("4182 Killed" in e for e in cause["evidence"])


def test_killed_line_with_a_still_oom_counter_is_a_kill_from_outside():
    cause = diagnose(corpus_facts("cgroup_oom__bash_killed.log", exit_code=137, oom_kill_delta=0))
    assert cause["class"] == "killed"
    assert "not the OOM killer" in "\n".join(cause["evidence"])


def test_reboot_is_never_an_oom():
    facts = corpus_facts("cgroup_oom__bash_killed.log", exit_code=137, boot_changed=True,
                         oom_kill_delta=None, vanished=True)
    cause = diagnose(facts)
    assert cause["class"] == "machine_restart"
    assert cause["retryable"] is True
    assert cause["evidence"][0] == "boot_id changed while the stage ran"


def test_vanished_process_is_restart_oom_hangup_crash_or_kill(tmp_path):
    prog = "step 1/10 loss 1.0\nstep 2/10 loss 0.9\n"
    assert diagnose(_facts(tmp_path, prog, vanished=True, boot_changed=True))["class"] == "machine_restart"
    assert diagnose(_facts(tmp_path, prog, vanished=True, oom_kill_delta=1))["class"] == "cgroup_oom"
    c = diagnose(_facts(tmp_path, prog, vanished=True, hangup=True))
    assert c["class"] == "hangup"
    c = diagnose(_facts(tmp_path, prog + "Received 1 death signal, shutting down workers\n", vanished=True))
    assert c["class"] == "hangup" and "death signal" in c["evidence"][0]
    c = diagnose(_facts(tmp_path, prog + "Traceback (most recent call last):\n  File \"t.py\"\n"
                        "ValueError: bad shape\n", vanished=True, oom_kill_delta=0))
    assert c["class"] == "code_error" and "vanished" in c["summary"]
    c = diagnose(_facts(tmp_path, prog, vanished=True, oom_kill_delta=0))
    assert c["class"] == "killed"
    assert "no reboot, no OOM kill, no hangup" in c["summary"]
    assert "cgroup oom_kill unchanged" in c["evidence"] and "boot_id unchanged" in c["evidence"]


def test_cancel_preemption_and_timeout_come_from_the_daemon():
    base = corpus_facts("cuda_oom__torch2.log", exit_code=143)
    assert diagnose(dict(base, cancelled=True))["class"] == "cancelled"
    c = diagnose(dict(base, preempted=True))
    assert c["class"] == "preempted" and c["retryable"] is True
    c = diagnose(dict(base, timed_out=True, timeout_s=600))
    assert c["class"] == "timeout" and "600" in c["evidence"][0]
    # a dead GPU explains a hang that ran into the timeout
    assert diagnose(dict(base, timed_out=True, gpu_faults=[XID79]))["class"] == "gpu_hardware"
    assert diagnose(dict(base, preflight=["GPU 0 at 91 C > max_gpu_temp_c 85"]))["class"] == "preflight_failed"


def _disk(path, bytes_pct, inodes_pct, role="workdir"):
    return {"path": path, "role": role, "bytes_total": 1 << 30, "bytes_used_pct": bytes_pct,
            "inodes_total": 1000, "inodes_used_pct": inodes_pct}


def test_disk_full_vs_inodes_full_from_the_disk_state():
    f = corpus_facts("disk_full__oserror.log", exit_code=1)
    c = diagnose(dict(f, disks=[_disk("/root/autodl-tmp", 100.0, 3.0)]))
    assert c["class"] == "disk_full" and "100% of bytes" in c["evidence"][1]
    c = diagnose(dict(f, disks=[_disk("/root/autodl-tmp", 12.0, 100.0)]))
    assert c["class"] == "inodes_full" and c["retryable"] is False
    assert "100% of inodes used while bytes are 12% used" in c["evidence"][1]
    # the filesystem named in the error line decides, not another full one
    c = diagnose(dict(f, disks=[_disk("/", 99.5, 10.0, "state"), _disk("/root/autodl-tmp", 10.0, 100.0)]))
    assert c["class"] == "inodes_full"
    c = diagnose(dict(f, disks=[_disk("/root/autodl-tmp", 40.0, 40.0)]))
    assert c["class"] == "disk_full" and "space freed since" in c["evidence"][1]


def test_disk_probe_reads_the_real_filesystem(tmp_path):
    p = tmp_path / "ckpt.pt"
    facts = _facts(tmp_path, "OSError: [Errno 28] No space left on device: '%s'\n" % p,
                   exit_code=1, probe_disks=True)
    c = diagnose(facts)
    assert c["class"] == "disk_full"                  # this disk is not full: said as such
    st = os.statvfs(str(tmp_path))
    assert st.f_blocks and "bytes" in c["evidence"][1]


def test_signals_decide_when_the_log_says_nothing(tmp_path):
    quiet = "working\n"
    assert diagnose(_facts(tmp_path, quiet, exit_code=137, oom_kill_delta=0))["class"] == "killed"
    for ec in (137, -9):
        # nobody said who sent the SIGKILL and no counter says it: killed, the memory killer
        # named as the likely sender with the check, never as a fact
        c = diagnose(_facts(tmp_path, quiet, exit_code=ec))
        assert c["class"] == "killed" and "most likely the OOM killer" in c["summary"], ec
        assert c["confidence"] == "low" and c["runner_up"] == "cgroup_oom"
        assert "dmesg -T | grep -i -e oom" in c["tell_apart"]
        assert "counter not readable" in "\n".join(c["evidence"])
        assert "oom_kill counter" in c["remediation"] and "dmesg -T | grep -i -e oom" in c["remediation"]
        # offline (a pasted log): the memory killer keeps the class, said as low
        c = diagnose(_facts(tmp_path, quiet, exit_code=ec, offline=True))
        assert c["class"] == "cgroup_oom" and c["confidence"] == "low" and c["runner_up"] == "killed"
    assert diagnose(_facts(tmp_path, quiet, signal=1))["class"] == "hangup"
    assert diagnose(_facts(tmp_path, quiet, signal="SIGTERM"))["class"] == "killed"
    c = diagnose(_facts(tmp_path, quiet, exit_code=139))
    assert c["class"] == "nonzero_exit" and "SIGSEGV" in c["summary"]
    assert diagnose(_facts(tmp_path, quiet, exit_code=127))["class"] == "code_error"


def test_exit_zero_failures(tmp_path):
    f = _facts(tmp_path, "all good\n", exit_code=0, kind="run")
    c = diagnose(dict(f, expect_missing=["out/model.pt"]))
    assert c["class"] == "expect_missing" and "out/model.pt" in c["summary"]
    c = diagnose(dict(f, success_pattern="^DONE$", success_seen=False))
    assert c["class"] == "success_pattern_missing"
    c = diagnose(dict(f, fail_line="FATAL: dataset empty"))
    assert c["class"] == "code_error" and "FATAL: dataset empty" in c["summary"]
    # a save that failed on a full disk explains the missing output better than "missing"
    f2 = corpus_facts("disk_full__oserror.log", exit_code=0, expect_missing=["ckpt/step_10000.pt"])
    c = diagnose(f2)
    assert c["class"] == "disk_full" and any("missing or empty" in e for e in c["evidence"])


def test_errors_before_the_last_progress_line_are_not_the_cause(tmp_path):
    text = ("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.wandb.ai')\n"
            "step 1/100 loss 2.0\nstep 2/100 loss 1.9\n"
            "Traceback (most recent call last):\n  File \"train.py\", line 3\nKeyError: 'lr'\n")
    c = diagnose(_facts(tmp_path, text, exit_code=1))
    assert c["class"] == "code_error" and c["retryable"] is False
    assert "also in the log" not in "\n".join(c["evidence"])


def test_job_rules_add_classes_and_override_builtins(tmp_path):
    log = _log(tmp_path, "step 1/10\nFileNotFoundError: /data/shard-07.tar missing\n")
    rules = build_rules(None, [{"class": "dataset_missing", "pattern": r"shard-\d+\.tar missing",
                                "severity": "critical", "retryable": False,
                                "remediation": "re-sync the dataset from the bucket"}])
    from tests.triage.conftest import watch_file as wf
    c = diagnose(dict(wf(log, rules=rules).facts(), exit_code=1))
    assert c["class"] == "dataset_missing"
    assert c["remediation"] == "re-sync the dataset from the bucket"
    # same class + pattern as a built-in: replaces it (here: make CUDA OOM retryable)
    from boxagent.triage.builtin_rules import BUILTIN_RULES
    oom = next(r for r in BUILTIN_RULES if r["class"] == "cuda_oom")
    rules = build_rules([], [dict(oom, retryable=True, remediation="retry: the GPU is shared")])
    assert [r.source for r in rules.rules if r.pattern == oom["pattern"]] == ["job"]
    from tests.triage.conftest import CORPUS
    c = diagnose(dict(wf(CORPUS / "cuda_oom__torch2.log", rules=rules).facts(), exit_code=1))
    assert c["class"] == "cuda_oom" and c["retryable"] is True
    assert c["remediation"] == "retry: the GPU is shared"


def test_profile_rules_sit_between_builtins_and_job_rules(tmp_path):
    log = _log(tmp_path, "autodl: instance will be released\n")
    prof = [{"class": "platform_release", "pattern": "will be released", "severity": "critical"}]
    job = [{"class": "mine", "pattern": "instance will", "severity": "critical"}]
    assert diagnose(dict(watch_file(log, rules=build_rules(prof, [])).facts(), exit_code=1))["class"] == "platform_release"
    assert diagnose(dict(watch_file(log, rules=build_rules(prof, job)).facts(), exit_code=1))["class"] == "mine"


def test_malformed_rules_are_dropped_not_fatal():
    rs = build_rules([{"class": "x"}, "junk", {"class": "y", "pattern": "("}], [{"pattern": "a"}])
    assert all(r.source == "builtin" for r in rs.rules)


def test_odd_facts_never_raise():
    """The daemon hands over whatever it has; a diagnosis must come out regardless."""
    odd = [{}, {"exit_code": "1"}, {"signal": "KILL"}, {"signal": 99}, {"exit_code": 300},
           {"hits": ["junk", {"class": "disk_full"}, {"severity": "critical"}], "exit_code": 1},
           {"hits": [{"class": "disk_full", "severity": "critical", "line_no": None}],
            "disks": ["x", {"path": None}], "exit_code": 1},
           {"gpu_faults": ["x", {"type": "gpu_xid", "code": "79"}], "exit_code": 1},
           {"vanished": True, "last_lines": []}, {"expect_missing": ["a"], "exit_code": 0},
           {"oom_kill_delta": "3", "exit_code": 137}]
    from boxagent.triage import success_warnings
    for f in odd:
        c = diagnose(f)
        assert c["class"] and c["summary"] and isinstance(c["evidence"], list), f
        assert isinstance(success_warnings(f), list)


def test_sigkill_after_a_death_signal_is_a_kill_from_outside(tmp_path):
    """torchrun got SIGTERM and its workers SIGKILL after the grace: not the memory killer"""
    text = ("step 9/10\nW1130 12:13:49.388 124326 api.py:723] Received 15 death signal, "
            "shutting down workers\n")
    c = diagnose(_facts(tmp_path, text, exit_code=137))
    assert c["class"] == "killed"
    assert c["decided_by"].startswith("log line 2: W1130") and "Received 15 death signal" in c["decided_by"]


def _pip_cause(tmp_path, text):
    from boxagent.triage.cli import report
    p = tmp_path / "pip.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), 1, [], "auto", None, probe_disks=False)["cause"]


_NONE = ("ERROR: Could not find a version that satisfies the requirement flash-attn==2.6.3 (from "
         "versions: none)\nERROR: No matching distribution found for flash-attn==2.6.3\n")


def test_pips_no_versions_after_its_own_connection_retries_is_the_network(tmp_path):
    c = _pip_cause(tmp_path, "WARNING: Retrying (Retry(total=4, connect=None, read=None, "
                   "redirect=None, status=None)) after connection broken by 'ConnectTimeoutError("
                   "<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>, 'Connection to "
                   "pypi.org timed out. (connect timeout=15)')': /simple/flash-attn/\n" + _NONE)
    assert c["class"] == "network_transient", c


def test_pips_no_versions_with_no_retry_stays_the_jobs_error(tmp_path):
    c = _pip_cause(tmp_path, "Collecting flash-attn==2.6.3\n" + _NONE)
    assert c["class"] == "code_error" and c.get("runner_up") == "network_transient", c
