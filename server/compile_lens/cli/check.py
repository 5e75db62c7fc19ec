"""`compile-lens check PATH...`: the editor's analysis from a terminal, for CI.

Its flags, then the engine's run (`engine/check.py`: the same discovery, worker, results and
result cache as the language server), then its rendering: text, JSON, SARIF or `--stream`'s lines.
Exit code: 0 no warnings or errors (information findings do not fail a build), 1 warnings or
errors (not counting those in `--baseline`) — or, with `--fail-on KINDS`, a finding of those kinds
(`cli/gate.py`) —, 2 usage or internal error. `--shard I/N` checks one CI job's share of the files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Optional, Union

from .. import __version__
from ..engine.check import TargetPick, check, json_document
from ..engine.finish import finish
from ..engine.project import open_cache
from ..interpreters import Interpreter
from ..protocol import PROFILE_DIR_ENV, FileReport
from ..render import sarif_limits
from ..render.cli_output import exit_code, render_text
from ..render.sarif import render_sarif
from ..render.torch_diff_text import render_torch_diff_text
from ..settings import DEVICES, PRECISIONS, Settings
from . import gate
from .baseline import apply_baseline, write_baseline
from .common import (
    add_remote_cache_argument,
    add_with_argument,
    files_and_root,
    say,
    settings_for,
    write_output,
)
from .gpu_wait import GpuWait, add_wait_gpu_argument
from .levers import FLAG_HELP as LEVERS_HELP
from .shard import Shard, add_shard_argument, shard_files
from .stream import STREAM_HELP, PartLines, last_line
from .torch_diff import add_compare_argument, label, other_interpreter, torch_diff


def _trace_written(trace_dir: str) -> None:
    from ..worker.torch_trace import trace_files  # torch-free: only lists the folder

    written = trace_files(trace_dir)
    if not written:
        say(f"no torch trace written to {trace_dir} (nothing was traced, or this torch cannot)")
    for path in written:
        say(f"torch trace: {path}  (open with `tlparse {path}`)")


def _profiles_written(folder: str) -> None:
    kept = sorted(n for n in os.listdir(folder) if n.endswith(".pt.trace.json"))
    if not kept:
        say(f"no profile written to {folder} (nothing was measured: --no-benchmark, a cached result, or no target ran)")
    else:
        say(f"{len(kept)} profiles in {folder} (open in Perfetto or TensorBoard, or `compile-lens import {folder}`)")


def add_check_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The `check` subcommand on `compile-lens`'s subparsers."""
    chk = subparsers.add_parser("check", help="report graph breaks, recompiles and (optionally) measured speedups")
    chk.add_argument("paths", nargs="+", help="Python files or folders")
    chk.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    chk.add_argument("--target", action="append", metavar="NAME", dest="targets",
                     help="analyse only this target (a class or function name, or path.py:Name); repeatable")
    chk.add_argument("--no-benchmark", action="store_true", help="trace only; do not measure Inductor")
    chk.add_argument("--no-recompiles", action="store_true",
                     help="skip the recompile check (with --no-benchmark: graph breaks only)")
    chk.add_argument("--root", metavar="DIR",
                     help="workspace root (default: found per file, like ruff: the nearest pyproject.toml with "
                          "[tool.compile-lens], else the nearest pyproject.toml, .git or .compile-lens/)")
    chk.add_argument("--no-cache", action="store_true", help="neither read nor write the result cache")
    chk.add_argument("--levers", action="store_true", help=LEVERS_HELP)
    chk.add_argument("--baseline", metavar="FILE", help="findings in FILE are not shown and do not fail the run")
    chk.add_argument("--write-baseline", action="store_true",
                     help="write every finding of this run to the --baseline FILE (and exit 0)")
    chk.add_argument("--fail-on", metavar="KINDS",
                     help="fail (exit 1) only on these kinds, comma-separated, instead of on any warning or error: "
                          + ", ".join(gate.KINDS))
    add_shard_argument(chk)
    chk.add_argument("--device", choices=DEVICES, default=None, help="default: pyproject's, else auto")
    chk.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="longest a worker may go without progress (worker.timeoutSeconds)")
    chk.add_argument("--memory-limit", type=int, default=None, metavar="MB",
                     help="memory the analysis process may grow to before it is replaced (worker.memoryLimitMB)")
    chk.add_argument("--max-seconds", type=float, default=None, metavar="SECONDS",
                     help="budget of one target's measurement (benchmark.maxSeconds), a bound: it ends within "
                          "max(SECONDS, the time to the forward's figure) x 1.1 + 5 s; the forward's headline always "
                          "runs, every later part only where it fits, else named \"not run: N s budget\" (--with: "
                          "parts run whatever the budget)")
    chk.add_argument("--precision", choices=PRECISIONS, default=None,
                     help="autocast / TF32 to measure in (benchmark.precision; default: pyproject's, else as recorded, else fp32)")
    add_with_argument(chk)
    add_wait_gpu_argument(chk)
    add_compare_argument(chk)
    add_remote_cache_argument(chk)
    chk.add_argument("-o", "--output", help="write the report here instead of stdout")
    chk.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    chk.add_argument("--stream", action="store_true", help=STREAM_HELP)
    chk.add_argument("--trace-dir", metavar="DIR",
                     help="also write torch's structured trace of this analysis here (as TORCH_TRACE does), for tlparse")
    chk.add_argument("--profile-dir", metavar="DIR",
                     help="keep the profiles of the measured calls here (PyTorch profiler traces, one per target, "
                          "workload and side): open them in Perfetto or TensorBoard, or read them with `compile-lens import`")
    chk.set_defaults(run=run_check)
    return chk


