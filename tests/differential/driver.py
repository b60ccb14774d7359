"""Differential test of the `ffi.*` global functions: our libtvm_ffi.so against the official one.

usage: driver.py [--accepted FILE] [group ...]      (tests/differential/run.sh is the usual entry)

Every group of cases.py runs once per library, each in its own process (runner.py, with
ANYFFI_LIBRARY naming the library); a process that crashes or stops making progress for
CASE_TIMEOUT seconds is recorded against the case it was running and restarted after it. The
outcomes are then compared case by case, classified, checked against accepted.txt, and written to
<root>/.cache/differential/report.txt (and report.json). Exit status 1 when something fails:
  - a crash or hang of our library (never acceptable);
  - a wrong-result, wrong-result(exc-vs-value) or exception-kind difference not in accepted.txt;
  - a harness problem (a runner that cannot start, case lists that do not line up).
Message-only and iteration-order-only differences, crashes of the official library and stale
entries of accepted.txt are reported and do not fail the run."""
import collections
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True  # keep the source tree clean (the runners get PYTHONDONTWRITEBYTECODE)
from paths import HERE, OFFICIAL_LIB, OURS_LIB, OUT, ROOT, SCRATCH, TINY_MODULE, TINY_MODULE_SRC

GROUPS = ["array", "list", "map", "dict", "shape_string", "structural", "recursive", "deepcopy_repr", "json",
          "serialization", "globals", "module", "visit", "arity", "tensor"]
SLOW = ("json", "serialization", "globals")  # started first (deep inputs; official crashes mean restarts)
LIBS = {"off": OFFICIAL_LIB, "ours": OURS_LIB}
CASE_TIMEOUT = 30  # seconds without progress -> hang
FAILING = ("wrong-result", "wrong-result(exc-vs-value)", "exception-kind")  # unless accepted
NEVER_OK = ("OURS-CRASH", "OURS-HANG")


def rel(p):
    r = os.path.relpath(p, ROOT)
    return p if r.startswith("..") else r


# --- preparation -------------------------------------------------------------------------------


def prepare():
    if not os.path.isfile(OFFICIAL_LIB):
        subprocess.run([os.path.join(ROOT, "scripts", "fetch-official.sh")], check=True, stdout=subprocess.DEVNULL)
    if not os.path.isfile(OURS_LIB):
        sys.exit("driver.py: %s is missing: build it first (cargo build --release)" % rel(OURS_LIB))
    os.makedirs(SCRATCH, exist_ok=True)
    os.makedirs(os.path.join(OUT, "results"), exist_ok=True)
    # tiny_module.cc, built against the official headers as tests/python_official/conftest.py does
    # (linked to the official library only to satisfy the linker: at run time its NEEDED
    # libtvm_ffi.so binds, by SONAME, to the library already loaded).
    if not os.path.isfile(TINY_MODULE) or os.path.getmtime(TINY_MODULE) < os.path.getmtime(TINY_MODULE_SRC):
        pkg = os.path.dirname(os.path.dirname(OFFICIAL_LIB))
        subprocess.run([os.environ.get("CXX", "g++"), "-std=c++17", "-O1", "-shared", "-fPIC",
                        "-DTVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1", "-I" + os.path.join(pkg, "include"),
                        TINY_MODULE_SRC, "-L" + os.path.dirname(OFFICIAL_LIB), "-ltvm_ffi",
                        "-o", TINY_MODULE + ".tmp"], check=True)
        os.replace(TINY_MODULE + ".tmp", TINY_MODULE)


def load_accepted(path):
    """{(group, case): (category, reason)} from lines `group | category | case | reason`."""
    acc = {}
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ", 3)]
            where = "%s:%d" % (rel(path), no)
            if len(parts) != 4 or not all(parts):
                sys.exit("%s: expected `group | category | case | reason`" % where)
            group, cat, case, reason = parts
            if group not in GROUPS or cat not in FAILING:
                sys.exit("%s: unknown group %r or category %r (one of %s)" % (where, group, cat, ", ".join(FAILING)))
            if (group, case) in acc:
                sys.exit("%s: %s | %s is listed twice" % (where, group, case))
            acc[(group, case)] = (cat, reason)
    return acc


# --- running -----------------------------------------------------------------------------------


def result_file(group, lib):
    return os.path.join(OUT, "results", "%s.%s.jsonl" % (group, lib))


