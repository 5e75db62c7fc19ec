"""A recorded analysis of another torch, for `test_torch_diff`: `check`'s FileReports as JSON
with paths relative to the analysed folder, so the recording reads the same on any checkout.

Record (the other interpreter runs the workers; this one, with the project, drives them):
    .venv/bin/python tests/torch_results.py --python /work/venv-torch-2.14.1/bin/python \\
        examples/item_scale.py -o tests/data/torch_2_14_1/item_scale.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
from typing import Any, Callable

from compile_lens.protocol import FileReport, from_dict


def _paths(value: Any, change: Callable[[str], str]) -> Any:
    """`value` with every "path" field changed (file reports, findings, breaks, frames, problems)."""
    if isinstance(value, dict):
        return {k: (change(v) if k == "path" and isinstance(v, str) else _paths(v, change)) for k, v in value.items()}
    if isinstance(value, list):
        return [_paths(v, change) for v in value]
    return value


def load_recorded(path: os.PathLike, root: os.PathLike) -> tuple[list[FileReport], dict]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    reports = _paths(doc["reports"], lambda p: os.path.join(str(root), p))
    return [from_dict(FileReport, r) for r in reports], doc["runtime"]


def main() -> None:
    from compile_lens.cli.common import say
    from compile_lens.engine.check import check
    from compile_lens.interpreters import probe
    from compile_lens.jobs.cache import ResultCache, cache_dir
    from compile_lens.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--python", required=True, help="the other interpreter")
    parser.add_argument("--root", default=None, help="default: the first file's folder")
    parser.add_argument("--benchmark", action="store_true")
    parser.add_argument("--cache", action="store_true", help="read (and fill) the result cache, as `check` does")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    other = probe(args.python)
    root = os.path.abspath(args.root or os.path.dirname(args.files[0]))
    reports, runtime = asyncio.run(check([os.path.abspath(f) for f in args.files], Settings(),
                                         benchmark=args.benchmark, on_progress=say, root=root, python=other.python,
                                         cache=ResultCache(cache_dir()) if args.cache else None))
    runtime = {k: v for k, v in runtime.items() if k not in ("pid",)}
    doc = {"runtime": {**runtime, "python_path": other.python},
           "reports": _paths([dataclasses.asdict(r) for r in reports], lambda p: os.path.relpath(p, root))}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
