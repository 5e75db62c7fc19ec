"""`compile-lens check PATH...`: the editor's analysis from a terminal, for CI.

Same discovery, worker, results and result cache as the language server; only the rendering
differs. Each file's workspace root is found like ruff finds its project (`config.find_root`):
pyproject targets, `.compile-lens/recorded.json` and the paths shown are the root's.
Exit code: 0 no warnings or errors (information findings do not fail a build), 1 warnings or
errors (not counting those in `--baseline`), 2 usage or internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Optional

from .. import __version__
from ..config import find_root
from ..discovery import Discovery, dependency_fingerprint, discover
from ..discovery.inputs import resolve_inputs
from ..jobs.analysis import analyze_file, safe_lint
from ..jobs.cache import ResultCache, TargetKeys, cache_dir, cache_key, target_keys, torch_version
from ..jobs.lanes import WorkerGone, WorkerSlot, default_python, worker_env
from ..positions import position_map, remap_result
from ..protocol import (
    Benchmark,
    FileReport,
    Finding,
    Problem,
    Recompile,
    TargetResult,
    TargetSpec,
    from_dict,
    phase_of,
    with_phase,
)
from ..render import assembly
from ..render import findings as fnd
from ..render.cli_output import exit_code, render_json, render_text
from ..render.sarif import render_sarif
from ..settings import DEVICES, Settings
from .baseline import apply_baseline, write_baseline
from .common import files_and_root, finish, open_cache, say, settings_for

WORKER_FAILURES = ("crash", "timeout", "memory", "exit")  # not the code's answer: never cached


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


# --- the result cache (shared with the language server: same keys) ----------------------------

def _moved(hit: tuple, source: str, path: str, result: TargetResult) -> Optional[TargetResult]:
    """A cached result of an earlier text of the same code, in today's lines (None: cannot map)."""
    cached_source = hit[1]
    if not cached_source or cached_source == source:
        return result
    mapping = position_map(cached_source, source)
    if mapping is None:
        return None
    return remap_result(result, mapping, lambda other: fnd.same_file(other, path))


def _from_cache(cache: ResultCache, keys: TargetKeys, source: str, path: str, *, recompiles: bool,
                benchmark: bool) -> Optional[TargetResult]:
    """The whole answer for one target from the cache, or None when any asked-for part is missing."""
    hit = cache.get(keys.trace)
    if hit is None:
        return None
    result = _moved(hit, source, path, from_dict(TargetResult, hit[0]))
    if result is None or result.status != "ok":
        return result
    if recompiles:
        hit = cache.get(keys.sweep)
        if hit is None:
            return None
        swept = _moved(hit, source, path, TargetResult(result.name, result.kind, result.line,
                                                       recompiles=[from_dict(Recompile, r) for r in hit[0]]))
        if swept is None:
            return None
        result = with_phase(result, "sweep", "done")
        result.recompiles = swept.recompiles
    if benchmark:
        hit = cache.get(keys.bench)
        if hit is None:
            return None
        result.benchmark = from_dict(Benchmark, hit[0])
        deploy = cache.get(keys.deploy)
        if deploy is not None:
            result.export = deploy[0].get("export")
            result.fallback_ops = deploy[0].get("fallback_ops") or []
            result.report = deploy[0].get("report")
        result = with_phase(result, "measure", "done")
    return result


class _Store:
    """Writes a running job's results to the cache as the worker sends them, each phase once it is
    settled (the phases a result carries say which): the trace, the recompile sweep, the measurement."""

    def __init__(self, cache: ResultCache, keys: dict[str, TargetKeys], source: str, *, recompiles: bool):
        self.cache, self.keys, self.source, self.recompiles = cache, keys, source, recompiles
        self.stored: set[tuple[str, str]] = set()  # (target, phase)

    def _once(self, result: TargetResult, phase: str) -> bool:
        """True the first time `phase` of `result` is settled (done, or failed in user code)."""
        state = phase_of(result, phase)
        if state is None or state.status == "not-run" or (result.name, phase) in self.stored:
            return False
        if state.error is not None and state.error.kind in WORKER_FAILURES:
            return False  # the worker died: not an answer about the code
        self.stored.add((result.name, phase))
        return True

    def __call__(self, result: TargetResult) -> None:
        keys = self.keys.get(result.name)
        if keys is None:
            return
        if self._once(result, "trace"):
            trace = dataclasses.replace(result, recompiles=[], benchmark=None, export=None, fallback_ops=[], report=None,
                                        phases=[p for p in result.phases if p.name == "trace"])
            self.cache.put(keys.trace, "trace", dataclasses.asdict(trace), self.source)
        sweep = phase_of(result, "sweep")
        if self.recompiles and sweep is not None and sweep.status == "done" and self._once(result, "sweep"):
            self.cache.put(keys.sweep, "sweep", [dataclasses.asdict(r) for r in result.recompiles], self.source)
        if result.benchmark is not None and result.status == "ok" and (result.name, "measure") not in self.stored:
            self.stored.add((result.name, "measure"))
            self.cache.put(keys.bench, "bench", dataclasses.asdict(result.benchmark))
        measure = phase_of(result, "measure")
        if result.benchmark is not None and measure is not None and measure.status == "done":
            # the deployment answers come after the figures, in the same phase
            self.cache.put(keys.deploy, "deploy", {
                "export": result.export, "fallback_ops": result.fallback_ops, "report": result.report})


