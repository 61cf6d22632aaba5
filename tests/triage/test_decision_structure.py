"""The decision's structural rules (emitters, causal precedence, launchers, logs that do not
look like Python), each justified by two independent cases: short excerpts in the wording of
the library named beside each, read through the daemon's own path (StageWatch -> diagnose)."""
from __future__ import annotations

from boxagent.triage import diagnose
from boxagent.triage.emitters import EMITTERS, emitter_of
from boxagent.triage.launchers import REPORTS, root_cause
from boxagent.triage.precedence import EXPLAINS
from tests.triage.conftest import watch_file

TB = "Traceback (most recent call last):\n  File \"train.py\", line 41, in <module>\n    main()\n"


def _cause(tmp_path, text, **facts):
    p = tmp_path / "stage.log"
    p.write_text(text)
    f = watch_file(p).facts()
    f.update(facts)
    return diagnose(f)


# -- emitters: who said the words decides what they mean
def test_every_emitter_row_names_its_source_and_a_known_domain():
    for sig, name, domain, source in EMITTERS:
        assert sig and name and source, name
        assert domain in ("host_memory", "gpu_memory", "collective", "scheduler", "download")


def test_out_of_memory_from_a_host_ram_emitter_is_not_gpu_memory(tmp_path):
    # pytorch c10/core/impl/alloc_cpu.cpp: the CPU allocator failing a tensor's allocation
    cpu = (TB + "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: "
           "not enough memory: you tried to allocate 34359738368 bytes.\n")
    c = _cause(tmp_path, cpu, exit_code=1)
    assert c["class"] == "cgroup_oom", c
    assert c["confidence"] == "medium" and c["runner_up"] == "code_error"
    # ray python/ray/exceptions.py: Ray's memory monitor killing a task for the node's RAM
    ray = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
           "memory.\nMemory on the node (IP: 10.0.0.5, ID: 9f2c) where the task was running "
           "was 61.02GB / 64.00GB (0.953469)\n")
    c = _cause(tmp_path, ray, exit_code=1)
    assert c["class"] == "cgroup_oom", c
    # numpy/core/_exceptions.py: an array too big for host RAM
    np_ = TB + ("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 74.5 GiB for an "
                "array with shape (100000, 100000) and data type float64\n")
    assert _cause(tmp_path, np_, exit_code=1)["class"] == "cgroup_oom"


def test_a_cuda_oom_is_still_the_gpu_whatever_else_the_line_says(tmp_path):
    # pytorch c10/cuda/CUDACachingAllocator.cpp
    gpu = (TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
           "has a total capacity of 79.10 GiB of which 1.06 GiB is free.\n")
    c = _cause(tmp_path, gpu, exit_code=1)
    assert c["class"] == "cuda_oom" and c["confidence"] == "high"
    assert emitter_of("torch.OutOfMemoryError: CUDA out of memory.")[1] == "gpu_memory"


def test_connection_refused_from_nccl_or_c10d_is_the_collective_not_a_download(tmp_path):
    # NCCL src/misc/socket.cc WARN line, under torch's c10d
    nccl = ("node1:1234:1300 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
            "10.0.0.2<43567> failed : Software caused connection abort\n" + TB +
            "ConnectionRefusedError: [c10d] Connection refused: NET/Socket connect to "
            "10.0.0.2<43567>\n")
    assert _cause(tmp_path, nccl, exit_code=1)["class"] == "nccl"
    # pytorch torch/csrc/distributed/c10d/TCPStore.cpp: a rank cannot reach the store
    store = (TB + "torch.distributed.DistNetworkError: Connection reset by peer: TCPStore "
             "client to 10.0.0.1:29500\n")
    assert _cause(tmp_path, store, exit_code=1)["class"] == "nccl"


def test_connection_refused_from_a_downloader_stays_a_network_blip(tmp_path):
    # requests/adapters.py wording around urllib3's NewConnectionError
    hf = (TB + "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
          "port=443): Max retries exceeded with url: /bert/resolve/main/config.json (Caused by "
          "NewConnectionError('<urllib3.connection.HTTPSConnection>: Failed to establish a new "
          "connection: [Errno 111] Connection refused'))\n")
    c = _cause(tmp_path, hf, exit_code=1)
    assert c["class"] == "network_transient" and c["confidence"] == "high"


