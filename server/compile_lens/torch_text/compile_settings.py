"""The settings behind a compile, read without torch: the Dynamo, Inductor, functorch and FX settings
that differ from torch's defaults, and what they say of the `torch.compile` call.

Where they come from:
- torch's own list of non-defaults: each config module's `codegen_config()` ("torch._dynamo.config.
  recompile_limit = 2", one line a setting), which Inductor writes at the top of every graph's
  `fx_graph_runnable` artifact of a structured trace (inside the compile: `mode`'s and `options`'
  patches are in force there), with the TORCH*/INDUCTOR*/TRITON* environment variables
  (`os.environ['TORCHINDUCTOR_FREEZING'] = '1'`); the trial's hook calls the same functions in the
  user's program, so both read with `read_codegen`;
- a compile with no Inductor graph (another backend, a failed compile) has only the compilation
  metrics' `dynamo_config`, the whole config as JSON: `from_dynamo_config` keeps the few settings that
  explain findings and whose default has held since torch 2.4 (`STABLE`), so a log of another torch
  is not read against this one's defaults.

Not the user's, dropped: values equal to the default (an older torch's codegen listed some: lists and
sets compared as values), the tables torch keeps in its config (a list or dict whose default is one:
it changes between releases), private settings holding containers, the functorch settings AOTAutograd
patches inside every compile of torch ≤ 2.8 (`TORCH_OWN`), and variables that say where things are
written, not how they compile (`ENV_NOISE`). `config_defaults.json` is torch 2.13's defaults
(`scripts/torch_config_defaults.py`). Stdlib only.
"""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config", "torch.fx.experimental._config")
_SETTING_RE = re.compile(r"^(torch\._dynamo\.config|torch\._inductor\.config|torch\._functorch\.config|"
                         r"torch\.fx\.experimental\._config)\.([\w.]+) = (.*)$")
_ENV_RE = re.compile(r"^os\.environ\['([^']+)'\] = '(.*)'$")
DYNAMO = "torch._dynamo.config."
INDUCTOR = "torch._inductor.config."
# AOTAutograd's own patches around every compile (torch ≤ 2.8 listed them in each graph's runnable)
TORCH_OWN = {"torch._functorch.config.functionalize_rng_ops": "False",
             "torch._functorch.config.fake_tensor_allow_unsafe_data_ptr_access": "True",
             "torch._functorch.config.unlift_effect_tokens": "True"}
ENV_NOISE = re.compile(r"^(TORCH_TRACE|TORCH_LOGS.*|TORCHELASTIC_.*|TORCH_NCCL_.*|.*_CACHE_DIR|_TORCHINDUCTOR_.*|"
                       r"TORCHDYNAMO_REPRO_.*|TRITON_.*_PATH)$")
# Dynamo settings that explain findings, with the default they have had since torch 2.4
STABLE = {"recompile_limit": 8, "cache_size_limit": 8, "accumulated_recompile_limit": 256,
          "accumulated_cache_size_limit": 256, "capture_scalar_outputs": False,
          "capture_dynamic_output_shape_ops": False, "automatic_dynamic_shapes": True,
          "assume_static_by_default": True, "specialize_int": False, "suppress_errors": False,
          "error_on_recompile": False, "fail_on_recompile_limit_hit": False}
LIMIT_NAMES = ("recompile_limit", "cache_size_limit")  # one setting: cache_size_limit is its older name
# torch.compile's modes as the Inductor settings they patch (`torch._inductor.list_mode_options`)
MODES = {"max-autotune": {"max_autotune", "coordinate_descent_tuning", "triton.cudagraphs"},
         "max-autotune-no-cudagraphs": {"max_autotune", "coordinate_descent_tuning"},
         "reduce-overhead": {"triton.cudagraphs"}}


@lru_cache(maxsize=1)
def defaults() -> tuple[str, dict[str, Any]]:
    """(the torch version the table is of, full setting name -> default)."""
    data = json.loads((Path(__file__).with_name("config_defaults.json")).read_text(encoding="utf-8"))
    return data["torch"], data["defaults"]


