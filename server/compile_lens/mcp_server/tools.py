"""The MCP tools' work, without the SDK: plain arguments in, the CLI's JSON documents out.

`check` is the engine's (`engine.check.check`) and its `json_document` (what `check --format json` prints);
`fixes` are `actions.code_actions` resolved into edits, as the editor's light bulb offers them;
`apply_fix` writes one and traces the file again; `trial` is `compile-lens trial --json` run as a
subprocess (its figures file is the answer; killing it stops the user's program too); `import` is
`render.imported_json.import_json`. A bad argument or a refusal raises `ToolProblem` with one line.
`note` receives progress lines while a tool runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import sys
import tempfile
from typing import Any, Callable, Optional, Sequence

import psutil
from lsprotocol import types as lsp

from .. import actions
from ..config import python_files
from ..engine.check import TargetPick, json_document
from ..engine.check import check as run_check
from ..engine.finish import finish
from ..engine.project import open_cache, project_settings, workspace_root
from ..protocol import FileReport, Finding
from ..render import keys
from ..render.assembly import in_workspace
from ..render.imported_json import import_json
from ..render.lsp import to_diagnostic, to_range, uri_of
from ..trace_import.paths import parse_maps
from ..trace_import.profiles import import_profiles, is_profile, profiles_json
from ..trace_import.report import NotATrace, import_trace
from .trust import Trust

Note = Optional[Callable[[str], None]]

PHASES = ("graph_breaks", "recompiles", "benchmark")
DEFAULT_PHASES = ("graph_breaks",)  # a trace (~1 s): what an agent fixing breaks needs; the others compile
DEFAULT_TRIAL_STEPS = 10


class ToolProblem(Exception):
    """A bad argument, or a call refused (an untrusted folder): the tool's error, one line."""


# --- check --------------------------------------------------------------------------------------

def _phases(phases: Optional[Sequence[str]]) -> tuple[str, ...]:
    chosen = tuple(phases) if phases else DEFAULT_PHASES
    unknown = [p for p in chosen if p not in PHASES]
    if unknown:
        raise ToolProblem(f"unknown phase {', '.join(unknown)}: the phases are {', '.join(PHASES)}")
    return chosen


def _files(path: str) -> tuple[list[str], str]:
    if not os.path.exists(path):
        raise ToolProblem(f"no such file or folder: {path}")
    files = python_files([path])
    if not files:
        raise ToolProblem(f"no Python files in {path}")
    return files, workspace_root(files)


async def _check(path: str, trust: Trust, target: Optional[str], phases: tuple[str, ...],
                 note: Note) -> tuple[dict[str, Any], list[FileReport], dict]:
    """`check`'s document, reports and the worker's runtime facts; static only where untrusted."""
    files, root = _files(path)
    trusted = all(trust.covers(f) for f in files)
    settings = project_settings(files, root)
    picks = [TargetPick.parse(target)] if target else None
    runs = {"recompiles": trusted and "recompiles" in phases, "benchmark": trusted and "benchmark" in phases}
    cache = open_cache(False)
    try:
        reports, runtime = await run_check(files, settings, targets=picks, cache=cache,
                                           on_progress=note, static_only=not trusted, **runs)
    finally:
        if cache is not None:
            cache.close()
    if picks is not None and not reports:
        raise ToolProblem(f"no target {target} in {path}")
    finish(reports)
    doc = json_document(reports, runtime, settings, graph_breaks=trusted, **runs)
    doc["trusted"] = trusted
    if not trusted:
        doc["note"] = trust.refusal(path) + "; these are the static lints' predictions"
    return doc, reports, runtime


async def check(path: str, trust: Trust, *, target: Optional[str] = None,
                phases: Optional[Sequence[str]] = None, note: Note = None) -> dict[str, Any]:
    doc, _, _ = await _check(path, trust, target, _phases(phases), note)
    return doc


async def show(path: str, line: int, trust: Trust, *, graph: bool, note: Note = None) -> dict[str, Any]:
    """`compile-lens show`'s JSON document with its text: the graphs Dynamo captured for the target at
    `line` (`graph`), or the kernels the line became (a measurement). Trusted folders only: it runs the file."""
    from ..engine.show import ShowProblem, show_document

    if not trust.covers(path):
        raise ToolProblem(trust.refusal(path))
    cache = open_cache(False)
    try:
        files, root = _files(path)
        doc, text = await show_document(files[0], line, graph=graph, settings=project_settings(files, root),
                                        cache=cache, on_progress=note)
    except ShowProblem as problem:
        raise ToolProblem(str(problem)) from None
    finally:
        if cache is not None:
            cache.close()
    return {**doc, "text": text}


