"""RSS stays flat over 200k calls that create and release objects."""

from __future__ import annotations

import gc
import os
import sys

import anyffi
import pytest

np = pytest.importorskip("numpy")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_rss_stable_over_200k_calls(t):
    x = np.arange(64, dtype="float32")
    cb = anyffi.Function(lambda s: s + "!")
    long_text = "a string long enough to be a heap object"

    def batch(n: int) -> None:
        for i in range(n):
            k = i % 8
            if k == 0:
                assert t.echo(long_text) == long_text  # ffi.String made and released
            elif k == 1:
                assert t.echo(2**70 + i) == 2**70 + i  # ffi.BigInt
            elif k == 2:
                assert t.echo(x).shape == (64,)  # ffi.Tensor from the capsule
            elif k == 3:
                assert t.apply(cb, long_text) == long_text + "!"  # callback with objects both ways
            elif k == 4:
                assert anyffi.Function(lambda: i)() == i  # a new function object and callback slot
            elif k == 5:
                t.nop(lambda: None, object(), b"some bytes longer than seven")  # temporaries
            elif k == 6:
                try:
                    t.raise_error("ValueError", "leak check")  # ffi.Error objects
                except ValueError:
                    pass
            else:
                assert t.echo(anyffi.device("cuda", 1)).device_id == 1

    from anyffi import _marshal, function

    batch(20_000)  # warm up pools, caches and the allocator
    gc.collect()
    callbacks, opaque = len(function._CALLBACKS), len(_marshal.OPAQUE)
    before = rss_bytes()
    batch(200_000)
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 8 * 1024 * 1024, f"RSS grew by {grown / 1e6:.1f} MB over 200k calls"
    # every callable and opaque object made by the batch was released by its deleter
    assert len(function._CALLBACKS) <= callbacks and len(_marshal.OPAQUE) <= opaque
