"""The rule table: every alternative of every built-in rule has a real example line; the
literal prefilter never hides a match; innocent "error" words are not crashes."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from boxagent.triage.rules import ScanState, build_rules, derive_keywords, minimal_anchors
from boxagent.triage.text import match_text
from tests.triage.conftest import CORPUS

EXAMPLES = [
    ("gpu_hardware", "[ 9813.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."),
    ("gpu_hardware", "NVRM: Xid (PCI:0000:AF:00.0): 48, pid=7, An uncorrectable double bit error"),
    ("gpu_hardware", "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"),
    ("gpu_hardware", "pynvml.NVMLError_GPUIsLost: GPU is lost"),
    ("gpu_hardware", "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    ("crlf_script", "run.sh: line 2: $'\\r': command not found"),
    ("crlf_script", "run.sh: line 9: syntax error near unexpected token `$'do\\r''"),
    ("crlf_script", "run.sh: line 3: set: -\r: invalid option"),
    ("crlf_script", "/usr/bin/env: \u2018bash\\r\u2019: No such file or directory"),
    ("crlf_script", "bash: ./run.sh: /bin/bash^M: bad interpreter: No such file or directory"),
    ("crlf_script", "sbatch: error: Batch script contains DOS line breaks (\\r\\n)"),
    ("crlf_script", "In x.sh line 2: SC1017: Literal carriage return. Run script through tr -d '\\r'."),
    ("timeout", "##[error]The job running on runner GitHub Actions 12 has exceeded the maximum "
                "execution time of 360 minutes."),
    ("timeout", "Task's current input in-8f2k hit its timeout of 300s"),
    ("cgroup_oom", "srun: error: gpu-a07: task 0: Killed"),
    ("killed", "srun: error: gpu-a07: tasks 0-3: Terminated"),
    ("truncated_checkpoint", "OSError: image file is truncated (3 bytes not processed)"),
    ("timeout", "job 4412 reached its time limit and was terminated"),
    ("cgroup_oom", "(raylet) 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
                   "crashed due to other reasons"),
    ("cgroup_oom", "systemd-oomd[611]: Killed /user.slice/session-3.scope due to memory pressure for "
                   "/user.slice being 71.44% > 50.00%"),
    ("cgroup_oom", "earlyoom[454]: low memory! at or below SIGKILL limits: mem  5.00%, swap  5.00%"),
    ("driver_too_old", "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"),
    ("driver_too_old", "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040)."),
    ("driver_too_old", "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."),
    ("driver_too_old", "Error 804: forward compatibility was attempted on non supported HW"),
    ("torch_arch_mismatch", "RuntimeError: CUDA error: no kernel image is available for execution on the device"),
    ("torch_arch_mismatch", "NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation."),
    ("disk_full", "OSError: [Errno 28] No space left on device: '/root/autodl-tmp/x.pt'"),
    ("disk_full", "cp: error writing '/data/x.bin': No space left on device"),
    ("disk_full", "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 1839285248 vs 1839285136"),
    ("disk_full", "terminate called after throwing an instance of 'std::ios_base::failure' what():  basic_ios::clear: iostream error"),
    ("disk_full", "OSError: [Errno 122] Disk quota exceeded"),
    ("disk_full", "Error: ENOSPC: no space left on device, write"),
    ("truncated_checkpoint", "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"),
    ("truncated_checkpoint", "_pickle.UnpicklingError: invalid load key, '\\x00'."),
    ("truncated_checkpoint", "EOFError: Ran out of input"),
    ("truncated_checkpoint", "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge"),
    ("truncated_checkpoint", "zipfile.BadZipFile: File is not a zip file"),
    ("truncated_checkpoint", "OSError: image file is truncated (48 bytes not processed)"),
    ("cuda_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"),
    ("cuda_oom", "RuntimeError: CUDA error: out of memory"),
    ("cuda_oom", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
    ("cuda_oom", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2G"),
    ("cgroup_oom", "Killed"),
    ("cgroup_oom", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=3302.batch. Some of your "
                   "processes may have been killed by the cgroup out-of-memory handler."),
    ("cgroup_oom", "slurmstepd: error: Step 3302.0 exceeded memory limit (1048576 > 65536), being killed"),
    ("cgroup_oom", "slurmstepd: error: Exceeded job memory limit"),
    ("timeout", "slurmstepd: error: *** JOB 48213 ON gpu-a07 CANCELLED AT 2024-05-01T09:00:00 DUE TO TIME LIMIT ***"),
    ("preempted", "slurmstepd: error: *** JOB 77120 ON node014 CANCELLED AT 2024-06-11T14:03:55 DUE TO PREEMPTION ***"),
    ("node_failure", "slurmstepd: error: *** JOB 901 ON cn112 CANCELLED AT 2024-03-02T03:14:08 DUE TO NODE "
                     "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"),
    ("cgroup_oom", "/root/run.sh: line 7:  4182 Killed                  python prepare.py"),
    ("cgroup_oom", "RuntimeError: DataLoader worker (pid 28133) is killed by signal: Killed."),
    ("cgroup_oom", "[12345.6] Memory cgroup out of memory: Killed process 4182 (python)"),
    ("cgroup_oom", "  exitcode  : -9 (pid: 4713)"),
    ("nccl", "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled system error"),
    ("nccl", "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited"),
    ("nccl", "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"),
    ("nccl", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"),
    ("network_transient", "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out."),
    ("network_transient", "socket.gaierror: [Errno -3] Temporary failure in name resolution"),
    ("network_transient", "fatal: unable to access 'https://github.com/x/y.git/': Could not resolve host: github.com"),
    ("network_transient", "curl: (6) Could not resolve host: pypi.org"),
    ("network_transient", "ssh: connect to host 10.0.0.2 port 22: Connection timed out"),
    ("network_transient", "huggingface_hub.utils._errors.HfHubHTTPError: 503 Server Error: Service Unavailable for url"),
    ("network_transient", "wandb: Network error (ConnectionError), entering retry loop."),
    ("network_transient", "urllib3.exceptions.ProtocolError: ('Connection aborted.', RemoteDisconnected('closed'))"),
    ("hangup", "./train.sh: line 4:  2222 Hangup                  python train.py"),
    ("hangup", "Hangup"),
    ("hangup", "torch.distributed.elastic.multiprocessing.api: Received 1 death signal, shutting down workers"),
    ("killed", "./go.sh: line 3: 9124 Terminated              python train.py"),
    ("killed", "Received SIGTERM, shutting down"),
    ("divergence", "FloatingPointError: Loss became infinite or NaN at step 7400"),
    ("divergence", "step 7300/20000 loss=nan lr 3.0e-4"),
    ("divergence", "{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 1.2}"),
    ("divergence", "Epoch 3: 45%|####5 | 450/1000 [01:02<01:20, train_loss=nan]"),
    ("divergence", "ValueError: Loss is NaN, stopping training"),
    ("divergence", "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output."),
    ("code_error", "RuntimeError: CUDA error: device-side assert triggered"),
    ("code_error", "  File \"t.py\", line 1\nSyntaxError: invalid syntax"),
    ("code_error", "/usr/bin/python3: No module named train"),
    ("code_error", "python: can't open file '/root/trian.py': [Errno 2] No such file or directory"),
    ("code_error", "run.sh: line 3: pyhton: command not found"),
    ("code_error", "train.py: error: the following arguments are required: --data"),
    ("code_error", "NameError: name 'flash_attn_varlen_func' is not defined"),
    ("code_error", "AssertionError"),
    # wordings of other layers, other eras and other locales
    ("crlf_script", "datart-server.sh:\u884c2: $'\\r': \u672a\u627e\u5230\u547d\u4ee4"),
    ("crlf_script", "/usr/bin/env: \u201cbash\\r\u201d: \u6ca1\u6709\u90a3\u4e2a\u6587\u4ef6"),
    ("crlf_script", "./hat_install.sh: line 4: cd: $'.\\r': No such file or directory"),
    ("disk_full", "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter "
                  "failed writing file data/176: file write failed"),
    ("cuda_oom", "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 "
                 "error=2 : out of memory"),
    ("cuda_oom", "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/THCStorage.cu:58"),
    ("cgroup_oom", "[1]  + 26478 killed     python train.py"),
    ("cgroup_oom", "zsh: killed     python train.py"),
    ("cgroup_oom", "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated "
                   "with signal SIGKILL"),
    ("cgroup_oom", "subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died "
                   "with <Signals.SIGKILL: 9>."),
    ("nccl", "RuntimeError: NCCL Error 2: unhandled system error"),
    ("network_transient", "TimeoutError: The read operation timed out"),
    ("network_transient", "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while "
                          "trying to locate the file on the Hub"),
    ("network_transient", "OSError: [Errno 101] Network is unreachable"),
    ("hangup", "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2919043 "
               "closing signal SIGHUP"),
    ("hangup", "torch.distributed.elastic.multiprocessing.api.SignalException: Process 2704337 "
               "got signal: 1"),
    ("killed", "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, "
               "shutting down workers"),
    ("divergence", "Exception: Current loss scale already at minimum - cannot decrease scale "
                   "anymore. Exiting run."),
    ("divergence", "ValueError:Network outputs is NAN! Stop Training"),
    ("divergence", "[2023-06-07 22:24:46,260] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] "
                   "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2"),
]


def _classify(rs, line, traceback=True):
    state = ScanState()
    if traceback:
        state.traceback_line = 0
    h = rs.match_line(line.encode("utf-8"), 1, state)
    return h and h["class"]


@pytest.mark.parametrize("cls,line", EXAMPLES, ids=[str(i) for i in range(len(EXAMPLES))])
def test_example_lines_get_their_class(cls, line):
    assert _classify(build_rules(), line) == cls


def test_every_builtin_rule_has_an_example():
    rs = build_rules()
    for rule in rs.rules:
        if rule.source != "builtin" or rule.needs_traceback or rule.tag or rule.vocab:
            continue              # a vocabulary row carries its own example (test_vocab)
        assert any(rule.rx.search(match_text(line.encode())) for _, line in EXAMPLES), rule.pattern


def test_keywords_never_hide_a_match():
    """The prefilter is only an optimisation: every line a rule's regex matches holds one of
    its keywords (examples and the whole corpus)."""
    lines = [l.encode() for _, l in EXAMPLES]
    for p in CORPUS.glob("*.log"):
        lines += p.read_bytes().split(b"\n")
    for rule in build_rules().rules:
        for raw in lines:
            if rule.rx.search(match_text(raw)):
                assert any(k in raw for k in rule.keywords), (rule.pattern, raw)


def test_a_loss_scale_still_calibrating_is_no_divergence():
    """fp16's dynamic loss scale halves on overflow while it finds its level: normal"""
    rs = build_rules()
    for line in ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16384, "
                 "reducing to 8192",
                 "[deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 134217728.0, "
                 "reducing to 67108864.0",
                 "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but "
                 "hysteresis is 2. Reducing hysteresis to 1"):
        assert _classify(rs, line) is None, line