def test_connection_refused_from_a_slurm_daemon_is_the_cluster_not_a_download(tmp_path):
    # slurm src/common/log.c prefixes; src/api/step_launch.c / slurm_protocol_api.c wordings
    srun = ("srun: error: slurm_receive_msg: Connection refused\nsrun: error: Unable to create "
            "step for job 4242: Connection refused\n")
    c = _cause(tmp_path, srun, exit_code=1)
    assert c["class"] == "node_failure", c
    stepd = "slurmstepd: error: connect io: Connection refused\n"
    assert _cause(tmp_path, stepd, exit_code=1)["class"] == "node_failure"


# -- causal precedence: a cause decides over the errors it explains
def test_every_precedence_row_says_why():
    for cause, _, consequence, _, why, _ in EXPLAINS:
        assert cause and consequence and len(why) > 10


def test_a_failed_pip_install_explains_the_later_import_error(tmp_path):
    # pip src/pip/_internal/commands/install.py: the install failing on a full disk
    pip = ("Collecting flash-attn\n  Downloading flash_attn-2.5.8.tar.gz (2.5 MB)\n"
           "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on "
           "device\n\n" + TB + "ModuleNotFoundError: No module named 'flash_attn'\n")
    c = _cause(tmp_path, pip, exit_code=1)
    assert c["class"] == "disk_full" and "Could not install packages" in c["decided_by"], c
    assert any("failed to install" in o for o in c["overruled"]), c["overruled"]
    # pip's download timing out (pip._vendor.urllib3 wording), then the import
    net = ("Collecting transformers\n  Downloading transformers-4.41.0-py3-none-any.whl\n"
           "pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host="
           "'files.pythonhosted.org', port=443): Read timed out.\n\n\n" + TB +
           "ModuleNotFoundError: No module named 'transformers'\n")
    c = _cause(tmp_path, net, exit_code=1)
    assert c["class"] == "network_transient" and "ReadTimeoutError" in c["decided_by"], c


def test_a_crlf_script_explains_the_later_command_and_argument_errors(tmp_path):
    # bash's quoting of a word holding a CR; argparse's usage error for the lost argument
    crlf = ("run.sh: line 2: $'\\r': command not found\nusage: train.py [-h] --data DATA\n"
            "train.py: error: the following arguments are required: --data\n")
    c = _cause(tmp_path, crlf, exit_code=2)
    assert c["class"] == "crlf_script" and c["confidence"] == "high", c
    env = ("/usr/bin/env: 'bash\\r': No such file or directory\n"
           "run.sh: line 5: cd: $'/data\\r': No such file or directory\n"
           "run.sh: line 6: python: command not found\n")
    assert _cause(tmp_path, env, exit_code=127)["class"] == "crlf_script"


def test_a_full_disk_explains_the_later_write_and_truncation_errors(tmp_path):
    # errno ENOSPC, then HDF5's H5Fint.c wording for the file it could not finish
    h5 = ("OSError: [Errno 28] No space left on device\n" + TB +
          "OSError: Unable to create file (unable to open file: name = 'ckpt.h5', errno = 28)\n")
    c = _cause(tmp_path, h5, exit_code=1)
    assert c["class"] == "disk_full", c
    # ENOSPC, then torch's zip reader on the cut file (caffe2/serialize/inline_container.cc)
    zipcut = ("OSError: [Errno 28] No space left on device\n" + TB +
              "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding "
              "central directory\n")
    assert _cause(tmp_path, zipcut, exit_code=1)["class"] == "disk_full"


def test_a_driver_too_old_explains_the_later_cuda_init_errors(tmp_path):
    # CUDA runtime cudaErrorInsufficientDriver (35), then torch's lazy init
    first = (TB + "RuntimeError: The NVIDIA driver on your system is too old (found version "
             "11040).\n" + TB + "RuntimeError: CUDA error: no CUDA-capable device is detected\n")
    assert _cause(tmp_path, first, exit_code=1)["class"] == "driver_too_old"
    jax = ("E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] failed call to cuInit: "
           "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH\nCUDA driver version is insufficient for CUDA "
           "runtime version\n" + TB + "RuntimeError: Unable to initialize backend 'cuda': "
           "CUDA_ERROR_NOT_INITIALIZED\n")
    assert _cause(tmp_path, jax, exit_code=1)["class"] == "driver_too_old"


# -- launchers
def test_every_launcher_row_names_its_source():
    assert all(p and who and src for p, who, src in REPORTS)


