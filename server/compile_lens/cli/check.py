"""`compile-lens check PATH...`: the editor's analysis from a terminal, for CI.

Same discovery, worker, results and result cache as the language server; only the rendering
differs. Each file's workspace root is found like ruff finds its project (`config.find_root`):
pyproject targets, `.compile-lens/recorded.json` and the paths shown are the root's.
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
from typing import Any, Callable, Optional, Union

from .. import __version__
from ..config import find_root
from ..discovery import Discovery, dependency_fingerprint, discover, note_importers
from ..discovery.inputs import resolve_inputs
from ..interpreters import Interpreter, is_own
from ..jobs.analysis import analyze_file, safe_lint
from ..jobs.cache import (
    ResultCache,
    ResultWriter,
    TargetKeys,
    cache_dir,
    cache_key,
    read_result,
    target_keys,
    torch_version,
)
from ..jobs.lanes import WorkerGone, WorkerSlot, default_python, worker_env
from ..protocol import PROFILE_DIR_ENV, FileReport, Finding, Problem, TargetResult, TargetSpec
from ..remote_cache import in_use as remote_cache_in_use
from ..render import assembly, sarif_limits
from ..render.cli_output import exit_code, render_json, render_text
from ..render.sarif import render_sarif
from ..render.torch_diff_text import render_torch_diff_text
from ..settings import DEVICES, PRECISIONS, Settings
from . import gate
from .baseline import apply_baseline, write_baseline
from .common import (
    add_remote_cache_argument,
    add_with_argument,
    files_and_root,
    finish,
    open_cache,
    say,
    settings_for,
    write_output,
)
from .gpu_wait import GpuWait, add_wait_gpu_argument
from .levers import FLAG_HELP as LEVERS_HELP
from .levers import levers_only, with_cached_levers
from .shard import Shard, add_shard_argument, shard_files
from .stream import STREAM_HELP, PartLines, both, last_line
from .torch_diff import add_compare_argument, label, other_interpreter, torch_diff

# --- which targets (--target NAME or path.py:NAME) ---------------------------------------------

@dataclass
class TargetPick:
    name: str
    path: Optional[str] = None  # real path, when given as path.py:Name

    @classmethod
    def parse(cls, text: str) -> TargetPick:
        where, sep, name = text.rpartition(":")
        if sep and where.endswith(".py"):
            return cls(name, os.path.realpath(where))
        return cls(text)

    def matches(self, path: str, spec: TargetSpec) -> bool:
        return spec.name == self.name and (self.path is None or os.path.realpath(path) == self.path)


def _picked(picks: Optional[list[TargetPick]], path: str, targets: list[TargetSpec]) -> Optional[set[str]]:
    """Names of the targets picked in this file; None: all of them."""
    if picks is None:
        return None
    return {t.name for t in targets if any(p.matches(path, t) for p in picks)}


# --- the run ----------------------------------------------------------------------------------

class _Workers:
    """One worker at a time, started in the root of the files it analyses, only when needed."""

    def __init__(self, settings: Settings, cache: Optional[ResultCache], python: Optional[str] = None):
        self.settings, self.cache, self.python = settings, cache, python
        self.slot: Optional[WorkerSlot] = None
        self.root: Optional[str] = None
        self.runtime: dict = {}

    async def get(self, root: str) -> WorkerSlot:
        if self.slot is not None and self.root != root:
            await self.stop()
        if self.slot is None:
            self.slot, self.root = WorkerSlot("cli", self.python or default_python(), root, worker_env(cache_dir()),
                                              spare=False), root
            info = await self.slot.info(self.settings.timeout_s)
            if not self.runtime:
                self.runtime = info
                if self.cache is not None:
                    self.cache.put(_runtime_key(self.python), "runtime", info)
        return self.slot

    async def stop(self) -> None:
        if self.slot is not None:
            await self.slot.stop()
        self.slot = self.root = None


def _runtime_key(python: Optional[str] = None) -> str:
    return cache_key("runtime", python or default_python(), torch_version(python))


async def check(files: list[str], settings: Settings, *, benchmark: bool, quiet: bool, recompiles: bool = True,
                root: Optional[str] = None, targets: Optional[list[TargetPick]] = None,
                cache: Optional[ResultCache] = None, trace_dir: Optional[str] = None,
                wait_gpu: Optional[float] = None, python: Optional[str] = None,
                levers: bool = False,
                on_progress: Optional[Callable[[str], None]] = None,
                static_only: bool = False,
                on_result: Optional[Callable[[str, TargetResult], None]] = None) -> tuple[list[FileReport], dict]:
    """Analyse `files`; each in its own workspace root unless `root` is given. Results come from
    `cache` when it has every part asked for (no worker starts when it has them all). `python`: the
    workers' interpreter when not this one (`--compare-with`), already probed. `on_progress`: where
    the progress lines go instead of stderr (the MCP server's progress notifications);
    `static_only`: the lints and what needs no torch, no code of the user's run (an untrusted folder);
    `on_result(path, result)`: each target's growing result as the worker sends it, then each final one
    (those from the cache too) — `cli/stream.py`."""
    python = None if is_own(python) else python
    note = on_progress or (None if quiet else say)
    version = torch_version(python)
    workers = _Workers(settings, cache, python)
    gpu_free = GpuWait(wait_gpu if benchmark else None, settings, quiet=quiet)
    reports: list[FileReport] = []
    try:
        for path in files:
            report = FileReport(path)
            try:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                report.error = Problem("read", f"cannot read the file: {exc}", path)
                reports.append(report)
                continue
            file_root = os.path.abspath(root) if root else find_root(path)
            discovery = discover(source, path=path, root=file_root)
            if discovery is None:
                if targets is None:
                    report.findings += _syntax_error(source, path)
                    reports.append(report)
                continue
            discovery.targets = resolve_inputs(path, file_root, discovery.targets, source=source,
                                               precision=settings.precision)
            picked = _picked(targets, path, discovery.targets)
            if picked is not None and not picked:
                continue  # --target: not in this file
            if not static_only:  # the model a workspace file compiles runs first (`discovery.order`)
                note_importers(discovery, path, file_root)
            reports.append(report)
            chosen = [t for t in discovery.targets if picked is None or t.name in picked]
            lints, statics = _static_findings(source, path, chosen, discovery, picked)
            report.findings = lints + statics
            runnable = [] if static_only else [t for t in chosen if t.inputs is not None]
            if not runnable:
                continue
            results: dict[str, TargetResult] = {}
            keys: dict[str, TargetKeys] = {}
            if cache is not None:
                deps, _ = dependency_fingerprint(path, source, file_root)
                keys = {t.name: target_keys(version, path, discovery.fingerprint, deps, t, settings.device, settings.mode,
                                           python, remote_cache_in_use(settings.remote_cache, os.environ),
                                           settings.opt_in)
                        for t in runnable}
                for t in runnable:
                    hit = read_result(cache, keys[t.name], source, path, recompiles=recompiles, benchmark=benchmark)
                    if hit is not None:
                        results[t.name] = hit
            # figures from the cache, levers not: the levers phase alone, handed those figures
            levers_todo: set[str] = set()
            for name, hit in list(results.items()):
                if levers and hit.status == "ok":
                    with_levers = with_cached_levers(cache, keys.get(name), hit)
                    if with_levers is None:
                        levers_todo.add(name)
                    else:
                        results[name] = with_levers
            todo = {t.name for t in runnable if t.name not in results}
            if todo or levers_todo:
                try:
                    slot = await workers.get(file_root)
                except WorkerGone as gone:
                    report.error = gone.problem
                    return reports, workers.runtime
                await gpu_free(os.path.relpath(path))
                if note:
                    note(f"tracing {os.path.relpath(path)}"
                         + (f" ({len(results)} of {len(runnable)} targets from the cache)" if results else ""))
                writer = ResultWriter(cache, keys, source) if cache else None
                told = (note and (lambda stage, target: note(f"  {stage}")))
                if todo:
                    run = await analyze_file(
                        slot, path, file_root, discovery, settings, benchmark=benchmark, recompiles=recompiles,
                        only=todo, on_target=both(writer, on_result, path), on_progress=told, trace_dir=trace_dir,
                        levers=levers,
                    )
                    results.update(run.results)
                    report.error = run.problem
                if levers_todo and report.error is None:
                    run = await levers_only(slot, path, file_root, discovery, settings, results, levers_todo,
                                            writer, told)
                    report.error = run.problem
            elif note:
                note(f"{os.path.relpath(path)}: from the cache")
            _fill(report, discovery, results, runnable, lints, statics, file_root)
            for result in report.targets if on_result else ():  # what no event said (the cache's, a part never sent)
                on_result(path, result)  # type: ignore[misc]
        runtime = workers.runtime
        if not runtime and cache is not None:
            hit = cache.get(_runtime_key(python))
            runtime = hit[0] if hit else {}
        return reports, runtime or {"torch": version}
    finally:
        await workers.stop()


def json_document(reports: list[FileReport], runtime: dict, settings: Settings, *, recompiles: bool,
                  benchmark: bool, graph_breaks: bool = True) -> dict[str, Any]:
    """`--format json`'s document (the MCP server's `check` returns it too): `check`'s reports, with
    the phases that ran."""
    device = "cuda" if runtime.get("cuda") and settings.device != "cpu" else "cpu"
    checks = {"graph_breaks": graph_breaks, "recompiles": recompiles, "benchmark": benchmark}
    return render_json(reports, torch_version=runtime.get("torch"), device=device, checks=checks)


def _static_findings(source: str, path: str, chosen: list[TargetSpec], discovery: Discovery,
                     picked: Optional[set[str]]) -> tuple[list[Finding], list[Finding]]:
    """The lints and the findings about targets that need no torch; with --target, only inside the picked ones."""
    lints = safe_lint(source, path) or []
    statics = assembly.static_findings(path, chosen, discovery.errors)
    if picked is not None:  # only what lies in the picked targets
        spans = [(t.line, max(t.end_line, t.line)) for t in chosen]
        lints, statics = ([f for f in found if any(a <= f.line <= b for a, b in spans)]
                          for found in (lints, statics))
    return lints, statics


def _fill(report: FileReport, discovery: Discovery, results: dict[str, TargetResult], runnable: list[TargetSpec],
          lints: list[Finding], statics: list[Finding], file_root: str) -> None:
    """The report's targets and every finding of the file, the traced ones with the static ones they confirm."""
    path = report.path
    report.targets = [results[t.name] for t in discovery.targets  # not an nn.Module after all: dropped
                      if t.name in results and results[t.name].status != "skipped"]
    here, elsewhere = assembly.traced_findings(report.targets, path, file_root)
    traced = here + [f for found in elsewhere.values() for f in found]  # a helper's break: in this report
    report.findings = assembly.file_findings(lints, statics, traced, assembly.covered_lines(runnable, results))


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


