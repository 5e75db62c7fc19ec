"""The suite's ledger from pytest's JUnit XML (`make pytest` writes build/pytest.xml): the wall
time, the test count, and the slowest tests and test files, as Markdown for BENCHMARKS.md.

    .venv/bin/python scripts/suite_ledger.py build/pytest.xml [--top 20]

A test's time is pytest's "total" (setup + call + teardown), so a module's shared fixture is
counted on the first test that asks for it.
"""

from __future__ import annotations

import argparse
import collections
import os
import xml.etree.ElementTree as ET


def test_file(classname: str) -> str:
    """tests/x/test_y.py for "tests.x.test_y" or "tests.x.test_y.TestClass"."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if os.path.exists(path):
            return path
    return classname


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("xml", nargs="*", default=["build/pytest.xml"], help="one or more (their runs one after the other)")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    cases: list[tuple[float, str]] = []
    counts = {k: 0 for k in ("tests", "failures", "errors", "skipped")}
    wall = 0.0
    for path in args.xml:
        if not os.path.exists(path):
            continue
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        cases += [(float(c.get("time") or 0), f"{c.get('classname')}::{c.get('name')}") for c in suite.iter("testcase")
                  if c.get("classname")]  # an interrupted run ends with a nameless case
        counts = {k: v + int(suite.get(k) or 0) for k, v in counts.items()}
        wall += float(suite.get("time") or 0)
    per_file: collections.Counter[str] = collections.Counter()
    for seconds, name in cases:
        per_file[test_file(name.split("::")[0])] += seconds
    print(f"pytest: {counts['tests']} tests ({counts['failures']} failed, {counts['errors']} errors, "
          f"{counts['skipped']} skipped), wall {wall:.0f} s, "
          f"sum of test times {sum(s for s, _ in cases):.0f} s\n")
    print(f"| slowest {args.top} tests | s |\n| --- | ---: |")
    for seconds, name in sorted(cases, reverse=True)[:args.top]:
        print(f"| `{name}` | {seconds:.1f} |")
    print(f"\n| slowest {args.top} files (sum of their tests) | s |\n| --- | ---: |")
    for name, seconds in per_file.most_common(args.top):
        print(f"| `{name}` | {seconds:.0f} |")


if __name__ == "__main__":
    main()
