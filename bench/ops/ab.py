"""Same-binary A/B of the `ops` bench server: several server processes (other builds, or the
same build under other environment variables) answer the same cases in alternating order, and
each case prints the median of every configuration's per-round medians, with its ratio to the
first one. Noisy machines make single runs swing by 10-20%; this is how the performance log's
A/B numbers are taken.

Usage:
  python3 bench/ops/ab.py ROUNDS REPS CASES LABEL=[ENV=V;ENV=V][@SERVER] ...
e.g. (two builds, then one build with and without a variable):
  cp $(ls -t target/release/deps/ops-* | grep -v '\\.d$' | head -1) /tmp/ops_new
  python3 bench/ops/ab.py 7 100 "add:f32:512:4096,attn:bf16:1:4096:12:2:128" old=@/tmp/ops_old new=@/tmp/ops_new
  python3 bench/ops/ab.py 5 200 "rms_norm:f32:512:4096" two= one="ANYFFI_NUM_THREADS=1"
CASES are the server's case strings (see ops_bench.rs); SERVER defaults to $EXE or the newest
built `ops` bench binary under target/release/deps.
"""
import glob
import os
import statistics
import subprocess
import sys


def newest_server():
    bins = [p for p in glob.glob("target/release/deps/ops-*") if not p.endswith(".d")]
    if not bins:
        sys.exit("no ops bench server: cargo bench -p anyffi-runtime --bench ops --no-run")
    return max(bins, key=os.path.getmtime)


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    rounds, reps, cases = int(argv[1]), int(argv[2]), argv[3].split(",")
    default = os.environ.get("EXE") or newest_server()
    cfgs = []
    for spec in argv[4:]:
        label, rest = spec.split("=", 1)
        exe = default
        if "@" in rest:
            rest, exe = rest.split("@", 1)
        env = dict(os.environ)
        for kv in filter(None, rest.split(";")):
            k, v = kv.split("=", 1)
            env[k] = v
        proc = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        cfgs.append((label, proc))
    res = {(label, c): [] for label, _ in cfgs for c in cases}
    for r in range(rounds):
        for c in cases:
            for label, proc in (cfgs if r % 2 == 0 else cfgs[::-1]):
                proc.stdin.write(f"{c} {reps}\n")
                proc.stdin.flush()
                times = [float(x) for x in proc.stdout.readline().split()]
                res[(label, c)].append(statistics.median(times))
    for c in cases:
        base = statistics.median(res[(cfgs[0][0], c)])
        cols = []
        for label, _ in cfgs:
            med = statistics.median(res[(label, c)])
            cols.append(f"{label}: {med * 1e3:.4f} ms ({med / base:.3f}x)")
        print(c, "  ".join(cols))
    for _, proc in cfgs:
        proc.stdin.close()
        proc.wait()


if __name__ == "__main__":
    main(sys.argv)
