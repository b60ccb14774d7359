"""Operator benchmark driver: times anyffi's ops (through the Rust server `ops_bench.rs`) and
their anchors (numpy/OpenBLAS, or a parallel memcpy for bandwidth-bound ops) in interleaved
blocks, so both sides see the same machine load, and prints a Markdown table of medians.

Run through bench/ops/run.sh (it builds the server and unsets OPENBLAS_CORETYPE/L2_SIZE for
this command only, so numpy uses its best kernel; the table header says which one it ran).
"""
import json
import statistics
import subprocess
import sys
import time

import numpy as np

try:
    import threadpoolctl
except ImportError:  # pragma: no cover
    threadpoolctl = None


class Server:
    def __init__(self, exe):
        self.p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, case, reps):
        self.p.stdin.write(f"{case} {reps}\n")
        self.p.stdin.flush()
        return [float(x) for x in self.p.stdout.readline().split()]

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def np_timer(fn):
    def run(reps):
        out = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        return out
    return run


def np_linear(m, k, n):
    rng = np.random.default_rng(0)
    x = rng.random((m, k), dtype=np.float32)
    w = (rng.random((n, k), dtype=np.float32) * 0.01)
    y = np.empty((m, n), np.float32)
    return np_timer(lambda: np.matmul(x, w.T, out=y))


def np_add(m, n):
    a = np.random.rand(m, n).astype(np.float32)
    b = np.random.rand(m, n).astype(np.float32)
    c = np.empty_like(a)
    return np_timer(lambda: np.add(a, b, out=c))


def np_argmax(n):
    v = np.random.default_rng(1).random(n, dtype=np.float32)
    return np_timer(lambda: v.argmax())