def read_lines(path):
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut short by a crash
                pass
    return out


def run_group(group, lib):
    """Runs GROUP on LIB; returns None, or the reason the runner could not start."""
    out = result_file(group, lib)
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, ANYFFI_LIBRARY=LIBS[lib], PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    start, errfile = 0, out[:-len(".jsonl")] + ".stderr"
    while True:
        with open(errfile, "wb") as ef:  # a file, not a pipe: a chatty runner must not block
            p = subprocess.Popen([sys.executable, os.path.join(HERE, "runner.py"), group, str(start), out],
                                 env=env, cwd=SCRATCH, stdout=subprocess.DEVNULL, stderr=ef)
        last_size, last_t, hung = -1, time.time(), False
        while p.poll() is None:
            time.sleep(0.1)
            size = os.path.getsize(out) if os.path.exists(out) else 0
            if size != last_size:
                last_size, last_t = size, time.time()
            elif time.time() - last_t > CASE_TIMEOUT:
                p.kill()
                p.wait()
                hung = True
        with open(errfile, "rb") as ef:
            err = ef.read().decode(errors="replace")
        lines = read_lines(out)
        if lines and "done" in lines[-1]:
            return None
        started = [x for x in lines if x.get("s") and x["i"] >= start]
        if not started:
            return "runner exited with %s before its first case:\n%s" % (p.returncode, err[-3000:])
        bad = started[-1]
        with open(out, "a") as f:
            f.write(json.dumps({"i": bad["i"], "n": bad["n"], "r": ["hang" if hung else "crash", p.returncode, err[-1500:]]}) + "\n")
        start = bad["i"] + 1


# --- comparing ---------------------------------------------------------------------------------


def unordered(r):
    """r with the items of every ffi.Map / ffi.Dict sorted (iteration order ignored)."""
    if isinstance(r, list):
        if len(r) == 2 and r[0] in ("ffi.Map", "ffi.Dict") and isinstance(r[1], list):
            return [r[0], sorted((unordered(x) for x in r[1]), key=json.dumps)]
        return [unordered(x) for x in r]
    return r


def tag(r):
    return r[0] if isinstance(r, list) and r and isinstance(r[0], str) else None


def classify(o, u):
    """The category of the difference between official outcome o and ours u, or None."""
    if tag(u) in ("crash", "hang"):
        return "OURS-" + tag(u).upper()
    if tag(o) in ("crash", "hang"):
        return "official-crash"
    if o == u:
        return None
    if tag(o) == "exc" and tag(u) == "exc":
        return "exception-kind" if o[1:3] != u[1:3] else "message"
    if tag(o) == "exc" or tag(u) == "exc":
        return "wrong-result(exc-vs-value)"
    return "order-only" if unordered(o) == unordered(u) else "wrong-result"


def compare(group, accepted):
    """[(case index, case name, category, status, official, ours)] for every difference; status is
    FAIL, accepted or info."""
    res = {}
    for lib in LIBS:
        res[lib] = {x["i"]: (x["n"], x["r"]) for x in read_lines(result_file(group, lib)) if "r" in x}
    diffs = []
    for i in sorted(set(res["off"]) | set(res["ours"])):
        (on, o), (un, u) = res["off"].get(i, ("?", ["missing"])), res["ours"].get(i, ("?", ["missing"]))
        if on != un:
            diffs.append((i, "%s / %s" % (on, un), "harness: case lists differ", "FAIL", o, u))
            continue
        cat = classify(o, u)
        if cat is None:
            continue
        status = "info"
        if cat in NEVER_OK:
            status = "FAIL"
        elif cat in FAILING:
            acc = accepted.get((group, on))
            if acc is None:
                status = "FAIL"
            elif acc[0] != cat:
                status, cat = "FAIL", "%s (accepted as %s)" % (cat, acc[0])
            else:
                status = "accepted"
        diffs.append((i, on, cat, status, o, u))
    return len(res["ours"]), diffs


