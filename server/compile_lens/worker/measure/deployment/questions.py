"""The deployment questions, per target, run with the benchmark: does it still export, which ops
does Inductor not generate code for, and the data of the compile report.

- **export** (`check_export`) — `torch.export.export(model, args)` non-strict first (the default
  since torch 2.9: it runs the Python code with fake tensors), then strict (Dynamo traces it, as
  `torch.compile(fullgraph=True)` would). The module is exported in eval mode, the deployment
  case. The result is `{"ok", "strict", "line", "path", "message"}`:
  - both export: `ok` and `strict` true, no line, no message;
  - only non-strict exports: `ok` true, `strict` false, and `line`/`path`/`message` say where and
    why strict export fails (worth knowing: AOTInductor and some exporters want strict);
  - neither: `ok` false, `strict` false, and the *first* failure (the non-strict one) at its
    innermost user line.
  The line comes from the innermost workspace frame of the traceback (non-strict runs the user's
  code for real), else from the file/line references torch writes into its message (strict: the
  "User Stack" part; a truncated `(…/file.py:9 in forward)` is matched against the target's file).
  The message is torch's own, shortened to its first paragraph: no traceback.
- **fallback ops** (`read_output_code`: the output code of the benchmark's warm forward compile,
  no compile of their own; `inspect_inductor`, `fallback_ops` without it) — the forward (eval, `no_grad`) compiled
  with Inductor in a *fresh* Inductor cache (`torch._inductor.utils.fresh_cache`: an empty cache
  folder and cleared in-memory caches, so nothing is reused from the benchmark), its output code
  captured with `torch._inductor.utils.run_and_get_code` (the wrapper Inductor writes for each
  graph). In each wrapper's `call()`:
  - `torch.ops.NS.OP.OVERLOAD(...)` / `aten.OP.OVERLOAD(...)` statements are **fallbacks**: ops
    Inductor has no lowering for, run through the ATen (eager) kernel, e.g. `aten.sort`, a custom
    op `mylib.op`. Inductor's own helpers (`torch.ops.inductor.*`) are not counted.
  - `extern_kernels.NAME(...)` (and `torch.ops.mkldnn/mkl/onednn/quantized`) are **library calls**
    (`kind: "extern"`): GEMMs and convolutions Inductor deliberately hands to BLAS/oneDNN/cuBLAS.
    They are not generated code but they are not "eager fallbacks" either: every compiled MLP has
    them. They are listed, labelled, and renderers show them apart from the fallbacks.
  - generated kernels (`cpp_fused_*`, `triton_*`) are counted, not listed.
  An op that makes Dynamo *break the graph* (e.g. `torch.nonzero`, whose output shape depends on
  the data, with `capture_dynamic_output_shape_ops` off) never reaches Inductor: it runs eagerly
  between two graphs and is reported as a graph break, not here.
  `inspect_inductor`'s compile also gives a **compile-time breakdown** (the report uses the cold
  children's frames instead, `Benchmark.compile_time`) from
  `torch._dynamo.utils.get_compilation_metrics()` (torch ≥ 2.4), summed over the graphs:
  Dynamo tracing = `entire_frame_compile_time_s - backend_compile_time_s`, AOTAutograd =
  `backend_compile_time_s - inductor_compile_time_s`, Inductor lowering/scheduling =
  `inductor_compile_time_s - code_gen_time_s`, code generation and C++/Triton compile =
  `code_gen_time_s`. In-process, after the benchmark: the one-time cost of a fresh process
  (imports, compile workers; most of a cold compile on a small model) is not in it — the report
  shows the benchmark's cold compile next to it.
- **batch sweep** (`report_data`) — eager vs compiled latency at 4–5 batch sizes around the
  example's (`torch.utils.benchmark.Timer.blocked_autorange`, eager and compiled alternating, a
  round length scaled to the budget). Dim 0 of every tensor input whose dim 0 matches the first
  input's is resized (rows repeated cyclically, so integer indices stay valid); inputs whose
  first tensor has fewer than 2 dims have no batch dimension and the sweep is skipped with a note.
  The compiled side is compiled once with the batch dimension marked dynamic
  (`torch._dynamo.maybe_mark_dynamic`), the way a model serving varying batch sizes runs; sizes
  are ≥ 2 (Dynamo specialises 0 and 1). Forward only, eval mode, `no_grad`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import re
import time
from typing import Any, Callable, Iterator, Optional

import torch

from ....torch_text.frames import is_user_file
from ... import dynamo
from ...loader import BuiltTarget, innermost_user_frame
from ..run import benchmark as bench
from ..run.estimates import estimate_s, report_budget  # noqa: F401 - named from here by jobs and tests
from ..run.isolated import isolated
from ..timing.verdict import MAX_ROUND_S, Stats, _timer, _timing
from ..workload.model import tensors_in

MESSAGE_CHARS = 400
SWEEP_POINTS = 5  # batch sizes measured (4 when the budget is under 4 s)
SWEEP_ROUNDS = 3  # alternating eager/compiled rounds per size
SWEEP_MAX_ELEMENTS = 1 << 26  # largest batch: at most this many input elements (256 MB of float32)
LIBRARY_NAMESPACES = {"mkldnn", "mkl", "onednn", "quantized", "_quantized"}
INTERNAL_NAMESPACES = {"inductor", "prims_debug"}  # Inductor's own helpers: not ops of the model

Progress = Callable[[str], None]


# --- the model, as deployed -------------------------------------------------------------------

class _Call(torch.nn.Module):
    """A plain function as a module: `torch.export` wants an `nn.Module`."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _eval_model(target: BuiltTarget, device: str) -> tuple[Any, tuple]:
    """A fresh model in eval mode on `device` (the user's own instance left alone) and its args."""
    obj = target.make()
    if isinstance(obj, torch.nn.Module):
        if target.spec.kind != "module":  # a module instance from the user's file: do not touch it
            obj = copy.deepcopy(obj)
        obj = obj.to(device).eval()
    return obj, bench.to_device(target.args, device)