@dataclass
class AnalysisInputs:
    """What `check` and `report` analyse, every part checked before any long work starts."""

    files: list[str]  # this shard's
    root: str
    settings: Settings  # [tool.compile-lens] in pyproject.toml, then the flags
    other: Optional[Interpreter]  # `--compare-with`'s, probed


def analysis_inputs(args: argparse.Namespace) -> Union[int, AnalysisInputs]:
    """The inputs of `check` and `report` from their flags, or 2 (said on stderr) for a usage error."""
    found = files_and_root(args)
    if isinstance(found, int):
        return found
    files, root = found
    other = other_interpreter(args)
    if isinstance(other, int):
        return other
    settings = settings_for(args, files, root)
    files = shard_files(args, files, root)
    if isinstance(files, int):
        return files
    return AnalysisInputs(files, root, settings, other)


def check_with_other(files: list[str], settings: Settings, other: Optional[Interpreter], *, quiet: bool,
                     wait_gpu: Optional[float] = None,
                     **run: Any) -> tuple[list[FileReport], dict, Optional[tuple[list[FileReport], dict]]]:
    """The engine's `check` with this interpreter, then (`--compare-with`) with the other, its reports
    finished: (reports, runtime, the other's (reports, runtime) or None). Each run waits up to
    `wait_gpu` seconds in all for a busy GPU before measuring (`--wait-gpu`)."""
    note = None if quiet else say

    def gpu_free() -> GpuWait:
        return GpuWait(wait_gpu if run.get("benchmark") else None, settings, quiet=quiet)

    if other and not quiet:
        say(f"with {label(None)}")
    reports, runtime = asyncio.run(check(files, settings, on_progress=note, gpu_free=gpu_free(), **run))
    if not other:
        return reports, runtime, None
    if not quiet:
        say(f"with {label(other)}")
    mine = {k: v for k, v in run.items() if k != "on_result"}  # the parts streamed are this interpreter's
    theirs = asyncio.run(check(files, settings, python=other.python, on_progress=note, gpu_free=gpu_free(), **mine))
    finish(theirs.reports)
    return reports, runtime, (theirs.reports, theirs.runtime)


