"""`compile-lens import TRACE`: torch's structured trace of a run made anywhere (a `TORCH_TRACE`
folder, one log per rank, or one log) on the workspace's lines: graph breaks, recompiles with the
guard that failed, compile time and cache counts per compiled function and rank, and the ranks
whose compiled programs part. Text, JSON and SARIF as `check` writes them; exit codes as `check`'s
(0 nothing to warn about, 1 warnings or errors, 2 usage error or not a trace). No torch needed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .. import __version__
from ..engine.finish import finish
from ..render import sarif_limits
from ..render.cli_output import display_path, exit_code, render_text
from ..render.imported_json import import_json
from ..render.profile_text import profiles_text
from ..render.sarif import render_sarif
from ..torch_text import compile_settings
from ..trace_import import kernel_lines
from ..trace_import.paths import parse_maps
from ..trace_import.profiles import import_profiles, is_profile, profiles_json
from ..trace_import.report import (
    Imported,
    NotATrace,
    divergence_text,
    import_trace,
    ranks_json,
)
from .common import say, write_output

SARIF_CATEGORY = "import"  # automationDetails.id "compile-lens/import/", apart from check's "compile-lens/all/"


def import_text(imported: Imported, root: str) -> str:
    lines = []
    version = next((t.torch_version for t in imported.traces if t.torch_version), "unknown")
    lines.append(f"Imported torch trace: {len(imported.traces)} log{'s' if len(imported.traces) != 1 else ''} "
                 f"(torch {version})")
    for r in ranks_json(imported):
        who = f"rank {r['rank']}: " if r["rank"] is not None else ""
        lines.append(f"  {who}{os.path.basename(r['file'])}: {r['targets']} compiled functions, "
                     f"{r['compiles']} compiles, {r['graph_breaks']} graph breaks, {r['recompiles']} recompiles, "
                     f"compile {r['compile_s']:.1f} s, cache {r['cache']['hits']} hits / {r['cache']['misses']} misses")
    for entry in imported.rank_divergence:
        lines.append(f"error: {divergence_text(entry)}")
    for note in imported.notes:
        lines.append(f"note: {note}")
    if imported.unmapped:
        lines.append(f"Not mapped onto the workspace ({len(imported.unmapped)}; shown with the run's path):")
        lines += [f"  {path}: {why}" for path, why in sorted(imported.unmapped.items())]
    for report in imported.reports:
        for t, extra in zip(report.targets, imported.target_extras.get(report.path, [])):
            rank = (f"rank {extra['rank']}: " if extra["rank"] is not None
                    else f"{extra['log']}: " if len(imported.traces) > 1 else "")
            lines.append(f"{display_path(report.path, root)}:{t.line}: {rank}{t.name}: {len(extra['compile_ids'])} compiles "
                         f"({', '.join(extra['compile_ids'])}), compile {extra['compile_s']:.1f} s, "
                         f"cache {extra['cache']['hits']} hits / {extra['cache']['misses']} misses")
            lines += settings_text(extra)
            for entry in extra.get("lines") or []:  # the run tracked provenance: each line's kernels, no times
                lines.append(f"  {display_path(entry['path'], root)}:{entry['line']}: {kernel_lines.text(entry)}")
    return "\n".join(lines) + "\n\n" + render_text(imported.reports, cwd=root)


def settings_text(extra: dict[str, Any]) -> list[str]:
    """`  settings (compiles 0/0, 1/0): dynamo.recompile_limit = 2, … — mode='max-autotune' read from them`."""
    out = []
    for entry in extra.get("settings") or []:
        if entry["values"]:
            ids = ", ".join(entry["compile_ids"][:6]) + (" …" if len(entry["compile_ids"]) > 6 else "")
            out.append(f"  settings off torch's defaults (compile{'s' if len(entry['compile_ids']) > 1 else ''} {ids}): "
                       f"{compile_settings.short(entry['values'], 8)}")
    call = {k: v for k, v in (extra.get("call") or {}).items() if k in ("mode", "dynamic", "backend") and v is not None}
    if call and out:
        out.append(f"  the torch.compile call, read from them (a trace does not record the call): "
                   f"{', '.join(f'{k}={v!r}' for k, v in call.items())}")
    out += [f"  {words}" for words in extra.get("explains") or []]
    return out


def import_sarif(imported: Imported, root: str) -> dict[str, Any]:
    """SARIF as `check` writes it, within GitHub's upload limits, under its own category: an upload of
    an imported trace must not replace (and so close) the alerts of the `check` runs."""
    log = render_sarif(imported.reports, tool_version=__version__, cwd=root, shard=SARIF_CATEGORY)
    for cut in sarif_limits.fit(log):  # an upload over GitHub's limits is rejected whole
        say(f"SARIF: {cut}")
    return log


def add_import_parser(subparsers: Any) -> argparse.ArgumentParser:
    imp = subparsers.add_parser("import", help="read torch's structured trace (TORCH_TRACE) of a run made anywhere",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    imp.add_argument("trace", help="a TORCH_TRACE folder (dedicated_log_torch_trace_*.log, one per rank) or one log; "
                                   "or a PyTorch profiler trace (*.json, *.json.gz, *.pt.trace.json) or a folder of them, one per rank")
    imp.add_argument("--provenance", metavar="TRACE", help="with a profiler trace: the same run's TORCH_TRACE folder or log, "
                                                          "whose Inductor provenance puts each kernel on its lines "
                                                          "(default: the logs beside the profile)")
    imp.add_argument("--root", metavar="DIR", default=".", help="the workspace the run's paths are mapped onto (default: .)")
    imp.add_argument("--map", action="append", default=[], metavar="REMOTE_PREFIX=LOCAL_PREFIX", dest="maps",
                     help="the run's REMOTE_PREFIX is LOCAL_PREFIX here; repeatable (else: the longest path "
                          "suffix that exactly one workspace file has)")
    imp.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    imp.add_argument("-o", "--output", help="write the report here instead of stdout")
    imp.set_defaults(run=run_import)
    return imp


def run_profile_import(args: argparse.Namespace, root: str) -> int:
    """A PyTorch profiler trace (or a folder of them): each rank's GPU figures, its kernels on the lines."""
    try:
        imported = import_profiles(args.trace, root, parse_maps(args.maps), args.provenance)
    except (ValueError, NotATrace, OSError) as exc:
        print(f"compile-lens import: {exc}", file=sys.stderr)
        return 2
    finish(imported.reports)
    doc = profiles_json(imported)
    if args.format == "text":
        text = profiles_text(doc, lambda p: display_path(p, root))
        if imported.reports:  # the lines as findings, as `check` prints them
            text += "\n" + render_text(imported.reports, cwd=root)
    elif args.format == "json":
        text = json.dumps(doc, indent=2)
    else:
        text = json.dumps(import_sarif(imported, root), indent=2)  # type: ignore[arg-type]
    if not write_output(args.output, text):
        return 2
    return exit_code(imported.reports)


def run_import(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.root):  # also checked with --map and -o before (`preflight`)
        say(f"--root {args.root} is not a folder")
        return 2
    if args.provenance and not os.path.exists(args.provenance):
        say(f"--provenance {args.provenance}: no such file or folder")
        return 2
    if is_profile(args.trace):  # detected by content: a Kineto trace, or a folder holding one
        return run_profile_import(args, os.path.abspath(args.root))
    try:
        maps = parse_maps(args.maps)
        imported = import_trace(args.trace, os.path.abspath(args.root), maps)
    except (ValueError, NotATrace) as exc:
        print(f"compile-lens import: {exc}", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    finish(imported.reports)
    if args.format == "text":
        text = import_text(imported, root)
    elif args.format == "json":
        text = json.dumps(import_json(imported), indent=2)
    else:
        text = json.dumps(import_sarif(imported, root), indent=2)
    if not write_output(args.output, text):
        return 2
    if imported.rank_divergence:
        return 1
    return exit_code(imported.reports)