# --- torch.export ------------------------------------------------------------------------------

_TB_FILE = re.compile(r'File "([^"]+)", line (\d+)')
_FX_FILE = re.compile(r"#\s*File:\s*(\S+?\.py):(\d+)\b")
_SHORT_FILE = re.compile(r"\(?(\S+?\.py):(\d+) in \w+")


def _location_in_text(text: str, root: str, own_path: str) -> Optional[tuple[str, int]]:
    """The innermost user `file:line` torch wrote into its message, if any."""
    found: Optional[tuple[str, int]] = None
    for m in _TB_FILE.finditer(text):  # traceback-style, outermost first: keep the last user one
        if is_user_file(m.group(1), root):
            found = (m.group(1), int(m.group(2)))
    if found:
        return found
    for pattern in (_FX_FILE, _SHORT_FILE):
        for m in pattern.finditer(text):
            path = m.group(1).lstrip("(")
            if is_user_file(path, root):
                found = (path, int(m.group(2)))
            elif not os.path.isabs(path) and own_path.endswith(path):  # "(mp/x/model.py:9 in f)"
                found = (own_path, int(m.group(2)))
        if found:
            return found
    return None


def short_message(exc: BaseException) -> str:
    """`Type: first paragraph of torch's message`, on one line, at most MESSAGE_CHARS."""
    lines: list[str] = []
    for row in str(exc).strip().splitlines():
        if not row.strip():
            if lines:
                break
            continue
        lines.append(row.strip())
    text = " ".join(lines)
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _failure(exc: BaseException, target: BuiltTarget, root: str) -> dict[str, Any]:
    where = innermost_user_frame(exc, root)
    if where is None:
        chained = exc.__cause__ or exc.__context__
        where = innermost_user_frame(chained, root) if chained is not None else None
    if where is None:
        where = _location_in_text(str(exc), root, os.path.abspath(target.namespace.get("__file__") or ""))
    path, line = where if where else (None, None)
    return {"path": path, "line": line, "message": short_message(exc)}


def _export_once(model: Any, args: tuple, strict: bool) -> None:
    quiet = io.StringIO()  # torch prints the partial graph of a failed export to stderr
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        torch.export.export(model, args, strict=strict)


def check_export(target: BuiltTarget, *, root: str, device: str = "cpu",
                 progress: Progress = lambda stage: None, strict: bool = True) -> dict[str, Any]:
    """Does the target export with `torch.export`? See the module docstring for the answer's shape.
    `strict=False`: the non-strict export alone (the budget had no room for strict's trace): a
    success then says `strict: None` (not checked)."""
    device, _ = bench.resolve_device(device)
    obj, args = _eval_model(target, device)
    model = obj if isinstance(obj, torch.nn.Module) else _Call(obj)
    failures: dict[bool, dict[str, Any]] = {}
    try:
        for strict_one in (False, True) if strict else (False,):
            progress(f"checking torch.export ({'strict' if strict_one else 'non-strict'})…")
            try:
                with torch.no_grad():
                    _export_once(model, args, strict_one)
            except Exception as exc:  # noqa: BLE001 - an export failure is the answer, not an error
                if bench.is_oom(exc):
                    raise
                failures[strict_one] = _failure(exc, target, root)
                exc.__traceback__ = None  # drop the frames (fake tensors, graphs) now
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()  # strict export ran Dynamo
    if False not in failures:
        strict_failure = failures.get(True)
        if strict_failure is None:
            return {"ok": True, "strict": True if strict else None, "line": None, "path": None, "message": None}
        return {"ok": True, "strict": False, **strict_failure,
                "message": "strict export fails: " + strict_failure["message"]}
    return {"ok": False, "strict": False, **failures[False]}


