"""Count the test suite's asserts that read a measured number (issue 51's figure), at the working tree
or at a git revision: `python scripts/count_figure_asserts.py [--rev REV] [--list]`.

An assert *reads a measured number* when its expression names a measured field (`speedup`,
`eager_ms`, `compile_s`, … : FIELDS, as an attribute, a name or a string key) or holds a string of
what a surface shows of one (`×`, ` ms`, `µs`, `pays back`, `faster`, `slower`: SHOWN). It *holds on
every run* unless the outcome of the machine's load decides whether it runs or what it accepts:
it sits under an `if`/`else` whose test reads `conclusive`, `inconclusive` or `busy`, or its own
expression accepts that outcome instead (`… or "inconclusive" in title`, a `busy`/`not run`/`failed`
alternative, in Python or in a pattern's `|`). Those are counted apart as *either/or*. Static: nothing is imported or run.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional

FIELDS = {
    "speedup", "speedup_ci", "eager_ms", "compiled_ms", "eager_us", "compiled_us", "eager_iqr_ms",
    "compiled_iqr_ms", "break_even_calls", "compile_s", "rounds", "guard_us_per_call", "guard_share",
    "peak_memory_bytes", "max_abs_error", "max_rel_error", "profile_us", "ci_rel_width", "first_look",
    # a figure read off a surface into a local: its interval's ends, its median, each side's time
    "lo", "hi", "median", "eager", "compiled",
}
SHOWN = ("×", " ms", "µs", "pays back", "faster", "slower")
OUTCOME = ("conclusive", "inconclusive", "busy")  # what the load decides
ACCEPTS = ("inconclusive", "busy", "not run", "failed", "no finding")  # an `or` that takes the load's outcome


def _words(node: ast.AST) -> Iterator[str]:
    """The names, attributes and string constants in `node`, lowercased."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id.lower()
        elif isinstance(sub, ast.Attribute):
            yield sub.attr.lower()
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value.lower()


def reads_figure(node: ast.AST) -> bool:
    return any(w in FIELDS or any(s in w for s in SHOWN) for w in _words(node))


def _mentions(node: ast.AST, needles: tuple[str, ...]) -> bool:
    return any(any(n in w for n in needles) for w in _words(node))


def _accepts_outcome(test: ast.AST) -> bool:
    """`a or b` where one side takes the load's outcome (inconclusive, busy, not run, failed)."""
    for sub in ast.walk(test):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "|" in sub.value \
                and any(a in sub.value.lower() for a in ACCEPTS):  # a pattern's alternative: `…|no finding \(machine busy\)`
            return True
        if isinstance(sub, ast.BoolOp) and isinstance(sub.op, ast.Or):
            if any(_mentions(v, ACCEPTS) for v in sub.values):
                return True
        if isinstance(sub, ast.Compare) and any(isinstance(op, ast.In) for op in sub.ops):
            for comp in sub.comparators:  # `status in ("done", "failed")`
                if isinstance(comp, (ast.Tuple, ast.List, ast.Set)) and len(comp.elts) > 1 and _mentions(comp, ACCEPTS):
                    return True
    return False


def count(tree: ast.AST) -> tuple[list[int], list[int]]:
    """(lines of asserts that read a figure and hold on every run, lines of the either/or ones)."""
    every: list[int] = []
    either: list[int] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            visit_stmt(child, guarded)

    def visit_stmt(stmt: ast.AST, guarded: bool) -> None:
        if isinstance(stmt, ast.Assert):
            if reads_figure(stmt.test):
                (either if guarded or _accepts_outcome(stmt.test) else every).append(stmt.lineno)
            return
        if isinstance(stmt, ast.If):
            inner = guarded or _mentions(stmt.test, OUTCOME)
            for sub in stmt.body + stmt.orelse:
                visit_stmt(sub, inner)
            return
        visit(stmt, guarded)

    visit(tree, False)
    return every, either


def sources(rev: Optional[str], root: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of each tests/**/*.py, in the working tree or at `rev`."""
    if rev is None:
        for path in sorted((root / "tests").rglob("*.py")):
            yield str(path.relative_to(root)), path.read_text(encoding="utf-8")
        return
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "tests"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    for name in sorted(n for n in names if n.endswith(".py")):
        yield name, subprocess.run(["git", "show", f"{rev}:{name}"], cwd=root, check=True,
                                   capture_output=True, text=True).stdout


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision (default: the working tree)")
    parser.add_argument("--list", action="store_true", help="list the either/or asserts, file:line")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    total_every = total_either = 0
    for name, text in sources(args.rev, root):
        every, either = count(ast.parse(text))
        total_every += len(every)
        total_either += len(either)
        if args.list:
            for line in either:
                print(f"  either/or: {name}:{line}")
    print(f"asserts reading a measured number: {total_every + total_either} "
          f"({total_every} hold on every run, {total_either} either/or on the load's outcome)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
