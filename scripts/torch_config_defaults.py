"""Write torch's compile-settings defaults (Dynamo, Inductor, functorch, FX's experimental config)
to server/compile_lens/torch_text/config_defaults.json, for `torch_text.compile_settings`, which
reads a trace's settings without torch. Run with the torch the table should describe:

    python scripts/torch_config_defaults.py

A default computed from the machine (a path, the CPU count) is left out: the table only says which
values a trace writes that are a default all the same (an older torch's codegen listed some).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch._dynamo.config
import torch._functorch.config
import torch._inductor.config
import torch.fx.experimental._config

MODULES = {"torch._dynamo.config": torch._dynamo.config, "torch._inductor.config": torch._inductor.config,
           "torch._functorch.config": torch._functorch.config,
           "torch.fx.experimental._config": torch.fx.experimental._config}
OUT = Path(__file__).resolve().parent.parent / "server" / "compile_lens" / "torch_text" / "config_defaults.json"


def _jsonable(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    json.dumps(value)  # raises for what JSON cannot hold (callables): left out
    return value


def main() -> None:
    defaults: dict[str, object] = {}
    for module_name, module in MODULES.items():
        for key, entry in module._config.items():
            value = entry.default
            if isinstance(value, str) and (os.sep in value or value.startswith("~")):
                continue  # a path of this machine
            if key in ("compile_threads",):
                continue  # the machine's CPU count
            try:
                defaults[f"{module_name}.{key}"] = _jsonable(value)
            except (TypeError, ValueError):
                continue
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(defaults.items()))
    OUT.write_text(f'{{"torch": {json.dumps(torch.__version__)}, "defaults": {{\n{rows}\n}}}}\n')  # a key a line: diffs read
    print(f"{len(defaults)} defaults of torch {torch.__version__} -> {OUT}")


if __name__ == "__main__":
    main()
