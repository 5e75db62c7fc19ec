"""Dynamic or static: where the recompile sweep found size recompiles, `dynamic=True` against the
default, over the sweep's own shapes (compile time and compiles, fresh processes) and at the user's
shapes (steady forward, and train step where the measurement timed one, paired rounds). Where the
dynamic kernels are slower, the static side is what is offered: `dynamic=False`, each shape its own
specialised graph — the default's automatic dynamic would compile those dynamic kernels after the
first size change.

When the user's code itself specialised a dimension the sweep varied (`for t in range(T)`,
`h + self.pos`), `dynamic=True` cannot keep it dynamic: torch's `symbolic_shape_specialization`
record (structured trace, `fx/experimental/symbolic_shapes.py`: symbol, sources, value, reason,
user_stack), read while the dynamic side compiles, names the line; the lever's `why` says it."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from typing import Any, Callable, Iterator, Optional

from ...protocol import Lever, Recompile
from ..loader import BuiltTarget
from .judge import compile_change, figures_words, forward_faster, forward_slower, seconds_pair
from .sides import compile_side
from .steady import timed
from .variants import shape_label_ok

_SIZE = re.compile(r"tensor '(?:L\[')?([^']+?)(?:'\])?' size mismatch at index (\d+)")
_SOURCE = re.compile(r"^L\['([^']+)'\]\.size\(\)\[(\d+)\]$")  # torch's source of a dimension: L['x'].size()[1]


def size_shapes(recompiles: list[Recompile]) -> list[str]:
    """The sweep's variations that recompiled on a size ("batch 16", "sequence 7")."""
    return list(dict.fromkeys(r.variation for r in recompiles
                              if shape_label_ok(r.variation) and "size mismatch" in (r.reason or "")))


def varied_dims(recompiles: list[Recompile]) -> set[tuple[str, int]]:
    """(input, dimension) pairs whose size changes recompiled: ("x", 1)."""
    return {(m.group(1), int(m.group(2))) for r in recompiles for m in [_SIZE.search(r.reason or "")] if m}


class Specialisations(logging.Handler):
    """torch's `symbolic_shape_specialization` records while a compile runs (`trace_log` handler, as
    `measure/lines/provenance.catching` reads Inductor's): each dimension the traced code made a constant."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = (getattr(record, "metadata", None) or {}).get("symbolic_shape_specialization")
        if isinstance(found, dict):
            self.records.append(found)

    def lines(self, dims: set[tuple[str, int]]) -> list[dict[str, Any]]:
        """For each varied dimension specialised: {"input", "dim", "value", "path", "line", "code"}
        of the innermost frame of the user's code that did it (files are interned ids: torch's table)."""
        try:
            from torch._logging import structured

            files = {v: k for k, v in structured.INTERN_TABLE.items()}
        except ImportError:
            files = {}
        found = []
        for rec in self.records:
            for source in rec.get("sources") or []:
                m = _SOURCE.match(source)
                if not m or (m.group(1), int(m.group(2))) not in dims:
                    continue
                frame = _user_frame(rec.get("user_stack") or [], files)
                if frame is None:
                    continue
                found.append({"input": m.group(1), "dim": int(m.group(2)), "value": rec.get("value"),
                              "path": frame[0], "line": frame[1], "code": frame[2]})
        unique = {(f["input"], f["dim"], f["path"], f["line"]): f for f in found}
        return list(unique.values())

    @contextlib.contextmanager
    def listening(self) -> Iterator[Specialisations]:
        """While inside, torch's specialisation records are kept (none on a torch without `trace_log`)."""
        from ..dynamo import structured_trace

        with structured_trace(self):
            yield self


def _user_frame(stack: list[dict[str, Any]], files: dict[int, str]) -> Optional[tuple[str, int, str]]:
    """The innermost frame outside torch and installed packages: the user's line."""
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    for frame in reversed(stack):
        path = files.get(frame.get("filename"), frame.get("filename"))
        if isinstance(path, str) and not path.startswith(torch_dir) and "site-packages" not in path:
            code = re.sub(r"\s+#[^'\"]*$", "", str(frame.get("loc") or "")).strip()  # the line, not its comment
            return path, int(frame.get("line") or 0), code
    return None


