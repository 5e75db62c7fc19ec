"""The compile, measured: `cold` starts a fresh process with an empty Inductor cache and limits,
`children` one such process per workload (the forward's started as the job arrives), `bench_child` is
what runs in it (`python -m`, by name; `cold_job` its job and result, typed), `per_frame` reads torch's compilation metrics per frame,
`per_line` Dynamo's tracing time per source line, `dynamo_watch` the recompiles, guards and cache
hits while timing, and `warm_remote` what a fresh process served by the team's Redis cache pays."""
