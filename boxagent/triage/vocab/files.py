"""A checkpoint, weights or data file cut short: how each reader says the file ends too
early or is not what it claims (HDF5/h5py, zip, safetensors, pickle, torch's zip archive,
gzip, numpy's memmap). A write cut off by a full disk or a kill leaves such files."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

HDF5 = "HDF5 1.14 src/H5Fsuper.c / H5Fint.c (h5py 3.11 raises them as OSError: Unable to open file (...))"
HDF5_O = "HDF5 1.14 src/H5Ocache.c / H5Gnode.c / H5Z.c"
ZIP = "CPython 3.12 Lib/zipfile/__init__.py"
ST = "safetensors 0.4 safetensors/src/tensor.rs SafeTensorError (Python: SafetensorError)"
PKL = "CPython 3.12 Modules/_pickle.c"
TORCH = "PyTorch 2.4 caffe2/serialize/inline_container.cc PyTorchStreamReader"
GZ = "CPython 3.12 Lib/_compression.py / Lib/gzip.py / Lib/tarfile.py"
MMAP = "NumPy 1.26 numpy/core/memmap.py over CPython 3.12 Modules/mmapmodule.c"

_S = False

ROWS = (
    rx("truncated_checkpoint", r"truncated file: eof = [0-9]+",
       "OSError: Unable to open file (truncated file: eof = 1089536, sblock->base_addr = 0, "
       "stored_eof = 94694792)", HDF5, ("truncated file: eof = ",), "hdf5"),
    lit("truncated_checkpoint", "file signature not found",
        "OSError: Unable to open file (file signature not found)", HDF5, "hdf5"),
    lit("truncated_checkpoint", "bad object header version number",
        "OSError: Unable to open object (bad object header version number)", HDF5_O, "hdf5", _S),
    lit("truncated_checkpoint", "bad symbol table node signature",
        "OSError: Can't read data (bad symbol table node signature)", HDF5_O, "hdf5", _S),
    lit("truncated_checkpoint", "inflate() failed",
        "OSError: Can't read data (inflate() failed)", HDF5_O, "hdf5", _S),
    lit("truncated_checkpoint", "BadZipFile", "zipfile.BadZipFile: File is not a zip file", ZIP,
        "python"),
    lit("truncated_checkpoint", "BadZipfile", "zipfile.BadZipfile: File is not a zip file",
        "CPython 2.7 Lib/zipfile.py", "python"),
    lit("truncated_checkpoint", "File is not a zip file", "zipfile.BadZipFile: File is not a zip file",
        ZIP, "python"),
    lit("truncated_checkpoint", "Bad magic number for central directory",
        "zipfile.BadZipFile: Bad magic number for central directory", ZIP, "python"),
    lit("truncated_checkpoint", "Truncated file header", "zipfile.BadZipFile: Truncated file header",
        ZIP, "python"),
    rx("truncated_checkpoint", r"Bad CRC-32 for file '",
       "zipfile.BadZipFile: Bad CRC-32 for file 'archive/data/0'", ZIP, ("Bad CRC-32 for file",),
       "python", _S),
    lit("truncated_checkpoint", "SafetensorError",
        "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
        ST, "safetensors"),
    lit("truncated_checkpoint", "Error while deserializing header",
        "Error while deserializing header: HeaderTooLarge", ST, "safetensors"),
    lit("truncated_checkpoint", "MetadataIncompleteBuffer",
        "SafetensorError: Error while deserializing header: MetadataIncompleteBuffer", ST,
        "safetensors"),
    lit("truncated_checkpoint", "incomplete metadata, file not fully covered",
        "SafetensorError: Error while deserializing header: incomplete metadata, file not fully "
        "covered", ST, "safetensors"),
    lit("truncated_checkpoint", "UnpicklingError", "_pickle.UnpicklingError: pickle data was truncated",
        PKL, "python"),
    lit("truncated_checkpoint", "pickle data was truncated",
        "_pickle.UnpicklingError: pickle data was truncated", PKL, "python"),
    lit("truncated_checkpoint", "EOFError: Ran out of input", "EOFError: Ran out of input", PKL,
        "python"),
    lit("truncated_checkpoint", "invalid load key",
        "_pickle.UnpicklingError: invalid load key, '<'.", PKL, "python", _S),
    lit("truncated_checkpoint", "PytorchStreamReader failed",
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central "
        "directory", TORCH, "torch"),
    lit("truncated_checkpoint", "failed finding central directory",
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central "
        "directory", TORCH, "torch"),
    lit("truncated_checkpoint", "invalid header or archive is corrupted",
        "RuntimeError: PytorchStreamReader failed reading file data/0: invalid header or archive "
        "is corrupted", TORCH, "torch"),
    lit("truncated_checkpoint", "Compressed file ended before the end-of-stream marker was reached",
        "EOFError: Compressed file ended before the end-of-stream marker was reached", GZ, "python"),
    lit("truncated_checkpoint", "tarfile.ReadError: unexpected end of data",
        "tarfile.ReadError: unexpected end of data", GZ, "python"),
    lit("truncated_checkpoint", "mmap length is greater than file size",
        "ValueError: mmap length is greater than file size", MMAP, "numpy", _S),
)
