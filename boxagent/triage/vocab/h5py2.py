"""HDF5's truncation and corruption messages as h5py 2.x prints them: its error translation
capitalises the innermost message too ("Unable to open file (Truncated file: eof = ...)"),
where h5py 3 keeps HDF5's lower case (the files table holds those)."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit, rx

H5PY2 = ("h5py 2.7 h5py/_errors.pyx set_exception (\"%s (%s)\" % (desc.capitalize(), "
         "desc_bottom.capitalize())) over HDF5 1.8 src/H5Fsuper.c (\"truncated file: eof = %llu, "
         "sblock->base_addr = %llu, stored_eoa = %llu\"), H5Ocache.c, H5Gnode.c, H5Z.c")

ROWS = found_via(
    ("cases/truncated_checkpoint/synthtext-15-ioerror-truncated-py2.log",),
    rx("truncated_checkpoint", r"Truncated file: eof = [0-9]+",
       "IOError: Unable to open file (Truncated file: eof = 15030288384, sblock->base_addr = 0, "
       "stored_eoa = 15807826032)", H5PY2, ("Truncated file: eof = ",), "hdf5"),
    lit("truncated_checkpoint", "File signature not found",
        "IOError: Unable to open file (File signature not found)", H5PY2, "hdf5"),
    lit("truncated_checkpoint", "Bad object header version number",
        "KeyError: 'Unable to open object (Bad object header version number)'", H5PY2, "hdf5", False),
    lit("truncated_checkpoint", "Bad symbol table node signature",
        "IOError: Can't read data (Bad symbol table node signature)", H5PY2, "hdf5", False),
)
