"""Ray's memory monitor: the raylet kills a worker when the node's memory crosses its threshold
(host memory, not the GPU's), and the driver's ray.get() raises the kill as
ray.exceptions.OutOfMemoryError. Ray 1.x raised RayOutOfMemoryError from its Python monitor."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit, rx

RAYLET = ("Ray 2.9 src/ray/raylet/node_manager.cc (memory monitor kill summary) and "
          "doc/source/ray-core/scheduling/ray-oom-prevention.rst")
TASK = ("Ray 2.9 src/ray/raylet/worker_killing_policy / node_manager.cc CreateOomKillMessageDetails "
        "(\"Task was killed due to the node running low on memory.\"), raised by ray.get as "
        "ray.exceptions.OutOfMemoryError")
RAY1 = "Ray 1.x python/ray/memory_monitor.py RayOutOfMemoryError (\"More than {}% of the memory on node {} is used\")"

_C = "cases/cgroup_oom/"

ROWS = found_via(
    (_C + "flingbot-11-ray-get-outofmemoryerror.log", _C + "ray-28776-outofmemoryerror-eviction-threshold.log"),
    lit("cgroup_oom", "Task was killed due to the node running low on memory",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        TASK, "ray"),
    rx("cgroup_oom", r"which exceeds the memory usage threshold of [0-9.]+",
       "Memory on the node (IP: 10.0.62.231, ID: e5d953ef03e55e26f13973ea1b5a0fd0ecc729cd820bc89e4aa"
       "50451) where the task (task ID: 43534ce9375fa8e4cd0d0ec285d9974a6a95897401000000, "
       "name=allocate_memory, pid=11362, memory used=1.25GB) was running was 27.71GB / 28.80GB "
       "(0.962273), which exceeds the memory usage threshold of 0.95.", TASK,
       ("exceeds the memory usage threshold",), "ray"),
) + found_via(
    (_C + "wmpo-3-raylet-workers-killed-memory-pressure.log", _C + "ray-44574-raylet-oom-then-ray-get.log"),
    lit("cgroup_oom", "killed due to memory pressure (OOM)",
        "(raylet) node_manager.cc:3040: 1 Workers (tasks / actors) killed due to memory pressure "
        "(OOM), 0 Workers crashed due to other reasons at node (ID: 2c82620270df6b9dd7ae2791ef51ee"
        "4b5a9d5df9f795986c10dd219c, IP: 172.31.183.172) over the last time period.", RAYLET, "ray"),
    # the advice the raylet prints under every kill summary: a tail cut before the summary
    # still holds it
    lit("cgroup_oom", "Refer to the documentation on how to address the out of memory issue",
        "(raylet) Refer to the documentation on how to address the out of memory issue: "
        "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider "
        "provisioning more memory on this node or reducing task parallelism by requesting more "
        "CPUs per task.", RAYLET, "ray"),
    lit("cgroup_oom", "RayOutOfMemoryError",
        "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node ip-172-31-3-4 "
        "is used (58.21 / 61.05 GB).", RAY1, "ray"),
)