def _usage(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with `check`'s flags together, said before any work; None when nothing."""
    if args.write_baseline and not args.baseline:
        return "--write-baseline needs --baseline FILE (where to write it)"
    # the baseline is parsed, and -o, --root and --trace-dir checked, before this runs (`preflight`)
    try:
        if args.fail_on is not None:
            gate.parse(args.fail_on)
    except ValueError as exc:
        return str(exc)
    if args.stream and args.output:
        return "--stream writes to stdout: drop -o/--output"
    return None


def run_check(args: argparse.Namespace) -> int:
    problem = _usage(args)
    if problem is not None:
        print(f"compile-lens: {problem}", file=sys.stderr)
        return 2
    inputs = analysis_inputs(args)
    if isinstance(inputs, int):
        return inputs
    picks = [TargetPick.parse(t) for t in args.targets] if args.targets else None
    # a trace is of a run that happens now: results from the cache would write none
    # kept profiles are of a measurement made now: results are written to the cache, never read from it
    cache = open_cache(args.no_cache or bool(args.trace_dir), read=not args.profile_dir)
    trace_dir = os.path.abspath(args.trace_dir) if args.trace_dir else None  # the worker runs elsewhere
    if args.profile_dir:  # the workers this run starts inherit it (`protocol.PROFILE_DIR_ENV`, read by `worker/measure/lines/windows`)
        os.makedirs(args.profile_dir, exist_ok=True)
        os.environ[PROFILE_DIR_ENV] = os.path.abspath(args.profile_dir)
    if args.levers and args.no_benchmark:  # a lever is measured against the measurement's own figures
        print("compile-lens: --levers needs the measurement: drop --no-benchmark", file=sys.stderr)
        return 2
    run = dict(levers=args.levers, benchmark=not args.no_benchmark, quiet=args.quiet, recompiles=not args.no_recompiles, root=args.root,
               targets=picks, cache=cache, trace_dir=trace_dir, wait_gpu=args.wait_gpu,
               on_result=PartLines(stream=args.stream, note=None if args.quiet else say))
    try:
        reports, runtime, theirs = check_with_other(inputs.files, inputs.settings, inputs.other, **run)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        return 2
    finally:
        if cache is not None:
            cache.close()
    if picks is not None and not reports and inputs.files:
        if args.shard:  # it may be another shard's: not this job's error
            say(f"no target {', '.join(args.targets)} in shard {args.shard} of {', '.join(args.paths)}")
        else:
            print(f"compile-lens: no target {', '.join(args.targets)} in {', '.join(args.paths)}", file=sys.stderr)
            return 2
    if trace_dir and not args.quiet:
        _trace_written(trace_dir)
    if args.profile_dir and not args.quiet:
        _profiles_written(os.path.abspath(args.profile_dir))
    return _report(args, inputs, reports, runtime, theirs)


def _report(args: argparse.Namespace, inputs: AnalysisInputs, reports: list[FileReport], runtime: dict,
            theirs: Optional[tuple[list[FileReport], dict]]) -> int:
    """The baseline written or applied, the reports rendered and written, and the exit code."""
    root = inputs.root
    finish(reports)
    hidden = 0
    if args.write_baseline:
        try:
            written = write_baseline(reports, root, args.baseline)
        except OSError as exc:
            say(f"cannot write the baseline {args.baseline}: {exc.strerror or exc}")
            return 2
        print(f"compile-lens: wrote {written} finding{'s' if written != 1 else ''} to {args.baseline}", file=sys.stderr)
    elif args.baseline:
        try:
            hidden = apply_baseline(reports, root, args.baseline)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"compile-lens: cannot read the baseline {args.baseline}: {exc}", file=sys.stderr)
            return 2
    diff = torch_diff((reports, runtime), theirs, inputs.other, root) if inputs.other and theirs else None
    if not write_output(args.output, _rendered(args, inputs, reports, runtime, diff, hidden)):
        return 2
    if any(r.error and r.error.kind == "no-torch" for r in reports + (theirs[0] if theirs else [])):
        return 2
    if args.write_baseline:
        return 0
    if args.fail_on is not None:
        return _gate(reports, gate.parse(args.fail_on),
                     {"recompiles": not args.no_recompiles, "benchmark": not args.no_benchmark})
    return exit_code(reports)


def _rendered(args: argparse.Namespace, inputs: AnalysisInputs, reports: list[FileReport], runtime: dict,
              diff: Optional[dict], hidden: int) -> str:
    """The reports as `--format` (or `--stream`'s last line) says."""
    root = inputs.root
    if args.format == "text" and not args.stream:
        not_run = tuple(what for what, skipped in (("recompile check (--no-recompiles)", args.no_recompiles),
                                                   ("measurement (--no-benchmark)", args.no_benchmark)) if skipped)
        text = render_text(reports, cwd=root, baselined=hidden, not_run=not_run)
        if diff is not None:
            text += "\n\n" + render_torch_diff_text(diff)
        return text
    if args.format == "json" or args.stream:
        doc = json_document(reports, runtime, inputs.settings, recompiles=not args.no_recompiles,
                            benchmark=not args.no_benchmark)
        if diff is not None:
            doc["compare"] = diff
        return last_line(doc) if args.stream else json.dumps(doc, indent=2)
    log = render_sarif(reports, tool_version=__version__, cwd=root,
                       shard=Shard.parse(args.shard).name if args.shard else None)
    for cut in sarif_limits.fit(log):  # an upload over GitHub's limits is rejected whole
        say(f"SARIF: {cut}")
    return json.dumps(log, indent=2)


def _gate(reports: list[FileReport], kinds: list[str], ran: dict[str, bool]) -> int:
    """`--fail-on`: 1 when a finding (or verdict) of one of `kinds` is shown; a kind whose check did
    not run is said, since it cannot fail this run."""
    skipped = gate.not_checked(kinds, ran)
    if skipped:
        flags = sorted({"--no-recompiles" if gate.KINDS[k].phase == "recompiles" else "--no-benchmark"
                        for k in skipped})
        say(f"--fail-on {', '.join(skipped)}: not checked in this run ({', '.join(flags)})")
    failed = gate.failures(reports, kinds)
    for kind, where in failed.items():
        shown = list(dict.fromkeys(where))
        say(f"fails on {kind}: {', '.join(shown[:5])}" + (f" and {len(shown) - 5} more" if len(shown) > 5 else ""))
    return 1 if failed else 0

