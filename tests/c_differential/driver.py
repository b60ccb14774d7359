"""Differential test of the TVM FFI C ABI: our libtvm_ffi.so against the official one.

usage: driver.py [--accepted FILE] [--valgrind] [--jobs N] [--timeout S] [--exclude SUBSTR]...
                 [SUBSTR ...]                      (tests/c_differential/run.sh is the usual entry)

The driver binary <root>/.cache/c_differential/cdiff (built by run.sh against the official headers,
no rpath) runs every case once per library, one process per case, the library chosen by
LD_LIBRARY_PATH. The two outputs are compared line by line and classified:
  ours-crash, ours-hang   our process crashed, aborted, or ran past the timeout     -> FAIL always
  official-crash          only the official library crashed; the case is skipped   -> reported
  value                   a non-message line differs (return codes, results, ...)  -> FAIL unless accepted
  kind                    only error kinds (and messages) differ                   -> FAIL unless accepted
  msg                     only error messages differ                               -> reported
  soft                    only informational "~" lines differ                      -> reported
A case selected by SUBSTR contains one of them; --exclude drops cases containing SUBSTR.
Writes <root>/.cache/c_differential/report.txt and results.json. --valgrind then runs our
library's cases under memcheck (cases marked CASE_NOVG skipped); a memory error, a definite leak
or a crash there fails too. Exit status: 0 pass, 1 fail, 2 harness error."""
import collections
import difflib
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, ".cache", "c_differential")
BIN = os.path.join(OUT, "cdiff")
LIBDIRS = {"official": os.path.join(ROOT, ".cache", "wheel", "unpacked", "tvm_ffi", "lib"),
           "ours": os.path.join(ROOT, "target", "release")}
SUPP = os.path.join(ROOT, "tests", "valgrind.supp")
FAILING = ("value", "kind")  # unless accepted
NEVER_OK = ("ours-crash", "ours-hang")
ORDER = ("ours-crash", "ours-hang", "value", "kind", "msg", "soft", "official-crash", "same")
VG_TIMEOUT = 300  # seconds per case under valgrind


def rel(p):
    r = os.path.relpath(p, ROOT)
    return p if r.startswith("..") else r


def die(msg):
    print("c_differential: " + msg, file=sys.stderr)
    sys.exit(2)


def lib_env(lib):
    return dict(os.environ, LD_LIBRARY_PATH=LIBDIRS[lib])


# --- cases and accepted differences -------------------------------------------------------------


def list_cases():
    """[(name, novg reason or None)] in the driver's order."""
    p = subprocess.run([BIN, "list"], env=lib_env("ours"), capture_output=True, text=True)
    if p.returncode != 0:
        die("`cdiff list` failed (rc %d):\n%s" % (p.returncode, p.stderr[-2000:]))
    cases = []
    for line in p.stdout.splitlines():
        parts = line.split("\t")
        cases.append((parts[0], parts[2] if len(parts) == 3 and parts[1] == "novg" else None))
    return cases


def load_accepted(path, known):
    """{case: (category, reason)} from lines `case | category | reason`."""
    acc = {}
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ", 2)]
            where = "%s:%d" % (rel(path), no)
            if len(parts) != 3 or not all(parts):
                die("%s: expected `case | category | reason`" % where)
            case, cat, reason = parts
            if cat not in FAILING:
                die("%s: category %r is not one of %s (others never fail)" % (where, cat, ", ".join(FAILING)))
            if case not in known:
                die("%s: no case named %r" % (where, case))
            if case in acc:
                die("%s: %s is listed twice" % (where, case))
            acc[case] = (cat, reason)
    return acc


def check_binding():
    """The driver must load exactly the library of LIBDIRS[lib] (no rpath, no stray copy)."""
    for lib, d in LIBDIRS.items():
        want = os.path.realpath(os.path.join(d, "libtvm_ffi.so"))
        p = subprocess.run(["ldd", BIN], env=lib_env(lib), capture_output=True, text=True)
        m = re.search(r"libtvm_ffi\.so => (\S+)", p.stdout)
        if not m or os.path.realpath(m.group(1)) != want:
            die("with LD_LIBRARY_PATH=%s the driver binds libtvm_ffi.so to %s, not %s"
                % (rel(d), m.group(1) if m else "nothing", rel(want)))


# --- running ------------------------------------------------------------------------------------


