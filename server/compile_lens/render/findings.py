"""Results → findings: what to show, where, with which code. Pure; shared by the LSP and the CLI."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import os
import re
from typing import Iterable, Optional

from .. import codes
from ..comments import IGNORE_COMMENT
from ..positions import same_file
from ..protocol import (
    CompileSeconds,
    Finding,
    Frame,
    GraphBreak,
    Problem,
    Recompile,
    TargetResult,
    TargetSpec,
)

# Codes of problems that are not graph breaks (CL1xx are predictions, CL2xx recompiles).
CODE_TARGET, CODE_IMPORT, CODE_WORKER = codes.TARGET, codes.IMPORT, codes.WORKER
CODE_DIRECTIVE, CODE_ACCURACY = codes.DIRECTIVE, codes.ACCURACY
RECOMPILE_CODES = {"automatic-dynamic": codes.RECOMPILE_DYNAMIC, "specialization": codes.RECOMPILE_VALUE,
                   "limit": codes.RECOMPILE_LIMIT, "state": codes.RECOMPILE_STATE}
RECOMPILE_SEVERITY = {"automatic-dynamic": "information", "specialization": "warning", "limit": "error"}


def graph_break_findings(result: TargetResult, path: str) -> list[Finding]:
    """Each break at the line that broke; a break inside a helper in another file also at the call
    site in the target's file, so it shows where the model is."""
    found = []
    for br in result.graph_breaks:
        body = br.explanation or br.reason.splitlines()[0]
        message = f"{br.gb_type}: {body}" if br.gb_type and br.gb_type not in body else body
        if br.loop is not None:  # on the first line: the one a problems list or the CLI shows
            message += " — " + loop_text(br)
        if br.hints:
            message += "\n" + "\n".join(f"Hint: {h}" for h in br.hints)
        if len(br.stack) > 1:
            chain = " → ".join(f.name for f in br.stack)
            message += f"\nCall chain: {chain} (traced from `{result.name}`)"
        related = list(br.stack[:-1])
        calls = [] if same_file(br.path, path) else [f for f in br.stack if same_file(f.path, path)]
        data = {"kind": "graph_break", "gb_id": br.gb_id, "gb_type": br.gb_type, "target": result.name,
                "function": br.stack[-1].name if br.stack else None,
                # its call-site copy is the same break (counted once); a helper or library function
                # broken from two lines of this file broke twice
                "break_at": [br.path, br.line] + ([calls[-1].line] if calls else []),
                # user frames above the line's own: 0 where it is in the function torch compiles (a
                # reordered print or log runs there; inlined deeper, torch 2.13 drops it); None: unknown
                "depth": len(br.stack) - 1 if br.stack else None}
        if br.loop is not None:  # GB7000: torch skips the frame the loop is in; the loop's header
            loop = br.loop
            related.append(Frame(loop.path, loop.line, loop.function,
                                 note=f"{loop.gb_id or 'graph break in loop'}: the loop this break is in — torch "
                                      f"skips the whole `{loop.function}`, which runs eagerly"))
            data.update(loop_gb_id=loop.gb_id, loop_line=loop.line)
        found.append(Finding(
            path=br.path, line=br.line, column=br.column, end_line=br.end_line, end_column=br.end_column,
            severity="warning", code=br.gb_id or codes.GRAPH_BREAK, message=message, url=br.url,
            related=related, data=data,
        ))
        if calls:
            site = calls[-1]
            inner = br.stack[-1]
            found.append(dataclasses.replace(
                found[-1], path=path, line=site.line, column=1, end_line=site.line, end_column=1,
                message=f"graph break inside `{inner.name}` ({os.path.basename(inner.path)}:{inner.line}): {message}",
                related=[f for f in br.stack if f is not site],
                data={**found[-1].data, "call_site": True, "depth": br.stack.index(site)}))
    return found


def loop_text(br: GraphBreak) -> str:
    """What a break inside a loop costs: torch skips the frame the loop is in (GB7000)."""
    loop = br.loop
    where = f"line {loop.line}" if same_file(loop.path, br.path) else f"{os.path.basename(loop.path)}:{loop.line}"
    return f"inside the loop at {where}: torch skips the whole `{loop.function}`, which runs eagerly"


def break_count_text(breaks: int, graph_count: Optional[int]) -> str:
    """The one graph-break count every surface shows: distinct breaks at distinct locations (a break
    inside a helper is one break, though also shown at its call site), with torch's own graph count
    beside it (a frame torch skips entirely compiles no graph)."""
    text = f"{breaks} graph break{'s' if breaks != 1 else ''}"
    if graph_count is not None and graph_count >= 0:
        text += f" (torch: {graph_count} graph{'s' if graph_count != 1 else ''})"
    return text


