"""One measurement from start to end: `benchmark` runs the parts in order (the forward first, its
headline sent as soon as it lands), `later_parts` those after the workloads, `budget` bounds them
(`--max-seconds`), `estimates` says what a later part should take, `isolated` keeps an optional part's
failure to its own figure, and `snapshot` turns the figures so far into a `Benchmark` to send."""
