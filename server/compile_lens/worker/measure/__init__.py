"""Measuring a target, eager vs compiled, in subpackages by concern: `run` (one measurement from start to
end: the parts in order, the budget, the figures so far), `workload` (what is called, on which device, in
which precision), `timing` (the steady-state paired rounds and the words they earn), `compile` (the cold
compile in fresh processes, per frame and per line, Dynamo's metrics, the warm-remote compile), `lines`
(the steady-state time per source line), `accuracy`, `memory` and `deployment`."""