TORCHRUN_TAIL = (
    "W0325 20:57:27.6 2606 torch/distributed/elastic/multiprocessing/api.py:851] Sending "
    "process 2631 closing signal SIGTERM\n"
    "E0325 20:57:27.9 2606 torch/distributed/elastic/multiprocessing/api.py:826] failed "
    "(exitcode: 1) local_rank: 1 (pid: 2631) of binary: /usr/bin/python\n" + TB +
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    "============================================================\ntrain.py FAILED\n"
    "------------------------------------------------------------\nRoot Cause (first observed "
    "failure):\n[0]:\n  time      : 2025-03-25_20:57:27\n  host      : box\n"
    "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 2631)\n  error_file: <N/A>\n"
    "============================================================\n")


def test_torchrun_root_cause_names_the_deciding_rank(tmp_path):
    ranks = ("[rank0]: Traceback (most recent call last):\n[rank0]: RuntimeError: [c10d] "
             "Connection reset by peer: TCPStore client\n"
             "[rank1]: Traceback (most recent call last):\n[rank1]: KeyError: 'labels'\n")
    c = _cause(tmp_path, ranks + TORCHRUN_TAIL, exit_code=1)
    assert c["class"] == "code_error" and "KeyError: 'labels'" in c["decided_by"], c
    assert root_cause(TORCHRUN_TAIL.split("\n")) == {"rank": 1, "exitcode": 1}
    # the rank named is 0: its error decides even when it comes last
    c = _cause(tmp_path, ranks.replace("[rank1]", "[rankX]").replace("[rank0]", "[rank1]")
               .replace("[rankX]", "[rank0]") + TORCHRUN_TAIL, exit_code=1)
    assert "KeyError" not in c["decided_by"], c


def test_torchrun_teardown_sigterm_after_a_failed_rank_is_not_a_kill(tmp_path):
    # a collective timeout (ProcessGroupNCCL.cpp's watchdog), then torchrun tearing down
    timeout = ("[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective "
               "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600012 "
               "milliseconds before timing out.\n"
               "[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: 7\n"
               "[rank1]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed "
               "or timed out.\n[rank1]:[E ProcessGroupNCCL.cpp:583] [Rank 1] To avoid data "
               "inconsistency, we are taking the entire process down.\n"
               "[rank1]: Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/"
               "c10d/ProcessGroupNCCL.cpp:1186 (most recent call first):\n"
               "[rank1]: frame #0: c10::Error::Error(c10::SourceLocation) + 0x96 (libc10.so)\n"
               "[rank1]: frame #1: <unknown function> + 0xe5c6fc (libtorch_cuda.so)\n" +
               "W0325 api.py:723] Received 15 death signal, shutting down workers\n" + TORCHRUN_TAIL)
    c = _cause(tmp_path, timeout, exit_code=1)
    assert c["class"] == "nccl", c
    assert "death signal" not in c["decided_by"]
    # the other rank went on printing steps after the timeout: the teardown alone follows
    # the last progress line, and still explains nothing
    went_on = timeout.replace("[rank1]: frame #1:", "[rank0]: step 12/100 loss 0.31\n[rank1]: frame #1:")
    assert _cause(tmp_path, went_on, exit_code=1)["class"] == "nccl"
    # a rank's error, then torchrun's own SIGTERM forwarding (elastic agent wording)
    err = (TB + "ValueError: bad shape\n"
           "torch.distributed.elastic.multiprocessing.api.SignalException: Process 2606 got "
           "signal: 15\n")
    assert _cause(tmp_path, err, exit_code=1)["class"] == "code_error"


def test_a_wrappers_own_exception_without_the_childs_error_is_a_nonzero_exit(tmp_path):
    # python Lib/subprocess.py CalledProcessError.__str__ (any command, not only python)
    sub = (TB + "subprocess.CalledProcessError: Command '['bash', 'prepare.sh']' returned "
           "non-zero exit status 3.\n")
    c = _cause(tmp_path, sub, exit_code=1)
    assert c["class"] == "nonzero_exit" and "exit status 3" in c["summary"], c
    # deepspeed/launcher/runner.py
    ds = ("[2025-01-02 10:00:00,123] [INFO] [launch.py:351:main] Process 4242 exits with "
          "return code = 1\n" + TB + "subprocess.CalledProcessError: Command '['/usr/bin/python3',"
          " '-u', 'train.py']' returned non-zero exit status 1.\n")
    assert _cause(tmp_path, ds, exit_code=1)["class"] == "nonzero_exit"


