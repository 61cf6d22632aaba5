"""The NVIDIA container toolkit's mount step (libnvidia-container's `configure`): it creates the
host driver's files (nvidia-smi, libnvidia-*.so) inside the container's root, so an image that
already carries them (copied from a host, or a base image that bakes the driver in) makes the
hook fail with "file exists". The image is wrong, not the GPU or the driver."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

NVC_MOUNT = ("NVIDIA libnvidia-container 1.16 src/nvc_mount.c mount_files / file_create (\"file "
             "creation failed: %s\"), src/cli/configure.c (\"mount error: %s\")")

_FIX = ("the image already holds the driver files the NVIDIA toolkit mounts from the host "
        "(nvidia-smi, libnvidia-*.so, libcuda.so): remove them from the image and let the "
        "toolkit provide the host's")

ROWS = found_via(
    ("wave4/cases/code_error/nvidia-docker-825-mount-error-nvidia-smi-file-exists.log",),
    rx("code_error", r"file creation failed: [^ ]+: file exists",
       "nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/0a1b/"
       "merged/usr/bin/nvidia-smi: file exists: unknown", NVC_MOUNT,
       ("file creation failed: ",), "nvidia-container-toolkit")._replace(fix=_FIX),
)