def run_case(lib, name, timeout):
    try:
        p = subprocess.run([BIN, "run", name], env=lib_env(lib), cwd=OUT, capture_output=True, timeout=timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
        if rc < 0:
            status = "signal %d" % -rc
        elif rc != 0:
            status = "exit %d" % rc
        elif not out.rstrip().endswith(b"END"):
            status = "exit 0 before END"
        else:
            status = "ok"
    except subprocess.TimeoutExpired as e:
        out, err, status = e.stdout or b"", e.stderr or b"", "timeout"
    lines = out.decode("utf-8", "replace").splitlines()
    if lines and lines[-1] == "END":
        lines.pop()
    err = err.decode("utf-8", "replace")
    if len(err) > 4000:  # the start says what happened (panic message), the end where it ended
        err = err[:2500] + "\n[...]\n" + err[-1500:]
    return {"status": status, "out": lines, "stderr": err}


# --- comparing ----------------------------------------------------------------------------------


def norm(lines, mask):
    """Hard lines (no "~"), with error messages (mask >= 1) and kinds (mask >= 2) blanked."""
    out = []
    for line in lines:
        if line.startswith("~"):
            continue
        if mask >= 1:
            line = re.sub(r"( err\.msg=).*", r"\1<msg>", line)
        if mask >= 2:
            line = re.sub(r"( err\.kind=).*", r"\1<kind>", line)
        out.append(line)
    return out


def classify(o, u):
    if u["status"] != "ok":
        return "ours-hang" if u["status"] == "timeout" else "ours-crash"
    if o["status"] != "ok":
        return "official-crash"
    if o["out"] == u["out"]:
        return "same"
    for mask, cat in ((0, "soft"), (1, "msg"), (2, "kind")):
        if norm(o["out"], mask) == norm(u["out"], mask):
            return cat
    return "value"


def detail(name, cat, status, o, u, reason=None):
    if status == "FAIL" and cat in FAILING:
        cat += ", not accepted"
    head = "  [%s] %s   (official: %s, ours: %s)" % (cat, name, o["status"], u["status"])
    lines = [head]
    if reason:
        lines.append("    accepted: " + reason)
    if cat not in ("official-crash",):
        diff = list(difflib.unified_diff(o["out"], u["out"], "official", "ours", lineterm="", n=0))[2:]
        for d in diff[:40]:
            lines.append("    " + (d if len(d) <= 400 else d[:400] + "..."))
        if len(diff) > 40:
            lines.append("    ... %d more diff lines" % (len(diff) - 40))
    for lib, r in (("official", o), ("ours", u)):
        if r["status"] != "ok" and (lib == "ours" or cat == "official-crash"):
            tail = [x for x in r["stderr"].strip().splitlines() if x.strip()][:6]
            if tail:
                lines.append("    %s stderr: %s" % (lib, " | ".join(t.strip()[:200] for t in tail)))
    return "\n".join(lines) + "\n"


# --- valgrind -----------------------------------------------------------------------------------


def run_valgrind(names, jobs):
    """{case: problem} for our library under memcheck, one forked child per case."""
    vgdir = os.path.join(OUT, "valgrind")
    os.makedirs(vgdir, exist_ok=True)
    for f in os.listdir(vgdir):
        os.remove(os.path.join(vgdir, f))
    shards = [names[i::jobs] for i in range(jobs)]

    def shard(i):
        cmd = ["valgrind", "-q", "--suppressions=" + SUPP, "--leak-check=full", "--show-leak-kinds=definite,possible",
               "--errors-for-leak-kinds=definite,possible", "--num-callers=30",
               "--log-file=" + os.path.join(vgdir, "ours.%p.log"), BIN, "forkeach", str(VG_TIMEOUT)] + shards[i]
        with open(os.path.join(vgdir, "shard%d.out" % i), "wb") as f:
            return subprocess.run(cmd, env=lib_env("ours"), cwd=OUT, stdout=f, stderr=subprocess.STDOUT).returncode

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        rcs = list(ex.map(shard, range(len(shards))))
    pid2case, status, problems = {}, {}, {}
    for i in range(len(shards)):
        with open(os.path.join(vgdir, "shard%d.out" % i), errors="replace") as f:
            for line in f:
                m = re.match(r"### CASE (\S+) pid=(\d+)", line)
                if m:
                    pid2case[m.group(2)] = m.group(1)
                m = re.match(r"### STATUS (\S+) (\S+)", line)
                if m:
                    status[m.group(1)] = m.group(2)
        if rcs[i] != 0:
            problems["(valgrind shard %d)" % i] = "valgrind exited with %d; see %s" % (
                rcs[i], rel(os.path.join(vgdir, "shard%d.out" % i)))
    for n in names:
        st = status.get(n)
        if st is None:
            problems[n] = "did not run (the shard stopped before it)"
        elif st != "exit=0":
            problems[n] = "timeout (%d s)" % VG_TIMEOUT if st == "signal=14" else "crashed under valgrind (%s)" % st
    for f in sorted(os.listdir(vgdir)):
        m = re.match(r"ours\.(\d+)\.log$", f)
        if not m:
            continue
        path = os.path.join(vgdir, f)
        with open(path, errors="replace") as fh:
            txt = fh.read()
        if not txt.strip():
            os.remove(path)
            continue
        kinds = sorted(set(re.sub(r" in loss record .*", "", m2.group(1))
                           for m2 in re.finditer(r"==\d+== ((?:Invalid|Mismatched|Conditional|Use of|Syscall|Source and)"
                                                 r"[^\n]*|[\d,]+ (?:\([^)]*\) )?bytes in [\d,]+ blocks are definitely"
                                                 r" lost[^\n]*|Process terminating[^\n]*)", txt)))
        case = pid2case.get(m.group(1), "(driver process, pid %s)" % m.group(1))
        msg = "; ".join(k[:120] for k in kinds) or "valgrind output"
        problems[case] = (problems[case] + "; " if case in problems else "") + "%s  [%s]" % (msg, rel(path))
    return problems


# --- main ---------------------------------------------------------------------------------------


def main(argv):
    accepted_path, excludes, select, use_vg = os.path.join(HERE, "accepted.txt"), [], [], False
    jobs, timeout = 2, 15.0
    it = iter(argv)
    for a in it:
        if a == "--accepted":
            accepted_path = next(it, None) or die("--accepted needs a file")
        elif a == "--exclude":
            excludes.append(next(it, None) or die("--exclude needs a substring"))
        elif a == "--valgrind":
            use_vg = True
        elif a == "--jobs":
            jobs = int(next(it, "0")) or die("--jobs needs a positive number")
        elif a == "--timeout":
            timeout = float(next(it, "0")) or die("--timeout needs seconds")
        elif a.startswith("-"):
            die("unknown option %s\n%s" % (a, __doc__.split("\n\n")[0]))
        else:
            select.append(a)
    for lib, d in LIBDIRS.items():
        if not os.path.isfile(os.path.join(d, "libtvm_ffi.so")):
            die("%s library missing: %s" % (lib, rel(os.path.join(d, "libtvm_ffi.so"))))
    if not os.path.isfile(BIN):
        die("%s missing: run tests/c_differential/run.sh (it builds it)" % rel(BIN))
    check_binding()
    all_cases = list_cases()
    novg = {n: r for n, r in all_cases if r}
    accepted = load_accepted(accepted_path, {n for n, _ in all_cases})
    names = [n for n, _ in all_cases if (not select or any(s in n for s in select))
             and not any(x in n for x in excludes)]
    if not names:
        die("no case selected")

    t0 = time.time()
    print("c_differential: %d cases on ours (%s) and official (%s), %d jobs, %g s timeout"
          % (len(names), rel(LIBDIRS["ours"]), rel(LIBDIRS["official"]), jobs, timeout), flush=True)
    jobs_list = [(lib, n) for n in names for lib in LIBDIRS]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        outs = list(ex.map(lambda j: run_case(j[0], j[1], timeout), jobs_list))
    res = {"official": {}, "ours": {}}
    for (lib, n), r in zip(jobs_list, outs):
        res[lib][n] = r
    elapsed = time.time() - t0
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(res, f, indent=1)

    counts, rows, seen = collections.Counter(), [], set()
    for n in names:
        o, u = res["official"][n], res["ours"][n]
        cat = classify(o, u)
        status = "info"
        if cat in NEVER_OK:
            status = "FAIL"
        elif cat in FAILING:
            acc = accepted.get(n)
            seen.add(n)
            if acc is None:
                status = "FAIL"
            elif acc[0] != cat:
                status, cat = "FAIL", "%s (accepted as %s)" % (cat, acc[0])
            else:
                status = "accepted"
        counts[cat if status != "FAIL" or cat in NEVER_OK else cat.split()[0]] += 1
        if status == "FAIL":
            counts["FAIL"] += 1
        if status == "accepted":
            counts["accepted " + cat] += 1
        if cat != "same":
            rows.append((n, cat, status, o, u))
    stale = sorted(n for n in accepted if n in names and n not in seen and res["ours"][n]["status"] == "ok")

    failures = [r for r in rows if r[2] == "FAIL"]
    summary = ["%-22s %5d" % ("cases", len(names)),
               "%-22s %5d" % ("same", counts["same"]),
               "%-22s %5d" % ("soft (~ lines only)", counts["soft"]),
               "%-22s %5d" % ("msg (messages only)", counts["msg"]),
               "%-22s %5d   (%d accepted)" % ("kind", counts["kind"], counts["accepted kind"]),
               "%-22s %5d   (%d accepted)" % ("value", counts["value"], counts["accepted value"]),
               "%-22s %5d   (skipped)" % ("official-crash", counts["official-crash"]),
               "%-22s %5d" % ("ours-crash", counts["ours-crash"]),
               "%-22s %5d" % ("ours-hang", counts["ours-hang"]),
               "%-22s %5d" % ("FAIL", counts["FAIL"])]

    vg_problems, vg_ran, vg_skipped = {}, [], []
    if use_vg:
        vg_skipped = [(n, novg[n]) for n in names if n in novg]
        vg_skipped += [(n, "crashed or hung without valgrind") for n in names
                       if n not in novg and res["ours"][n]["status"] != "ok"]
        skip = {n for n, _ in vg_skipped}
        vg_ran = [n for n in names if n not in skip]
        t1 = time.time()
        print("valgrind: %d cases of ours under memcheck (%d skipped) ..." % (len(vg_ran), len(vg_skipped)), flush=True)
        vg_problems = run_valgrind(vg_ran, jobs)
        summary.append("%-22s %5d   (%d cases in %.0f s, %d skipped)" % ("valgrind problems", len(vg_problems),
                                                                         len(vg_ran), time.time() - t1,
                                                                         len(vg_skipped)))

    with open(os.path.join(OUT, "report.txt"), "w") as f:
        f.write("C ABI differential: ours %s vs official %s\naccepted list: %s\n\n"
                % (rel(LIBDIRS["ours"]), rel(LIBDIRS["official"]), rel(accepted_path)))
        f.write("\n".join(summary) + "\n")
        sections = [("FAILURES", failures),
                    ("ACCEPTED (%s)" % rel(accepted_path), [r for r in rows if r[2] == "accepted"]),
                    ("OFFICIAL LIBRARY CRASHED (case skipped)", [r for r in rows if r[1] == "official-crash"]),
                    ("MESSAGE-ONLY (same rc and error kinds, other wording)", [r for r in rows if r[1] == "msg"]),
                    ("SOFT (only informational ~ lines differ)", [r for r in rows if r[1] == "soft"])]
        for title, items in sections:
            f.write("\n== %s: %d\n" % (title, len(items)))
            for n, cat, status, o, u in items:
                f.write(detail(n, cat, status, o, u, accepted[n][1] if status == "accepted" else None))
        if stale:
            f.write("\n== STALE ENTRIES OF %s (no longer differ): %d\n" % (rel(accepted_path), len(stale)))
            f.writelines("  %s\n" % n for n in stale)
        if use_vg:
            f.write("\n== VALGRIND (ours): %d problems\n" % len(vg_problems))
            f.writelines("  %s: %s\n" % kv for kv in sorted(vg_problems.items()))
            f.write("\n== VALGRIND SKIPPED: %d\n" % len(vg_skipped))
            f.writelines("  %s: %s\n" % kv for kv in vg_skipped)

    print("\n".join(summary))
    print("(%d cases per library in %.0f s; value/kind: listed in %s when accepted; official-crash: "
          "only the official library crashed, nothing compared)" % (len(names), elapsed, rel(accepted_path)))
    if stale:
        print("\nstale entries in %s (these cases no longer differ; remove them):" % rel(accepted_path))
        for n in stale:
            print("  " + n)
    if failures:
        print("\nFAILURES (%d):" % len(failures))
        for n, cat, status, o, u in failures[:40]:
            print(detail(n, cat, status, o, u), end="")
        if len(failures) > 40:
            print("  ... %d more in the report" % (len(failures) - 40))
    if vg_problems:
        print("\nVALGRIND (ours, %d):" % len(vg_problems))
        for kv in sorted(vg_problems.items()):
            print("  %s: %s" % kv)
    ok = not failures and not vg_problems
    print("\nreport: %s\nc_differential: %s" % (rel(os.path.join(OUT, "report.txt")), "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
