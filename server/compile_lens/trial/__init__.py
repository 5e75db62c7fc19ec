"""`compile-lens trial -- python train.py ...`: the user's own training run, eager and compiled.

`hook` runs inside the user's program beside the `record` hook (stdlib only until torch is
imported); `runner` starts the runs; `summary` turns the two run records into figures
(`render/trial_text.py` words them, `lsp/trial_feed.py` hands them to the editor); the subcommand
is `cli/trial.py`. Importing this package imports nothing else.
"""
