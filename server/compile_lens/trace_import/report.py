"""What a trace recorded → the `FileReport`s every renderer reads (text, JSON, SARIF, the editor),
with what only an imported trace has: the rank and compile id each finding came from, per-target
compile time and cache counts, the ranks, where they part, and the paths left unmapped."""

from __future__ import annotations

import dataclasses
import gzip
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from ..protocol import FileReport, Finding, Frame, GraphBreak, Recompile, TargetResult
from ..ranks import RankEvent, RankParting, rank_divergence
from ..render import findings as fnd
from ..torch_text import compile_settings
from . import kernel_lines
from .fold import CompiledFunction, RankTrace, fold
from .paths import PathMap

LOG_PREFIX = "dedicated_log_torch_trace_"  # torch's LOG_PREFIX: what TORCH_TRACE writes, what tlparse reads
SOURCE = "Compile Lens (imported trace)"
WHY_IT_MATTERS = ("collectives then pair different compiled programs on different ranks: an NCCL watchdog hang "
                  "or wrong values; mark the varying dimension dynamic (torch._dynamo.mark_dynamic) or give every "
                  "rank equal shard sizes")


class NotATrace(Exception):
    """The path holds no structured trace at all: said to the user, exit 2."""


def trace_logs(path: str) -> list[str]:
    """The logs to read: the file itself, or a folder's `dedicated_log_torch_trace_*.log` (rank order;
    gzipped ones too, `*.log.gz`, as logs are often shipped)."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise NotATrace(f"no such file or folder: {path}")
    names = sorted(n for n in os.listdir(path) if n.startswith(LOG_PREFIX) and n.endswith((".log", ".log.gz")))
    if not names:
        raise NotATrace(f"{path} holds no {LOG_PREFIX}*.log: give the folder a `TORCH_TRACE=DIR` run wrote, or one log")
    return [os.path.join(path, n) for n in names]


@dataclass
class Imported:
    traces: list[RankTrace]
    reports: list[FileReport]
    target_extras: dict[str, list[dict[str, Any]]]  # report path -> per target, in order: rank, compile_s, cache, …
    unmapped: dict[str, str]
    rank_divergence: list[RankParting]
    notes: list[str] = field(default_factory=list)  # what could not be read, per log


def _who(trace: RankTrace, apart: bool) -> str:
    """How a finding names the log it came from: its rank, or, among logs of separate runs, the log."""
    if trace.rank is not None:
        return f"rank {trace.rank}"
    return f"log {os.path.basename(trace.file)}" if apart else ""


def compared_ranks(traces: list[RankTrace]) -> tuple[bool, list[str]]:
    """Whether the logs are the ranks of one run, to compare (each says its rank, in its file name or
    its records, and no rank twice), and notes on the logs that are not: a log without a rank is a
    run of its own (two single-process runs do not part, they are two runs)."""
    notes = []
    ranked = [t for t in traces if t.rank is not None]
    unranked = [t for t in traces if t.rank is None]
    ranks = [t.rank for t in ranked]
    repeated = sorted({r for r in ranks if ranks.count(r) > 1})  # type: ignore[type-var]
    if len(traces) > 1 and unranked:
        notes.append(f"{len(unranked)} log{'s say' if len(unranked) != 1 else ' says'} no rank (in neither its file name "
                     f"nor its records): each is a run of its own, shown apart and not compared with "
                     f"another: {', '.join(os.path.basename(t.file) for t in unranked[:5])}")
    if repeated:
        notes.append(f"rank {', '.join(map(str, repeated))} appears in more than one log: these are the logs of more "
                     "than one run, so ranks are not compared; import one run's folder")
    return len(ranked) > 1 and not repeated, notes


def _where(who: str, compile_ids: list[str]) -> str:
    where = f"compile {', '.join(compile_ids)}" if compile_ids else ""
    return ", ".join(p for p in (who, where) if p)


def _target(fn: CompiledFunction, local: str, paths: PathMap, who: str) -> TargetResult:
    breaks = []
    for b in fn.graph_breaks:
        path = paths.local(b.path) or b.path
        # the user's frames of torch's traceback (a break inside a library is also shown where the
        # workspace called into it), then the line that broke
        stack = [Frame(local, line, name) for local, line, name in
                 ((paths.local(p, listed=False), line, name) for p, line, name in b.stack[:-1]) if local is not None]
        stack.append(Frame(path, b.line, b.stack[-1][2] if b.stack else fn.name))
        breaks.append(GraphBreak(path, b.line, 1, b.line, 1, b.gb_id, b.gb_type, b.explanation, list(b.hints), b.url,
                                 b.reason, stack, compile_id=b.compile_ids[0] if b.compile_ids else None))
    recompiles = []
    for r in fn.recompiles:
        guard_path = (paths.local(r.path) or r.path) if r.path else None
        recompiles.append(Recompile(r.line or fn.line, _where(who, [r.compile_id]), r.kind, r.guard, r.changed,
                                    path=guard_path if r.line else None, frame=Frame(local, fn.line, fn.name),
                                    compile_id=r.compile_id))
    return TargetResult(fn.name, "compiled frame", fn.line, graph_count=len(fn.compile_ids), graph_breaks=breaks,
                        recompiles=recompiles)


def _findings(result: TargetResult, fn: CompiledFunction, path: str, who: str) -> list[Finding]:
    found = []
    for f, b in zip(fnd.graph_break_findings(result, path), _break_per_finding(result, path)):
        seen = next((s for s in fn.graph_breaks if s.line == b.line and s.gb_type == b.gb_type), None)
        origin = _where(who, seen.compile_ids if seen else [])
        found.append(dataclasses.replace(f, data={**f.data, "origin": [origin]}))
    for br in result.graph_breaks:  # a break outside the workspace: also where the workspace called into it
        callers = {f.path for f in br.stack[:-1]} - {path, br.path}
        for caller in sorted(callers):
            single = dataclasses.replace(result, graph_breaks=[br])
            for f in fnd.graph_break_findings(single, caller):
                if f.data.get("call_site"):
                    seen = next((s for s in fn.graph_breaks if s.line == br.line and s.gb_type == br.gb_type), None)
                    found.append(dataclasses.replace(
                        f, data={**f.data, "origin": [_where(who, seen.compile_ids if seen else [])]}))
    for f in fnd.recompile_findings(result, path):
        found.append(dataclasses.replace(f, data={**f.data, "origin": [f.data.get("variation", "")]}))
    return [_with_settings(f, fn) for f in found]


def settings_of(fn: CompiledFunction) -> dict[str, str]:
    """The function's compiles' settings off torch's defaults, as one set (a later compile's value wins)."""
    merged: dict[str, str] = {}
    for _, values, _ in fn.settings:
        merged.update(values)
    return merged


def settings_json(fn: CompiledFunction) -> dict[str, Any]:
    """The settings behind the function's compiles, and what they say of its `torch.compile` call: a
    structured trace does not record the call itself (`site` null), its settings say the mode and `dynamic`."""
    merged = settings_of(fn)
    call = {"site": None, "read_from": "settings", **compile_settings.call_words(merged),
            "backend": "inductor" if fn.inductor else None}
    return {"settings": [{"compile_ids": ids, "values": values, "read_from": source} for ids, values, source in fn.settings],
            "call": call, "explains": compile_settings.explanations(merged)}


def _with_settings(finding: Finding, fn: CompiledFunction) -> Finding:
    """The finding with the settings behind its compile: a lowered recompile limit said on a limit hit."""
    merged = settings_of(fn)
    if not merged:
        return finding
    line = f"Settings off torch's defaults in this run: {compile_settings.short(merged)}"
    call = compile_settings.call_words(merged)
    if call:
        line += f" (the call's {', '.join(f'{k}={v!r}' for k, v in call.items())}, read from them)"
    if finding.data.get("recompile_kind") == "limit" and compile_settings.limit_words(merged):
        line = f"The limit was {compile_settings.limit_words(merged)}. " + line
    return dataclasses.replace(finding, data={**finding.data, "settings": merged, "settings_line": line})


def _break_per_finding(result: TargetResult, path: str) -> list[GraphBreak]:
    """The break each of `graph_break_findings`' findings is of (a break in another file has two)."""
    out = []
    for br in result.graph_breaks:
        out.append(br)
        if not fnd.same_file(br.path, path) and any(fnd.same_file(f.path, path) for f in br.stack):
            out.append(br)
    return out


