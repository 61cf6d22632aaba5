"""Rows and structure read from the sources the fourth wave's field cases led to: a kill's sender
that names itself decides over the OOM guess of exit 137, a TensorRT engine refused explains the
code that then has no engine, a row with a remedy of its own is a rule's answer that the known
failures never overrule, and each message decides the same class in every spelling its sources
print. Lines are the sources' own wording (see each row's `source`), not the field logs'."""
from __future__ import annotations

import pytest

from boxagent.triage.builtin_rules import REMEDIATION
from boxagent.triage.cli import report
from boxagent.triage.known.advice import undecided

TB = "Traceback (most recent call last):\n  File \"serve.py\", line 9, in <module>\n    main()\n"


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


@pytest.mark.parametrize("message,cls", [
    ("The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi.",
     "disk_full"),
    ("Pod ephemeral local storage usage exceeds the total limit of containers 2Gi.", "disk_full"),
    ("Pod was terminated in response to imminent node shutdown.", "preempted"),
])
def test_a_kill_whose_sender_names_its_reason_is_that_reason_not_the_oom_guess(tmp_path, message,
                                                                                cls):
    c = _cause(tmp_path, "status:\n  message: '%s'\n  phase: Failed\n  reason: Evicted\n"
               % message, 137)
    assert c["class"] == cls, c


def test_a_bare_sigkill_is_still_the_oom_guess(tmp_path):
    assert _cause(tmp_path, "step 12/100\n", 137)["class"] == "cgroup_oom"


def test_a_refused_tensorrt_engine_explains_the_assertion_on_the_missing_engine(tmp_path):
    text = ("[TRT] [E] 6: The engine plan file is generated on an incompatible device, expecting "
            "compute 8.6 got compute 9.0, please rebuild.\n" + TB +
            "    assert self.engine is not None\nAssertionError\n")
    c = _cause(tmp_path, text)
    assert c["class"] == "torch_arch_mismatch", c


def test_a_code_error_with_a_remedy_of_its_own_is_decided_a_bare_one_is_not():
    assert undecided({"class": "code_error", "runner_up": None,
                      "remediation": REMEDIATION["code_error"]})
    assert not undecided({"class": "code_error", "runner_up": None,
                          "remediation": "the image holds the driver files the toolkit mounts"})


@pytest.mark.parametrize("lines,cls", [
    # SIGKILL: bash, Go's os/exec
    (["Killed", "go build example.com/x: /usr/local/go/pkg/tool/linux_amd64/compile: signal: killed"],
     "cgroup_oom"),
    # a dial that timed out, with and without the address Go prints when it has one
    (["Get \"https://proxy.golang.org/x/@v/v1.mod\": dial tcp 142.250.1.1:443: i/o timeout",
      "Get \"https://proxy.golang.org/x/@v/v1.mod\": dial tcp: i/o timeout"], "network_transient"),
    # ENOEXEC: glibc, Go (runc)
    (["/bin/sh: 1: ./a.out: Exec format error",
      "exec /usr/bin/python3: exec format error"], "code_error"),
    # a ptxas older than the GPU: XLA's two warnings, LLVM's NVPTX backend
    (["Falling back to the CUDA driver for PTX compilation; ptxas does not support CC 12.0",
      "UNIMPLEMENTED: ptxas ptxas too old. Falling back to the driver to compile.",
      "LLVM ERROR: PTX version 8.4 does not support target 'sm_120a'. Minimum required PTX "
      "version is 8.7."], "torch_arch_mismatch"),
])
def test_each_message_decides_one_class_in_every_spelling_its_sources_print(tmp_path, lines, cls):
    for line in lines:
        assert _cause(tmp_path, line + "\n")["class"] == cls, line


def test_skypilot_s_preemption_decides_over_the_sigterm_that_follows_it(tmp_path):
    text = ("I 05-04 00:52:46 controller.py:100] The cluster is preempted.\n"
            "I 05-04 00:52:46 spot_state.py:99] === Recovering... ===\n")
    assert _cause(tmp_path, text, 143)["class"] == "preempted"


def test_a_ci_runner_s_download_timeout_is_transient(tmp_path):
    line = ("##[error]The request was canceled due to the configured HttpClient.Timeout of 100 "
            "seconds elapsing.\n")
    assert _cause(tmp_path, line)["class"] == "network_transient"
