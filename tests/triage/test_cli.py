"""`rgt-agent triage` (real subprocess, bare interpreter, the shipped .pyz) and
`rgt-client triage` (CliRunner): same report, documented exit codes, no tracebacks."""
from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from rgt_client.cli import cli
from tests.triage.conftest import CORPUS

OOM = str(CORPUS / "cuda_oom__torch2.log")


def test_agent_triage_json_and_exit_codes(agent):
    out = agent("triage", OOM, "--exit-code", "1", "--json", bare=True)
    assert out.returncode == 4, out.stderr
    rep = json.loads(out.stdout)
    assert rep["schema"] == "rgt.triage/1" and rep["verdict"] == "failed"
    assert rep["cause"]["class"] == "cuda_oom"
    assert rep["classes"]["cuda_oom"]["first_line"] == 15
    assert rep["lines"] == 15 and rep["progress"]["done"] == 30 and rep["progress_line_no"] == 5
    out = agent("triage", OOM, "--exit-code", "0", "--json")
    rep = json.loads(out.stdout)
    assert out.returncode == 0 and rep["cause"] is None and rep["verdict"] == "ok"
    assert any("traceback follows the last progress line" in w for w in rep["warnings"])


def test_agent_triage_text_names_classes_lines_and_the_remediation(agent):
    out = agent("triage", str(CORPUS / "disk_full__oserror.log"))
    assert out.returncode == 4
    text = out.stdout.decode()
    assert "disk_full" in text and "line 7" in text
    assert "remediation: `df -h`" in text and "evidence:" in text


def test_agent_triage_without_exit_code_and_no_failure(agent):
    out = agent("triage", str(CORPUS / "innocent.log"), "--json")
    rep = json.loads(out.stdout)
    assert out.returncode == 0 and rep["verdict"] == "no_failure_found" and rep["cause"] is None


def test_agent_triage_bad_input_is_an_error_with_a_hint(agent, tmp_path):
    out = agent("triage", str(tmp_path / "nope.log"))
    assert out.returncode == 2
    assert out.stderr.decode().startswith("Error: no such log file") and b"Hint:" in out.stderr
    bad = tmp_path / "rules.json"
    bad.write_text('[{"class": "x"}]')
    out = agent("triage", OOM, "--rules", str(bad))
    assert out.returncode == 2 and b"pattern" in out.stderr and b"Traceback" not in out.stderr
    out = agent("triage", OOM, "--progress-pattern", "step")
    assert out.returncode == 2 and b"named group" in out.stderr


def test_agent_triage_with_job_rules_file(agent, tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"class": "wandb_key", "pattern": "wandb.errors.CommError",
                                  "severity": "critical", "remediation": "wandb login"}]))
    out = agent("triage", str(CORPUS / "network_transient__wandb.log"), "--exit-code", "1",
                "--rules", str(rules), "--json")
    assert json.loads(out.stdout)["cause"]["class"] == "wandb_key"


def test_the_shipped_pyz_runs_triage_bare(agent_pyz):
    out = subprocess.run([sys.executable, "-S", str(agent_pyz), "triage",
                          str(CORPUS / "nccl__watchdog.log"), "--exit-code", "134", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 4, out.stderr
    assert json.loads(out.stdout)["cause"]["class"] == "nccl"


def test_client_triage_runs_the_same_code_locally():
    r = CliRunner().invoke(cli, ["triage", OOM, "--exit-code", "1", "--json"])
    assert r.exit_code == 4, r.output
    assert json.loads(r.output)["cause"]["class"] == "cuda_oom"
    r = CliRunner().invoke(cli, ["triage", str(CORPUS / "innocent.log"), "--exit-code", "0"])
    assert r.exit_code == 0 and "outcome: exit 0, no warnings" in r.output


def test_client_triage_bad_input():
    r = CliRunner().invoke(cli, ["triage", "/nonexistent/x.log"])
    assert r.exit_code == 2
    assert "Error: no such log file" in r.output and "Hint:" in r.output


def test_triage_reads_stdin_and_negative_exit_codes(agent):
    data = (CORPUS / "hangup.log").read_bytes()
    out = agent("triage", "-", "--exit-code", "-1", "--json", stdin=data)
    rep = json.loads(out.stdout)
    assert out.returncode == 4 and rep["log"] == "-"
    assert rep["cause"]["class"] == "hangup"
    assert rep["cause"]["evidence"][0] == "exit code -1 = killed by SIGHUP"
    assert "Hangup" in rep["cause"]["evidence"][1]
    r = CliRunner().invoke(cli, ["triage", "-", "--json"], input=(CORPUS / "cuda_oom__torch2.log").read_bytes())
    assert r.exit_code == 4 and json.loads(r.output)["cause"]["class"] == "cuda_oom"


WRAPPED = ("step 10/100 loss 1.2\nTraceback (most recent call last):\n  File \"train.py\", line 9\n"
           "RuntimeError: [enforce fail at inline_container.cc:337] . unexpected pos 1134 vs 1130\n"
           "Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 8\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")


def test_triage_shows_the_deciding_line_and_what_it_overruled(agent, tmp_path):
    log = tmp_path / "wrapped.log"
    log.write_text(WRAPPED)
    out = agent("triage", str(log), "--exit-code", "1", bare=True)
    text = out.stdout.decode()
    assert out.returncode == 4
    assert "  decided by: log line 4: RuntimeError: [enforce fail" in text
    assert "  overruled:\n    - log line 7: torch.distributed.elastic.multiprocessing.errors." \
           "ChildFailedError: is torchrun's report of a failed rank (ChildFailedError): looked " \
           "through to log line 4" in text
    r = CliRunner().invoke(cli, ["triage", str(log), "--exit-code", "1", "--json"])
    cause = json.loads(r.output)["cause"]
    assert cause["class"] == "disk_full" and cause["decided_by"].startswith("log line 4: RuntimeError")
    assert len(cause["overruled"]) == 1 and "looked through to log line 4" in cause["overruled"][0]
    r = CliRunner().invoke(cli, ["triage", str(log), "--exit-code", "1"])
    assert "decided by: log line 4" in r.output and "looked through to log line 4" in r.output
