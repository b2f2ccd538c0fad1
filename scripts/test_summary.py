"""The last lines of scripts/test.sh: how many tests ran, passed, failed and were skipped, and
each group of skipped tests with the reason it gave, from ctest's JUnit file (--output-junit).

    python3 scripts/test_summary.py JUNIT_XML

The last line is always `N passed, N failed, N skipped`. Exits 1 when the file is missing or
holds no tests (test.sh keeps ctest's own exit status as well).
"""

import re
import sys
import xml.etree.ElementTree as ElementTree


def skip_reason(output):
    """What a skipped test said about why: a script's `SKIP: reason` line, or the line after
    GoogleTest's `file:line: Skipped`."""
    lines = [line.strip() for line in output.splitlines()]
    for line in lines:
        if line.startswith("SKIP:"):
            return line[len("SKIP:"):].strip()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") and i + 1 < len(lines) and lines[i + 1]:
            return lines[i + 1]
    return "no reason given"


def family(name):
    """Suite.Test -> Suite.*, Instances/Suite.Test/param -> Instances/Suite.*/param; others as is."""
    name = name.split("  #")[0]  # GoogleTest's "  # GetParam() = ..." after a parameterised test
    return re.sub(r"^([^.]+)\.[^/]+", r"\1.*", name) if "." in name else name


def main(path):
    try:
        cases = ElementTree.parse(path).getroot().iter("testcase")
    except (OSError, ElementTree.ParseError) as error:
        print(f"test summary: no ctest results ({error})")
        print("0 passed, 0 failed, 0 skipped")
        return 1
    passed, failed, skipped = [], [], {}
    for case in cases:
        name, status = case.get("name"), case.get("status")
        output = case.findtext("system-out") or ""
        if status == "run":
            passed.append(name)
        elif status == "notrun" and case.find("skipped") is not None:
            skipped.setdefault(skip_reason(output), []).append(name)
        else:
            failed.append(name)
    total_skipped = sum(len(names) for names in skipped.values())
    ran = len(passed) + len(failed)
    print(f"\ntest summary: {ran} tests ran, {total_skipped} skipped")
    for reason, names in sorted(skipped.items(), key=lambda item: -len(item[1])):
        families = sorted(set(family(n) for n in names))
        shown = ", ".join(families[:4]) + (f" and {len(families) - 4} more" if len(families) > 4 else "")
        print(f"  skipped {len(names)} ({shown}): {reason}")
    for name in failed:
        print(f"  FAILED {name}")
    print(f"{len(passed)} passed, {len(failed)} failed, {total_skipped} skipped")
    return 1 if ran + total_skipped == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
