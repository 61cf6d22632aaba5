"""fsspec, the filesystem layer under s3fs, gcsfs, adlfs and HTTP datasets: its own timeout.

A remote call through fsspec that passes its timeout raises fsspec's FSTimeoutError, whatever
store is behind it; inside a DataLoader worker the re-raise names only that type. Read after a
field case (a DataLoader over S3) ended with it and no row named it."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit

FSSPEC = ("fsspec 2024.6 fsspec/exceptions.py (FSTimeoutError(asyncio.TimeoutError): \"Raised "
          "when a fsspec function timed out occurs\"), fsspec/asyn.py sync() raising it when a "
          "call to the remote filesystem passes its timeout")

ROWS = found_via(
    ("wave5/cases/network_transient/d-scirepeval-48-fsspec-s3-timeout-dataloader.log",),
    lit("network_transient", "FSTimeoutError",
        "fsspec.exceptions.FSTimeoutError: Caught FSTimeoutError in DataLoader worker process 1.",
        FSSPEC, "fsspec"),
)
