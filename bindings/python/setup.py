"""Build step for ``pip install ./bindings/python``: bundle ``libtvm_ffi.so`` into the package.

The library comes from (first that applies):
  1. ``ANYFFI_BUNDLE_LIBRARY=/path/to/libtvm_ffi.so`` (bundle that file as is);
  2. ``cargo build --release`` in the checkout that contains this folder (when cargo exists and
     ``ANYFFI_SKIP_CARGO`` is not set), then ``target/release/libtvm_ffi.so``;
  3. an already built ``target/release/libtvm_ffi.so`` of the checkout.
With none of them the package installs without a library and finds one at import time
(``ANYFFI_LIBRARY``), saying what it searched when it cannot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIB = "libtvm_ffi.so"


def _library() -> str | None:
    given = os.environ.get("ANYFFI_BUNDLE_LIBRARY")
    if given:
        if not os.path.isfile(given):
            sys.exit(f"anyffi setup: ANYFFI_BUNDLE_LIBRARY={given} does not exist")
        return given
    built = os.path.join(ROOT, "target", "release", LIB)
    cargo = shutil.which("cargo")
    if cargo and os.path.isfile(os.path.join(ROOT, "Cargo.toml")) and not os.environ.get("ANYFFI_SKIP_CARGO"):
        jobs = os.environ.get("CARGO_BUILD_JOBS", "2")
        print(f"anyffi setup: cargo build --release -j {jobs} in {ROOT}", flush=True)
        subprocess.run([cargo, "build", "--release", "-j", jobs], cwd=ROOT, check=True)
    return built if os.path.isfile(built) else None


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        lib = _library()
        if lib is None:
            print("anyffi setup: no libtvm_ffi.so bundled; set ANYFFI_LIBRARY at run time", flush=True)
            return
        dest = os.path.join(self.build_lib, "anyffi", LIB)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(lib, dest)
        print(f"anyffi setup: bundled {lib}", flush=True)


class PlatformDistribution(Distribution):
    """The wheel carries a native library, so it is tagged for this platform."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=PlatformDistribution)