def is_break(finding: Finding) -> bool:
    """A traced graph break (not its call-site copy, not a prediction)."""
    return (is_break_finding(finding) and not finding.data.get("call_site") and not finding.predicted)


def is_break_finding(finding: Finding) -> bool:
    return finding.data.get("kind") == "graph_break" or codes.is_graph_break(finding.code)


def _is_state_switch(rc: Recompile) -> bool:
    """Mode switches (train/eval, requires_grad, autocast, grad mode) compile once per state, not per value."""
    text = f"{rc.reason} {rc.changed}"
    return any(k in text for k in ("GLOBAL_STATE", "requires_grad", ".training", "grad_mode", "autocast"))


_WORST = {"automatic-dynamic": 0, "specialization": 1, "limit": 2}


def recompile_findings(result: TargetResult, path: str) -> list[Finding]:
    """One finding per variation and place (the target, or the user line a guard names): torch
    logs one record per compiled frame (a graph break makes several, a library adds its own), and
    they are one cost to the user. The input named is the one the target's own frame guards; the
    kind is the worst any frame showed; the other frames' guards are summarised.
    The compile-time figure is said once per target, on its first recompile finding."""
    groups: dict[tuple, list[Recompile]] = {}
    for rc in result.recompiles:
        where = rc.path if rc.path and rc.line else path
        state = rc.kind != "limit" and _is_state_switch(rc)
        groups.setdefault((where, rc.line or result.line, rc.variation, state), []).append(rc)
    found = []
    compile_s = result.benchmark.compile_s if result.benchmark else None
    for (where, line, variation, state), records in groups.items():
        own = [r for r in records if r.frame is not None and same_file(r.frame.path, path)]
        rc = (own or records)[0]
        kind = max((r.kind for r in records), key=lambda k: _WORST.get(k, 1))
        if kind != rc.kind:  # the worst frame speaks for the group
            rc = next(r for r in records if r.kind == kind)
        code = RECOMPILE_CODES["state"] if state else RECOMPILE_CODES.get(kind, codes.RECOMPILE_VALUE)
        severity = "information" if state else RECOMPILE_SEVERITY.get(kind, "warning")
        message = recompile_message(rc, state, None if found else compile_s)
        frames = {(r.frame.path, r.frame.line, r.frame.name) if r.frame else id(r) for r in records}
        if len(frames) > 1:
            other = next((r for r in records if r.reason != rc.reason), None)
            message += f" ({len(frames)} compiled frames recompile" + (
                f"; first guard in `{other.frame.name}` ({os.path.basename(other.frame.path)}:{other.frame.line}): "
                f"{other.reason}" if other is not None and other.frame is not None else "") + ")"
        found.append(Finding(
            path=where, line=line, column=1, end_line=line, end_column=1, severity=severity, code=code,
            message=message,
            data={"kind": "recompile", "recompile_kind": kind, "changed": rc.changed,
                  "target": result.name, "variation": variation, "count": len(records),
                  "frames": len(frames),
                  **({"anchor": "keyword"} if line == result.line else {})},
        ))
    return found


def recompile_message(rc: Recompile, state_switch: bool = False, compile_s: Optional[CompileSeconds] = None) -> str:
    # The sweep compiles with backend "eager" (guards only): its compile times are not what a
    # recompile costs with Inductor. Only the measured Inductor compile times are quoted, as what
    # they are: a recompile in a warm process usually costs less than the first, cold compile.
    cold, warm = (compile_s.cold, compile_s.warm) if compile_s else (None, None)
    cost = ""
    if cold:
        cost = f" (the first compile with Inductor took {cold:.1f} s cold" + (
            f", {warm:.1f} s with warm caches)" if warm else ")")
    # torch's own name for the value (`___stack0`): say it in the user's terms, then torch's guard
    if rc.meaning and rc.changed.startswith("___") and not state_switch and rc.kind in ("specialization", "limit"):
        if rc.kind == "limit":
            return (f"Hits the recompile limit ({rc.variation}): {rc.meaning} — torch's guard: {rc.reason} — "
                    "later calls silently run eager")
        return f"Recompiles for every new value ({rc.variation}): {rc.meaning} — torch's guard: {rc.reason} — each costs a compile{cost}"
    if state_switch:
        return (f"Recompiles once for {rc.variation}: {rc.reason} — one more compile{cost}, then both versions "
                "are kept; expected if you switch this at run time")
    if rc.kind == "automatic-dynamic":
        return f"Recompiles when {_what_changed(rc)} changes ({rc.variation}): {rc.reason} — one extra compile{cost}, then dynamic"
    if rc.kind == "limit":
        return f"Hits the recompile limit ({rc.variation}): {rc.reason} — later calls silently run eager"
    return f"Recompiles for every new value of {_what_changed(rc)} ({rc.variation}): {rc.reason} — each costs a compile{cost}"


