"""Containers and their runtimes: the words docker (moby), containerd, runc, the NVIDIA
container toolkit and Kubernetes print when a job's container cannot start, or is killed.

The NVIDIA toolkit's hook runs inside runc's container init, so its words arrive wrapped
(`OCI runtime create failed: runc create failed: ... nvidia-container-cli: requirement error:
unsatisfied condition: cuda>=12.4, please update your driver ...: unknown`): the row matches
the toolkit's own words wherever they sit."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

NVCLI = ("NVIDIA libnvidia-container 1.16 src/cli/common.c and src/nvc_info.c / src/driver.c "
         "(\"requirement error: unsatisfied condition: %s\", \"nvml error: %s\", \"load library "
         "failed: %s\")")
NVML = "NVML API 12.4 nvml.h nvmlErrorString (NVML_ERROR_LIB_RM_VERSION_MISMATCH, NVML_ERROR_DRIVER_NOT_LOADED)"
MOBY = "moby 24.0 daemon/devices.go (\"could not select device driver %q with capabilities: %v\")"
EXEC = "Go 1.22 src/os/exec/lp_unix.go (ErrNotFound: \"executable file not found in $PATH\"), via runc 1.1 libcontainer"
K8S_OOM = "Kubernetes 1.30 pkg/kubelet/kuberuntime (container status reason \"OOMKilled\"); docker 24 inspect State.OOMKilled"
K8S_EVICT = ("Kubernetes 1.30 pkg/kubelet/eviction/helpers.go (nodeLowMessageFmt \"The node was low on "
             "resource: %v. \", podEphemeralStorageMessageFmt, containerEphemeralStorageMessageFmt)")
K8S_SHUTDOWN = ("Kubernetes 1.30 pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go "
                "(nodeShutdownMessage \"Pod was terminated in response to imminent node shutdown.\")")
HUB = "Docker Hub docs, Usage and limits (toomanyrequests: \"You have reached your pull rate limit\"), 2024"
MOBY_DIST = ("moby 24.0 distribution/errors.go (\"pull access denied for %s, repository does not "
             "exist or may require 'docker login'\")")
COMPOSE = "docker compose 2.27 (\"<service> exited with code 137\": 128 + SIGKILL)"

_S = False
TOOLKIT_FIX = ("the GPU is not reachable from the container: install the NVIDIA Container Toolkit on "
               "the host (`nvidia-ctk runtime configure --runtime=docker`, restart docker) and run "
               "with `--gpus all`; check `nvidia-smi` on the host")
MISMATCH_FIX = ("the loaded NVIDIA kernel module and the user-space driver library differ (a driver "
                "upgraded without a reboot): reboot the host, or reload the nvidia modules")

ROWS = (
    rx("driver_too_old", r"unsatisfied condition: cuda ?>= ?[0-9.]+",
       "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update "
       "your driver to a newer version, or use an earlier cuda container: unknown", NVCLI,
       ("unsatisfied condition: cuda",), "nvidia-container-toolkit"),
    rx("driver_too_old", r"[Dd]river/library version mismatch",
       "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: "
       "unknown", NVML, ("river/library version mismatch",), "nvml")._replace(fix=MISMATCH_FIX),
    lit("driver_too_old", "nvml error: driver not loaded",
        "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown", NVCLI,
        "nvidia-container-toolkit", _S)._replace(fix=TOOLKIT_FIX),
    lit("driver_too_old", "load library failed: libnvidia-ml.so.1",
        "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot "
        "open shared object file: no such file or directory: unknown", NVCLI,
        "nvidia-container-toolkit", _S)._replace(fix=TOOLKIT_FIX),
    lit("code_error", "could not select device driver",
        "docker: Error response from daemon: could not select device driver \"\" with capabilities: "
        "[[gpu]].", MOBY, "docker", _S)._replace(fix=TOOLKIT_FIX),
    lit("code_error", "executable file not found in $PATH",
        "Error: failed to create containerd task: failed to create shim task: OCI runtime create "
        "failed: runc create failed: unable to start container process: exec: \"python\": "
        "executable file not found in $PATH: unknown", EXEC, "runc"),
    # `"OOMKilled": false` is docker inspect's field for every container: only true counts
    rx("cgroup_oom", r"\"OOMKilled\": ?true|OOMKilled( |,|\)|$)",
       "      Reason:       OOMKilled", K8S_OOM, ("OOMKilled",), "kubernetes"),
    rx("cgroup_oom", r"The node was low on resource: \[?memory",
       "Status: Failed Reason: Evicted Message: The node was low on resource: memory. Threshold "
       "quantity: 100Mi, available: 90Mi.", K8S_EVICT, ("The node was low on resource: ",),
       "kubernetes"),
    rx("disk_full", r"The node was low on resource: \[?ephemeral-storage|ephemeral local storage "
       r"usage exceeds|exceeded its local ephemeral storage limit",
       "Message: The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, "
       "available: 9Gi.", K8S_EVICT, ("The node was low on resource: ", "ephemeral local storage",
                                       "local ephemeral storage limit"), "kubernetes"),
    lit("preempted", "Pod was terminated in response to imminent node shutdown",
        "Message: Pod was terminated in response to imminent node shutdown.", K8S_SHUTDOWN,
        "kubernetes"),
    # a registry refusing: a rate limit passes, a name that does not exist does not
    lit("network_transient", "You have reached your pull rate limit",
        "Error response from daemon: toomanyrequests: You have reached your pull rate limit. You "
        "may increase the limit by authenticating and upgrading: https://www.docker.com/increase-"
        "rate-limit", HUB, "docker"),
    rx("code_error", r"pull access denied for [^ ,]+, repository does not exist",
       "docker: Error response from daemon: pull access denied for mycorp/trainer, repository does "
       "not exist or may require 'docker login': denied: requested access to the resource is "
       "denied.", MOBY_DIST, ("pull access denied for ",), "docker"),
    rx("cgroup_oom", r"exited with code 137", "trainer-1 exited with code 137", COMPOSE,
       ("exited with code 137",), "docker", _S),
)