# --- what Inductor generated -------------------------------------------------------------------

_CALL_DEF = re.compile(r"^(\s*)def call\(")
_STATEMENT = r"^\s*(?:[\w\s,\[\]]+=\s*)?"
_TORCH_OP = re.compile(_STATEMENT + r"torch\.ops\.(\w+)\.(\w+)\.(\w+)\(")
_ATEN_ALIAS = re.compile(_STATEMENT + r"aten\.(\w+)\.(\w+)\(")
_EXTERN = re.compile(_STATEMENT + r"extern_kernels\.(\w+)\(")
_KERNEL = re.compile(r"^\s*((?:cpp|triton)_\w+?)(?:\.run)?\(")


def _call_bodies(code: str) -> Iterator[str]:
    """The lines of each `def call(...)` in an Inductor wrapper module (one per graph)."""
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        m = _CALL_DEF.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            yield lines[i]
            i += 1


def ops_in_code(codes: list[str]) -> tuple[list[dict[str, Any]], int]:
    """Fallback ops and library calls in Inductor wrapper code (counted), and the number of
    generated-kernel calls. Fallbacks first, then library calls; each by count, then name."""
    counts: dict[tuple[str, str], int] = {}
    kernels = 0
    for code in codes:
        for row in _call_bodies(code):
            if row.lstrip().startswith("#"):
                continue
            m = _TORCH_OP.match(row) or _ATEN_ALIAS.match(row)
            if m:
                ns, op = (m.group(1), m.group(2)) if m.re is _TORCH_OP else ("aten", m.group(1))
                if ns in INTERNAL_NAMESPACES:
                    continue
                kind = "extern" if ns in LIBRARY_NAMESPACES else "fallback"
                key = (f"{ns}.{op}", kind)
                counts[key] = counts.get(key, 0) + 1
                continue
            m = _EXTERN.match(row)
            if m:
                key = (f"extern_kernels.{m.group(1)}", "extern")
                counts[key] = counts.get(key, 0) + 1
                continue
            if _KERNEL.match(row):
                kernels += 1
    ops = [{"op": op, "count": n, "kind": kind} for (op, kind), n in counts.items()]
    ops.sort(key=lambda o: (o["kind"] != "fallback", -o["count"], o["op"]))
    return ops, kernels


def _metric(entry: Any, name: str) -> float:
    value = getattr(entry, name, None)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def compile_breakdown(entries: list[Any]) -> Optional[dict[str, Any]]:
    """Seconds per compile stage summed over the frame compiles in `entries` (CompilationMetrics)."""
    frames = [e for e in entries if getattr(e, "co_name", None) and getattr(e, "entire_frame_compile_time_s", None)]
    if not frames:
        return None
    total = sum(_metric(e, "entire_frame_compile_time_s") for e in frames)
    backend = sum(_metric(e, "backend_compile_time_s") for e in frames)
    inductor = sum(_metric(e, "inductor_compile_time_s") for e in frames)
    codegen = sum(_metric(e, "code_gen_time_s") for e in frames)
    return {
        "dynamo_s": max(0.0, total - backend),
        "aot_autograd_s": max(0.0, backend - inductor),
        "inductor_s": max(0.0, inductor - codegen),
        "codegen_s": codegen,
        "total_s": total,
        "graphs": len(frames),
        "method": "torch._dynamo.utils.get_compilation_metrics(): forward (eval, no_grad), "
                  "fresh Inductor cache, in the warm worker (no process start-up or imports)",
    }


@contextlib.contextmanager
def _fresh_inductor_cache() -> Iterator[None]:
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache", None)
    with (fresh() if fresh is not None else contextlib.nullcontext()):
        yield