def main(argv):
    accepted_path = os.path.join(HERE, "accepted.txt")
    if argv[:1] == ["--accepted"]:
        accepted_path, argv = argv[1], argv[2:]
    groups = argv or GROUPS
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        sys.exit("driver.py: unknown group(s) %s; groups: %s" % (bad, " ".join(GROUPS)))
    accepted = load_accepted(accepted_path)
    prepare()
    t0 = time.time()
    print("differential: ours %s vs official %s" % (rel(OURS_LIB), rel(OFFICIAL_LIB)), flush=True)
    jobs = sorted(((g, lib) for g in groups for lib in LIBS), key=lambda j: j[0] not in SLOW)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        startup = {job: err for job, err in zip(jobs, ex.map(lambda j: run_group(*j), jobs)) if err}
    elapsed = time.time() - t0

    failures, infos, report, seen = [], [], {}, set()
    hdr = "%-14s %6s %9s %8s %8s %10s %5s" % ("group", "cases", "accepted", "message", "order", "off-crash", "FAIL")
    lines = [hdr]
    totals = collections.Counter()
    for g in groups:
        if any(job[0] == g for job in startup):
            lines.append("%-14s  runner failed (below)" % g)
            continue
        n, diffs = compare(g, accepted)
        counts = collections.Counter()
        for i, name, cat, status, o, u in diffs:
            if status != "info":
                seen.add((g, name))  # an entry of accepted.txt still needed (or wrong)
            key = "FAIL" if status == "FAIL" else "accepted" if status == "accepted" else cat
            counts[key] += 1
            (failures if status == "FAIL" else infos).append((g, i, name, cat, status, o, u))
        counts["cases"] = n
        totals.update(counts)
        report[g] = {"cases": n, "diffs": [dict(zip(("i", "case", "category", "status", "official", "ours"), d)) for d in diffs]}
        lines.append("%-14s %6d %9d %8d %8d %10d %5s" % (g, n, counts["accepted"], counts["message"], counts["order-only"],
                                                        counts["official-crash"], counts["FAIL"] or ""))
    lines.append("%-14s %6d %9d %8d %8d %10d %5s" % ("total", totals["cases"], totals["accepted"], totals["message"],
                                                    totals["order-only"], totals["official-crash"], totals["FAIL"] or ""))
    stale = sorted(k for k in accepted if k[0] in groups and k not in seen and k[0] not in {j[0] for j in startup})

    def detail(d):
        g, i, name, cat, status, o, u = d
        why = "    accepted: %s\n" % accepted[(g, name)][1] if status == "accepted" else ""
        return "  [%s] %s | %s   (#%d)\n%s    official: %s\n    ours:     %s\n" % (
            cat, g, name, i, why, json.dumps(o)[:600], json.dumps(u)[:600])

    with open(os.path.join(OUT, "report.json"), "w") as f:
        json.dump({"groups": report, "startup_failures": ["%s/%s: %s" % (j[0], j[1], e) for j, e in startup.items()],
                   "stale_accepted": ["%s | %s" % k for k in stale]}, f, indent=1)
    with open(os.path.join(OUT, "report.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
        sections = [("FAILURES", failures), ("ACCEPTED (accepted.txt)", [d for d in infos if d[4] == "accepted"])]
        sections += [(title, [d for d in infos if d[4] == "info" and d[3] == cat]) for title, cat in (
            ("OFFICIAL LIBRARY CRASHED (case skipped)", "official-crash"),
            ("ORDER-ONLY (same items, other map/dict iteration order)", "order-only"),
            ("MESSAGE-ONLY (same exception class and kind, other wording)", "message"))]
        for title, items in sections:
            f.write("\n== %s: %d\n" % (title, len(items)))
            f.writelines(detail(d) for d in items)
        if stale:
            f.write("\n== STALE ENTRIES OF accepted.txt (no longer differ): %d\n" % len(stale))
            f.writelines("  %s | %s\n" % k for k in stale)

    print("\n".join(lines))
    print("(%d cases per library in %.0f s; accepted: differences listed in %s; message: same exception "
          "class and kind, other wording; off-crash: the official library crashed, case skipped)"
          % (totals["cases"], elapsed, rel(accepted_path)))
    if stale:
        print("\nstale entries in %s (these cases no longer differ; remove them):" % rel(accepted_path))
        for k in stale:
            print("  %s | %s" % k)
    for (g, lib), err in sorted(startup.items()):
        print("\nFAIL: %s on %s: %s" % (g, lib, err))
    if failures:
        print("\nFAILURES (%d):" % len(failures))
        for d in failures[:40]:
            print(detail(d), end="")
        if len(failures) > 40:
            print("  ... %d more" % (len(failures) - 40))
    ok = not failures and not startup
    print("\nreport: %s\ndifferential: %s" % (rel(os.path.join(OUT, "report.txt")), "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
