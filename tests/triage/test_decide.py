"""Which line decides, and what it overrules: one structural rule per test, each named after
the field failure it guards against (tests/triage/field holds the logs they come from)."""
from __future__ import annotations

from boxagent.triage import diagnose, success_warnings
from tests.triage.conftest import watch_file

TB = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    main()\n"
CHILD_FAILED = (
    "E0325 20:57:27.620000 2606 torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: 1) local_rank: 0 (pid: 2630) of binary: /usr/bin/python\n" + TB +
    "    raise ChildFailedError(\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    "train.py FAILED\nRoot Cause (first observed failure):\n  exitcode  : 1 (pid: 2630)\n")


def _cause(tmp_path, text, **facts):
    p = tmp_path / "stage.log"
    p.write_text(text)
    f = watch_file(p).facts()
    f.update(facts)
    return diagnose(f)


def _line_of(text, needle):
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


def test_a_tqdm_bar_redrawn_after_the_crash_does_not_hide_it(tmp_path):
    text = ("step 10/100\n" + TB + "RuntimeError: [enforce fail at inline_container.cc:337] . "
            "unexpected pos 1134 vs 1130\n 17%|##   | 30/174 [01:02<05:00, 2.1s/it]\n" + CHILD_FAILED)
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "disk_full"
    assert c["decided_by"].startswith("log line %d: RuntimeError" % _line_of(text, "unexpected pos"))
    assert any("ChildFailedError" in o and "looked through to log line %d" % _line_of(text, "unexpected pos")
               in o for o in c["overruled"]), c["overruled"]


def test_childfailederror_alone_is_no_code_error(tmp_path):
    c = _cause(tmp_path, "step 5/10 loss 0.3\n" + CHILD_FAILED, exit_code=1)
    assert c["class"] == "nonzero_exit"
    assert "launcher reports its child failed (exit status 1)" in c["summary"]
    assert "failed (exitcode: 1)" in c["decided_by"]           # torchrun's first word of it


def test_a_native_crash_behind_a_launcher_says_so(tmp_path):
    text = (TB + "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
            "subprocess.CalledProcessError: Command '['C:\\\\venv\\\\Scripts\\\\python.exe', "
            "'train.py']' returned non-zero exit status 3221225477.\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "nonzero_exit" and "0xC0000005: an access violation" in c["summary"]
    assert "PYTHONFAULTHANDLER" in c["remediation"]


def test_the_first_rank_to_fail_decides_over_the_ranks_failing_after_it(tmp_path):
    text = ("[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.\n"
            "[rank2]: Traceback (most recent call last):\n[rank2]:   File \"r.py\", line 9\n"
            "[rank2]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "remote process exited or there was a network error\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "cuda_oom" and c["decided_by"].startswith("log line 1: [rank5]:")
    assert any(o.startswith("log line 4: torch.distributed.DistBackendError") and "another rank" in o
               for o in c["overruled"]), c["overruled"]


def test_the_last_exception_decides_over_an_earlier_one(tmp_path):
    text = (TB + "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.wandb.ai')\n"
            "wandb: retrying in offline mode\n\n\n\n" + TB + "KeyError: 'lr'\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "code_error" and "KeyError: 'lr'" in c["decided_by"]
    assert any(o.startswith("log line 4: requests.exceptions.ConnectionError") and "later error" in o
               for o in c["overruled"]), c["overruled"]


def test_a_chained_traceback_is_one_error_named_by_its_most_specific_line(tmp_path):
    text = (TB + "RuntimeError: [enforce fail at inline_container.cc:764] . PytorchStreamWriter "
            "failed writing file data/117: file write failed\n\nDuring handling of the above "
            "exception, another exception occurred:\n\n" + TB + "ValueError: cannot close\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "disk_full" and c["overruled"] == []


def test_shutdown_noise_in_a_del_never_decides(tmp_path):
    text = (TB + "RuntimeError: cuda runtime error (2) : out of memory at THCStorage.cu:58\n"
            "Exception ignored in: <bound method DataLoaderIter.__del__ of <DataLoaderIter>>\n"
            + TB + "TypeError: 'NoneType' object is not iterable\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "cuda_oom"
    assert any("TypeError" in o and "is shutdown noise" in o for o in c["overruled"])


def test_a_thread_traceback_on_exit_zero_draws_no_warning(tmp_path):
    text = ("epoch 6 loss 0.1\nException in thread Thread-5:\n" + TB +
            "requests.exceptions.ReadTimeout: read timed out\nepoch 7 loss 0.09\n")
    p = tmp_path / "stage.log"
    p.write_text(text)
    assert success_warnings(dict(watch_file(p).facts(), exit_code=0)) == []
    p.write_text(text.replace("Exception in thread Thread-5:\n", ""))
    assert success_warnings(dict(watch_file(p).facts(), exit_code=0)) != []


def test_a_warning_never_decides_over_an_exception(tmp_path):
    text = ("/x/torch/cuda/__init__.py:173: UserWarning: NVIDIA T4 with CUDA capability sm_75 "
            "is not compatible with the current PyTorch installation.\n" + TB + "KeyError: 'lr'\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "code_error"
    assert any(o.startswith("warning at log line 1 (") and "ignored: an exception follows at log line 5"
               in o for o in c["overruled"]), c["overruled"]


def test_a_warning_alone_still_explains(tmp_path):
    text = ("/usr/lib/python3/torch/cuda/__init__.py:124: UserWarning: CUDA initialization: The "
            "NVIDIA driver on your system is too old (found version 11000).\n")
    assert _cause(tmp_path, text, exit_code=1)["class"] == "driver_too_old"


def test_ecc_error_then_an_nccl_watchdog_line_about_it_is_the_gpu(tmp_path):
    text = ("RuntimeError: CUDA error: uncorrectable ECC error encountered\n\n\n\n\n"
            "[E ProcessGroupNCCL.cpp:916] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1) ran for 600020 milliseconds\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "gpu_hardware" and c["decided_by"].startswith("log line 1:")
    assert any("follows from log line 1: a failing GPU explains it" in o for o in c["overruled"]), c["overruled"]


def test_an_nccl_error_detailing_a_reset_socket_is_nccl_not_a_network_blip(tmp_path):
    text = ("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process "
            "exited or there was a network error\nncclRemoteError: A call failed\nLast error:\n"
            "socketProgressOpt: Call to recv from 10.0.0.2<33759> failed : Connection reset by peer\n")
    assert _cause(tmp_path, text, exit_code=1)["class"] == "nccl"


def test_a_segfault_after_an_error_is_how_the_process_died(tmp_path):
    text = ("THCudaCheck FAIL file=THCStorage.cu line=58 error=2 : out of memory\n"
            "Segmentation fault (core dumped)\n")
    c = _cause(tmp_path, text, exit_code=139)
    assert c["class"] == "cuda_oom"
    assert any("Segmentation fault" in o and "how the process died" in o for o in c["overruled"])
    c = _cause(tmp_path, "epoch 1\nSegmentation fault (core dumped)\n", exit_code=139)
    assert c["class"] == "nonzero_exit" and "native crash" in c["summary"]


def test_a_rank_prefixed_traceback_is_read_like_any_other(tmp_path):
    text = "".join("[rank0]: " + line + "\n" for line in (TB + "KeyError: 'lr'").split("\n"))
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "code_error" and c["decided_by"] == "log line 4: [rank0]: KeyError: 'lr'"
    assert c["summary"].startswith("crashed: KeyError: 'lr'")


def test_enospc_with_bytes_free_in_the_logs_own_df_is_inodes(tmp_path):
    df = ("Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda2        25G   16G  7.5G  69% /\n"
          "tmpfs           3.1G     0  3.1G   0% /dev/shm\n\n")
    c = _cause(tmp_path, df + "bash: test.txt: No space left on device\n", exit_code=1)
    assert c["class"] == "inodes_full" and any("df -i" in e for e in c["evidence"])
    full = df.replace(" 69% /\n", " 100% /\n")
    assert _cause(tmp_path, full + "bash: test.txt: No space left on device\n", exit_code=1)["class"] == "disk_full"


def test_a_fact_that_overrules_the_log_says_so(tmp_path):
    c = _cause(tmp_path, TB + "KeyError: 'lr'\n", exit_code=1, oom_kill_delta=1)
    assert c["class"] == "cgroup_oom"
    assert c["decided_by"] == "cgroup oom_kill counter +1 during the stage"
    assert c["overruled"] == ["log line 4: KeyError: 'lr' (code_error) overruled: cgroup oom_kill "
                              "counter +1 during the stage"]


def test_loss_scale_collapse_on_exit_zero_warns(tmp_path):
    def line(a, b):
        return ("[INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
                "step. Attempted loss scale: %s, reducing to %s\n" % (a, b))
    p = tmp_path / "stage.log"
    p.write_text(line(65536, 32768) + line(32768, 16384) + "done\n")
    assert success_warnings(dict(watch_file(p).facts(), exit_code=0)) == []
    p.write_text(line(8, 4) + line(4, 2) + "done\n")
    w = success_warnings(dict(watch_file(p).facts(), exit_code=0))
    assert len(w) == 1 and "NaN/inf" in w[0] and "line 1" in w[0]


def test_a_timestamped_source_line_never_names_the_error(tmp_path):
    """`[ts]     raise ReadTimeoutError(` is the traceback quoting code; the next line is it"""
    text = ("[2020-10-08 15:40:59]     raise ReadTimeoutError(self._pool, None, \"Read timed out.\")\n"
            "[2020-10-08 15:40:59] pip._vendor.urllib3.exceptions.ReadTimeoutError: "
            "HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out.\n")
    c = _cause(tmp_path, text, exit_code=2)
    assert c["class"] == "network_transient" and c["decided_by"].startswith("log line 2:")


def test_a_retry_announced_while_a_crashed_run_shuts_down_is_no_cause(tmp_path):
    """wandb keeps retrying its upload after the job died: the OOM stopped the run"""
    text = (TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
            "wandb: Waiting for W&B process to finish... (failed 1).\n"
            "wandb: Network error (ReadTimeout), entering retry loop.\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "cuda_oom"
    assert any(o.startswith("warning at log line 6 (wandb: Network error") for o in c["overruled"])
    # alone, the retry still explains a run that never got going
    assert _cause(tmp_path, "wandb: Network error (ReadTimeout), entering retry loop.\n",
                  exit_code=1)["class"] == "network_transient"


def test_a_traceback_in_an_atexit_hook_is_shutdown_noise(tmp_path):
    text = (TB + "KeyError: 'lr'\nError in atexit._run_exitfuncs:\n" + TB +
            "ConnectionResetError: [Errno 104] Connection reset by peer\n")
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "code_error" and "KeyError" in c["decided_by"]
    assert any("ConnectionResetError" in o and "shutdown noise" in o for o in c["overruled"])


def test_an_error_the_run_went_on_after_never_outweighs_the_episodes_own_warning(tmp_path):
    text = (TB + "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.wandb.ai')\n"
            "step 1/100 loss 2.0\nstep 2/100 loss 1.9\n"
            "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2\n"
            + CHILD_FAILED)
    c = _cause(tmp_path, text, exit_code=1)
    assert c["class"] == "divergence" and c["decided_by"].startswith("log line 7: [deepspeed] OVERFLOW!")
    assert any(o.startswith("log line 4: requests.exceptions.ConnectionError") and
               "before the last progress line" in o for o in c["overruled"]), c["overruled"]