def _merged(findings: list[Finding]) -> list[Finding]:
    """One finding per place and code: a break every rank hit is one diagnostic, from those ranks."""
    by_key: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.path, f.line, f.code, f.message.splitlines()[0] if f.data.get("kind") == "graph_break" else f.message)
        if key in by_key:
            by_key[key].data["origin"] += [o for o in f.data["origin"] if o not in by_key[key].data["origin"]]
        else:
            by_key[key] = f
    out = []
    for f in by_key.values():
        origin = "; ".join(o for o in f.data["origin"] if o)
        if origin and f.data.get("kind") == "graph_break":
            f.message = f"{f.message}\nRecorded in the imported trace: {origin}"
        elif origin:
            f.message = f"{f.message} (recorded in the imported trace)"
        line = f.data.pop("settings_line", None)
        if line:  # after the origin: the settings of the first log that found it
            f.message = f"{f.message}\n{line}"
        out.append(f)
    return out


def _read_notes(trace: RankTrace) -> list[str]:
    stats, name = trace.stats, os.path.basename(trace.file)
    notes = []
    if stats.unknown_kinds:
        kinds = ", ".join(f"{k} ×{n}" for k, n in stats.unknown_kinds.most_common(5))
        notes.append(f"{name}: {sum(stats.unknown_kinds.values())} records of kinds this reader does not know "
                     f"were skipped ({kinds}); a newer torch writes them")
    if stats.wrong_shape:
        lines = ", ".join(map(str, stats.wrong_shape_lines)) + (" …" if stats.wrong_shape > len(stats.wrong_shape_lines) else "")
        many = stats.wrong_shape != 1
        notes.append(f"{name}: {stats.wrong_shape} record{'s' if many else ''} of a shape torch does not write "
                     f"{'were' if many else 'was'} skipped (line{'s' if many else ''} {lines})")
    if stats.not_records:
        notes.append(f"{name}: {stats.not_records} lines are not trace records (first at line {stats.first_bad_line}); skipped")
    if stats.truncated:
        notes.append(f"{name}: the log ends mid-record at line {stats.lines} (still being written, or the run was killed): "
                     "what came before it is shown")
    return notes


