#!/usr/bin/env python3
"""The operator library's CUDA kernels against torch's CUDA operators, in one run on one GPU.

For each case: microseconds per call (median of timed batches, CUDA events on torch's current
stream, which is also the stream the ops run on: the environment stream is set to it), the ratio
torch/anyffi (> 1: anyffi faster), and the bandwidth of memory-bound ops as a share of the
device-to-device copy measured at the start. Needs torch with CUDA and a GPU:

    ANYFFI_LIBRARY=target/release/libtvm_ffi.so python3 bench/cuda/bench_cuda.py [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import torch  # noqa: E402

import anyffi  # noqa: E402

F = torch.nn.functional


def timed(fn, batches: int, per: int) -> float:
    """Median microseconds per call of ``fn`` over ``batches`` batches of ``per`` calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(batches):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(per):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / per)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    batches, per = (5, 20) if args.quick else (11, 50)
    dev = "cuda"
    lib = ctypes.CDLL(anyffi.library_path)
    lib.TVMFFIEnvSetStream.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    stream = torch.cuda.current_stream().cuda_stream
    assert lib.TVMFFIEnvSetStream(2, 0, stream, None) == 0
    op = {n: anyffi.get_global_func("ops." + n) for n in
          ("add", "swiglu", "rms_norm", "rope", "self_attention", "linear", "argmax", "embedding", "gemm")}

    def t(x):
        return anyffi.from_dlpack(x)

    # clocks up before anything is timed (an idle GPU starts slow)
    w = torch.randn(4096, 4096, device=dev)
    for _ in range(200):
        w @ w
    torch.cuda.synchronize()
    n = 1 << 28
    src, dst = torch.empty(n // 4, device=dev), torch.empty(n // 4, device=dev)
    copy_us = timed(lambda: dst.copy_(src), batches, per)
    copy_bw = 2 * n / copy_us / 1e3  # GB/s, read + write
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; copy {copy_bw:.0f} GB/s (read + write)")
    print(f"{'case':44s} {'anyffi us':>10s} {'torch us':>10s} {'torch/ours':>10s} {'bw share':>9s}")

    def row(name, ours, theirs, nbytes=None):
        a, b = timed(ours, batches, per), timed(theirs, batches, per)
        share = f"{nbytes / a / 1e3 / copy_bw:8.0%}" if nbytes else ""
        print(f"{name:44s} {a:10.2f} {b:10.2f} {b / a:9.2f}x {share:>9s}", flush=True)

    for dt in (torch.float32, torch.bfloat16):
        tag = str(dt).split(".")[1]
        es = torch.finfo(dt).bits // 8
        a, b = torch.randn(512, 4096, device=dev, dtype=dt), torch.randn(512, 4096, device=dev, dtype=dt)
        c = torch.empty_like(a)
        ta, tb, tc = t(a), t(b), t(c)
        row(f"add (512,4096) {tag}", lambda: op["add"](tc, ta, tb), lambda: torch.add(a, b, out=c), 3 * a.numel() * es)
        row(f"swiglu (512,4096) {tag}", lambda: op["swiglu"](tc, ta, tb), lambda: torch.mul(F.silu(a), b, out=c), 3 * a.numel() * es)
        w = torch.randn(4096, device=dev, dtype=dt)
        tw = t(w)
        row(f"rms_norm (512,4096) {tag}", lambda: op["rms_norm"](tc, ta, tw, 1e-6),
            lambda: F.rms_norm(a, (4096,), w, 1e-6), 2 * a.numel() * es)
        x = torch.randn(512, 32, 128, device=dev, dtype=dt)
        y = torch.empty_like(x)
        pos = torch.arange(512, device=dev)
        tx, ty, tp = t(x), t(y), t(pos)
        h = 64
        inv = 1.0 / (10000.0 ** (torch.arange(h, device=dev, dtype=torch.float32) * 2 / 128))
        ang = pos.float()[:, None] * inv[None, :]
        cos, sin = ang.cos()[:, None, :].to(dt), ang.sin()[:, None, :].to(dt)

        def rope_torch():
            x1, x2 = x[..., :h], x[..., h:]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

        row(f"rope (512,32,128) {tag}", lambda: op["rope"](ty, tx, tp, 10000.0), rope_torch, 2 * x.numel() * es)
        q = torch.randn(1, 12, 128, device=dev, dtype=dt)
        k = torch.randn(4096, 2, 128, device=dev, dtype=dt)
        v = torch.randn(4096, 2, 128, device=dev, dtype=dt)
        o = torch.empty_like(q)
        tq, tk, tv, to = t(q), t(k), t(v), t(o)
        qq, kk, vv = q.permute(1, 0, 2)[None], k.permute(1, 0, 2)[None], v.permute(1, 0, 2)[None]
        sc = 1 / math.sqrt(128)
        row(f"decode attention 4096 keys GQA 6:1 {tag}", lambda: op["self_attention"](to, tq, tk, tv, sc),
            lambda: F.scaled_dot_product_attention(qq, kk, vv, scale=sc, enable_gqa=True), 2 * k.numel() * es)
        for m, kd, nd in ((1, 1536, 8960), (128, 1536, 8960), (512, 4096, 4096)):
            xx = torch.randn(m, kd, device=dev, dtype=dt)
            ww = torch.randn(nd, kd, device=dev, dtype=dt)
            yy = torch.empty(m, nd, device=dev, dtype=dt)
            txx, tww, tyy = t(xx), t(ww), t(yy)
            row(f"linear ({m},{kd},{nd}) {tag}", lambda: op["linear"](tyy, txx, tww, None),
                lambda: torch.matmul(xx, ww.t(), out=yy),
                ww.numel() * es if m == 1 else None)
    # per-call cost on the host: 1-element tensors, wall clock per call with no synchronisation
    # inside the loop (the GPU work is negligible; launch and argument handling are what is left)
    import time

    one = [torch.ones(1, device=dev) for _ in range(3)]
    t1 = [t(x) for x in one]
    nop = anyffi.get_global_func("anyffi.testing.nop", allow_missing=True)

    def wall(fn, n=2000):
        best = float("inf")
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / n * 1e6)
        return best

    ours, theirs = wall(lambda: op["add"](t1[0], t1[1], t1[2])), wall(lambda: torch.add(one[1], one[2], out=one[0]))
    print(f"{'per-call host cost, add of 1 element':44s} {ours:10.2f} {theirs:10.2f} {theirs / ours:9.2f}x")
    if nop is not None:
        print(f"{'  of which the Python call (nop(a, b, c))':44s} {wall(lambda: nop(t1[0], t1[1], t1[2])):10.2f}")
    assert lib.TVMFFIEnvSetStream(2, 0, None, None) == 0


if __name__ == "__main__":
    main()
