"""runner.py GROUP START OUTFILE: runs the cases of GROUP from index START on the library named by
ANYFFI_LIBRARY and appends JSON lines to OUTFILE: {"i", "n", "s": 1} before a case, {"i", "n", "r"}
after it, {"done": count} at the end. A missing "r" after an "s" tells driver.py which case crashed."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ser, ser_exc  # noqa: E402
import cases  # noqa: E402


def main():
    group, start, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    todo = cases.build(group)
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def w(obj):
        os.write(fd, (json.dumps(obj) + "\n").encode())

    for i in range(start, len(todo)):
        name, fn = todo[i]
        w({"i": i, "n": name, "s": 1})
        try:
            r = ser(fn())
        except RecursionError as e:
            r = ["exc", "RecursionError(python)", "", str(e)[:200]]
        except BaseException as e:  # noqa: BLE001
            r = ser_exc(e)
        try:
            w({"i": i, "n": name, "r": r})
        except (TypeError, ValueError) as e:
            w({"i": i, "n": name, "r": ["unserializable", str(e)]})
    w({"done": len(todo)})
    os.close(fd)
    os._exit(0)  # skip interpreter teardown: deleters run at shutdown are not under test here


if __name__ == "__main__":
    main()
