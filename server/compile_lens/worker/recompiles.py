"""Recompile sweeps: call the compiled target with input variations and read torch's own log.

The target is compiled with `backend="eager"` (guards do not depend on the backend), called with
its base inputs, then with each variation. What recompiled, and why, comes from torch itself: the
`torch._dynamo.guards.__recompiles` log records (one "Recompiling function" entry per recompile),
with `get_compilation_metrics()` for the compile time and the recompile-limit failure.

One `Recompile` per "Recompiling function" log entry, never merged or dropped for declared
variants, so what is reported for them equals torch's own log in number and reason. An entry lists
one guard failure per cached entry of that frame, newest first. `reason` is one of those lines,
verbatim except for the "0/1: " compile-id prefix and the trailing "  # source  # file:line" comment
torch appends (the line number is read from it into `line`):
- declared variants, recorded shapes and the base call: torch's first line (the same one
  `get_compilation_metrics()` gives as `recompile_reason`);
- automatic variations: the failure against the entry compiled from the base inputs, which names
  the one thing the variation changed (the newest entry may fail on an unrelated, earlier change).
A recompile refused by the limit gets kind "limit" and its reason is followed by torch's warning:
"steps == 9 — torch._dynamo hit config.recompile_limit (8): after 8 compiles it runs eager".

Classification, by observing the sweep, per (frame, changed input, kind of guard[, dimension]), a
frame being a code object (file, first line, name), never a bare function name:
- "limit": the recompile limit was hit on this entry (warning record, or metrics fail_type/reason);
- "specialization": the same input recompiled twice or more for different values, or once for a
  guard that every new value fails (dtype, requires_grad, rank, device, strings, bools, module
  flags such as `training`, global state such as autocast and grad mode, object identity, lengths);
- "automatic-dynamic": one recompile for a size (or an int/float value), after which Dynamo makes
  it dynamic; sizes 0 and 1, which Dynamo always specialises, do not count towards the repeats.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..protocol import Frame, Problem, Recompile
from .loader import BuiltTarget, TargetError, describe, user_line

log = logging.getLogger(__name__)

_DYNAMO_LOGGER = "torch._dynamo"
_TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__))
_LIMIT_RE = re.compile(r"hit config\.(\w+) \((\d+)\)")
_LIMIT_FAIL_RE = re.compile(r"recompile[_ ]limit|cache[_ ]size[_ ]limit|gb0039", re.IGNORECASE)
_ID_RE = re.compile(r"^(\d+/\d+):\s?(.*)$", re.DOTALL)
_FILE_RE = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')
_COMMENT_LOC_RE = re.compile(r"\s#\s.*?\s{2}#\s(\S+):(\d+) in \S+")
_HEADER_RE = re.compile(r"^Recompiling function (\S+) in (.+):(\d+)")
_SIZE_RE = re.compile(r"size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
_STRIDE_RE = re.compile(r"stride mismatch at index (\d+)")
_SIZE_EXPR_RE = re.compile(r"\.(?:size|stride)\(\)\[(\d+)\]")
_CHAIN_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]]*\])*")
_NOT_NAMES = {"True", "False", "None", "and", "or", "not", "is", "in", "if", "else"}


# --- what torch logged ----------------------------------------------------------------------

@dataclass
class _Failure:
    """One line of a "triggered by the following guard failure(s)" list."""

    entry: str | None  # the cache entry that failed, "0/1" (None on torch without ids)
    text: str  # the guard, without the compile-id prefix and the source comment
    raw: str  # the line as torch wrote it (without the id prefix)
    stack: list[tuple[str, int]] = field(default_factory=list)  # "User stack trace:" frames


@dataclass
class _Entry:
    """One "Recompiling function ..." record, tagged with the variation that caused it."""

    frame: str
    frame_file: str
    frame_line: int
    failures: list[_Failure]
    compile_id: str | None
    variation: str = ""
    relevant: int = 0  # index into failures: the line reported as the reason
    limit: str | None = None  # torch's limit warning headline when this entry hit it
    compile_s: float | None = None


def _parse_entry(message: str) -> _Entry | None:
    """One log record as an entry; any "Recompiling function" record gives one, whatever its form."""
    lines = message.splitlines()
    if not lines or not lines[0].lstrip().startswith("Recompiling function"):
        return None
    head = _HEADER_RE.match(lines[0].strip())
    failures: list[_Failure] = []
    in_stack = False
    for raw_line in lines[1:]:
        text = raw_line.strip()
        if not text or text.startswith("triggered by the following guard failure"):
            continue
        body = raw_line.lstrip()
        body = body[2:] if body.startswith("- ") else body
        if re.match(r"^guard \d+ failures:$", body.strip()):  # recompiles_verbose on older torch
            in_stack = False
            continue
        ident = _ID_RE.match(body.strip())
        if ident:
            failures.append(_new_failure(ident.group(1), ident.group(2)))
            in_stack = False
            continue
        if body.strip() == "User stack trace:":
            in_stack = True
            continue
        frame = _FILE_RE.match(body)
        if in_stack:
            if frame and failures:
                failures[-1].stack.append((frame.group(1), int(frame.group(2))))
            continue
        if not body.startswith(" ") or not failures:  # older torch: no "0/1: " prefix
            failures.append(_new_failure(None, body.strip()))
    if not failures:  # a wording this parser does not know: keep the entry, with torch's text
        rest = " ".join(line.strip() for line in lines[1:]).strip()
        failures.append(_new_failure(None, rest or lines[0].strip()))
    if head is None:
        return _Entry("?", "", 0, failures, None)
    return _Entry(head.group(1), head.group(2), int(head.group(3)), failures, None)


def _new_failure(entry: str | None, raw: str) -> _Failure:
    text = re.split(r"\s{2,}#\s|\s+#\s(?=.*:\d+ in )", raw, maxsplit=1)[0].strip()
    return _Failure(entry, text, raw.strip())


class _Collector(logging.Handler):
    """Keeps torch's recompile entries and recompile-limit warnings as they are logged."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.entries: list[_Entry] = []
        self.limits: list[tuple[int, str]] = []  # (number of entries seen before, headline)
        self.variation = ""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a handler must never raise into torch
            return
        if record.name.endswith("__recompiles") or record.name.endswith("__recompiles_verbose"):
            entry = _parse_entry(message)
            if entry is not None:
                entry.compile_id = _current_compile_id()
                entry.variation = self.variation
                self.entries.append(entry)
        elif record.levelno >= logging.WARNING and _LIMIT_RE.search(message):
            self.limits.append((len(self.entries), message.splitlines()[0].strip()))


