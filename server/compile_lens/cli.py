"""`compile-lens check PATH...`: the editor's analysis from a terminal, for CI.

Same discovery, worker and results as the language server; only the rendering differs.
Exit code: 0 nothing found, 1 findings, 2 usage or internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Optional

from . import __version__
from .analysis import analyze_file, safe_lint
from .config import load_project_config
from .discovery import discover
from .inputs import resolve_inputs
from .pool import WorkerGone, WorkerSlot, default_python, worker_env
from .protocol import FileReport, Finding, Problem
from .record.cli import add_record_parser
from .render import findings as fnd
from .render.cli_output import exit_code, render_json, render_sarif, render_text
from .report_cli import add_report_parser, run_report
from .settings import DEVICES, Settings
from .trial.cli import add_trial_parser

SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox", ".mypy_cache"}


def python_files(paths: list[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            found.append(os.path.abspath(path))
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            found += [os.path.abspath(os.path.join(dirpath, f)) for f in sorted(filenames) if f.endswith(".py")]
    return found


def _workspace_root(files: list[str]) -> str:
    cwd = os.getcwd()
    if all(f.startswith(cwd + os.sep) for f in files):
        return cwd
    return os.path.commonpath([os.path.dirname(f) for f in files]) if files else cwd


def _progress(message: str) -> None:
    print(f"compile-lens: {message}", file=sys.stderr, flush=True)


async def check(files: list[str], settings: Settings, *, benchmark: bool, quiet: bool,
                trace_dir: Optional[str] = None) -> tuple[list[FileReport], dict]:
    root = _workspace_root(files)
    slot = WorkerSlot("cli", default_python(), root, worker_env(_cache_dir()), spare=False)
    reports: list[FileReport] = []
    runtime: dict = {}
    try:
        for path in files:
            report = FileReport(path)
            reports.append(report)
            try:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                report.error = Problem("read", f"cannot read the file: {exc}", path)
                continue
            discovery = discover(source)
            if discovery is None:
                report.findings += [f for f in _syntax_error(source, path)]
                continue
            discovery.targets = resolve_inputs(path, root, discovery.targets, source=source)
            report.findings += safe_lint(source, path) or []
            report.findings += [f for t in discovery.targets for f in fnd.static_target_findings(t, path)]
            report.findings += [Finding(path, e.line, 1, e.line, 1, "warning", fnd.CODE_DIRECTIVE, e.message)
                                for e in discovery.errors]
            if not any(t.inputs is not None for t in discovery.targets):
                continue
            if not runtime:
                try:
                    runtime = await slot.info(settings.timeout_s)
                except WorkerGone as gone:
                    report.error = gone.problem
                    return reports, runtime
            if not quiet:
                _progress(f"tracing {os.path.relpath(path)}")
            run = await analyze_file(
                slot, path, root, discovery, settings, benchmark=benchmark,
                on_progress=(None if quiet else lambda stage, target: _progress(f"  {stage}")),
                trace_dir=trace_dir,
            )
            report.targets = [run.results[t.name] for t in discovery.targets
                              if t.name in run.results and run.results[t.name].status != "skipped"]
            report.error = run.problem
            traced = [f for r in report.targets for f in fnd.target_findings(r, path)]
            covered = [(t.line, t.end_line) for t in discovery.targets
                       if t.name in run.results and run.results[t.name].status == "ok"]
            report.findings = fnd.merge_with_lints(report.findings, traced, covered)
        return reports, runtime
    finally:
        await slot.stop()


def _trace_written(trace_dir: str) -> None:
    from .worker.torch_trace import trace_files  # torch-free: only lists the folder

    written = trace_files(trace_dir)
    if not written:
        _progress(f"no torch trace written to {trace_dir} (nothing was traced, or this torch cannot)")
    for path in written:
        _progress(f"torch trace: {path}  (open with `tlparse {path}`)")


def _syntax_error(source: str, path: str) -> list[Finding]:
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        line = exc.lineno or 1
        return [Finding(path, line, exc.offset or 1, line, (exc.offset or 1) + 1, "error", "syntax-error",
                        f"cannot parse: {exc.msg}")]
    return []


def _cache_dir() -> str:
    return os.environ.get("COMPILE_LENS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "compile-lens")


def _apply_ignores(reports: list[FileReport]) -> None:
    cache: dict[str, list[str]] = {}
    for report in reports:
        kept = []
        for f in report.findings:
            if f.path not in cache:
                try:
                    with open(f.path, encoding="utf-8") as fh:
                        cache[f.path] = fh.read().splitlines()
                except OSError:
                    cache[f.path] = []
            lines = cache[f.path]
            if not fnd.suppressed(f, lines):
                kept.append(fnd.whole_line(f, lines))
        report.findings = kept


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compile-lens", description="What torch.compile will do to your PyTorch code.")
    parser.add_argument("--version", action="version", version=f"compile-lens {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    chk = sub.add_parser("check", help="report graph breaks, recompiles and (optionally) measured speedups")
    chk.add_argument("paths", nargs="+", help="Python files or folders")
    chk.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    chk.add_argument("--no-benchmark", action="store_true", help="trace only; do not measure Inductor")
    chk.add_argument("--device", choices=DEVICES, default=None, help="default: pyproject's, else auto")
    chk.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="longest one analysis step may take (worker.timeoutSeconds)")
    chk.add_argument("-o", "--output", help="write the report here instead of stdout")
    chk.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    chk.add_argument("--trace-dir", metavar="DIR",
                     help="also write torch's structured trace of this analysis here (as TORCH_TRACE does), for tlparse")
    add_record_parser(sub)
    add_report_parser(sub)
    add_trial_parser(sub)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if args.command in ("record", "trial"):
        return args.run(args)
    if args.command == "report":
        return run_report(args)
    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        print(f"compile-lens: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    files = python_files(args.paths)
    if not files:
        print(f"compile-lens: no Python files in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    # [tool.compile-lens] in pyproject.toml gives the defaults; flags win
    settings, problems = Settings.from_client(load_project_config(files[0], _workspace_root(files)).settings)
    for problem in problems:
        print(f"compile-lens: {problem}", file=sys.stderr)
    if args.device:
        settings.device = args.device
    if args.timeout:
        settings.timeout_s = args.timeout
    trace_dir = os.path.abspath(args.trace_dir) if args.trace_dir else None  # the worker runs elsewhere
    try:
        reports, runtime = asyncio.run(check(files, settings, benchmark=not args.no_benchmark, quiet=args.quiet,
                                             trace_dir=trace_dir))
    except KeyboardInterrupt:
        return 2
    if trace_dir and not args.quiet:
        _trace_written(trace_dir)
    _apply_ignores(reports)
    cwd = os.getcwd()
    if args.format == "text":
        text = render_text(reports, cwd=cwd)
    elif args.format == "json":
        device = "cuda" if runtime.get("cuda") and settings.device != "cpu" else "cpu"
        text = json.dumps(render_json(reports, torch_version=runtime.get("torch"), device=device), indent=2)
    else:
        text = json.dumps(render_sarif(reports, tool_version=__version__, cwd=cwd), indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    if any(r.error and r.error.kind == "no-torch" for r in reports):
        return 2
    return exit_code(reports)


if __name__ == "__main__":
    sys.exit(main())