def _what_changed(rc: Recompile) -> str:
    """A "batch N" variation resizes every input of that batch (`worker.variations`): the guard
    names only the first input it checked, but what changed is the batch of them all."""
    if rc.variation.startswith("batch "):
        return f"the batch size of the inputs (first guard to fail: `{rc.changed}`)"
    return f"`{rc.changed}`"


def problem_finding(problem: Problem, path: str, line: int, code: str, severity: str = "warning") -> Finding:
    message = problem.message + (f" — {problem.hint}" if problem.hint else "")
    where = problem.path if problem.path and problem.line else path
    at = problem.line if problem.path and problem.line else line
    return Finding(where, at, 1, at, 1, severity, code, message,
                   data={"kind": "problem", "problem": problem.kind})


def target_findings(result: TargetResult, path: str) -> list[Finding]:
    """Everything a finished target shows, in this file and in the helper files it called."""
    if result.status == "skipped":  # a class that was not an nn.Module after all
        recipe = result.inputs
        if recipe is not None and recipe.source == "directive" and recipe.line:
            return [Finding(path, recipe.line, 1, recipe.line, 1, "warning", CODE_DIRECTIVE,
                            f"this compile-lens directive attaches to nothing: `{result.name}` is not an nn.Module "
                            "subclass (checked after import)", data={"kind": "directive", "target": result.name})]
        return []
    if result.status == "error" and result.error is not None and result.error.kind == "guess":
        # Compile Lens's own guess did not fit: one note on the class, never a warning on user code
        recipe = result.inputs
        return [Finding(path, result.line, 1, result.line, 1, "information", CODE_TARGET,
                        f"`{result.name}`: {result.error.message}",
                        data={"kind": "guessed_inputs", "target": result.name,
                              "text": recipe.text if recipe is not None else "", "anchor": "keyword"})]
    found = graph_break_findings(result, path) + recompile_findings(result, path)
    if result.benchmark is not None:
        drift = result.benchmark.accuracy_drift
        where = [Frame(drift.path, drift.line, drift.module or result.name, note=next(
            (n.removeprefix("accuracy drift:").strip() for n in result.benchmark.notes if n.startswith("accuracy drift:")),
            "where the difference starts"))] if drift is not None and drift.path and drift.line else []
        for note in result.benchmark.notes:
            if note.startswith("accuracy:"):  # compiled output differs beyond the dtype's tolerance
                found.append(Finding(path, result.line, 1, result.line, 1, "warning", CODE_ACCURACY,
                                     f"`{result.name}` compiled vs eager: {note.removeprefix('accuracy:').strip()}",
                                     related=list(where), data={"kind": "accuracy", "target": result.name}))
    if result.status == "error" and result.error is not None:
        err = result.error
        code = CODE_WORKER if err.kind in ("crash", "timeout", "memory", "exit") else CODE_TARGET
        severity = "error" if code == CODE_WORKER else ("information" if err.kind == "inputs" else "warning")
        # on the class/def line, always; a second copy at the user line in this file it came from
        found.append(problem_finding(Problem(err.kind, f"`{result.name}`: {err.message}", None, None, err.hint),
                                     path, result.line, code, severity))
        if err.path and err.line and same_file(err.path, path) and err.line != result.line:
            found.append(problem_finding(err, path, err.line, code, severity))
    else:
        found += phase_findings(result, path)
    return found


