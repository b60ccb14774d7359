"""Finding and loading ``libtvm_ffi.so``.

Search order (the first that exists wins):

1. the ``ANYFFI_LIBRARY`` environment variable (a file path);
2. the package folder (``anyffi/libtvm_ffi.so``, as bundled by ``pip install``);
3. ``target/release/libtvm_ffi.so`` of a cargo checkout, found by walking up from the package.

Any ABI-compatible ``libtvm_ffi.so`` works, ours or the official apache-tvm-ffi one.
"""

from __future__ import annotations

import ctypes
import os
import sys

LIB_NAME = {"darwin": "libtvm_ffi.dylib", "win32": "tvm_ffi.dll"}.get(sys.platform, "libtvm_ffi.so")


def candidate_paths() -> list[str]:
    """Every place the library is looked for, in order."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = []
    env = os.environ.get("ANYFFI_LIBRARY")
    if env:
        paths.append(env)
    paths.append(os.path.join(here, LIB_NAME))
    d = here
    while True:
        paths.append(os.path.join(d, "target", "release", LIB_NAME))
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return paths


def load() -> tuple[ctypes.CDLL, ctypes.PyDLL, str]:
    """The library twice: as CDLL (calls release the GIL) and as PyDLL (calls keep it), and its path.

    Raises ImportError naming every path searched when none exists, or the path that failed to load.
    """
    searched = candidate_paths()
    env = os.environ.get("ANYFFI_LIBRARY")
    if env and not os.path.isfile(env):
        raise ImportError(f"anyffi: ANYFFI_LIBRARY={env!r} does not name a file")
    for path in searched:
        if os.path.isfile(path):
            try:
                # RTLD_GLOBAL so that libraries loaded later (kernel modules, the official testing
                # library) resolve their TVMFFI* imports against this very copy.
                cdll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                pydll = ctypes.PyDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                raise ImportError(f"anyffi: failed to load {path}: {e}") from e
            return cdll, pydll, path
    listing = "\n  ".join(searched)
    raise ImportError(
        f"anyffi: cannot find {LIB_NAME}. Build it with `cargo build --release` in the anyffi checkout, "
        f"set ANYFFI_LIBRARY to its path, or install the package with `pip install ./bindings/python`. "
        f"Searched:\n  {listing}"
    )
