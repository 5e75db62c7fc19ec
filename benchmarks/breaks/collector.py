"""Time spent inside the worker's collector per torch log record, data path vs text fallback, in one
process, alternating per round (issue 16): `.venv/bin/python -m benchmarks.breaks.collector FILE...`.

Each round traces and sweeps every target of each file; even rounds read torch's data, odd rounds
the log text (`collector.STRUCTURED = False`). The collector's own time per record is what is
compared; whole rounds (trace + sweep, which also hold the data path's wrapper around torch's
break formatter and the reading of its arguments) are printed beside it, though on a shared
machine they vary more than the difference. Its figures go back as one JSON line (`figures.emit`).
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))
from benchmarks.figures import Figure, Result, emit  # noqa: E402
from compile_lens.discovery import discover  # noqa: E402
from compile_lens.discovery.inputs import resolve_inputs  # noqa: E402
from compile_lens.worker.breaks import collector  # noqa: E402
from compile_lens.worker.breaks.graph_breaks import trace_graph_breaks  # noqa: E402
from compile_lens.worker.breaks.recompiles import sweep_recompiles  # noqa: E402
from compile_lens.worker.loader import build_target, import_file  # noqa: E402

ROUNDS = 6
cost: dict[bool, list[float]] = {True: [], False: []}
rounds: dict[bool, list[float]] = {True: [], False: []}
read = collector.CompileCollector._read


def timed(self, record):
    started = time.perf_counter()
    read(self, record)
    cost[collector.STRUCTURED].append(time.perf_counter() - started)


collector.CompileCollector._read = timed
for name in sys.argv[1:]:
    path = Path(name).resolve()
    root = str(path.parent)
    module = import_file(str(path), root)
    found = discover(path.read_text())
    specs = [s for s in resolve_inputs(str(path), root, list(found.targets)) if s.inputs and s.inputs.text]
    built = [build_target(module, s, str(path)) for s in specs]
    for i in range(ROUNDS):
        collector.STRUCTURED = i % 2 == 0
        started = time.perf_counter()
        for target in built:
            trace_graph_breaks(target, root)
            sweep_recompiles(target, path=str(path))
        rounds[collector.STRUCTURED].append(time.perf_counter() - started)
collector.STRUCTURED = True
figures: dict[str, Figure] = {}
for structured in (True, False):
    times = cost[structured]
    side = "data" if structured else "text"
    print(f"{side}: {len(times)} records, median {statistics.median(times) * 1e6:.1f} µs, "
          f"total {sum(times) * 1e3:.2f} ms; whole rounds {' '.join(f'{t * 1e3:.0f}' for t in rounds[structured])} ms")
    figures |= {f"{side}.records": Figure(len(times), "count"),
                f"{side}.median_us": Figure(statistics.median(times) * 1e6, "µs", "lower"),
                f"{side}.total_ms": Figure(sum(times) * 1e3, "ms", "lower"),
                f"{side}.rounds_median_ms": Figure(statistics.median(rounds[structured]) * 1e3, "ms", "lower")}
# the goal: torch's data costs no more per record than the text readers did
figures["data_over_text"] = Figure(figures["data.median_us"].value / figures["text.median_us"].value, "x", "lower", 1.0)
emit(Result(figures))