# -- logs that do not look like Python
def test_a_cpp_exception_thrown_out_of_a_library_decides(tmp_path):
    # libstdc++ verbose terminate handler, c10::Error's message
    cpp = ("terminate called after throwing an instance of 'c10::Error'\n  what():  "
           "Expected all tensors to be on the same device\nException raised from "
           "check_device at ../aten/src/ATen/native/TensorCompare.cpp:12\n")
    c = _cause(tmp_path, cpp, exit_code=134)
    assert c["class"] == "code_error" and "same device" in c["summary"], c
    assert c["confidence"] == "medium"
    # std::bad_alloc: operator new failing is host RAM (the emitter), not a code bug
    bad = "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
    assert _cause(tmp_path, bad, exit_code=134)["class"] == "cgroup_oom"


def test_an_assertion_in_c_or_a_cuda_kernel_decides(tmp_path):
    # glibc assert/assert.c's message, then the abort
    c_assert = ("python3: src/sampler.c:88: draw: Assertion `n > 0' failed.\n"
                "Aborted (core dumped)\n")
    c = _cause(tmp_path, c_assert, exit_code=134)
    assert c["class"] == "code_error" and "Assertion `n > 0' failed" in c["summary"], c
    # Lua (lua.c msghandler): the error line above `stack traceback:`
    lua = ("/root/torch/install/bin/luajit: ./train.lua:57: attempt to index a nil value\n"
           "stack traceback:\n\t./train.lua:57: in main chunk\n\t[C]: at 0x00405d50\n")
    c = _cause(tmp_path, lua, exit_code=1)
    assert c["class"] == "code_error" and "attempt to index a nil value" in c["summary"], c


def test_a_tail_that_starts_mid_traceback_still_names_the_error_and_its_frame(tmp_path):
    # a 20-line tail: frames, no header; a library's own exception class
    tail = ('  File "/app/eval.py", line 9, in main\n    cfg = load(cfg_path)\n'
            '  File "/app/cfg.py", line 30, in load\n    raise ConfigError(f"missing {k}")\n'
            "omegaconf.errors.ConfigError: missing num_classes\n")
    c = _cause(tmp_path, tail, exit_code=1)
    assert c["class"] == "code_error" and "ConfigError" in c["summary"], c
    assert "cfg.py:30 in load" in c["summary"]
    # glued to a tqdm bar (tqdm writes \r redraws without a newline)
    glued = "epoch 1:  40%|####      | 4/10 [00:02<00:03,  1.9it/s]omegaconf.errors.ConfigError: bad\n"
    c = _cause(tmp_path, glued, exit_code=1)
    assert c["class"] == "code_error" and "ConfigError: bad" in c["summary"], c


def test_the_innermost_frame_of_a_python_traceback_is_in_the_evidence(tmp_path):
    tb = ('Traceback (most recent call last):\n  File "/app/run.py", line 3, in <module>\n'
          '    main()\n  File "/app/eval.py", line 9, in main\n    n = cfg["num_classes"]\n'
          "KeyError: 'num_classes'\n")
    c = _cause(tmp_path, tb, exit_code=1)
    assert "log line 6" in c["summary"] and "/app/eval.py:9 in main" in c["summary"], c
    assert "raised in the code at /app/eval.py:9 in main" in c["evidence"]
    chained = tb.replace("/app/eval.py", "/srv/job/ds.py").replace("line 9", "line 120")
    c = _cause(tmp_path, chained, exit_code=1)
    assert "/srv/job/ds.py:120 in main" in c["summary"]


def test_torchruns_own_sigterms_listed_under_failures_are_not_a_kill(tmp_path):
    # torch/distributed/elastic/multiprocessing/errors: the ranks it stopped are listed with
    # "Signal 15 (SIGTERM) received by PID"; the root cause aborted (-6)
    summary = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
               "============================================================\ntrain.py FAILED\n"
               "------------------------------------------------------------\nFailures:\n[1]:\n"
               "  time      : 2025-03-25_20:57:27\n  rank      : 1 (local_rank: 1)\n"
               "  exitcode  : -15 (pid: 2631)\n  error_file: <N/A>\n"
               "  traceback : Signal 15 (SIGTERM) received by PID 2631\n"
               "------------------------------------------------------------\n"
               "Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n"
               "  exitcode  : -6 (pid: 2630)\n  error_file: <N/A>\n"
               "  traceback : Signal 6 (SIGABRT) received by PID 2630\n"
               "============================================================\n")
    c = _cause(tmp_path, summary, exit_code=1)
    assert c["class"] == "nonzero_exit" and "SIGABRT" in c["summary"], c
    # the same summary after the rank's own NCCL watchdog error: the error decides
    nccl = ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600012 milliseconds before "
            "timing out.\n")
    assert _cause(tmp_path, nccl + summary, exit_code=1)["class"] == "nccl"
    # a root cause that was itself a SIGTERM is a stop from outside: left to the signal rules
    outside = summary.replace("exitcode  : -6", "exitcode  : -15").replace(
        "Signal 6 (SIGABRT)", "Signal 15 (SIGTERM)")
    assert _cause(tmp_path, outside, exit_code=1)["class"] == "killed"