def _current_compile_id() -> str | None:
    try:
        trace_id = torch._guards.CompileContext.current_trace_id()
    except Exception:  # noqa: BLE001 - private API, may move
        return None
    if trace_id is None:
        return None
    text = str(trace_id)
    match = re.match(r"^\[?(\d+/\d+)", text)
    return match.group(1) if match else None


# --- torch state: logging, metrics, limit ---------------------------------------------------

def _dynamo_reset() -> None:
    torch._dynamo.reset()
    _clear_metrics()


def _clear_metrics() -> None:
    clear = getattr(torch._dynamo.utils, "clear_compilation_metrics", None)
    if clear is not None:
        try:
            clear()
        except Exception:  # noqa: BLE001
            pass


def _metrics() -> list[Any]:
    get = getattr(torch._dynamo.utils, "get_compilation_metrics", None)
    if get is None:
        return []
    try:
        return list(get())
    except Exception:  # noqa: BLE001
        return []


def recompile_limit() -> int:
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return 8


@contextlib.contextmanager
def _recompile_log() -> Iterator[_Collector]:
    collector = _Collector()
    logger = logging.getLogger(_DYNAMO_LOGGER)
    logger.addHandler(collector)
    try:
        torch._logging.set_logs(recompiles=True)
    except Exception:  # noqa: BLE001 - older torch: the records still come when TORCH_LOGS says
        log.info("set_logs(recompiles=True) failed", exc_info=True)
    try:
        yield collector
    finally:
        logger.removeHandler(collector)
        try:
            torch._logging.set_logs()
        except Exception:  # noqa: BLE001
            pass


# --- variations -----------------------------------------------------------------------------

