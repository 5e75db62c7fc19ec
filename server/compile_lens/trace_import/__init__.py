"""`compile-lens import`: read torch's structured trace (`TORCH_TRACE`), made anywhere, and put what
torch recorded onto the workspace's lines. Pure Python, no torch, no pygls: it runs in the CLI and
in the language server. `reader` streams records out of a log; `fold` keeps, per rank, the compiled
frames with their breaks, recompiles, compile time and cache counts; `paths` maps the run's paths
onto the workspace; `report` turns that into the `FileReport`s every renderer reads."""
