"""compare.py OFFICIAL.xml OURS.xml: exit 1 when a test passes on the official library and not
on ours (junit XML of the same suite); prints the counts and every difference."""

import collections
import sys
import xml.etree.ElementTree as ET


def outcomes(path: str) -> dict:
    result = {}
    for case in ET.parse(path).iter("testcase"):
        name = case.get("classname", "") + "::" + case.get("name", "")
        state = "pass"
        for child in case:
            if child.tag in ("failure", "error"):
                state = "fail"
                break
            if child.tag == "skipped":
                state = "skip"
        result[name] = state
    return result


def main() -> int:
    official, ours = outcomes(sys.argv[1]), outcomes(sys.argv[2])
    for label, res in (("official", official), ("ours", ours)):
        counts = collections.Counter(res.values())
        print(f"{label}: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    worse = [n for n, s in official.items() if s == "pass" and ours.get(n) != "pass"]
    better = [n for n, s in ours.items() if s == "pass" and official.get(n) != "pass"]
    for n in better:
        print(f"passes on ours only: {n}")
    for n in worse:
        print(f"FAILS on ours only: {n} ({ours.get(n, 'not run')})")
    print("OK: nothing fails on ours that passes on the official library" if not worse else
          f"{len(worse)} test(s) fail on ours only")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
