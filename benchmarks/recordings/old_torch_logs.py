"""Record what an older torch logs while Compile Lens traces and sweeps some files, for the tests
of the text readers (`tests/worker/test_old_torch_logs.py`), which replay these records on today's torch.

    python3 -m venv /tmp/v24 && /tmp/v24/bin/pip install torch==2.4.0 numpy psutil
    PYTHONPATH=server:. /tmp/v24/bin/python -m benchmarks.recordings.old_torch_logs examples/item_scale.py ... [--out DIR]

writes tests/data/torch_logs/torch-<version>.json: per file and target, every record the
collector's logger received (logger, level, function, message), the repository root written as
"{root}" so the records replay anywhere.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import torch

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.worker.breaks.graph_breaks import trace_graph_breaks
from compile_lens.worker.breaks.recompiles import sweep_recompiles
from compile_lens.worker.loader import TargetError, build_target, import_file

ROOT = Path(__file__).resolve().parents[2]


OUT = ROOT / "tests" / "data" / "torch_logs"


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append({"name": record.name, "level": record.levelno, "func": record.funcName,
                             "message": record.getMessage().replace(str(ROOT), "{root}"),
                             "exc": str(record.exc_info[1]) if record.exc_info else None})


def main(paths: list[str]) -> None:
    out: dict[str, dict] = {}
    logger = logging.getLogger("torch._dynamo")
    for name in paths:
        path = Path(name).resolve()
        found = discover(path.read_text())
        specs = [s for s in resolve_inputs(str(path), str(path.parent), list(found.targets)) if s.inputs and s.inputs.text]
        module = import_file(str(path), str(path.parent))
        for spec in specs:
            try:
                built = build_target(module, spec, str(path))
            except TargetError:
                continue
            runs = {}
            jobs = (("trace", lambda b=built, p=path: trace_graph_breaks(b, str(p.parent))),
                    ("sweep", lambda b=built, p=path: sweep_recompiles(b, path=str(p), max_seconds=120)))
            for run, job in jobs:
                recorder = _Recorder()
                logger.addHandler(recorder)
                try:
                    job()
                except TargetError as exc:
                    print(f"{path.name}:{spec.name} {run}: {exc.problem.message}", file=sys.stderr)
                finally:
                    logger.removeHandler(recorder)
                runs[run] = recorder.records
            out[f"{path.relative_to(ROOT)}:{spec.name}"] = runs
    target = OUT / f"torch-{torch.__version__.split('+')[0]}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {target} ({sum(len(r) for runs in out.values() for r in runs.values())} records)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--out" in args:  # another folder than the tests' (the `old_torch_logs` unit's own)
        i = args.index("--out")
        OUT, args = Path(args[i + 1]), args[:i] + args[i + 2:]
    main(args)
