"""Records golden.json: what each case of golden_cases.py does on the OFFICIAL library.

Run through `tests/python_official/run.sh --record-golden`, which sets up the official package
as is (its own lib/libtvm_ffi.so). Refuses to record on any other library.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import conftest  # noqa: E402  (identity check helpers; imports tvm_ffi)
import golden_cases  # noqa: E402


def main(out: str) -> int:
    if os.environ.get("TVMFFI_UNDER_TEST_NAME") != "official":
        print("record_golden.py: golden values come from the official library only", file=sys.stderr)
        return 2
    problem = conftest.library_identity_problem()
    if problem is not None or conftest.IMPORT_ERROR is not None:
        print(f"record_golden.py: {problem or conftest.IMPORT_ERROR}", file=sys.stderr)
        return 2
    import tvm_ffi

    golden = {
        "recorded_with": {
            "tvm_ffi": tvm_ffi.__version__,
            "library": "official libtvm_ffi.so from the apache-tvm-ffi wheel",
        },
        "surface": conftest.library_surface(),
        "cases": {},
    }
    for case in golden_cases.build_cases():
        first = golden_cases.run_case(case)
        again = golden_cases.run_case(case)
        if first != again:
            print(f"record_golden.py: {case.id} is not deterministic:\n  {first}\n  {again}", file=sys.stderr)
            return 1
        golden["cases"][case.id] = first
    Path(out).write_text(json.dumps(golden, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
    print(
        f"record_golden.py: wrote {len(golden['cases'])} cases, {len(golden['surface']['global_functions'])} "
        f"global functions and {len(golden['surface']['types'])} types to {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
