"""Launchers' own report of a worker's death by signal: DeepSpeed's launcher logs the worker's
return code, -9 for SIGKILL. A SIGKILL nobody asked for is usually the OOM killer (the same
reading as torchrun's `exitcode: -9` in the built-in rules; the box's oom_kill counter tells):
suggestive, not definitive."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

DS = ("DeepSpeed (deepspeedai/DeepSpeed 32c6645; 0.9 in 2023 logs the same) deepspeed/launcher/launch.py sigkill_handler "
      "(logger.error(f\"{cmd} exits with return code = {last_return_code}\"))")

ROWS = found_via(
    ("cases/cgroup_oom/deepspeed-3232-colab-sigkill-handler-minus9.log",),
    rx("cgroup_oom", r"exits with return code = -9$",
       "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', "
       "'main.py', '--local_rank=0'] exits with return code = -9", DS,
       ("exits with return code = -9",), "deepspeed", False),
)