# --- the run ----------------------------------------------------------------------------------

class _Workers:
    """One worker at a time, started in the root of the files it analyses, only when needed."""

    def __init__(self, settings: Settings, cache: Optional[ResultCache]):
        self.settings, self.cache = settings, cache
        self.slot: Optional[WorkerSlot] = None
        self.root: Optional[str] = None
        self.runtime: dict = {}

    async def get(self, root: str) -> WorkerSlot:
        if self.slot is not None and self.root != root:
            await self.stop()
        if self.slot is None:
            self.slot, self.root = WorkerSlot("cli", default_python(), root, worker_env(cache_dir()),
                                              spare=False), root
            info = await self.slot.info(self.settings.timeout_s)
            if not self.runtime:
                self.runtime = info
                if self.cache is not None:
                    self.cache.put(_runtime_key(), "runtime", info)
        return self.slot

    async def stop(self) -> None:
        if self.slot is not None:
            await self.slot.stop()
        self.slot = self.root = None


def _runtime_key() -> str:
    return cache_key("runtime", default_python(), torch_version())


async def check(files: list[str], settings: Settings, *, benchmark: bool, quiet: bool, recompiles: bool = True,
                root: Optional[str] = None, targets: Optional[list[TargetPick]] = None,
                cache: Optional[ResultCache] = None, trace_dir: Optional[str] = None) -> tuple[list[FileReport], dict]:
    """Analyse `files`; each in its own workspace root unless `root` is given. Results come from
    `cache` when it has every part asked for (no worker starts when it has them all)."""
    version = torch_version()
    workers = _Workers(settings, cache)
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
            discovery = discover(source)
            if discovery is None:
                if targets is None:
                    report.findings += _syntax_error(source, path)
                    reports.append(report)
                continue
            file_root = os.path.abspath(root) if root else find_root(path)
            discovery.targets = resolve_inputs(path, file_root, discovery.targets, source=source)
            picked = _picked(targets, path, discovery.targets)
            if picked is not None and not picked:
                continue  # --target: not in this file
            reports.append(report)
            chosen = [t for t in discovery.targets if picked is None or t.name in picked]
            lints, statics = _static_findings(source, path, chosen, discovery, picked)
            report.findings = lints + statics
            runnable = [t for t in chosen if t.inputs is not None]
            if not runnable:
                continue
            results: dict[str, TargetResult] = {}
            keys: dict[str, TargetKeys] = {}
            if cache is not None:
                deps, _ = dependency_fingerprint(path, source, file_root)
                keys = {t.name: target_keys(version, path, discovery.fingerprint, deps, t, settings.device, settings.mode)
                        for t in runnable}
                for t in runnable:
                    hit = _from_cache(cache, keys[t.name], source, path, recompiles=recompiles, benchmark=benchmark)
                    if hit is not None:
                        results[t.name] = hit
            todo = {t.name for t in runnable if t.name not in results}
            if todo:
                try:
                    slot = await workers.get(file_root)
                except WorkerGone as gone:
                    report.error = gone.problem
                    return reports, workers.runtime
                if not quiet:
                    say(f"tracing {os.path.relpath(path)}"
                        + (f" ({len(results)} of {len(runnable)} targets from the cache)" if results else ""))
                run = await analyze_file(
                    slot, path, file_root, discovery, settings, benchmark=benchmark, recompiles=recompiles,
                    only=todo, on_target=_Store(cache, keys, source, recompiles=recompiles) if cache else None,
                    on_progress=(None if quiet else lambda stage, target: say(f"  {stage}")),
                    trace_dir=trace_dir,
                )
                results.update(run.results)
                report.error = run.problem
            elif not quiet:
                say(f"{os.path.relpath(path)}: from the cache")
            _fill(report, discovery, results, runnable, lints, statics, file_root)
        runtime = workers.runtime
        if not runtime and cache is not None:
            hit = cache.get(_runtime_key())
            runtime = hit[0] if hit else {}
        return reports, runtime or {"torch": version}
    finally:
        await workers.stop()


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
    chk.add_argument("--baseline", metavar="FILE", help="findings in FILE are not shown and do not fail the run")
    chk.add_argument("--write-baseline", action="store_true",
                     help="write every finding of this run to the --baseline FILE (and exit 0)")
    chk.add_argument("--device", choices=DEVICES, default=None, help="default: pyproject's, else auto")
    chk.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="longest one analysis step may take (worker.timeoutSeconds)")
    chk.add_argument("--memory-limit", type=int, default=None, metavar="MB",
                     help="memory the analysis process may grow to before it is replaced (worker.memoryLimitMB)")
    chk.add_argument("--max-seconds", type=float, default=None, metavar="SECONDS",
                     help="budget of one target's measurement, compiles included (benchmark.maxSeconds)")
    chk.add_argument("-o", "--output", help="write the report here instead of stdout")
    chk.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    chk.add_argument("--trace-dir", metavar="DIR",
                     help="also write torch's structured trace of this analysis here (as TORCH_TRACE does), for tlparse")
    chk.set_defaults(run=run_check)
    return chk