def read_codegen(text: str) -> dict[str, str]:
    """`codegen_config()`'s lines and the environment lines of a runnable (an `fx_graph_runnable` payload,
    or the hook's own calls): full setting name (or variable) -> the value as torch wrote it."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        setting = _SETTING_RE.match(line)
        if setting:
            found[f"{setting[1]}.{setting[2]}"] = setting[3].strip()
            continue
        env = _ENV_RE.match(line)
        if env:
            found[env[1]] = env[2]
        elif line.startswith(("isolate_fails_code_str", "# torch version", "class Repro", "def ")):
            break  # the graph follows: no setting below
    return found


def _value(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value, key=repr)
    return value


def _same(value: Any, default: Any) -> bool:
    if isinstance(value, list) and isinstance(default, list):
        return sorted(value, key=repr) == sorted(default, key=repr)
    return bool(value == default)


def non_default(found: dict[str, str]) -> dict[str, str]:
    """What the user (or the call's mode and options) set: `found` less what is torch's own or its default."""
    _, table = defaults()
    out = {}
    for name, text in found.items():
        if not name.startswith(MODULES):  # an environment variable
            if not ENV_NOISE.match(name):
                out[name] = text
            continue
        if TORCH_OWN.get(name) == text:
            continue
        value = _value(text)
        last = name.rsplit(".", 1)[-1]
        default = table.get(name, STABLE.get(last) if name.startswith(DYNAMO) else None)
        if (name in table or default is not None) and _same(value, default):
            continue
        if isinstance(value, (list, dict)) and isinstance(default, type(value)):
            continue  # a table torch keeps (its default changes between releases): not a setting a user makes
        if last.startswith("_") and (isinstance(value, (list, dict)) or value == text):
            continue  # a private table or callable torch keeps: not a setting a user makes
        out[name] = text
    return out


def from_dynamo_config(text: object) -> dict[str, str]:
    """The compilation metrics' `dynamo_config` (the whole config, JSON): the `STABLE` settings off their default."""
    if not isinstance(text, str):
        return {}
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(config, dict):
        return {}
    out = {}
    for key, default in STABLE.items():
        value = config.get(key)
        if key in config and type(value) is type(default) and value != default:
            out[DYNAMO + key] = repr(value)
    return out


def call_words(settings: dict[str, str]) -> dict[str, Any]:
    """What the settings say of the `torch.compile` call: its `mode` (the Inductor settings a mode patches,
    all on) and `dynamic` (False: automatic dynamic shapes off; True: nothing assumed static)."""
    on = {name[len(INDUCTOR):] for name, text in settings.items() if name.startswith(INDUCTOR) and text == "True"}
    out: dict[str, Any] = {}
    mode = next((m for m, patched in MODES.items() if patched <= on), None)
    if mode:
        out["mode"] = mode
    if settings.get(DYNAMO + "automatic_dynamic_shapes") == "False":
        out["dynamic"] = False
    elif settings.get(DYNAMO + "assume_static_by_default") == "False":
        out["dynamic"] = True
    return out


def limit_of(settings: dict[str, str]) -> Optional[int]:
    """The recompile limit the run set, when it set one."""
    for name in LIMIT_NAMES:
        text = settings.get(DYNAMO + name)
        if text is not None and text.lstrip("-").isdigit():
            return int(text)
    return None


def limit_words(settings: dict[str, str]) -> Optional[str]:
    """Why the recompile limit was hit when the run changed it: `recompile_limit = 2 in this run (torch's default is 8)`."""
    limit = limit_of(settings)
    if limit is None or limit == STABLE["recompile_limit"]:
        return None
    lower = "lowered: " if limit < STABLE["recompile_limit"] else ""
    return (f"{lower}torch._dynamo.config.recompile_limit = {limit} in this run (torch's default is "
            f"{STABLE['recompile_limit']})")


def scalar_words(settings: dict[str, str]) -> Optional[str]:
    """Why a `.item()` does not break the graph in this run."""
    if settings.get(DYNAMO + "capture_scalar_outputs") == "True":
        return ("torch._dynamo.config.capture_scalar_outputs = True in this run: `.item()` is captured in the graph "
                "(no graph break there)")
    return None


def explanations(settings: dict[str, str]) -> list[str]:
    """The settings of this run that explain findings, in words."""
    out = [w for w in (limit_words(settings), scalar_words(settings)) if w]
    if settings.get(DYNAMO + "automatic_dynamic_shapes") == "False":
        out.append("torch._dynamo.config.automatic_dynamic_shapes = False (`dynamic=False`): every new input size "
                   "recompiles")
    if settings.get(DYNAMO + "suppress_errors") == "True":
        out.append("torch._dynamo.config.suppress_errors = True: a failed compile runs eagerly, silently")
    return out


SHORT = {"torch._dynamo.config": "dynamo", "torch._inductor.config": "inductor", "torch._functorch.config": "functorch",
         "torch.fx.experimental._config": "fx"}


def short_name(full: str) -> str:
    """`torch._dynamo.config.recompile_limit` -> `dynamo.recompile_limit`; a variable stays as it is."""
    for module, name in SHORT.items():
        if full.startswith(module + "."):
            return name + full[len(module):]
    return full


def short(settings: dict[str, str], most: int = 6) -> str:
    """`dynamo.recompile_limit = 2, TORCHINDUCTOR_FREEZING=1, … (+3 more)`: the settings in a line."""
    parts = [f"{short_name(k)} = {v}" if k.startswith(MODULES) else f"{k}={v}" for k, v in list(settings.items())[:most]]
    more = len(settings) - most
    return ", ".join(parts) + (f" (+{more} more)" if more > 0 else "")
