"""`compile-lens report PATH... -o report.html`: the compile report as one standalone HTML page.

The same analysis as `compile-lens check` with measurements (graph breaks, recompiles, eager vs
Inductor, torch.export, eager fallbacks, the batch-size sweep and the compile-time breakdown),
rendered by `render.report_html` instead of as findings. The page needs no network to be read.

Exit code: 0 when the report was written (whatever it found: it is an artifact, not a gate — use
`check` to fail a build), 2 for a usage error, no Python files, no torch or a file that cannot be
written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..engine.finish import finish
from ..engine.project import open_cache
from ..settings import DEVICES, MODES
from ..trial import store as trial_store
from ..trial import summary as trial_summary
from .check import analysis_inputs, check_with_other
from .common import add_remote_cache_argument, add_with_argument
from .gpu_wait import add_wait_gpu_argument
from .levers import FLAG_HELP as LEVERS_HELP
from .shard import add_shard_argument
from .torch_diff import add_compare_argument, torch_diff
from .trial import add_bill_arguments, bill_flag_error, bill_inputs

DEFAULT_OUTPUT = "compile-report.html"


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The `report` subcommand on `compile-lens`'s subparsers."""
    rep = subparsers.add_parser(
        "report", help="measure and write the compile report (one standalone HTML page)",
        description="Trace, sweep and measure the targets in PATH, and write the compile report: "
                    "a table of targets, latency vs batch size, the compile-time breakdown, "
                    "torch.export, ops that fall back to eager and every graph break.")
    rep.add_argument("paths", nargs="+", help="Python files or folders")
    rep.add_argument("-o", "--output", default=DEFAULT_OUTPUT, help=f"where to write it (default {DEFAULT_OUTPUT})")
    rep.add_argument("--device", choices=DEVICES, default=None, help="default: pyproject's, else auto")
    rep.add_argument("--mode", choices=MODES, default=None, help="torch.compile mode (benchmark.mode)")
    rep.add_argument("--max-seconds", type=float, default=None, metavar="SECONDS",
                     help="budget of one target's benchmark, compile included (benchmark.maxSeconds)")
    rep.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="longest a worker may go without progress (worker.timeoutSeconds)")
    rep.add_argument("--root", metavar="DIR", help="workspace root (default: found per file, as for `check`)")
    rep.add_argument("--no-cache", action="store_true", help="measure again even when the result cache has figures")
    rep.add_argument("--levers", action="store_true", help=LEVERS_HELP + " (a levers table per target)")
    add_with_argument(rep)
    add_shard_argument(rep)
    add_wait_gpu_argument(rep)
    add_remote_cache_argument(rep)
    rep.add_argument("--title", default=None, help="the page's title (default: from the paths)")
    rep.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_compare_argument(rep)
    add_bill_arguments(rep)  # for the trial's section: .compile-lens/trial.json and its bill
    rep.set_defaults(run=run_report)
    return rep


def _title(paths: list[str]) -> str:
    shown = ", ".join(os.path.basename(os.path.abspath(p)) or p for p in paths[:3])
    return f"Compile report: {shown}" + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def run_report(args: argparse.Namespace) -> int:
    from ..render.report_html import render_report  # here: `check` and `record` need none of it

    problem = bill_flag_error(args)
    if problem:
        print(f"compile-lens: {problem}", file=sys.stderr)
        return 2
    # [tool.compile-lens] in pyproject.toml gives the defaults, as for `check`; flags win
    inputs = analysis_inputs(args)
    if isinstance(inputs, int):
        return inputs
    files, root, settings, other = inputs.files, inputs.root, inputs.settings, inputs.other
    cache = open_cache(args.no_cache)
    try:
        reports, runtime, theirs = check_with_other(files, settings, other, benchmark=True, quiet=args.quiet,
                                                    root=args.root, cache=cache, wait_gpu=args.wait_gpu,
                                                    levers=args.levers)
    except KeyboardInterrupt:
        return 2
    finally:
        if cache is not None:
            cache.close()
    finish(reports)
    every = reports + (theirs[0] if theirs else [])
    if any(r.error and r.error.kind == "no-torch" for r in every):
        problem = next(r.error for r in every if r.error and r.error.kind == "no-torch")
        print(f"compile-lens: {problem.message}", file=sys.stderr)
        return 2
    device = "cuda" if runtime.get("cuda") and settings.device != "cpu" else "cpu"
    trial, trial_note = trial_store.load(root)
    if trial_note:
        print(f"compile-lens report: {trial_note}", file=sys.stderr)
    bill = bill_inputs(args, settings)
    trial_bill = trial_summary.bill(trial.figures, bill) if trial else None
    page = render_report(reports, title=args.title or _title(args.paths), torch_version=runtime.get("torch"),
                         device=device, cwd=root, trial=trial, trial_bill=trial_bill, trial_note=trial_note, bill=bill,
                         torch_diff=torch_diff((reports, runtime), theirs, other, root) if other and theirs else None)
    try:
        directory = os.path.dirname(os.path.abspath(args.output))
        os.makedirs(directory, exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        print(f"compile-lens: cannot write {args.output}: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        targets = sum(len(r.targets) for r in reports)
        print(f"compile-lens: wrote {args.output} ({targets} target{'s' if targets != 1 else ''} "
              f"in {len(reports)} file{'s' if len(reports) != 1 else ''})", file=sys.stderr)
    return 0