# --- fixes and apply_fix ------------------------------------------------------------------------

def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolProblem(f"cannot read {path}: {exc}") from None


def _at_line(reports: list[FileReport], path: str, line: int) -> list[Finding]:
    return [f for r in reports for f in r.findings if _same(f.path or r.path, path) and f.line <= line <= f.end_line]


def _edit_json(path: str, edit: lsp.TextEdit) -> dict[str, Any]:
    """1-based lines and columns, as the diagnostics in `check`'s JSON."""
    start, end = edit.range.start, edit.range.end
    return {"path": path, "line": start.line + 1, "column": start.character + 1, "end_line": end.line + 1,
            "end_column": end.character + 1, "new_text": edit.new_text}


def _fixes(path: str, line: int, reports: list[FileReport], runtime: dict, root: str) -> list[dict[str, Any]]:
    """The code actions at `line` that resolve to an edit that compiles, each with its edits."""
    source = _read(path)
    found = _at_line(reports, path, line)
    guesses = {t.name: t.inputs for r in reports for t in r.targets
               if t.inputs is not None and t.inputs.after_import and t.inputs.text}
    offered = actions.code_actions(source, uri_of(path), to_range(line, 1, line, 1), [to_diagnostic(f) for f in found],
                                   guesses=guesses, hatches=runtime.get("escape_hatches") or ())
    fixes = []
    for action in offered:
        data = action.data if isinstance(action.data, dict) else {}
        other = _path_of(data.get("uri")) or path
        if not in_workspace(other, root) and not _same(other, path):
            continue  # an installed library's file: never edited
        resolved = actions.resolve(action, source if _same(other, path) else _read(other))
        if resolved.edit is None or not resolved.edit.changes:
            continue
        edits = [_edit_json(_path_of(uri) or path, e) for uri, changes in resolved.edit.changes.items() for e in changes]
        fixes.append({"id": len(fixes), "title": action.title, "kind": action.kind,
                      "codes": sorted({str(d.code) for d in action.diagnostics or [] if d.code}),
                      "edits": edits})
    return fixes


def _path_of(uri: Any) -> Optional[str]:
    from urllib.parse import unquote, urlparse

    if not isinstance(uri, str) or not uri.startswith("file:"):
        return None
    return unquote(urlparse(uri).path)


def _line_diagnostics(doc: dict[str, Any], path: str, line: int) -> list[dict[str, Any]]:
    return [d for e in doc["files"] if _same(e["path"], path) for d in e["diagnostics"]
            if d["line"] <= line <= d["end_line"]]


def _one_file(path: str) -> None:
    if not os.path.isfile(path) or not path.endswith(".py"):
        raise ToolProblem(f"{path} is not a Python file")


async def fixes(path: str, line: int, trust: Trust, *, phases: Optional[Sequence[str]] = None,
                note: Note = None) -> dict[str, Any]:
    _one_file(path)
    doc, reports, runtime = await _check(path, trust, None, _phases(phases), note)
    root = workspace_root([path])
    return {"path": path, "line": line, "trusted": doc["trusted"],
            "diagnostics": _line_diagnostics(doc, path, line), "fixes": _fixes(path, line, reports, runtime, root)}


def _keys(findings: list[Finding], root: str) -> set[str]:
    cache = keys.LineCache()
    return {keys.key_of(keys.identity(f, root, cache(f.path))) for f in findings}