def test_a_sigterm_hours_after_a_survived_error_is_still_a_kill(tmp_path):
    # a network blip the run survived, then progress, then torchrun stopped from outside
    text = ("wandb: ERROR Network error (ConnectionError), entering retry loop.\n" + TB +
            "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.wandb.ai')\n" +
            "".join("step %d/1000 loss 0.5\n" % i for i in range(80)) +
            "W0325 api.py:723] Received 15 death signal, shutting down workers\n")
    assert _cause(tmp_path, text, exit_code=1)["class"] == "killed"


def test_an_exception_message_that_goes_on_below_is_read_with_its_emitter(tmp_path):
    # TensorFlow 2.x: "Graph execution error:" then the op's message on the next lines
    tf = (TB + "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution "
          "error:\n\nOOM when allocating tensor with shape[8192,32768] and type float on "
          "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n")
    c = _cause(tmp_path, tf, exit_code=1)
    assert c["class"] == "cuda_oom", c
    # the op's own line decides (a vocabulary row), or the exception read with it
    assert any("OOM when allocating" in e for e in c["evidence"] + [c["decided_by"]])
    cpu = tf.replace("device:GPU:0 by allocator GPU_0_bfc", "device:CPU:0 by allocator cpu")
    assert _cause(tmp_path, cpu, exit_code=1)["class"] == "cgroup_oom"
    # TensorFlow 1.x: "N root error(s) found." then each error indented below
    tf1 = (TB + "tensorflow.python.framework.errors_impl.ResourceExhaustedError: 2 root error(s) "
           "found.\n  (0) Resource exhausted: OOM when allocating tensor with shape[64,256,56,56] "
           "and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
           "GPU_0_bfc\n\t [[{{node conv2/Conv2D}}]]\n")
    assert _cause(tmp_path, tf1, exit_code=1)["class"] == "cuda_oom"


def test_a_warning_naming_a_cause_explains_the_later_error(tmp_path):
    # torch/cuda/__init__.py's UserWarning at lazy init, then the error it explains
    warn = ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:118: UserWarning: CUDA "
            "initialization: The NVIDIA driver on your system is too old (found version 11040). "
            "Please update your GPU driver\n")
    c = _cause(tmp_path, warn + TB + "RuntimeError: No CUDA GPUs are available\n", exit_code=1)
    assert c["class"] == "driver_too_old", c
    # the same warning, then accelerate's refusal to run fp16 without a GPU
    acc = warn + TB + "ValueError: fp16 mixed precision requires a GPU (not 'cpu').\n"
    assert _cause(tmp_path, acc, exit_code=1)["class"] == "driver_too_old"
    # a warning explains nothing through a row for any cause (a launcher's teardown)
    tear = warn + "W0325 api.py:723] Received 15 death signal, shutting down workers\n"
    assert _cause(tmp_path, tear, exit_code=1)["class"] == "killed"


def test_a_worker_the_oom_killer_took_explains_its_peers_broken_pipe(tmp_path):
    # torch/utils/data/_utils/signal_handling.py, then the main process's reset socket
    dl = ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.\n" + TB +
          "ConnectionResetError: [Errno 104] Connection reset by peer\n")
    assert _cause(tmp_path, dl, exit_code=1, offline=True)["class"] == "cgroup_oom"
    # the kernel's OOM-killer line (a dmesg paste), then multiprocessing's broken pipe
    mp = ("[12345.678] Out of memory: Killed process 4321 (python) total-vm:61234567kB\n" + TB +
          "BrokenPipeError: [Errno 32] Broken pipe\n")
    c = _cause(tmp_path, mp, exit_code=1)
    assert c["class"] == "cgroup_oom" and c["confidence"] == "high", c
