"""What `compile-lens trial` adds to the `record` hook inside the user's program.

A *step* is one `optimizer.step()` (torch's global optimizer step post-hook; no patching), or,
with `--step-on forward`, one call of an outermost workspace module. Per step it notes:
- `wall_s`: time from the end of the previous step to the end of this one (data loading
  included); step 0 starts at its first model call;
- `hook_s`: time from the first outermost model call of the step to its end (forward, loss,
  backward, optimizer step);
- `loss`: the value of the first scalar tensor whose `.backward()` is called in the step
  (`torch.autograd.backward(t)` called directly is not seen);
- the input shapes of the step's first model call, and the compiles that happened in it.
Peak memory: on CUDA, `torch.cuda.max_memory_allocated` over the run; on the CPU, one steady
step profiled for its allocations (`step_memory`), marked `profiled`, its processing kept out of
every step's time.
After `steps` steps (or `seconds`), it raises SystemExit(0) from the step's end (with `forward`
steps: from the next model call, after the step's backward) and notes that the
trial stopped the program. GPU work is synchronised at each step end so times are real.

*Outermost workspace modules* are instances of `nn.Module` classes defined in the workspace and
built outside any other workspace module's constructor (the model, a workspace loss). In the
compiled run each is compiled as `Module.compile()` would (`torch.compile(module._call_impl,
**options)`), unless the program compiles it itself (`torch.compile(model, ...)`,
`model.compile(...)`): then its own call and options are used. A program that builds none (its
model is a library's: `AutoModelForCausalLM.from_config(...)`, `nn.Sequential(...)`) has its model
found at the end of step 0 instead: the modules inside no other module that hold the optimizer's
parameters. They are compiled as `torch.compile(model)` would and timed from step 1; step 0 is
marked untimed (its forward was not seen). The eager run sets
`TORCH_COMPILE_DISABLE=1` and makes `torch.compile(x)` return `x` (and `Module.compile()` do
nothing), so the program's own compiled code runs eagerly too (Dynamo disabled alone rejects
`fullgraph=True`).

The record of the run is written as JSON to COMPILE_LENS_TRIAL_OUT at exit, by the process that
installed the hook only. Under torchrun (COMPILE_LENS_TRIAL_RANKED, see `torchrun`) that process is
each rank, never the launcher: each writes its own record, appends a line per step as it goes, and
writes its record on SIGTERM too. Stdlib only at import.

Over 500 lines: one process-global state machine (the step being timed, its events, the rank's
log) patched into the user's process before their code runs; its parts share that state, so
splitting it would pass the state around, not simplify it.
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import math
import os
import re
import signal
import sys
import time
import traceback
import types
import weakref
from typing import Any, Optional

from ..remote_cache import REMOTE_COUNT_FIELDS
from . import step_memory
from . import torchrun as _torchrun

_USER_CODE = re.compile(r'from user code:\s*File "([^"]+)", line (\d+)')
_mode = ""  # "eager" | "compiled"
_steps_limit = 0
_seconds_limit = 0.0
_step_on = "optimizer"
_options: dict = {}
_out = ""
_pid = -1
_record: Any = None  # compile_lens.record.hook
_torch: Any = None
_compile_below: Any = None  # torch.compile under our patch (the record hook's)

# id(outermost module) -> (weak reference, its compiled call or None: eager / the program's own). A plain dict,
# read only in this module's functions (Dynamo skips them): a WeakKeyDictionary's Python methods, called
# from a module's call in the program's own compiled region (`torch.compile(DDP(model))`), were compiled
# as frames of their own, two frames the program alone does not compile
_tracked: dict = {}
_tracked_names: list = []  # their classes, for the record (the modules are gone at exit)
_tracked_targets: list = []  # the same as recorded.json names them ("train.py:Net"), for the hover card
_with_dropout: set = set()  # tracked classes holding dropout layers with p > 0: compiled masks differ
_found_late = False  # the model was found at the end of step 0 (no workspace module was built)
_compiled_by_program = False  # a tracked module is the program's own `torch.compile(model)`
_init_depth = 0
_call_depth = 0
_steps: list = []
_cur: dict = {}  # the step in progress: first call time, shapes, loss
_last_end: Optional[float] = None
_first_start: Optional[float] = None
_stopped = False
_failure: Optional[dict] = None
_events: list = []  # graph breaks and recompiles from torch's logs, with the step they happened in
_seen_metrics: set = set()
_compiles: list = []  # compilation metrics entries, with their step
_problems: list = []
_artifact: Optional[dict] = None  # the cache artifact loaded at start (third run)
_fx_keys: Optional[list] = None  # this run's FX-graph cache lookups (`cache_keys`), when the trial compares runs
_rank: Optional[int] = None  # under torchrun: this process's RANK
_log = ""  # under torchrun: the step log this rank appends to
_logged = [0, 0]  # events, compiles already in the step log
_killed: Optional[dict] = None  # the signal that ended the run, and the step it was in


def _new_step() -> dict:
    return {"start": None, "shapes": None, "loss": None, "loss_finite": True}


def install() -> None:
    """Add the trial to the record hook (installed already); idempotent; only in the first process."""
    global _mode, _steps_limit, _seconds_limit, _step_on, _options, _out, _pid, _record, _cur
    if os.environ.get("COMPILE_LENS_TRIAL_RANKED") and "RANK" not in os.environ:
        return  # torchrun's launcher: the ranks are the runs
    owner = os.environ.get("COMPILE_LENS_TRIAL_OWNER")
    if _pid == os.getpid() or (owner and owner != str(os.getpid())):
        return  # a child process of the program (spawned workers): not a run of its own
    os.environ["COMPILE_LENS_TRIAL_OWNER"] = str(os.getpid())
    _pid = os.getpid()
    _mode = os.environ.get("COMPILE_LENS_TRIAL_MODE", "eager")
    _steps_limit = int(os.environ.get("COMPILE_LENS_TRIAL_STEPS") or 0)
    _seconds_limit = float(os.environ.get("COMPILE_LENS_TRIAL_SECONDS") or 0)
    _step_on = os.environ.get("COMPILE_LENS_TRIAL_STEP_ON", "optimizer")
    _options = json.loads(os.environ.get("COMPILE_LENS_TRIAL_OPTIONS") or "{}")
    _out = os.environ.get("COMPILE_LENS_TRIAL_OUT", "")
    _cur = _new_step()
    from compile_lens.record import hook as record

    _record = record
    # Chain onto the record hook's own patch points (it looks them up by name when they fire).
    patch_torch, adopt, skip = record._patch_torch, record._adopt, record._skip_in_dynamo

    def chained_patch_torch(torch: Any) -> None:
        patch_torch(torch)
        _patch_torch(torch)

    def chained_adopt(cls: type) -> None:
        adopt(cls)
        if cls in record._by_class:
            _adopt(cls)

    def chained_skip(eval_frame: Any) -> None:
        skip(eval_frame)
        for code in _own_code():
            eval_frame.skip_code(code)

    record._patch_torch, record._adopt, record._skip_in_dynamo = chained_patch_torch, chained_adopt, chained_skip
    if getattr(sys.modules.get("torch"), "_compile_lens_recording", False):
        _patch_torch(sys.modules["torch"])
    sys.excepthook = _excepthook(sys.excepthook)
    atexit.register(_write)
    if os.environ.get("COMPILE_LENS_TRIAL_RANKED"):
        _as_rank()


def _as_rank() -> None:
    """Under torchrun: this rank's own record and step log, and its record kept on SIGTERM."""
    global _rank, _out, _log
    _rank = int(os.environ["RANK"])
    _log = _torchrun.rank_log(_out, str(_rank))
    _out = _torchrun.rank_out(_out, str(_rank))
    _log_line({"head": {"mode": _mode, "step_on": _step_on, "options": _options, "rank": _rank, "pid": os.getpid()}})
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # the program's own handler stays
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: Any) -> None:
    global _killed
    _killed = {"signal": "SIGTERM", "step": len(_steps)}
    _write()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _log_line(entry: dict) -> None:
    if not _log:
        return
    try:
        with open(_log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    except (OSError, TypeError, ValueError) as exc:
        _problems.append(f"step log: {type(exc).__name__}: {exc}")


def _log_step(step: dict) -> None:
    """The step, and the events and compiles since the last line: a killed rank keeps them."""
    events, compiles = _events[_logged[0]:], _compiles[_logged[1]:]
    _logged[:] = [len(_events), len(_compiles)]
    _log_line({"step": step, "events": events, "compiles": compiles})


def _own_code() -> list:
    codes: list = []
    pending = [v.__code__ for v in list(globals().values())
               if isinstance(v, types.FunctionType) and v.__module__ == __name__]
    while pending:
        code = pending.pop()
        if code not in codes:
            codes.append(code)
            pending += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return codes


def _compiling() -> bool:
    return bool(_record._dynamo and _record._compiling())


def _patch_torch(torch: Any) -> None:
    global _torch
    if _torch is not None:
        return
    _torch = torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    if _step_on == "optimizer":
        register_optimizer_step_post_hook(lambda optimizer, args, kwargs: _end_step(optimizer))
    backward = torch.Tensor.backward

    def tensor_backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        # --step-on forward: the step ended when the model returned; its loss comes after
        step = _steps[-1] if _step_on == "forward" and _steps and _cur["start"] is None else _cur
        if step.get("loss") is None and step.get("loss_finite", True) and not _compiling():
            try:
                if self.numel() == 1:
                    value = float(self.detach())
                    if math.isfinite(value):
                        step["loss"] = value
                    elif _failure is None:
                        _cur["loss_finite"] = step["loss_finite"] = False
                        if step is not _cur:
                            _fail("nan-loss", f"the loss of step {step['index']} is not finite", step["index"])
            except Exception as exc:  # noqa: BLE001 - never change what backward does
                _problems.append(f"loss: {type(exc).__name__}: {exc}")
        return backward(self, *args, **kwargs)

    torch.Tensor.backward = tensor_backward
    global _compile_below
    compile_ = _compile_below = torch.compile  # the record hook's: it notes the calls

    def compile(*args: Any, **kwargs: Any) -> Any:
        model = args[0] if args else kwargs.get("model")
        if _mode == "eager":  # the baseline runs the program's own compiled code eagerly
            return model if model is not None else (lambda fn: fn)
        if model is not None and _is_tracked(model):
            _set_tracked(model, None)  # the program compiles it itself: its call, its options
        inner = getattr(model, "module", None)  # `torch.compile(DDP(model))`: DDP's compile holds the model's
        if inner is not None and isinstance(model, torch.nn.parallel.DistributedDataParallel) and _is_tracked(inner):
            _set_tracked(inner, None)
        return compile_(*args, **kwargs)

    torch.compile = compile
    module_compile = torch.nn.Module.compile

    def module_compile_(self: Any, *args: Any, **kwargs: Any) -> None:
        if _mode == "eager":
            return None
        if _is_tracked(self):
            _set_tracked(self, None)
        return module_compile(self, *args, **kwargs)

    torch.nn.Module.compile = module_compile_
    if _mode == "compiled":
        _watch_logs(torch)
        _record_fx_keys()
        _load_artifacts(torch)


def _record_fx_keys() -> None:
    """Why a run meant to be served (`--cache-artifact`, `--remote-cache`) missed: each compile's FX-graph
    cache key, to compare with the compiled run's. Only when the trial asks (COMPILE_LENS_TRIAL_FX_KEYS):
    while a handler listens, torch computes every structured-trace payload (compile time it counts as
    `structured_logging_overhead`)."""
    global _fx_keys
    if not os.environ.get("COMPILE_LENS_TRIAL_FX_KEYS"):
        return
    try:
        from ..torch_text import cache_keys  # stdlib only

        _fx_keys = cache_keys.record_all()
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        _problems.append(f"FX-graph cache keys: {type(exc).__name__}: {exc}")


def _load_artifacts(torch: Any) -> None:
    """`--cache-artifact`'s third run: a fresh process warmed by the artifact the compiled run saved."""
    global _artifact
    path = os.environ.get("COMPILE_LENS_TRIAL_LOAD_ARTIFACTS")
    if not path:
        return
    try:
        with open(path, "rb") as f:
            info = torch.compiler.load_cache_artifacts(f.read())
        _artifact = {"loaded": path, "info": _artifact_info(info)}
    except Exception as exc:  # noqa: BLE001
        _artifact = {"loaded": None, "error": f"{type(exc).__name__}: {exc}"}


def _artifact_info(info: Any) -> Optional[dict]:
    if info is None:
        return None
    out = {}
    for name in ("inductor_artifacts", "autotune_artifacts", "aot_autograd_artifacts", "pgo_artifacts",
                 "precompile_artifacts"):
        value = getattr(info, name, None)
        if value is not None:
            out[name] = len(value) if hasattr(value, "__len__") else str(value)
    return out


def _save_artifacts(torch: Any) -> Optional[dict]:
    path = os.environ.get("COMPILE_LENS_TRIAL_SAVE_ARTIFACTS")
    if not path:
        return None
    save = getattr(torch.compiler, "save_cache_artifacts", None)
    if save is None:
        return {"saved": None, "error": f"torch {torch.__version__} has no torch.compiler.save_cache_artifacts (2.7+)"}
    try:
        saved = save()
        if not saved or not saved[0]:
            return {"saved": None, "error": "torch saved no cache artifacts (nothing was compiled by Inductor?)"}
        with open(path, "wb") as f:
            f.write(saved[0])
        return {"saved": path, "bytes": len(saved[0]), "info": _artifact_info(saved[1])}
    except Exception as exc:  # noqa: BLE001
        return {"saved": None, "error": f"{type(exc).__name__}: {exc}"}


def _watch_logs(torch: Any) -> None:
    """Graph breaks and recompiles as torch logs them, without printing them to the program's stderr."""
    try:
        graphs = {"cudagraphs": True} if _options.get("mode") == "reduce-overhead" else {}  # CUDA-graph records
        torch._logging.set_logs(graph_breaks=True, recompiles=True, **graphs)
    except Exception as exc:  # noqa: BLE001
        _problems.append(f"set_logs: {type(exc).__name__}: {exc}")
        return
    logger = logging.getLogger("torch._dynamo")
    for handler in list(logger.handlers):  # torch's own stderr handler: the program's stderr stays its own
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            logger.removeHandler(handler)
    _watch_ddp_splits()
    try:
        from .events import watch

        watch(_events, lambda: (len(_steps), _cur.get("shapes")), _record._root or None)
        if graphs:
            from .cudagraph_events import watch as watch_cudagraphs

            watch_cudagraphs(_events, lambda: (len(_steps), _cur.get("shapes")))
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        _problems.append(f"watching torch's logs: {type(exc).__name__}: {exc}")


_DDP_SPLIT = re.compile(r"DDPOptimizer used bucket cap (\S+) and created (\d+) buckets")


class _DDPSplits(logging.Handler):
    """DDPOptimizer's split of a compiled DDP graph at its bucket boundaries: expected, not the user's break."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            found = _DDP_SPLIT.search(record.getMessage())
            if found:
                _events.append({"kind": "ddp_split", "step": len(_steps), "shapes": _cur.get("shapes"),
                                "bucket_cap_bytes": found[1], "buckets": int(found[2])})
            elif record.levelno >= logging.WARNING:  # torch's warnings reach the program's handlers as before
                logging.getLogger("torch._dynamo.backends").handle(record)
        except Exception as exc:  # noqa: BLE001
            _problems.append(f"DDPOptimizer log: {type(exc).__name__}: {exc}")


def _watch_ddp_splits() -> None:
    logger = logging.getLogger("torch._dynamo.backends.distributed")
    logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
    logger.propagate = False  # its INFO line is ours to read, not the program's stderr (warnings are passed on)
    logger.addHandler(_DDPSplits())


# --- the outermost workspace modules ------------------------------------------------------------

def _is_tracked(module: Any) -> bool:
    entry = _tracked.get(id(module))
    return entry is not None and entry[0]() is module


def _set_tracked(module: Any, compiled: Any) -> None:
    key = id(module)
    _tracked[key] = (weakref.ref(module, lambda _ref: _tracked.pop(key, None)), compiled)


def _adopt(cls: type) -> None:
    init = cls.__dict__.get("__init__")
    if isinstance(init, types.FunctionType) and not getattr(init, "_compile_lens_trial", False):
        cls.__init__ = _wrap_init(init)


def _wrap_init(original: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        global _init_depth
        _init_depth += 1
        try:
            original(self, *args, **kwargs)
        finally:
            _init_depth -= 1
        if _init_depth == 0 and not _is_tracked(self):
            try:
                _track(self)
            except Exception as exc:  # noqa: BLE001
                _problems.append(f"{type(self).__qualname__}: {type(exc).__name__}: {exc}")

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(__init__, name, getattr(original, name, None))
    __init__._compile_lens_trial = True  # type: ignore[attr-defined]
    return __init__


def _track(module: Any, whole: bool = False) -> None:
    """Time `module`'s calls and, in the compiled run, compile it: its `_call_impl` as `Module.compile()`
    does, or with `whole` as `torch.compile(module)` does (a module whose forward is torch's own, as
    `nn.Sequential`'s, is never compiled through `_call_impl`: Dynamo skips torch's frames)."""
    global _compiled_by_program
    compiled = None
    own = type(module).__name__ == "OptimizedModule"  # the program's `torch.compile(model)`: its options
    if _mode == "compiled" and module._compiled_call_impl is None and not own:
        compiled = _compile_below(module if whole else module._call_impl, **_options)
    _set_tracked(module, compiled)
    _compiled_by_program = _compiled_by_program or own
    shown = type(getattr(module, "_orig_mod", None) if own else module).__qualname__  # the model, not torch's wrapper
    _tracked_names.append(shown)
    rel = _record._relative(getattr(sys.modules.get(type(module).__module__), "__file__", None))
    if rel:
        _tracked_targets.append(f"{rel}:{type(module).__qualname__}")
    cls = type(module)
    if cls.__dict__.get("__call__") is None or not getattr(cls.__dict__["__call__"], "_compile_lens_trial", False):
        cls.__call__ = _timed_call(cls.__call__)
    dropout = sys.modules["torch"].nn.modules.dropout._DropoutNd
    if any(isinstance(m, dropout) and m.p > 0 for m in module.modules()):
        _with_dropout.add(shown)


def _timed_call(original: Any) -> Any:
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _call_depth
        if _compiling() or not _is_tracked(self):
            return original(self, *args, **kwargs)
        compiled = _tracked[id(self)][1]
        if _call_depth == 0:
            _stop_if_done()
        if _call_depth == 0 and _cur["start"] is None:
            _cur["shapes"] = [list(a.shape) for a in list(args) + list(kwargs.values()) if hasattr(a, "shape")][:8]
            if not _on_cuda():
                step_memory.start(len(_steps), _steps_limit)
            _cur["start"] = time.perf_counter()
        _call_depth += 1
        try:
            # only the outermost call: a whole-module compile calls this again from inside
            if compiled is not None and self._compiled_call_impl is None and _call_depth == 1:
                return compiled(*args, **kwargs)
            return original(self, *args, **kwargs)
        finally:
            _call_depth -= 1
            if _call_depth == 0 and _step_on == "forward":
                _end_step()

    __call__._compile_lens_trial = True  # type: ignore[attr-defined]
    return __call__


def _track_library_model(optimizer: Any) -> None:
    """At the end of step 0, when no workspace module was built: the modules inside no other module
    that hold the optimizer's parameters are the model (one scan of the live objects, once)."""
    global _found_late
    try:
        params = {id(p) for group in optimizer.param_groups for p in group["params"]}
        # type(), not isinstance(): that reads `__class__`, which some module proxies answer with a warning
        modules = [o for o in gc.get_objects() if issubclass(type(o), _torch.nn.Module)]
        inner = {id(child) for m in modules for child in m.children()}
        for module in modules:
            if id(module) not in inner and not _is_tracked(module) and any(id(p) in params for p in module.parameters()):
                _track(module, whole=True)
                _found_late = True
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        _problems.append(f"finding the model: {type(exc).__name__}: {exc}")


# --- steps ---------------------------------------------------------------------------------

def _on_cuda() -> bool:
    torch = _torch
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def _end_step(optimizer: Any = None) -> None:
    global _cur, _last_end, _first_start, _stopped
    if _compiling():
        return
    if _on_cuda():
        _torch.cuda.synchronize()
    now = time.perf_counter()
    start = _cur["start"] if _cur["start"] is not None else (_last_end if _last_end is not None else now)
    if _first_start is None:
        _first_start = start
    step = {"index": len(_steps), "wall_s": now - (_last_end if _last_end is not None else start),
            "hook_s": now - start, "loss": _cur["loss"], "shapes": _cur["shapes"], "compiles": _new_compiles()}
    if _cur["start"] is None and _last_end is None:
        step["timed"] = False  # no model call was seen before it ended: nothing to time it from
    _steps.append(step)
    for event in reversed(_events):  # logged before the step's first model call (inside DDP's forward): its inputs
        if event.get("step") != step["index"]:
            break
        if event.get("shapes") is None:
            event["shapes"] = step["shapes"]
    if optimizer is not None and step["index"] == 0 and not _tracked_names:
        _track_library_model(optimizer)
    if not _cur["loss_finite"] and _failure is None:
        _fail("nan-loss", f"the loss of step {step['index']} is not finite", step["index"])
    if step_memory.running():
        step_memory.end(step)
        now = time.perf_counter()  # the profiler's processing is no step's time
    if _log:
        _log_step(step)
        now = time.perf_counter()  # the log's write is no step's time
    _last_end = now
    _cur = _new_step()
    if (_steps_limit and len(_steps) >= _steps_limit) or (_seconds_limit and now - _first_start >= _seconds_limit):
        _stopped = True
        if _step_on == "optimizer":
            raise SystemExit(0)
        # --step-on forward: at the next model call, so that the last step's loss and backward happen


def _stop_if_done() -> None:
    if _stopped:
        raise SystemExit(0)


def _new_compiles() -> int:
    if _mode != "compiled" or "torch._dynamo.utils" not in sys.modules:
        return 0
    fresh = 0
    try:
        for entry in sys.modules["torch._dynamo.utils"].get_compilation_metrics():
            if id(entry) in _seen_metrics:
                continue
            _seen_metrics.add(id(entry))
            _compiles.append(_metric(entry, len(_steps)))
            fresh += 1
    except Exception as exc:  # noqa: BLE001
        _problems.append(f"compilation metrics: {type(exc).__name__}: {exc}")
    return fresh


def _metric(entry: Any, step: int) -> dict:
    out: dict = {"step": step}
    for name in ("compile_id", "co_name", "co_filename", "co_firstlineno", "recompile_reason", "num_graph_breaks",
                 "entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s",
                 "fail_type", "fail_reason", "structured_logging_overhead_s",  # with `fx_keys`: torch's trace payloads
                 *(f"{p}_{n}_count" for p in REMOTE_COUNT_FIELDS.values() for n in ("hit", "miss"))):
        value = getattr(entry, name, None)
        out[name] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    return out


def _fail(kind: str, message: str, step: int, where: Optional[str] = None) -> None:
    global _failure
    _failure = {"kind": kind, "message": message[:2000], "step": step, "where": where,
                "at": time.time()}  # under torchrun, the first rank to fail is the cause: others fail in collectives after
    _log_line({"failure": _failure})


def _excepthook(previous: Any) -> Any:
    def excepthook(kind: type, value: BaseException, tb: Any) -> None:
        try:
            frames = traceback.extract_tb(tb)
            mine = [f for f in frames if _record._relative(f.filename)] or frames  # the workspace's last line
            where = f"{mine[-1].filename}:{mine[-1].lineno}" if mine else None
            traced = _USER_CODE.search(str(value))  # Dynamo names the user line it was tracing
            if traced:
                where = f"{traced[1]}:{traced[2]}"
            first = str(value).strip().splitlines()
            if _failure is None or _failure["kind"] == "nan-loss":
                _fail("exception", f"{kind.__name__}: {first[0] if first else ''}", len(_steps), where)
        except Exception:  # noqa: BLE001
            pass
        previous(kind, value, tb)

    return excepthook


def _levers() -> dict:
    """torch's own levers against ranks compiling apart, as this torch has them."""
    torch, config = _torch, sys.modules.get("torch._dynamo.config")
    return {"torch.compiler.set_enable_guard_collectives":
            hasattr(getattr(torch, "compiler", None), "set_enable_guard_collectives"),
            "torch._dynamo.config.enable_compiler_collectives":
            config is not None and hasattr(config, "enable_compiler_collectives")}


def _write() -> None:
    if os.getpid() != _pid or not _out:
        return
    data: dict = {"mode": _mode, "steps": _steps, "stopped_by_trial": _stopped, "failure": _failure,
                  "step_on": _step_on, "options": _options, "problems": _problems[:50]}
    torch = _torch
    try:
        if torch is not None:
            _new_compiles()
            data["torch"] = torch.__version__
            if _mode == "compiled":
                data["artifact_saved"] = _save_artifacts(torch)
                data["artifact_loaded"] = _artifact
            if _on_cuda():
                data["device"] = "cuda"
                data["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated())
                data["memory_method"] = "CUDA max allocated over the run: weights, optimizer state and activations"
            else:
                data["device"] = "cpu"
                data.update(step_memory.figures(_steps_limit))
    except Exception as exc:  # noqa: BLE001
        _problems.append(f"at exit: {type(exc).__name__}: {exc}")
    data["compiles"] = _compiles
    if _fx_keys is not None:
        data["fx_keys"] = _fx_keys
    data["events"] = _events
    data["outermost_modules"] = sorted(set(_tracked_names))
    data["outermost_found_late"] = _found_late
    data["compiled_by_program"] = _compiled_by_program
    data["dropout_in"] = sorted(_with_dropout)
    data["outermost_targets"] = sorted(set(_tracked_targets))
    if _rank is not None:
        data.update(rank=_rank, killed=_killed, levers=_levers())
    try:
        with open(_out, "w", encoding="utf-8") as f:
            json.dump(data, f)
    except OSError:
        pass