def phase_findings(result: TargetResult, path: str) -> list[Finding]:
    """A recompile check or a measurement that failed, or was not run, says so on its target; the
    trace's findings stand beside it (each phase is its own result)."""
    from .phases import VERB, WORKER_KINDS, phase_states

    found = []
    states = [s for s in phase_states(result) if s.name != "trace"]
    failed = [s for s in states if s.status == "failed" and s.error is not None]
    for state in failed:
        if state.error is not None and state.error.kind == "internal":
            continue  # a bug of Compile Lens's own: a report in the log (jobs.analysis), not a warning on user code
        err = state.error
        assert err is not None
        code = CODE_WORKER if err.kind in WORKER_KINDS else CODE_TARGET
        severity = "error" if code == CODE_WORKER else "warning"
        message = f"`{result.name}`: {VERB[state.name]} failed: {err.message}"
        later = [s for s in states if s.status == "not-run" and s.error is not None
                 and PHASE_ORDER[s.name] > PHASE_ORDER[state.name]]
        if later:
            message += " (so " + " and ".join(LATER[s.name] for s in later) + ")"
        finding = problem_finding(Problem(err.kind, message, None, None, err.hint), path, result.line, code, severity)
        finding.data.update(phase=state.name, target=result.name)
        found.append(finding)
        if err.path and err.line and same_file(err.path, path) and err.line != result.line:
            found.append(problem_finding(err, path, err.line, code, severity))
    if not failed:  # not run for a reason of its own (the file could not be imported again, ...)
        for state in states:
            if state.status == "not-run" and state.error is not None:
                finding = problem_finding(Problem(state.error.kind, f"`{result.name}`: {state.words}", None, None,
                                                  state.error.hint), path, result.line, CODE_TARGET, "information")
                finding.data.update(phase=state.name, target=result.name)
                found.append(finding)
    return found


PHASE_ORDER = {"trace": 0, "sweep": 1, "measure": 2}
LATER = {"sweep": "its recompiles were not checked", "measure": "it was not measured"}


def static_target_findings(spec: TargetSpec, path: str, *, runs: bool = True) -> list[Finding]:
    """A target that cannot run as written (no inputs): said once on its line, without torch.

    `runs`: code runs here (a trusted workspace); else a guess left to the worker is never made,
    and the reason the source alone could not tell is said instead."""
    recipe = spec.inputs
    if not runs and recipe is not None and recipe.after_import and not recipe.text and recipe.note \
            and not spec.maybe_module:
        return [Finding(path, spec.line, spec.column, spec.line, spec.end_column, "information", CODE_TARGET,
                        recipe.note, data={"kind": "needs_inputs", "target": spec.name})]
    if spec.inputs is not None or not spec.problem:
        return []
    return [Finding(path, spec.line, spec.column, spec.line, spec.end_column, "information", CODE_TARGET,
                    spec.problem, data={"kind": "needs_inputs", "target": spec.name})]


def whole_line(finding: Finding, lines: list[str]) -> Finding:
    """Findings made without columns (column 1 to 1) cover their line's text — or, anchored to the
    `class`/`def` keyword, just that word, so hovering the target's name shows its card unclouded."""
    if finding.column == finding.end_column == 1 and 0 < finding.line <= len(lines):
        text = lines[finding.line - 1]
        finding.column = len(text) - len(text.lstrip()) + 1
        finding.end_column = max(len(text.rstrip()) + 1, finding.column + 1)
        if finding.data.get("anchor") == "keyword":
            word = re.match(r"\s*(@?\w+)", text)
            if word:
                finding.end_column = word.end(1) + 1
    return finding


def suppressed(finding: Finding, lines: list[str]) -> bool:
    """`# compile-lens: ignore` or `ignore[GB0124,CL101]` at the end of the finding's line."""
    if not 0 < finding.line <= len(lines):
        return False
    match = IGNORE_COMMENT.search(lines[finding.line - 1])
    if not match:
        return False
    codes = match["codes"]
    return codes is None or finding.code.upper() in {c.strip().upper() for c in codes.split(",")}


def merge_with_lints(lints: Iterable[Finding], traced: list[Finding], covered: list[tuple[int, int]]) -> list[Finding]:
    """A trace confirms or clears a prediction: drop lints on lines a trace break or a traced target covers."""
    if not traced and not covered:  # nothing traced yet (every keystroke of an unsaved file)
        return list(lints)
    real = functools.lru_cache(maxsize=None)(os.path.realpath)  # one file's lints: one path, once
    break_lines = {(real(f.path), f.line) for f in traced if codes.is_graph_break(f.code)}
    starts, ends = _spans(covered)
    kept = []
    for lint in lints:
        if lint.predicted:
            at = bisect.bisect_right(starts, lint.line) - 1
            if (at >= 0 and lint.line <= ends[at]) or (real(lint.path), lint.line) in break_lines:
                continue
        kept.append(lint)
    return kept + traced


def _spans(covered: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Line spans joined where they overlap, as sorted starts and their ends (for bisect)."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(covered):
        if ends and a <= ends[-1] + 1:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends
