"""NumPy writing a file to a full disk, in its own words rather than errno's: before writing an
array to a file (ndarray.tofile, np.save's write_array) it reserves the space with
posix_fallocate and says "Not enough free space to write N bytes" when that fails with ENOSPC;
a write that comes back short says "N requested and M written". Both are the disk (a /dev/shm
tmpfs counts), the second suggestively (a pipe closed under the writer says it too). Read
after a field case (BlenderProc saving a frame to /dev/shm) ended with the first and the engine
called it a code error."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

NUMPY = ("NumPy 1.26 numpy/core/src/multiarray/convert.c npy_fallocate (\"Not enough free space to "
         "write %d bytes\" when posix_fallocate fails with ENOSPC) and PyArray_ToFile (\"%d "
         "requested and %d written\")")

ROWS = found_via(
    ("wave6/cases/disk_full/e-blenderproc-286-not-enough-free-space-to-write-dev-shm.log",),
    rx("disk_full", r"Not enough free space to write [0-9]+ bytes",
       "OSError: Not enough free space to write 292626432 bytes", NUMPY,
       ("Not enough free space to write ",), "numpy"),
    rx("disk_full", r"[0-9]+ requested and [0-9]+ written",
       "OSError: 536870912 requested and 0 written", NUMPY, (" requested and ",), "numpy", False),
)