def _syntax_error(source: str, path: str) -> list[Finding]:
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        line = exc.lineno or 1
        return [Finding(path, line, exc.offset or 1, line, (exc.offset or 1) + 1, "error", "syntax-error",
                        f"cannot parse: {exc.msg}")]
    return []


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
                     help="longest one analysis step may take (worker.timeoutSeconds)")
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
                     **run: Any) -> tuple[list[FileReport], dict, Optional[tuple[list[FileReport], dict]]]:
    """`check` with this interpreter, then (`--compare-with`) with the other, its reports finished:
    (reports, runtime, the other's (reports, runtime) or None)."""
    if other and not quiet:
        say(f"with {label(None)}")
    reports, runtime = asyncio.run(check(files, settings, quiet=quiet, **run))
    if not other:
        return reports, runtime, None
    if not quiet:
        say(f"with {label(other)}")
    mine = {k: v for k, v in run.items() if k != "on_result"}  # the parts streamed are this interpreter's
    theirs = asyncio.run(check(files, settings, quiet=quiet, python=other.python, **mine))
    finish(theirs[0])
    return reports, runtime, theirs


def run_check(args: argparse.Namespace) -> int:
    if args.write_baseline and not args.baseline:
        print("compile-lens: --write-baseline needs --baseline FILE (where to write it)", file=sys.stderr)
        return 2
    # the baseline is parsed, and -o, --root and --trace-dir checked, before this runs (`preflight`)
    try:
        fail_on = gate.parse(args.fail_on) if args.fail_on is not None else None
    except ValueError as exc:
        print(f"compile-lens: {exc}", file=sys.stderr)
        return 2
    if args.stream and args.output:
        print("compile-lens: --stream writes to stdout: drop -o/--output", file=sys.stderr)
        return 2
    inputs = analysis_inputs(args)
    if isinstance(inputs, int):
        return inputs
    files, root, settings, other = inputs.files, inputs.root, inputs.settings, inputs.other
    picks = [TargetPick.parse(t) for t in args.targets] if args.targets else None
    # a trace is of a run that happens now: results from the cache would write none
    # kept profiles are of a measurement made now: results are written to the cache, never read from it
    cache = open_cache(args.no_cache or bool(args.trace_dir), read=not args.profile_dir)
    trace_dir = os.path.abspath(args.trace_dir) if args.trace_dir else None  # the worker runs elsewhere
    if args.profile_dir:  # the workers this run starts inherit it (`protocol.PROFILE_DIR_ENV`, read by `line_windows`)
        os.makedirs(args.profile_dir, exist_ok=True)
        os.environ[PROFILE_DIR_ENV] = os.path.abspath(args.profile_dir)
    if args.levers and args.no_benchmark:  # a lever is measured against the measurement's own figures
        print("compile-lens: --levers needs the measurement: drop --no-benchmark", file=sys.stderr)
        return 2
    run = dict(levers=args.levers, benchmark=not args.no_benchmark, quiet=args.quiet, recompiles=not args.no_recompiles, root=args.root,
               targets=picks, cache=cache, trace_dir=trace_dir, wait_gpu=args.wait_gpu,
               on_result=PartLines(stream=args.stream, note=None if args.quiet else say))
    try:
        reports, runtime, theirs = check_with_other(files, settings, other, **run)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        return 2
    finally:
        if cache is not None:
            cache.close()
    if picks is not None and not reports and files:
        if args.shard:  # it may be another shard's: not this job's error
            say(f"no target {', '.join(args.targets)} in shard {args.shard} of {', '.join(args.paths)}")
        else:
            print(f"compile-lens: no target {', '.join(args.targets)} in {', '.join(args.paths)}", file=sys.stderr)
            return 2
    if trace_dir and not args.quiet:
        _trace_written(trace_dir)
    if args.profile_dir and not args.quiet:
        _profiles_written(os.path.abspath(args.profile_dir))
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
    not_run = tuple(what for what, skipped in (("recompile check (--no-recompiles)", args.no_recompiles),
                                               ("measurement (--no-benchmark)", args.no_benchmark)) if skipped)
    diff = torch_diff((reports, runtime), theirs, other, root) if other and theirs else None
    if args.format == "text" and not args.stream:
        text = render_text(reports, cwd=root, baselined=hidden, not_run=not_run)
        if diff is not None:
            text += "\n\n" + render_torch_diff_text(diff)
    elif args.format == "json" or args.stream:
        doc = json_document(reports, runtime, settings, recompiles=not args.no_recompiles,
                            benchmark=not args.no_benchmark)
        if diff is not None:
            doc["compare"] = diff
        text = last_line(doc) if args.stream else json.dumps(doc, indent=2)
    else:
        log = render_sarif(reports, tool_version=__version__, cwd=root,
                           shard=Shard.parse(args.shard).name if args.shard else None)
        for cut in sarif_limits.fit(log):  # an upload over GitHub's limits is rejected whole
            say(f"SARIF: {cut}")
        text = json.dumps(log, indent=2)
    if not write_output(args.output, text):
        return 2
    if any(r.error and r.error.kind == "no-torch" for r in reports + (theirs[0] if theirs else [])):
        return 2
    if args.write_baseline:
        return 0
    if fail_on is not None:
        return _gate(reports, fail_on, {"recompiles": not args.no_recompiles, "benchmark": not args.no_benchmark})
    return exit_code(reports)


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

