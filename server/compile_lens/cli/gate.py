"""`check --fail-on KINDS`: which kinds of finding fail the build, in place of the level rule.

Most kinds are findings, named by their codes; two are not findings today and are read from the
target's results instead: `slower` is the measurement's verdict (compiled measured slower, with
a conclusive timing) and `export` the deployment check (torch.export failed). A finding the
baseline holds never fails; `slower` and `export` are no findings, so no baseline holds them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .. import codes
from ..protocol import FileReport, Finding, TargetResult
from ..render.cli_output import report_problems


@dataclass(frozen=True)
class Kind:
    name: str
    what: str  # said in --help and docs/cli.md
    phase: Optional[str] = None  # the check it needs: "recompiles" or "benchmark" (None: the trace)
    finding: Optional[Callable[[Finding], bool]] = None
    target: Optional[Callable[[TargetResult], bool]] = None


def _codes(*wanted: str) -> Callable[[Finding], bool]:
    return lambda f: f.code in wanted


def _slower(t: TargetResult) -> bool:
    b = t.benchmark
    if b is None:
        return False
    timing = b.train_step or b.forward  # the verdict's own timing
    # conclusive: the direction is certain (the interval wholly below 1, on a quiet machine); a timing
    # without an interval (one round) is never conclusive, whatever its flag says
    return timing.speedup_ci is not None and timing.conclusive and timing.speedup < 1.0


def _export_failed(t: TargetResult) -> bool:
    return t.export is not None and t.export.ok is False


_ANALYSIS = (codes.IMPORT, codes.WORKER)

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("graph-break", "a graph break torch took (GBxxxx, GB7000, graph-break)",
         finding=lambda f: codes.is_graph_break(f.code) and not f.predicted),
    Kind("predicted-break", "a break predicted from the source (CL101-CL107)", finding=_codes(*codes.PREDICTED_BREAKS)),
    Kind("compile-hazard", "torch.compile misuse found in the source (CL201-CL203)",
         finding=_codes(codes.COMPILE_REPEATED, codes.COMPILE_FRESH, codes.VARYING_SCALAR)),
    Kind("recompile", "any measured recompile (CL210-CL213)", "recompiles",
         finding=_codes(codes.RECOMPILE_DYNAMIC, codes.RECOMPILE_VALUE, codes.RECOMPILE_LIMIT, codes.RECOMPILE_STATE)),
    Kind("recompile-dynamic", "recompiles once on a size change, then is dynamic (CL210)", "recompiles",
         finding=_codes(codes.RECOMPILE_DYNAMIC)),
    Kind("recompile-every-value", "recompiles for every new value of an input (CL211)", "recompiles",
         finding=_codes(codes.RECOMPILE_VALUE)),
    Kind("recompile-limit", "hits the recompile limit (CL212)", "recompiles", finding=_codes(codes.RECOMPILE_LIMIT)),
    Kind("recompile-state", "recompiles once per mode switch (CL213)", "recompiles",
         finding=_codes(codes.RECOMPILE_STATE)),
    Kind("accuracy", "compiled outputs differ from eager (CL301)", "benchmark", finding=_codes(codes.ACCURACY)),
    Kind("slower", "the measurement's verdict: compiled is slower, conclusively", "benchmark", target=_slower),
    Kind("export", "torch.export of the target fails (the deployment check)", "benchmark", target=_export_failed),
    Kind("analysis-error", "a file or target that could not be analysed (CL002, CL003, a crash)",
         finding=_codes(*_ANALYSIS)),
)}


def parse(text: str) -> list[str]:
    """`graph-break,recompile-limit` → the kinds' names; ValueError names the unknown ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in KINDS]
    if unknown or not names:
        raise ValueError(f"unknown --fail-on kind{'s' if len(unknown) > 1 else ''} {', '.join(unknown) or '(none)'};"
                         f" the kinds are {', '.join(KINDS)}")
    return list(dict.fromkeys(names))


def not_checked(names: list[str], ran: dict[str, bool]) -> list[str]:
    """The kinds whose check did not run (`ran`: {"recompiles": False, ...}): they cannot fail."""
    return [n for n in names if KINDS[n].phase is not None and not ran.get(KINDS[n].phase, True)]


def failures(reports: list[FileReport], names: list[str]) -> dict[str, list[str]]:
    """For each kind that fails the build, where: `path:line CODE` of findings, or target names."""
    found: dict[str, list[str]] = {}
    for name in names:
        kind = KINDS[name]
        for report in reports:
            if kind.finding is not None:
                found.setdefault(name, []).extend(
                    f"{f.path}:{f.line} {f.code}" for f in report.findings
                    if not f.data.get("baseline") and kind.finding(f))
            if kind.target is not None:
                found.setdefault(name, []).extend(t.name for t in report.targets if kind.target(t))
            if name == "analysis-error":
                found.setdefault(name, []).extend(f"{path}:{line} {p.kind}" for path, line, p in report_problems(report))
    return {name: where for name, where in found.items() if where}