def test_torchrun_stopping_its_other_workers_is_no_kill_from_outside():
    """after one rank fails torchrun SIGTERMs the rest: that says nothing of who killed it"""
    line = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 197 closing signal SIGTERM"
    assert _classify(build_rules(), line) is None


def test_innocent_error_words_are_not_a_crash():
    rs = build_rules()
    for line in ("val_error=0.12", "ErrorRate: 3", "MeanSquaredError: 0.1", "errors: 0",
                 "mean_error 0.3 | error_rate 0.01", "no NaN values found", "loss 0.000 killed_features=[]",
                 "Exception handling enabled", "ConnectionPool size 10"):
        assert _classify(rs, line, traceback=False) is None, line
    # after a traceback header, an exception line is a crash; Python's own exception names
    # are one anywhere (a paste that starts mid-traceback), other names only in a traceback
    assert _classify(rs, "ValueError: shapes (3,) and (4,) not aligned") == "code_error"
    assert _classify(rs, "ValueError: shapes (3,) and (4,) not aligned", traceback=False) == "code_error"
    assert _classify(rs, "ShapeError: (3,) and (4,) not aligned") == "code_error"
    assert _classify(rs, "ShapeError: (3,) and (4,) not aligned", traceback=False) is None
    assert _classify(rs, "Exception: bad config") == "code_error"


def test_derived_keywords():
    assert derive_keywords(r"Killed|Hangup") == ["Killed", "Hangup"]
    assert derive_keywords(r"[Ll]oss is nan") == ["oss is nan"]
    assert derive_keywords(r"a(bcd|efg)h") == ["bcd", "efg"]
    assert derive_keywords(r"(?i)error") is None          # case-insensitive: no literal
    assert derive_keywords(r"^\d+ k") is None             # nothing of 3 characters
    rs = build_rules(None, [{"class": "c", "pattern": r"(?i)fatal"}])
    assert not rs.anchored                                 # every line becomes a candidate


def test_minimal_anchors_drop_redundant_keywords():
    assert minimal_anchors([b"Error", b"OutOfMemoryError", b"Killed", b"Killed by"]) == (b"Error", b"Killed")


def test_a_job_rule_without_literals_still_matches(tmp_path):
    from tests.triage.conftest import watch_file
    p = tmp_path / "x.log"
    p.write_bytes(b"ok\nFATAL disk\nok\n")
    rs = build_rules(None, [{"class": "fatal", "pattern": r"(?i)^fatal", "severity": "critical"}])
    assert [h["class"] for h in watch_file(p, rules=rs).hits] == ["fatal"]


@pytest.mark.skipif(not shutil.which("grep"), reason="grep is not installed")
def test_grep_reads_the_builtin_alternation_like_python():
    """The benchmark hands grep -E the same alternation: it must mean the same thing."""
    alt = build_rules().alternation()
    for p in sorted(CORPUS.glob("*.log")):
        if p.name == "crlf_script.log":
            continue                      # a raw CR splits a line for python's ^/$ only
        lines = p.read_bytes().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        py = sum(1 for raw in lines if any(r.rx.search(match_text(raw)) for r in build_rules().rules))
        out = subprocess.run(["grep", "-a", "-E", "-c", "-e", alt, str(p)], capture_output=True)
        assert out.returncode in (0, 1), out.stderr
        assert int(out.stdout) == py, p.name


def test_the_same_rules_are_compiled_once_and_other_rules_get_their_own_set():
    """A sweep's runs share their rules: the daemon must not recompile ~100 patterns per run."""
    from boxagent.triage import build_rules
    job = [{"class": "data_error", "pattern": "bad shard \\d+"}]
    assert build_rules(None, job) is build_rules(None, [dict(job[0])])
    other = build_rules(None, [{"class": "data_error", "pattern": "corrupt shard"}])
    assert other is not build_rules(None, job)
    assert any(r.pattern == "corrupt shard" for r in other.rules)
    assert not any(r.pattern == "corrupt shard" for r in build_rules(None, job).rules)