def np_copy(nbytes):
    src = np.ones(nbytes // 2, np.uint8)
    dst = np.empty_like(src)
    return np_timer(lambda: np.copyto(dst, src))


MIB = 1 << 20
SETTLE_S = 0.15
E = 512 * 4096  # elements of a (512, 4096) tensor

# (label, our case, anchor: ("numpy", factory) | ("rust", case), bytes moved, target, kind)
# kind "speedup": target on anchor_time / our_time; "bandwidth": our GB/s over the anchor copy's.
CASES = [
    ("linear f32 (1,1536,8960)", "linear:f32:1:1536:8960", ("numpy", lambda: np_linear(1, 1536, 8960)), 0, 1.0, "speedup"),
    ("linear f32 (16,1536,1536)", "linear:f32:16:1536:1536", ("numpy", lambda: np_linear(16, 1536, 1536)), 0, 1.0, "speedup"),
    ("linear f32 (128,1536,8960)", "linear:f32:128:1536:8960", ("numpy", lambda: np_linear(128, 1536, 8960)), 0, 1.0, "speedup"),
    ("linear f32 (512,4096,4096)", "linear:f32:512:4096:4096", ("numpy", lambda: np_linear(512, 4096, 4096)), 0, 1.0, "speedup"),
    ("linear bf16 (1,1536,8960) vs numpy f32", "linear:bf16:1:1536:8960", ("numpy", lambda: np_linear(1, 1536, 8960)), 0, 1.8, "speedup"),
    ("linear bf16 (1,8960,1536) vs numpy f32", "linear:bf16:1:8960:1536", ("numpy", lambda: np_linear(1, 8960, 1536)), 0, 1.8, "speedup"),
    ("add f32 (512,4096) vs numpy", "add:f32:512:4096", ("numpy", lambda: np_add(512, 4096)), 0, None, "speedup"),
]
for dt, es in (("f32", 4), ("bf16", 2)):
    CASES += [
        (f"add {dt} (512,4096)", f"add:{dt}:512:4096", ("rust", f"copy:{3 * es * E}"), 3 * es * E, 0.8, "bandwidth"),
        (f"swiglu {dt} (512,4096)", f"swiglu:{dt}:512:4096", ("rust", f"copy:{3 * es * E}"), 3 * es * E, 0.8, "bandwidth"),
        (f"rms_norm {dt} (512,4096)", f"rms_norm:{dt}:512:4096", ("rust", f"copy:{2 * es * E}"), 2 * es * E, 0.8, "bandwidth"),
        (f"rope {dt} (512,32,128)", f"rope:{dt}:512:32:128", ("rust", f"copy:{2 * es * E}"), 2 * es * E, 0.8, "bandwidth"),
        (f"rope {dt} (512,4,4096) [LLAISYS shape, 4x larger]", f"rope:{dt}:512:4:4096", ("rust", f"copy:{8 * es * E}"), 8 * es * E, None, "bandwidth"),
        (f"decode attention {dt} (1 q, 4096 kv, 12/2 heads, d 128)", f"attn:{dt}:1:4096:12:2:128", ("rust", f"copy:{2 * 4096 * 2 * 128 * es}"), 2 * 4096 * 2 * 128 * es, 0.7, "bandwidth"),
        # 8 KV heads: the key split by shape once ran this in one chunk per head, 2x slower
        (f"decode attention {dt} (1 q, 4096 kv, 32/8 heads, d 128)", f"attn:{dt}:1:4096:32:8:128", ("rust", f"copy:{2 * 4096 * 8 * 128 * es}"), 2 * 4096 * 8 * 128 * es, None, "bandwidth"),
    ]
# The same bandwidth cases with their operands in DRAM (256 MiB written before every call, on
# both sides): the regime of a model whose weights and KV cache do not stay in the last-level
# cache between layers. The (512, 4096) tensors fit in this machine's L3, so the rows above
# compare against a copy running from L3.
for dt, es in (("f32", 4), ("bf16", 2)):
    CASES += [
        (f"{label} [cold]", f"cold:{case}", ("rust", f"cold:{anchor[1]}"), nbytes, target, kind)
        for label, case, anchor, nbytes, target, kind in list(CASES)
        if kind == "bandwidth" and case.split(":")[1] == dt and target is not None
    ]
CASES += [
    ("argmax f32 (151936) vs numpy", "argmax:f32:151936", ("numpy", lambda: np_argmax(151936)), 0, None, "speedup"),
    ("plan cache: linear f32 (1,64,64) on vs off", "linear:f32:1:64:64", ("rust", "nocache:linear:f32:1:64:64"), 0, None, "speedup"),
    ("plan cache: linear f32 (1,8,8) on vs off", "linear:f32:1:8:8", ("rust", "nocache:linear:f32:1:8:8"), 0, None, "speedup"),
    ("plan cache: linear bf16 (4,64,64) on vs off", "linear:bf16:4:64:64", ("rust", "nocache:linear:bf16:4:64:64"), 0, None, "speedup"),
    ("copy 256 MiB (parallel memcpy) vs numpy copyto (1 thread)", f"copy:{256 * MIB}", ("numpy", lambda: np_copy(256 * MIB)), 256 * MIB, None, "speedup"),
]


def measure(server, case, anchor, rounds, block_s):
    kind, a = anchor
    anchor_run = a() if kind == "numpy" else (lambda reps: server.run(a, reps))
    # calibrate the block size to about block_s seconds per side
    server.run(case, 2)
    anchor_run(2)
    t = statistics.median(server.run(case, 3) + anchor_run(3))
    reps = max(1, min(200, int(block_s / max(t, 1e-7))))
    if case.startswith("cold:"):
        reps = min(reps, 8)  # each call first writes 256 MiB (~10 ms) outside the timing
    ours, theirs = [], []
    for _ in range(rounds):
        # OpenBLAS worker threads spin for about 2^28 cycles after a call before they sleep,
        # and they would take the cores from whichever side runs next: let both pools settle.
        time.sleep(SETTLE_S)
        ours += server.run(case, reps)
        time.sleep(SETTLE_S)
        theirs += anchor_run(reps)
    return ours, theirs


def main():
    exe = sys.argv[1]
    filt = sys.argv[2] if len(sys.argv) > 2 else ""
    rounds = 9
    server = Server(exe)
    if threadpoolctl:
        info = [(i["internal_api"], i.get("architecture"), i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    else:
        info = "threadpoolctl not installed"
    print(f"numpy {np.__version__}, BLAS {info}; medians (and minima) over {rounds} interleaved blocks; 'met' judges the medians\n")
    print("| case | ours (ms) | anchor | anchor (ms) | result (medians) | result (minima) | target | met |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for label, case, anchor, nbytes, target, kind in CASES:
        if filt not in label and filt not in case:
            continue
        ours, theirs = measure(server, case, anchor, rounds, 0.05)
        mo, mt = statistics.median(ours), statistics.median(theirs)
        lo, lt = min(ours), min(theirs)
        if anchor[0] == "numpy":
            aname = "numpy"
        elif "copy" in anchor[1]:
            aname = "memcpy same bytes"
        else:
            aname = "cache off"
        res, rmin = mt / mo, lt / lo
        if kind == "speedup":
            result, rmin_s = f"{res:.2f}x", f"{rmin:.2f}x"
        else:
            # same bytes: bandwidth fraction = copy time / our time
            result = f"{nbytes / mo / 1e9:.1f} GB/s = {100 * res:.0f}% of copy ({nbytes / mt / 1e9:.1f} GB/s)"
            rmin_s = f"{100 * rmin:.0f}%"
        tgt = "" if target is None else (f">= {target}x" if kind == "speedup" else f">= {100 * target:.0f}%")
        met = "" if target is None else ("yes" if res >= target else "NO")
        ms = (lambda t: f"{t * 1e6:.2f} us") if mo < 1e-4 else (lambda t: f"{t * 1e3:.3f}")
        print(f"| {label} | {ms(mo)} | {aname} | {ms(mt)} | {result} | {rmin_s} | {tgt} | {met} |", flush=True)
        rows.append({"label": label, "ours_s": mo, "anchor_s": mt, "ours_min_s": lo, "anchor_min_s": lt, "result": res, "result_min": rmin, "target": target})
    server.close()
    with open("bench/ops/last.json", "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