async def apply_fix(path: str, line: int, fix: int, trust: Trust, *, phases: Optional[Sequence[str]] = None,
                    note: Note = None) -> dict[str, Any]:
    """Writes fix `fix` (an id from `fixes`), traces the file again and says whether the findings it
    answered are gone (by their stable keys: the code and the text of their line, not its number)."""
    _one_file(path)
    if not trust.covers(path):
        raise ToolProblem(trust.refusal(path))
    chosen = _phases(phases)
    _, reports, runtime = await _check(path, trust, None, chosen, note)
    root = workspace_root([path])
    offered = _fixes(path, line, reports, runtime, root)
    picked = next((f for f in offered if f["id"] == fix), None)
    if picked is None:
        raise ToolProblem(f"no fix {fix} at {path}:{line} (there are {len(offered)}: call fixes first)")
    answered = [f for f in _at_line(reports, path, line) if f.code in picked["codes"]]
    before = _keys(answered, root)
    for target in dict.fromkeys(e["path"] for e in picked["edits"]):
        source = _read(target)
        edits = [lsp.TextEdit(to_range(e["line"], e["column"], e["end_line"], e["end_column"]), e["new_text"])
                 for e in picked["edits"] if e["path"] == target]
        with open(target, "w", encoding="utf-8") as f:
            f.write(actions.apply_edits(source, edits))
    if note:
        note(f"applied: {picked['title']}; tracing again")
    doc, after_reports, _ = await _check(path, trust, None, chosen, note)
    remaining = _keys([f for r in after_reports for f in r.findings], root)
    return {"applied": picked, "gone": bool(before) and not (before & remaining),
            "still_there": sorted(before & remaining), "after": doc}


# --- trial and import ---------------------------------------------------------------------------

async def trial(command: str, root: str, trust: Trust, *, steps: int = DEFAULT_TRIAL_STEPS,
                note: Note = None) -> dict[str, Any]:
    """`compile-lens trial --steps N --json FILE -- COMMAND` in `root`; its figures, exit code and the
    last lines the program wrote. Cancelled, the trial's process tree is killed."""
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise ToolProblem(f"{root} is not a folder")
    if not trust.covers(root):
        raise ToolProblem(trust.refusal(root))
    program = shlex.split(command)
    if not program:
        raise ToolProblem("give the command to run, e.g. python train.py --epochs 1")
    if steps <= 0:
        raise ToolProblem("steps must be positive")
    with tempfile.TemporaryDirectory(prefix="compile-lens-mcp-") as scratch:
        figures_file = os.path.join(scratch, "trial.json")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "compile_lens.cli", "trial", "--steps", str(steps), "--root", root,
            "--json", figures_file, "--", *program,
            cwd=root, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        tail: list[str] = []

        async def read(stream: Any, progress: bool) -> None:
            async for raw in stream:
                text = raw.decode("utf-8", "replace").rstrip()
                tail.append(text)
                del tail[:-40]
                if progress and note and text.startswith("compile-lens trial: "):
                    note(text.removeprefix("compile-lens trial: "))

        try:
            await asyncio.gather(read(proc.stdout, False), read(proc.stderr, True))
            code = await proc.wait()
        except BaseException:
            _end_tree(proc.pid)
            await proc.wait()  # a cancel reaches this task once (server.isolated): the wait runs
            raise
        figures = None
        if os.path.isfile(figures_file):
            with open(figures_file, encoding="utf-8") as f:
                figures = json.load(f)
    return {"command": command, "root": root, "exit_code": code, "figures": figures, "output_tail": tail}


def _end_tree(pid: int) -> None:
    """SIGKILL the trial and everything it started. It is stopped first: killed children first, the
    trial would start its next run (eager ended → the compiled run) before its own kill arrived."""
    try:
        trial = psutil.Process(pid)
        trial.suspend()
        tree = trial.children(recursive=True)
    except psutil.Error:
        return
    for proc in [*tree, trial]:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def import_(trace: str, root: str, maps: Sequence[str] = ()) -> dict[str, Any]:
    """`compile-lens import TRACE --format json`: torch's structured trace, or a PyTorch profiler trace
    (each rank's GPU figures, the kernels' time on the lines), on the workspace's lines."""
    if not os.path.isdir(root):
        raise ToolProblem(f"root {root} is not a folder")
    try:
        if is_profile(trace):
            profiled = import_profiles(trace, os.path.abspath(root), parse_maps(list(maps)))
            finish(profiled.reports)
            return profiles_json(profiled)
        imported = import_trace(trace, os.path.abspath(root), parse_maps(list(maps)))
    except (ValueError, NotATrace, OSError) as exc:
        raise ToolProblem(str(exc)) from None
    finish(imported.reports)
    return import_json(imported)
