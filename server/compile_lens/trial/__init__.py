"""`compile-lens trial -- python train.py ...`: the user's own training run, eager and compiled.

`hook` runs inside the user's program beside the `record` hook (stdlib only until torch is
imported), with its parts `hook_*` (state, modules, steps, logs, artifacts, ranks); `session` decides which runs happen and `runner` starts each; `summary` turns the run
records into figures, typed in `figures` (what trial.json holds, through `store`), with `shapes`
(per input shape) and `ranks` (per torchrun rank); `render/trial_text.py` words them,
`lsp/trial_feed.py` hands them to the editor; the subcommand is `cli/trial.py`. Importing this
package imports nothing else.
"""
