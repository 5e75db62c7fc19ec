"""The function whose Dynamo graph gives the recorded cudagraph-skip messages their stack traces
(benchmarks/recordings/cudagraph_skips.py): an input mutated in place (line 6), the other input used (line 7)."""


def step(x, y):
    x.add_(1)
    return y * 2