def inspect_inductor(target: BuiltTarget, *, device: str = "cpu", mode: str = "default",
                     progress: Progress = lambda stage: None) -> dict[str, Any]:
    """Compile the forward with Inductor once and read its output: `{"fallback_ops", "kernels",
    "breakdown", "graphs"}`."""
    from torch._inductor.utils import run_and_get_code

    device, _ = bench.resolve_device(device)
    obj, args = _eval_model(target, device)
    dynamo.clear_metrics()
    try:
        with _fresh_inductor_cache(), torch.no_grad():
            compiled = torch.compile(obj, **bench.compile_kwargs(target, mode))
            _, codes = run_and_get_code(compiled, *args)  # resets Dynamo first
        entries = dynamo.metrics()  # [] on a torch without them: no breakdown
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()
    ops, kernels = ops_in_code(codes)
    return {"fallback_ops": ops, "kernels": kernels, "graphs": len(codes),
            "breakdown": compile_breakdown(entries)}


def read_output_code(codes: list[str]) -> dict[str, Any]:
    """`inspect_inductor`'s answer read from output code already captured (the benchmark's warm
    forward compile, `compile.per_frame.output_code`): no compile of its own."""
    ops, kernels = ops_in_code(codes)
    return {"fallback_ops": ops, "kernels": kernels, "graphs": len(codes)}


def fallback_ops(target: BuiltTarget, *, device: str = "cpu", mode: str = "default",
                 progress: Progress = lambda stage: None) -> list[dict[str, Any]]:
    """`[{"op": "aten.sort", "count": 1, "kind": "fallback"}, {"op": "extern_kernels.addmm", ...}]`."""
    return inspect_inductor(target, device=device, mode=mode, progress=progress)["fallback_ops"]


# --- the batch-size sweep ----------------------------------------------------------------------

def batch_size_of(args: tuple) -> Optional[int]:
    """Dim 0 of the first tensor input when it has at least 2 dims (else: no batch dimension)."""
    first = next((a for a in tensors_in(args)), None)
    if first is None or first.dim() < 2 or first.shape[0] < 1:
        return None
    return int(first.shape[0])