def import_trace(path: str, root: str, maps: Optional[list[tuple[str, str]]] = None) -> Imported:
    """Read `path` (a TORCH_TRACE folder or one log) and place what it recorded on `root`'s files.
    Raises NotATrace when nothing in it is a trace record."""
    traces = []
    for log in trace_logs(path):
        try:
            opener = gzip.open if log.endswith(".gz") else open
            with opener(log, "rt", encoding="utf-8", errors="replace") as stream:
                traces.append(fold(stream, log))
        except (OSError, EOFError) as exc:  # EOFError: a gzip cut short
            raise NotATrace(f"cannot read {log}: {exc}") from exc
    if not any(t.stats.records for t in traces):
        names = ", ".join(os.path.basename(t.file) for t in traces)
        raise NotATrace(f"{names}: not a torch structured trace (no trace record in it); "
                        f"give what `TORCH_TRACE=DIR python …` writes ({LOG_PREFIX}*.log)")
    paths = PathMap(root, maps or [])
    compare, notes = compared_ranks(traces)
    apart = len(traces) > 1
    reports: dict[str, FileReport] = {}
    extras: dict[str, list[dict[str, Any]]] = {}
    events: dict[int, list[RankEvent]] = {}
    for trace in traces:
        who = _who(trace, apart)
        notes += _read_notes(trace)
        if compare and trace.rank is not None:
            events[trace.rank] = [RankEvent(f"{what} {fn} {cid if what.startswith('recompile') else ''}".strip(), cid,
                                            what, guard) for cid, fn, what, guard in trace.events]
        for fn in trace.functions:
            local = paths.local(fn.path)
            where = local or fn.path
            report = reports.setdefault(where, FileReport(where))
            result = _target(fn, where, paths, who)
            report.targets.append(result)
            for finding in _findings(result, fn, where, who):
                reports.setdefault(finding.path, FileReport(finding.path)).findings.append(finding)
            extras.setdefault(where, []).append({
                "rank": trace.rank, "log": os.path.basename(trace.file),
                "compile_s": round(fn.compile_s, 3), "cache": dict(fn.cache),
                "compile_ids": list(fn.compile_ids), "frames": list(fn.frames), "recorded_path": fn.path,
                "mapped": local is not None, "failures": list(fn.failures),
                "lines": kernel_lines.lines_of(fn, paths),  # each line's kernels, when the run tracked provenance
                **settings_json(fn)})
    for report in reports.values():
        report.findings = _merged(report.findings)
    ordered = sorted(reports.values(), key=lambda r: (r.path not in paths.unmapped, r.path), reverse=True)
    return Imported(traces, ordered, extras, dict(paths.unmapped), rank_divergence(events), notes)


def ranks_json(imported: Imported) -> list[dict[str, Any]]:
    out = []
    for trace in imported.traces:
        fns = trace.functions
        out.append({
            "rank": trace.rank, "file": trace.file, "torch": trace.torch_version,
            "targets": len(fns), "compiles": sum(len(f.compile_ids) for f in fns),
            "graph_breaks": sum(len(f.graph_breaks) for f in fns), "recompiles": sum(len(f.recompiles) for f in fns),
            "compile_s": round(sum(f.compile_s for f in fns), 3),
            "cache": {k: sum(f.cache[k] for f in fns) for k in ("hits", "misses")},
            "records": trace.stats.records, "lines": trace.stats.lines, "truncated": trace.stats.truncated,
            "unknown_kinds": dict(trace.stats.unknown_kinds), "not_records": trace.stats.not_records,
            "wrong_shape": trace.stats.wrong_shape,
        })
    return out


def divergence_text(entry: RankParting) -> str:
    ranks = ", ".join(str(r) for r in entry.ranks)
    others = ", ".join(str(r) for r in entry.other_ranks)
    guard = f" (guard: {entry.guard})" if entry.guard else ""
    return (f"ranks part at compile {entry.step}: rank{'s' if len(entry.ranks) > 1 else ''} {ranks} "
            f"{entry.what}{guard}, rank{'s' if len(entry.other_ranks) > 1 else ''} {others} did not "
            f"({entry.steps_apart} compile event{'s' if entry.steps_apart != 1 else ''} apart) — {WHY_IT_MATTERS}")
