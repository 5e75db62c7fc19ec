"""Where the steady-state time goes, line by line: `costs` (profiles of eager and compiled calls, each
line's share), `windows` (each profiled call's time window on the profiler's clocks, the device clock),
`tags` (which source line a torch call belongs to), `provenance` (Inductor's provenance: the lines
each generated kernel came from) and `part` (the line costs as a part of the measurement, read from
each workload's own timed compile)."""