def sweep_sizes(batch: int, elements_per_row: int, points: int = SWEEP_POINTS) -> list[int]:
    """`points` sizes around `batch`: up to two halvings below it, doublings above, all ≥ 2 (Dynamo
    specialises 0 and 1) and within SWEEP_MAX_ELEMENTS input elements."""
    cap = max(2, SWEEP_MAX_ELEMENTS // max(1, elements_per_row))
    base = min(max(batch, 2), cap)
    candidates = sorted({c for c in (base // 4, base // 2, base, *(base << k for k in range(1, 8)))
                         if 2 <= c <= cap})
    i = candidates.index(base)
    window = candidates[max(0, i - 2):max(0, i - 2) + points]
    if len(window) < points:
        window = candidates[max(0, len(candidates) - points):]
    return window


def resize_batch(args: Any, batch: int, size: int) -> Any:
    """`args` with dim 0 of every tensor of batch `batch` resized to `size` (rows cycled)."""
    if isinstance(args, torch.Tensor):
        if args.dim() >= 1 and args.shape[0] == batch:
            index = torch.arange(size, device=args.device) % batch
            return args.detach().index_select(0, index)
        return args
    if isinstance(args, tuple):
        items = [resize_batch(a, batch, size) for a in args]
        return type(args)(*items) if hasattr(args, "_fields") else tuple(items)
    if isinstance(args, list):
        return [resize_batch(a, batch, size) for a in args]
    if isinstance(args, dict):
        return {k: resize_batch(v, batch, size) for k, v in args.items()}
    return args


def _mark_batch_dynamic(args: Any, batch: int) -> None:
    mark = getattr(torch._dynamo, "maybe_mark_dynamic", None)
    if mark is None:
        return
    for t in tensors_in(args):
        if t.dim() >= 1 and t.shape[0] == batch:
            with contextlib.suppress(Exception):
                mark(t, 0)


def batch_sweep(target: BuiltTarget, *, device: str, max_seconds: float, mode: str = "default",
                progress: Progress = lambda stage: None) -> tuple[Optional[dict[str, Any]], list[str]]:
    """Eager vs compiled forward latency across batch sizes, and notes."""
    device, _ = bench.resolve_device(device)
    batch = batch_size_of(target.args)
    if batch is None:
        return None, ["batch sweep: the first input has fewer than 2 dimensions, so there is no "
                      "batch dimension to vary; skipped"]
    started = time.perf_counter()
    obj, args = _eval_model(target, device)
    first = next(tensors_in(args))
    points_wanted = SWEEP_POINTS if max_seconds >= 4 else SWEEP_POINTS - 1
    sizes = sweep_sizes(batch, max(1, first.numel() // max(1, first.shape[0])), points_wanted)
    notes: list[str] = []
    dynamo.clear_metrics()
    torch._dynamo.reset()
    compiled_fn = torch.compile(obj, **bench.compile_kwargs(target, mode))
    points: list[dict[str, Any]] = []
    try:
        # Compile (once, batch dynamic) and warm up at every size before anything is timed.
        inputs: dict[int, Any] = {}
        for size in sizes:
            progress(f"batch sweep: compiling and warming up batch {size}…")
            inputs[size] = resize_batch(args, batch, size)
            if size == sizes[0]:
                _mark_batch_dynamic(inputs[size], size)
            with torch.no_grad():
                try:
                    for _ in range(2):
                        compiled_fn(*inputs[size])
                        obj(*inputs[size])
                except Exception as exc:  # noqa: BLE001 - a size the model does not accept
                    if bench.is_oom(exc):
                        notes.append(f"batch sweep: batch {size} ran out of memory; larger sizes skipped")
                        del inputs[size]
                        break
                    raise
        compiles = _recompiles()
        left = max(0.5, max_seconds - (time.perf_counter() - started))
        round_s = min(MAX_ROUND_S, max(0.02, left / (len(inputs) * 2 * SWEEP_ROUNDS * 1.3)))
        for size, sized in inputs.items():
            progress(f"batch sweep: timing batch {size}…")
            stats = {"eager": Stats(), "compiled": Stats()}
            fns = {"eager": obj, "compiled": compiled_fn}
            timers = {side: _timer(_no_grad_call(fns[side], sized), f"batch {size} {side}") for side in fns}
            for _ in range(SWEEP_ROUNDS):
                for side in ("eager", "compiled"):
                    stats[side].add(timers[side].blocked_autorange(min_run_time=round_s))
            t = _timing(stats["eager"], stats["compiled"])
            points.append({"batch": size, "eager_ms": t.eager_ms, "compiled_ms": t.compiled_ms,
                           "eager_iqr_ms": t.eager_iqr_ms, "compiled_iqr_ms": t.compiled_iqr_ms,
                           "speedup": t.speedup})
        after = _recompiles()
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()
    if after > compiles:
        notes.append(f"batch sweep: {after - compiles} recompile(s) while timing; those figures include compiling")
    if compiles:
        notes.append(f"batch sweep: {compiles} recompile(s) across the sizes: the batch dimension could not "
                     "stay dynamic (something specialises on it)")
    return {"dim": 0, "example_batch": batch, "sizes": [p["batch"] for p in points], "points": points,
            "compiles": 1 + compiles, "dynamic": compiles == 0, "device": device,
            "workload": "forward (eval, no_grad)", "seconds": time.perf_counter() - started}, notes


def _recompiles() -> int:
    """Frame compiles since the metrics were cleared that were recompiles (`compile_id` "F/R", R > 0);
    the frames after a graph break are first compiles of their own frame, not recompiles."""
    ids = [str(getattr(e, "compile_id", "") or "") for e in dynamo.frame_compiles(dynamo.metrics())]
    return sum(1 for i in ids if "/" in i and not i.endswith("/0"))


def _no_grad_call(fn: Callable[..., Any], args: tuple) -> Callable[[], Any]:
    def call() -> Any:
        with torch.no_grad():
            return fn(*args)
    return call


def report_data(target: BuiltTarget, *, device: str, max_seconds: float, mode: str = "default",
                inductor: Optional[dict[str, Any]] = None,
                progress: Progress = lambda stage: None,
                unmeasured: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The compile report's figures for one target: `{"batch_sweep", "kernels", "notes"}`. `inductor`
    is what `inspect_inductor` / `read_output_code` found (the kernel count). The compile time per
    stage is `Benchmark.compile_time` (the cold child's frames): no compile here for it. A batch
    sweep that fails is `unmeasured["batch sweep"]` ("not measurable: …", `isolated`)."""
    notes: list[str] = []
    sweep = None
    given = unmeasured
    unmeasured = {} if given is None else given
    with isolated("batch sweep", unmeasured) as part:  # e.g. a model that accepts only its example batch
        sweep, sweep_notes = batch_sweep(target, device=device, max_seconds=max_seconds, mode=mode,
                                         progress=progress)
        notes.extend(sweep_notes)
    if part.why and unmeasured is not given:
        notes.append(f"batch sweep {part.why}")  # a caller without a place for it: the report's notes
    return {"batch_sweep": sweep, "kernels": (inductor or {}).get("kernels"), "notes": notes}
