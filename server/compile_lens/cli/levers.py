"""`check --levers`'s flag: the levers phase after the measurement (run by `engine/check.py`). A
target whose figures came from the cache runs the levers phase alone, handed those figures (the guard share, the recompiles); levers
already measured on the same code come from the cache too."""

from __future__ import annotations

FLAG_HELP = ("after the measurement, try torch's levers on each target (regional compilation, dynamic/static "
             "shapes, guard filters, the aot_compile restart path, CUDA graphs on a GPU) and measure each against the default; costs up to 3× a measurement")