def specialised_words(found: list[dict[str, Any]], root: str) -> str:
    """`your code made dimension 1 of `x` a constant (9) at model.py:13 (`for t in range(1, T):`), which
    dynamic=True cannot undo`."""
    def one(f: dict[str, Any]) -> str:
        where = os.path.relpath(f["path"], root) if root and f["path"].startswith(os.path.abspath(root)) else f["path"]
        code = f" (`{f['code']}`)" if f["code"] else ""
        return f"dimension {f['dim']} of `{f['input']}` a constant ({f['value']}) at {where}:{f['line']}{code}"
    return "your code made " + "; ".join(one(f) for f in found) + ", which dynamic=True cannot undo"


def measure(target: BuiltTarget, shapes: list[str], *, path: str, root: str, device: str, mode: str,
            max_seconds: float, progress: Callable[..., None], steady_s: float, train: bool = False,
            recompiles: Optional[list[Recompile]] = None) -> Lever:
    sides = {}
    for name, variant in (("before", "default"), ("after", "dynamic")):
        progress(f"levers: compiling {variant} over {len(shapes) + 1} shapes in a fresh process…")
        sides[name] = compile_side(target, variant, path=path, root=root, device=device, mode=mode,
                                   max_seconds=max_seconds, progress=progress, shapes=shapes)
    caught = Specialisations()  # read while the dynamic side compiles at the user's shapes
    forward, step = timed(target, "default", "dynamic", device=device, mode=mode, budget_s=steady_s, train=train,
                          compiling=caught.listening())
    specialised = caught.lines(varied_dims(recompiles or []))
    before, after = sides["before"], sides["after"]
    lever = Lever("dynamic", "torch.compile(..., dynamic=True)", "no change",
                  compile_s={"before": round(before["cold_s"], 2), "after": round(after["cold_s"], 2),
                             "cpu_before": before.get("cold_cpu_s"), "cpu_after": after.get("cold_cpu_s")},
                  warm_compile_s={"before": round(before["warm_s"], 2), "after": round(after["warm_s"], 2)},
                  forward=forward, train_step=step,
                  recompiles={"before": before["compiles"], "after": after["compiles"]},
                  data={"shapes": shapes, "dims": sorted([list(d) for d in varied_dims(recompiles or [])]),
                        **({"specialized": specialised} if specialised else {})})
    over = f"compiles over {len(shapes) + 1} shapes {seconds_pair(lever.compile_s)} " \
           f"({before['compiles']} → {after['compiles']} compiles)"
    ratio = compile_change(before, after, before.get("busy") or after.get("busy"))
    slower = forward_slower(forward) or forward_slower(step)
    figures = figures_words(over, forward, step)
    if slower:  # the dynamic kernels are slower: the static side is the lever
        lever.lever, lever.change = "static", "torch.compile(..., dynamic=False)"
        lever.verdict = "better" if ratio is None or ratio >= 1.0 else "inconclusive"
        kernels = figures_words("", forward, step)
        lever.why = f"dynamic kernels at your shapes: {kernels}; {over}"
        if lever.verdict == "better":
            lever.action = f"Keep shapes static (dynamic=False): dynamic kernels measured {kernels}"
    elif ratio is None:
        lever.verdict, lever.why = "inconclusive", f"{figures}; the compile clocks disagree or the machine was busy"
    elif ratio <= 0.8 or after["compiles"] < before["compiles"]:
        lever.verdict, lever.why = "better", figures
        lever.action = f"Mark shapes dynamic (dynamic=True): {figures}"
    elif ratio >= 1.25 and not (forward_faster(forward) or forward_faster(step)):
        lever.verdict, lever.why = "worse", figures
    else:
        lever.why = figures
    if specialised:
        lever.why += "; " + specialised_words(specialised, root)
    return lever
