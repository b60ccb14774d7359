"""Where things are: derived from this file's location (tests/differential/ in the checkout)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OFFICIAL_PKG = os.path.join(ROOT, ".cache", "wheel", "unpacked", "tvm_ffi")  # scripts/fetch-official.sh
OFFICIAL_LIB = os.path.join(OFFICIAL_PKG, "lib", "libtvm_ffi.so")
TESTING_LIB = os.path.join(OFFICIAL_PKG, "lib", "libtvm_ffi_testing.so")
OURS_LIB = os.path.join(ROOT, "target", "release", "libtvm_ffi.so")
OUT = os.path.join(ROOT, ".cache", "differential")  # everything the suite writes
SCRATCH = os.path.join(OUT, "scratch")  # files the cases may write
TINY_MODULE = os.path.join(OUT, "tiny_module.so")  # built by driver.py
TINY_MODULE_SRC = os.path.join(ROOT, "tests", "python_official", "tiny_module.cc")