def run_check(args: argparse.Namespace) -> int:
    if args.write_baseline and not args.baseline:
        print("compile-lens: --write-baseline needs --baseline FILE (where to write it)", file=sys.stderr)
        return 2
    if args.baseline and not args.write_baseline and not os.path.isfile(args.baseline):
        print(f"compile-lens: no baseline file {args.baseline} (write one with --write-baseline)", file=sys.stderr)
        return 2
    found = files_and_root(args)
    if isinstance(found, int):
        return found
    files, root = found
    settings = settings_for(args, files, root)
    picks = [TargetPick.parse(t) for t in args.targets] if args.targets else None
    # a trace is of a run that happens now: results from the cache would write none
    cache = open_cache(args.no_cache or bool(args.trace_dir))
    trace_dir = os.path.abspath(args.trace_dir) if args.trace_dir else None  # the worker runs elsewhere
    try:
        reports, runtime = asyncio.run(check(files, settings, benchmark=not args.no_benchmark, quiet=args.quiet,
                                             recompiles=not args.no_recompiles, root=args.root, targets=picks,
                                             cache=cache, trace_dir=trace_dir))
    except KeyboardInterrupt:
        return 2
    finally:
        if cache is not None:
            cache.close()
    if picks is not None and not reports:
        print(f"compile-lens: no target {', '.join(args.targets)} in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    if trace_dir and not args.quiet:
        _trace_written(trace_dir)
    finish(reports)
    hidden = 0
    if args.write_baseline:
        written = write_baseline(reports, root, args.baseline)
        print(f"compile-lens: wrote {written} finding{'s' if written != 1 else ''} to {args.baseline}", file=sys.stderr)
    elif args.baseline:
        try:
            hidden = apply_baseline(reports, root, args.baseline)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"compile-lens: cannot read the baseline {args.baseline}: {exc}", file=sys.stderr)
            return 2
    not_run = tuple(what for what, skipped in (("recompile check (--no-recompiles)", args.no_recompiles),
                                               ("measurement (--no-benchmark)", args.no_benchmark)) if skipped)
    if args.format == "text":
        text = render_text(reports, cwd=root, baselined=hidden, not_run=not_run)
    elif args.format == "json":
        device = "cuda" if runtime.get("cuda") and settings.device != "cpu" else "cpu"
        checks = {"graph_breaks": True, "recompiles": not args.no_recompiles, "benchmark": not args.no_benchmark}
        text = json.dumps(render_json(reports, torch_version=runtime.get("torch"), device=device, checks=checks),
                          indent=2)
    else:
        text = json.dumps(render_sarif(reports, tool_version=__version__, cwd=root), indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    if any(r.error and r.error.kind == "no-torch" for r in reports):
        return 2
    return 0 if args.write_baseline else exit_code(reports)

