"""The steady-state timing: `rounds` (eager and compiled in paired rounds, the median ratio with its
bootstrap interval, each round asked of `busy/` whether it was quiet), `per_workload` (one workload's
rounds on its share of the budget: the forward's first look, more rounds after it is sent),
`guard_cost` (guards skipped, as a third block of the same rounds) and `verdict` (from figures to
words: the verdict, break-even, why a timing is inconclusive, pooled medians)."""
