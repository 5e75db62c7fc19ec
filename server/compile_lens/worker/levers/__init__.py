"""The `levers` phase: torch's levers tried on a target and measured against the default compile.

Data flows one way through these files:
- `blocks`: which children repeat (the regional lever's blocks), read from the built model;
- `variants`: how each side is compiled — the default `torch.compile(model)`, each block compiled
  once, `nested_compile_region`, `dynamic=True`, a guard filter — shared by the child and the worker;
- `child`: one side's cold and warm compile (and its compiles counted), in a fresh process with an
  empty Inductor cache, as the measurement's cold compile is (`measure/compile/cold`);
- `steady`: two sides' steady time in paired rounds with a 95% interval (`measure/timing/rounds`);
- `judge`: figures to a verdict ("better", "worse", "no change", "inconclusive");
- `regional`, `dynamic`, `guards`: one lever each, from its figures to a `protocol.Lever`;
- `phase`: which levers apply to a target, each run on its own (`isolated`) within the budget.
"""
