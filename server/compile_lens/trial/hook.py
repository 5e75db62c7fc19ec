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

Its state is one object (`hook_state.STATE`); its parts by concern: `hook_modules` (the outermost
modules, tracked, timed, compiled), `hook_steps` (a step's end, the stop, the compiles, a failure),
`hook_logs` (torch's logs: breaks, recompiles, CUDA-graph records, DDP splits), `hook_artifacts`
(the cache artifact, FX-graph cache keys), `hook_ranks` (under torchrun); this module installs them
beside the recorder, patches torch and writes the record.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import traceback
from typing import Any

from ..record.hook import own_code
from ..record.hook_state import STATE as recorder
from ..record.workspace import relative
from . import (
    hook_artifacts,
    hook_logs,
    hook_modules,
    hook_ranks,
    hook_settings,
    hook_state,
    hook_steps,
    step_memory,
)
from .hook_state import STATE, new_step, on_cuda

_USER_CODE = re.compile(r'from user code:\s*File "([^"]+)", line (\d+)')
PARTS = (hook_state, hook_modules, hook_steps, hook_logs, hook_artifacts, hook_ranks, hook_settings)  # and this one: Dynamo skips them


def install() -> None:
    """Add the trial to the record hook (installed already); idempotent; only in the first process."""
    if os.environ.get("COMPILE_LENS_TRIAL_RANKED") and "RANK" not in os.environ:
        return  # torchrun's launcher: the ranks are the runs
    owner = os.environ.get("COMPILE_LENS_TRIAL_OWNER")
    if STATE.pid == os.getpid() or (owner and owner != str(os.getpid())):
        return  # a child process of the program (spawned workers): not a run of its own
    os.environ["COMPILE_LENS_TRIAL_OWNER"] = str(os.getpid())
    STATE.pid = os.getpid()
    STATE.mode = os.environ.get("COMPILE_LENS_TRIAL_MODE", "eager")
    STATE.steps_limit = int(os.environ.get("COMPILE_LENS_TRIAL_STEPS") or 0)
    STATE.seconds_limit = float(os.environ.get("COMPILE_LENS_TRIAL_SECONDS") or 0)
    STATE.step_on = os.environ.get("COMPILE_LENS_TRIAL_STEP_ON", "optimizer")
    STATE.options = json.loads(os.environ.get("COMPILE_LENS_TRIAL_OPTIONS") or "{}")
    STATE.out = os.environ.get("COMPILE_LENS_TRIAL_OUT", "")
    STATE.cur = new_step()
    STATE.recorder = recorder
    # the recorder's patch points: torch imported, a workspace class adopted, Dynamo imported
    recorder.on_torch.append(_patch_torch)
    recorder.on_workspace_class.append(hook_modules.adopt)
    recorder.on_dynamo.append(_skip_in_dynamo)
    if getattr(sys.modules.get("torch"), "_compile_lens_recording", False):
        _patch_torch(sys.modules["torch"])
    if "torch._dynamo.eval_frame" in sys.modules:
        _skip_in_dynamo(sys.modules["torch._dynamo.eval_frame"])
    sys.excepthook = _excepthook(sys.excepthook)
    atexit.register(_write)
    if os.environ.get("COMPILE_LENS_TRIAL_RANKED"):
        hook_ranks.as_rank(_write)


def _skip_in_dynamo(eval_frame: Any) -> None:
    """Dynamo never compiles a frame of the trial hook's own (it still compiles what they call)."""
    skip = getattr(eval_frame, "skip_code", None)
    if skip is not None:
        for code in own_code([*PARTS, sys.modules[__name__]]):
            skip(code)


def _patch_torch(torch: Any) -> None:
    if STATE.torch is not None:
        return
    STATE.torch = torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    if STATE.step_on == "optimizer":
        register_optimizer_step_post_hook(lambda optimizer, args, kwargs: hook_steps.end_step(
            lambda: hook_modules.track_library_model(optimizer)))
    backward = torch.Tensor.backward

    def tensor_backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook_steps.note_loss(self)
        return backward(self, *args, **kwargs)

    torch.Tensor.backward = tensor_backward
    compile_ = STATE.compile_below = torch.compile  # the record hook's: it notes the calls

    def compile(*args: Any, **kwargs: Any) -> Any:
        model = args[0] if args else kwargs.get("model")
        if STATE.mode == "eager":  # the baseline runs the program's own compiled code eagerly
            return model if model is not None else (lambda fn: fn)
        hook_settings.note_call("torch.compile", args[1:], kwargs)
        if model is not None and hook_modules.is_tracked(model):
            hook_modules.set_tracked(model, None)  # the program compiles it itself: its call, its options
        inner = getattr(model, "module", None)  # `torch.compile(DDP(model))`: DDP's compile holds the model's
        if inner is not None and isinstance(model, torch.nn.parallel.DistributedDataParallel) \
                and hook_modules.is_tracked(inner):
            hook_modules.set_tracked(inner, None)
        return compile_(*args, **kwargs)

    torch.compile = compile
    module_compile = torch.nn.Module.compile

    def module_compile_(self: Any, *args: Any, **kwargs: Any) -> None:
        if STATE.mode == "eager":
            return None
        if hook_modules.is_tracked(self):
            hook_modules.set_tracked(self, None)
        hook_settings.note_call("Module.compile", args, kwargs)
        return module_compile(self, *args, **kwargs)

    torch.nn.Module.compile = module_compile_
    if STATE.mode == "compiled":
        hook_logs.watch_logs(torch)
        hook_artifacts.record_fx_keys()
        hook_artifacts.load_artifacts(torch)


def _excepthook(previous: Any) -> Any:
    def excepthook(kind: type, value: BaseException, tb: Any) -> None:
        try:
            frames = traceback.extract_tb(tb)
            mine = [f for f in frames if relative(f.filename)] or frames  # the workspace's last line
            where = f"{mine[-1].filename}:{mine[-1].lineno}" if mine else None
            traced = _USER_CODE.search(str(value))  # Dynamo names the user line it was tracing
            if traced:
                where = f"{traced[1]}:{traced[2]}"
            first = str(value).strip().splitlines()
            if STATE.failure is None or STATE.failure["kind"] == "nan-loss":
                hook_steps.fail("exception", f"{kind.__name__}: {first[0] if first else ''}", len(STATE.steps), where)
        except Exception:  # noqa: BLE001
            pass
        previous(kind, value, tb)

    return excepthook


def _write() -> None:
    if os.getpid() != STATE.pid or not STATE.out:
        return
    data: dict = {"mode": STATE.mode, "steps": STATE.steps, "stopped_by_trial": STATE.stopped,
                  "failure": STATE.failure, "step_on": STATE.step_on, "options": STATE.options,
                  "problems": STATE.problems[:50]}
    torch = STATE.torch
    try:
        if torch is not None:
            hook_steps.new_compiles()
            data["torch"] = torch.__version__
            if STATE.mode == "compiled":
                data["artifact_saved"] = hook_artifacts.save_artifacts(torch)
                data["artifact_loaded"] = STATE.artifact
            if on_cuda():
                data["device"] = "cuda"
                data["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated())
                data["memory_method"] = "CUDA max allocated over the run: weights, optimizer state and activations"
            else:
                data["device"] = "cpu"
                data.update(step_memory.figures(STATE.steps_limit))
    except Exception as exc:  # noqa: BLE001
        STATE.problems.append(f"at exit: {type(exc).__name__}: {exc}")
    data["compiles"] = STATE.compiles
    data["calls"] = STATE.calls
    data["settings"] = STATE.settings
    if STATE.fx_keys is not None:
        data["fx_keys"] = STATE.fx_keys
    data["events"] = STATE.events
    data["outermost_modules"] = sorted(set(STATE.tracked_names))
    data["outermost_found_late"] = STATE.found_late
    data["compiled_by_program"] = STATE.compiled_by_program
    data["dropout_in"] = sorted(STATE.with_dropout)
    data["outermost_targets"] = sorted(set(STATE.tracked_targets))
    if STATE.rank is not None:
        data.update(rank=STATE.rank, killed=STATE.killed, levers=hook_ranks.levers())
    try:
        with open(STATE.out, "w", encoding="utf-8") as f:
            json.dump(data, f)
    except OSError:
        pass
