"""Raw memory access without a ctypes call: memoryviews over the whole address space.

ctypes reads such as ``c_int64.from_address(p).value`` allocate an object and cost ~150 ns; an
index into a memoryview costs ~25 ns. Every layout read here is part of the C ABI (``c_api.h``,
``dlpack.h``) or of CPython's stable object layout, and every address comes from the library or
from a live Python object, so a read never strays outside memory that is alive.

``Q``/``I``/``D`` index 8-byte unsigned/4-byte signed/8-byte float cells: the cell at address ``a``
(aligned) is ``Q[(a >> 3) - 1]``, ``I[(a >> 2) - 2]``, ``D[(a >> 3) - 1]``. ``B`` indexes bytes:
``B[a - 8]``. (The views start at address 8, not 0, so that no view is built on a NULL pointer.)
"""

from __future__ import annotations

import ctypes

_BASE = 8
_SIZE = 1 << 60  # beyond every user-space address on x86-64 and aarch64

_from_memory = ctypes.pythonapi.PyMemoryView_FromMemory
_from_memory.restype = ctypes.py_object
_from_memory.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
_PyBUF_WRITE = 0x200

B = _from_memory(_BASE, _SIZE, _PyBUF_WRITE)
Q = B.cast("Q")
I = B.cast("i")
D = B.cast("d")
q = B.cast("q")  # signed 8-byte cells (Int values)


def qi(addr: int) -> int:
    """The ``Q``/``q``/``D`` index of the 8-aligned address ``addr``."""
    return (addr >> 3) - 1


def read_bytes(addr: int, size: int) -> bytes:
    """A copy of ``size`` bytes at ``addr``."""
    if size == 0:
        return b""
    return B[addr - _BASE : addr - _BASE + size].tobytes()


def read_str(addr: int, size: int) -> str:
    """UTF-8 text of ``size`` bytes at ``addr``."""
    if size == 0:
        return ""
    return str(B[addr - _BASE : addr - _BASE + size], "utf-8")


def _bytes_data_offset() -> int:
    # Where CPython keeps the characters of a bytes object (ob_sval), relative to id(). Used to pass
    # long str/bytes arguments as zero-copy RawStr/ByteArray views; checked here once.
    probe = b"anyffi-probe-bytes"
    addr = ctypes.cast(ctypes.c_char_p(probe), ctypes.c_void_p).value
    off = addr - id(probe)
    if read_bytes(id(probe) + off, len(probe) + 1) != probe + b"\0":
        return -1
    return off


BYTES_DATA_OFFSET = _bytes_data_offset()