@dataclass
class _Variation:
    label: str
    args: tuple
    declared: bool = False  # declared, recorded and base calls: report torch's first line
    context: Callable[[], Any] | None = None  # a context manager factory (autocast)
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None


def _resized(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """`t` with dimension `dim` of length `size`, repeating or cutting its own values."""
    old = t.shape[dim]
    base = t.detach()
    if size > old:
        reps = [1] * t.dim()
        reps[dim] = math.ceil(size / max(old, 1))
        base = base.repeat(*reps) if old > 0 else _fresh(t, [*t.shape[:dim], size, *t.shape[dim + 1:]])
    out = base.narrow(dim, 0, size).clone()
    return _like(out, t)


def _fresh(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """A new tensor of another shape with values of the same kind as `t`'s."""
    if t.dtype == torch.bool:
        out = torch.zeros(shape, dtype=t.dtype, device=t.device)
    elif t.is_floating_point() or t.is_complex():
        out = torch.randn(shape, device=t.device).to(t.dtype)
    else:
        hi = int(t.max().item()) + 1 if t.numel() else 2
        lo = int(t.min().item()) if t.numel() else 0
        out = torch.randint(lo, max(hi, lo + 1), shape, dtype=t.dtype, device=t.device)
    return _like(out, t)


def _like(out: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    if t.requires_grad and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_(True)
    for attr in ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices",
                 "_dynamo_static_indices", "_dynamo_unbacked_indices"):
        value = getattr(t, attr, None)
        if value is not None:
            try:
                setattr(out, attr, type(value)(value))
            except Exception:  # noqa: BLE001
                pass
    return out


def _reshaped(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    if len(shape) != t.dim():
        return _fresh(t, shape)
    out = t
    for dim, size in enumerate(shape):
        if out.shape[dim] != size:
            out = _resized(out, dim, size)
    return out


def _tensors(args: tuple) -> list[int]:
    return [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]


def _batch_sizes(b: int) -> list[int]:
    odd = next((n for n in range(b - 1, 1, -1) if n % 2), None)
    sizes = [max(2 * b, 2), odd if odd is not None else 2 * b + 1]
    return [s for s in dict.fromkeys(sizes) if s != b]


def _batch_variations(args: tuple) -> list[_Variation]:
    idx = [i for i in _tensors(args) if args[i].dim() >= 1]
    if not idx:
        return []
    b = args[idx[0]].shape[0]
    same = [i for i in idx if args[i].shape[0] == b]
    out = []
    for size in _batch_sizes(b):
        new = list(args)
        for i in same:
            new[i] = _resized(args[i], 0, size)
        out.append(_Variation(f"batch {size}", tuple(new)))
    return out


def _is_sequence_like(t: torch.Tensor) -> bool:
    integer = not (t.is_floating_point() or t.is_complex()) and t.dtype != torch.bool
    return (integer and t.dim() >= 2) or (t.is_floating_point() and t.dim() == 3)


def _sequence_variations(args: tuple) -> list[_Variation]:
    seq = [i for i in _tensors(args) if _is_sequence_like(args[i])]
    if not seq:
        return []
    first = args[seq[0]]
    b, length = first.shape[0], first.shape[1]
    same = [i for i in _tensors(args)
            if args[i].dim() >= 2 and args[i].shape[0] == b and args[i].shape[1] == length]
    sizes = [length + 1, length - 1 if length - 1 >= 2 else length + 2]
    out = []
    for size in dict.fromkeys(sizes):
        new = list(args)
        for i in same:
            new[i] = _resized(args[i], 1, size)
        out.append(_Variation(f"sequence {size}", tuple(new)))
    return out


def _float_inputs(args: tuple) -> list[int]:
    return [i for i in _tensors(args) if args[i].is_floating_point()]


def _requires_grad_variation(args: tuple) -> list[_Variation]:
    floats = _float_inputs(args)
    if not floats:
        return []
    flag = not args[floats[0]].requires_grad
    new = list(args)
    for i in floats:
        new[i] = _like(args[i].detach().clone(), args[i]).requires_grad_(flag)
    return [_Variation(f"requires_grad={flag}", tuple(new))]


def _autocast_variation(args: tuple, obj: Any) -> list[_Variation]:
    has_float = bool(_float_inputs(args))
    if isinstance(obj, torch.nn.Module):
        has_float = has_float or any(p.is_floating_point() for p in obj.parameters())
    try:
        already = torch.is_autocast_enabled()
    except Exception:  # noqa: BLE001
        already = False
    if not has_float or already:
        return []
    tensors = [args[i] for i in _tensors(args)]
    params = list(obj.parameters()) if isinstance(obj, torch.nn.Module) else []
    device = (tensors or params)[0].device.type if (tensors or params) else "cpu"
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    available = getattr(getattr(torch.amp, "autocast_mode", None), "is_autocast_available", None)
    try:
        if available is not None and not available(device):
            return []
    except Exception:  # noqa: BLE001
        return []
    name = str(dtype).replace("torch.", "")
    return [_Variation(f"autocast {name}", args,
                       context=lambda: torch.autocast(device_type=device, dtype=dtype))]


def _mode_variation(args: tuple, obj: Any) -> list[_Variation]:
    if not isinstance(obj, torch.nn.Module):
        return []
    was = obj.training
    return [_Variation("eval mode" if was else "train mode", args,
                       setup=lambda: obj.train(not was), teardown=lambda: obj.train(was))]


def _param_names(obj: Any, args: tuple) -> list[str]:
    fn = obj.forward if isinstance(obj, torch.nn.Module) else obj
    names = [f"arg{i}" for i in range(len(args))]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return names
    for i in range(len(args)):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names[i] = params[i].name
        elif any(p.kind == p.VAR_POSITIONAL for p in params):
            star = next(p for p in params if p.kind == p.VAR_POSITIONAL)
            before = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
            names[i] = f"{star.name}[{i - before}]"
    return names


def _string_constants(obj: Any) -> list[str]:
    fn = type(obj).forward if isinstance(obj, torch.nn.Module) else obj
    code = getattr(inspect.unwrap(fn), "__code__", None)
    found: list[str] = []
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        for const in c.co_consts:
            if isinstance(const, str) and re.fullmatch(r"[\w.\-]{1,32}", const):
                found.append(const)
            elif inspect.iscode(const):
                stack.append(const)
    return list(dict.fromkeys(found))


def _new_values(value: Any, strings: list[str], count: int = 2) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        if value < 0:
            return [value - k for k in range(1, count + 1)]
        out, c = [], value + 1
        while len(out) < count:
            if c >= 2:
                out.append(c)
            c += 2
        return out
    if isinstance(value, float):
        return [value * k for k in range(2, count + 2)] if value else [0.5 * k for k in range(1, count + 1)]
    if isinstance(value, str):
        picks = [s for s in strings if s != value][:count]
        return picks + [f"{value}_{k}" for k in range(2, 2 + count - len(picks))]
    return []


def _scalar_label(name: str, value: Any) -> str:
    return f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"


def _scalar_variations(args: tuple, obj: Any, names: list[str]) -> list[_Variation]:
    out = []
    strings: list[str] | None = None
    for i, value in enumerate(args):
        if not isinstance(value, (bool, int, float, str)):
            continue
        if isinstance(value, str) and strings is None:
            strings = _string_constants(obj)
        for new in _new_values(value, strings or []):
            changed = list(args)
            changed[i] = new
            out.append(_Variation(_scalar_label(names[i], new), tuple(changed)))
    return out


def _recorded_variations(args: tuple, recorded: Iterable[Any]) -> list[_Variation]:
    tensor_idx = _tensors(args)
    base = [list(args[i].shape) for i in tensor_idx]
    seen: list[list[list[int]]] = []
    out = []
    for call in recorded:
        shapes = _normalise_call(call, args, tensor_idx)
        if shapes is None or shapes == base or shapes in seen:
            continue
        seen.append(shapes)
        new = list(args)
        for i, shape in zip(tensor_idx, shapes):
            new[i] = _reshaped(args[i], shape)
        label = ", ".join(str(tuple(s)) for s in shapes)
        out.append(_Variation(f"recorded shape {label}", tuple(new), declared=True))
    return out


def _normalise_call(call: Any, args: tuple, tensor_idx: list[int]) -> list[list[int]] | None:
    """The shapes of one recorded call, one per tensor argument; None if they do not fit."""
    try:
        items = list(call)
    except TypeError:
        return None
    if items and all(isinstance(v, int) for v in items):
        items = [items]  # a single tensor's shape
    if len(items) == len(args) and len(args) != len(tensor_idx):
        items = [items[i] for i in tensor_idx]
    shapes = []
    for item in items[:len(tensor_idx)]:
        if not isinstance(item, (list, tuple)) or not all(isinstance(v, int) for v in item):
            return None
        shapes.append([int(v) for v in item])
    return shapes if len(shapes) == len(tensor_idx) and shapes else None


# --- the sweep ------------------------------------------------------------------------------

class _Sweep:
    def __init__(self, target: BuiltTarget, path: str, progress: Callable[[str], None],
                 compile_kwargs: dict[str, Any], collector: _Collector):
        self.target = target
        self.path = path
        self.progress = progress
        self.obj = target.make()
        self.compiled = torch.compile(self.obj, backend="eager", **compile_kwargs)
        self.collector = collector
        self.limit_hit = False
        self.deadline: float | None = None

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def call(self, v: _Variation) -> tuple[bool, list[_Entry], BaseException | None]:
        """Run one variation; returns (it ran, the entries it logged, the exception)."""
        self.progress(f"recompiles: {v.label}")
        self.collector.variation = v.label
        first, first_limit = len(self.collector.entries), len(self.collector.limits)
        _clear_metrics()
        error: BaseException | None = None
        try:
            if v.setup:
                v.setup()
            with (v.context() if v.context else contextlib.nullcontext()):
                self.compiled(*v.args)
        except Exception as exc:  # noqa: BLE001 - user code: note it, never crash
            error = exc
        finally:
            if v.teardown:
                try:
                    v.teardown()
                except Exception:  # noqa: BLE001
                    log.info("restoring after %s failed", v.label, exc_info=True)
        entries = self.collector.entries[first:]
        self._annotate(entries, self.collector.limits[first_limit:], first, v.declared)
        if error is not None and not v.declared:
            log.info("recompile sweep: skipped %s: %s", v.label, describe(error))
            del self.collector.entries[first:]
            return False, [], error
        if error is not None:
            log.info("recompile sweep: %s raised: %s", v.label, describe(error))
        return error is None, entries, error

    def _annotate(self, entries: list[_Entry], limits: list[tuple[int, str]], first: int,
                  declared: bool) -> None:
        metrics = _metrics()
        by_id = {str(getattr(m, "compile_id", "")): m for m in metrics}
        with_reason = [m for m in metrics if getattr(m, "recompile_reason", None)]
        for n, entry in enumerate(entries):
            entry.relevant = 0 if declared else _base_failure(entry)
            m = by_id.get(entry.compile_id or "") or (with_reason[n] if n < len(with_reason) else None)
            if m is not None:
                seconds = getattr(m, "entire_frame_compile_time_s", None)
                failed = " ".join(str(getattr(m, k, "") or "") for k in ("fail_type", "fail_reason"))
                if _LIMIT_FAIL_RE.search(failed):
                    entry.limit = entry.limit or f"torch._dynamo hit config.recompile_limit ({recompile_limit()})"
                elif isinstance(seconds, (int, float)):
                    entry.compile_s = round(float(seconds), 6)
        for count, headline in limits:
            index = count - first - 1
            if 0 <= index < len(entries):
                entries[index].limit = headline
                entries[index].compile_s = None
        if any(e.limit for e in entries):
            self.limit_hit = True


def _base_failure(entry: _Entry) -> int:
    """The failure against the frame's first cache entry (the one the base inputs compiled)."""
    for i, failure in enumerate(entry.failures):
        if failure.entry and failure.entry.endswith("/0"):
            return i
    return len(entry.failures) - 1


def sweep_recompiles(
    target: BuiltTarget,
    *,
    path: str,
    progress: Callable[[str], None] = lambda s: None,
    automatic: bool = True,
    recorded_shapes: list | None = None,
    compile_kwargs: dict | None = None,
    max_seconds: float | None = None,
) -> list[Recompile]:
    """Compile the target (backend eager), call it with variations, report each recompile.

    Order of calls: base inputs, declared variants, recorded shapes, then (automatic=True) batch,
    sequence, Python scalars, train/eval, requires_grad, autocast, and last the recompile-limit
    probe. `compile_kwargs` are the options of the user's own `torch.compile(...)` decorator or
    call; only `dynamic` changes guards, the rest (backend, mode, options, fullgraph) is not used.
    `max_seconds`: no automatic variation or probe starts after that long (declared and recorded
    ones always run). Raises `TargetError` when the base inputs themselves cannot be called.
    """
    kwargs = {k: v for k, v in (compile_kwargs or {}).items() if k == "dynamic"}
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    _dynamo_reset()
    try:
        with _recompile_log() as collector:
            sweep = _Sweep(target, path, progress, kwargs, collector)
            sweep.deadline = deadline
            return _run(sweep, automatic, recorded_shapes)
    finally:
        _dynamo_reset()


def _run(sweep: _Sweep, automatic: bool, recorded_shapes: list | None) -> list[Recompile]:
    target = sweep.target
    args = target.args
    ok, _, error = sweep.call(_Variation("base inputs", args, declared=True))
    if not ok and error is not None:
        raise TargetError(Problem(
            "call", f"calling `{target.spec.name}` compiled with its inputs failed: {describe(error)}",
            sweep.path, user_line(error, sweep.path) or target.spec.line,
            "check that the inputs fit the model")) from None

    variations: list[_Variation] = []
    variants = target.spec.inputs.variants if target.spec.inputs else []
    for n, text in enumerate(variants, 1):
        try:
            variations.append(_Variation(f"variant {n}", target.eval_args(text), declared=True))
        except Exception as exc:  # noqa: BLE001 - the user's expression
            log.info("recompile sweep: variant %d `%s` failed to evaluate: %s", n, text, describe(exc))
    variations += _recorded_variations(args, recorded_shapes or [])
    names = _param_names(sweep.obj, args)
    if automatic:
        # Shapes and scalars first; state switches (train/eval, requires_grad, autocast) last.
        variations += _batch_variations(args)
        variations += _sequence_variations(args)
        variations += _scalar_variations(args, sweep.obj, names)
        variations += _mode_variation(args, sweep.obj)
        variations += _requires_grad_variation(args)
        variations += _autocast_variation(args, sweep.obj)

    for v in variations:
        if not v.declared and sweep.limit_hit:  # from here on the frame runs eager: no news
            log.info("recompile sweep: limit hit, automatic variations not run")
            break
        if not v.declared and sweep.out_of_time():
            sweep.progress("recompiles: out of time, automatic variations stopped")
            log.info("recompile sweep: out of time before %s", v.label)
            break
        sweep.call(v)

    entries = list(sweep.collector.entries)
    records = _classify(entries, target, sweep.path)
    if automatic and not sweep.limit_hit:
        probe = _limit_probe(sweep, records, names, variations)
        if probe is not None:
            records.append(probe)
    return records


# --- reading a guard failure ----------------------------------------------------------------

def _normalise_source(text: str) -> str:
    text = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", text)
    text = re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", text)
    return text


def _changed(text: str) -> str:
    tensor = re.match(r"^tensor '(.+?)'(?= )", text)
    if tensor:
        return _normalise_source(tensor.group(1))
    typed = re.match(r"^expected type of '(.+?)'", text)
    if typed:
        return _normalise_source(typed.group(1))
    state = re.match(r"^GLOBAL_STATE changed:\s*(.*)$", text)
    if state:
        return ", ".join(state.group(1).split()) or "global state"
    source = _normalise_source(text)
    for match in _CHAIN_RE.finditer(source):
        chain = match.group(0)
        after = source[match.end():match.end() + 1]
        if chain in _NOT_NAMES or chain.startswith("___") or (after == "(" and "." not in chain):
            continue
        chain = re.sub(r"\.(size|stride|shape|dim|numel|storage_offset)$", "", chain)
        return chain
    return text.split()[0] if text.split() else ""


def _category(text: str) -> tuple[str, Any, bool]:
    """(kind of guard, dimension or value type, involves a 0/1 size)."""
    if text.startswith("tensor '"):
        size = _SIZE_RE.search(text)
        if size:
            zero_one = size.group(2) in ("0", "1") or size.group(3) in ("0", "1")
            return "size", int(size.group(1)), zero_one
        stride = _STRIDE_RE.search(text)
        if stride:
            return "stride", int(stride.group(1)), False
        what = re.search(r"' (\w+) mismatch", text)
        return (what.group(1) if what else "tensor"), None, False
    if text.startswith("GLOBAL_STATE"):
        return "global", None, False
    if text.startswith("expected type of "):
        return "type", None, False
    dim = _SIZE_EXPR_RE.search(text)
    if dim:
        zero_one = bool(re.search(r"(?<![\w.])[012](?![\w.])", text))
        return "size", int(dim.group(1)), zero_one
    if "___check_obj_id" in text or "___check_type_id" in text or "id(" in text:
        return "identity", None, False
    if text.startswith("len("):
        return "length", None, False
    value = re.match(r"^.+? == (.+)$", text)
    if value:
        literal = value.group(1).strip()
        if literal in ("True", "False"):
            return "value", "bool", False
        if re.fullmatch(r"-?\d+", literal):
            return "value", "int", False
        if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)(e-?\d+)?|-?inf|nan", literal):
            return "value", "float", False
        return "value", "other", False
    return "other", None, False


def _is_user_file(filename: str) -> bool:
    real = os.path.realpath(filename)
    if real.startswith(_TORCH_DIR + os.sep) or "site-packages" in real or "dist-packages" in real:
        return False
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    return os.path.exists(real) and not any(
        real.startswith(os.path.join(p, "lib") + os.sep) for p in prefixes)


def _user_location(failure: _Failure, path: str, frame_file: str) -> tuple[str, int] | None:
    same = os.path.realpath(path)
    for filename, line in reversed(failure.stack):
        if _is_user_file(filename):
            return (path if os.path.realpath(filename) == same else filename), line
    loc = _COMMENT_LOC_RE.search(failure.raw)
    if loc:
        suffix, line = loc.group(1), int(loc.group(2))
        for candidate in (path, frame_file):
            if candidate and os.path.realpath(candidate).endswith(suffix.lstrip("./")):
                return (path if os.path.realpath(candidate) == same else candidate), line
    return None


@dataclass
class _Row:
    entry: _Entry
    failure: _Failure
    changed: str
    key: tuple
    zero_one: bool


def _classify(entries: list[_Entry], target: BuiltTarget, path: str) -> list[Recompile]:
    rows = []
    seen: set[tuple] = set()
    for entry in entries:
        # A frame is its code object (file, first line, name): `forward` in the user's file and
        # `forward` in a library's are two frames, each with its own cache and automatic dynamic.
        frame = (os.path.realpath(entry.frame_file) if entry.frame_file else "", entry.frame_line, entry.frame)
        failure = entry.failures[min(entry.relevant, len(entry.failures) - 1)]
        row = _row(entry, frame, failure)
        newest = _row(entry, frame, entry.failures[0])
        if row.key in seen and newest.key != row.key:
            # the base entry fails on what an earlier variation already made dynamic; what forced
            # this compile is what the newest entry (dynamic in that input) failed on
            row = newest
        seen.add(row.key)
        rows.append(row)

    counts: dict[tuple, int] = {}
    for row in rows:
        if not row.zero_one:
            counts[row.key] = counts.get(row.key, 0) + 1

    records = []
    for row in rows:
        kind_of_guard, detail = row.key[-2], row.key[-1]
        if row.entry.limit:
            kind = "limit"
        elif counts.get(row.key, 0) >= 2:
            kind = "specialization"
        elif kind_of_guard in ("size", "stride") or (kind_of_guard == "value" and detail in ("int", "float")):
            kind = "automatic-dynamic"
        else:
            kind = "specialization"
        where = _user_location(row.failure, path, row.entry.frame_file)
        reason = row.failure.text
        if row.entry.limit:
            reason = f"{reason} — {_limit_text(row.entry.limit)}"
        records.append(Recompile(
            line=where[1] if where else target.spec.line,
            variation=row.entry.variation,
            kind=kind,
            reason=reason,
            changed=row.changed,
            compile_s=None if row.entry.limit else row.entry.compile_s,
            path=where[0] if where else None,
            frame=_frame_of(row.entry),
            compile_id=row.entry.compile_id,
        ))
    return records


def _row(entry: _Entry, frame: tuple, failure: _Failure) -> _Row:
    changed = _changed(failure.text)
    kind, detail, zero_one = _category(failure.text)
    return _Row(entry, failure, changed, (*frame, changed, kind, detail), zero_one)


def _frame_of(entry: _Entry) -> Frame | None:
    if not entry.frame_file:
        return None
    name = re.sub(r"^torch_dynamo_resume_in_(.+)_at_\d+$", r"\1", entry.frame)
    return Frame(os.path.realpath(entry.frame_file), entry.frame_line, name)


def _limit_text(headline: str) -> str:
    match = _LIMIT_RE.search(headline)
    n = match.group(2) if match else str(recompile_limit())
    return f"{headline}: after {n} compiles it runs eager"


# --- the recompile-limit probe --------------------------------------------------------------

def _limit_probe(sweep: _Sweep, records: list[Recompile], names: list[str],
                 tried: list[_Variation]) -> Recompile | None:
    """Keep giving a specialised input new values until torch refuses to compile (bounded)."""
    special = [r for r in records if r.kind == "specialization"]
    scalars = {r.changed for r in special
               if not r.reason.startswith(("tensor '", "GLOBAL_STATE")) and not _SIZE_EXPR_RE.search(r.reason)}
    sizes = {r.changed for r in special if _SIZE_RE.search(r.reason) or _SIZE_EXPR_RE.search(r.reason)}
    limit = recompile_limit()
    if not (scalars or sizes) or limit > 64:
        return None
    for plan in _probe_plans(sweep.target.args, names, scalars, sizes, [v.args for v in tried],
                             limit + 1):
        quiet = 0
        for label, new_args in plan:
            if sweep.out_of_time():
                return None
            ok, logged, _ = sweep.call(_Variation(f"limit probe: {label}", new_args))
            if not ok:
                break
            hit = next((e for e in logged if e.limit), None)
            if hit is not None:
                failure = hit.failures[0]
                where = _user_location(failure, sweep.path, hit.frame_file)
                return Recompile(
                    line=where[1] if where else sweep.target.spec.line,
                    variation=hit.variation, kind="limit",
                    reason=f"{failure.text} — {_limit_text(hit.limit or '')}",
                    changed=_changed(failure.text), compile_s=None,
                    path=where[0] if where else None, frame=_frame_of(hit), compile_id=hit.compile_id)
            quiet = 0 if logged else quiet + 1
            if quiet >= 2:  # new values stopped recompiling: nothing to hit
                break
    return None


def _probe_plans(args: tuple, names: list[str], scalars: set[str], sizes: set[str],
                 tried: list[tuple], count: int) -> Iterator[list[tuple[str, tuple]]]:
    """For each specialised scalar argument or tensor batch size: `count` values not tried yet."""
    for i, value in enumerate(args):
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float, str)) and names[i] in scalars:
            used = {a[i] for a in tried if len(a) > i and isinstance(a[i], (int, float, str))}
            values = itertools.islice((v for v in _endless(value) if v not in used), count)
            yield [(_scalar_label(names[i], v), args[:i] + (v,) + args[i + 1:]) for v in values]
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and names[i] in sizes:
            b = value.shape[0]
            used = {a[i].shape[0] for a in tried
                    if len(a) > i and isinstance(a[i], torch.Tensor) and a[i].dim() >= 1}
            new_sizes = itertools.islice(
                (n for n in itertools.count(2) if n not in used and n != b), count)
            same = [j for j in _tensors(args) if args[j].dim() >= 1 and args[j].shape[0] == b]
            plan = []
            for size in new_sizes:
                new = list(args)
                for j in same:
                    new[j] = _resized(args[j], 0, size)
                plan.append((f"batch {size}", tuple(new)))
            yield plan


def _endless(value: Any) -> Iterator[Any]:
    if isinstance(value, int):
        return (value + k for k in itertools.count(1) if value + k >= 2)
    if isinstance(value, float):
        return (value + 0.5 * k for k in itertools.count(1))
    return (f"{value}_{k}" for k in itertools.count(2))


__all__ = ["sweep_recompiles", "recompile_limit"]
