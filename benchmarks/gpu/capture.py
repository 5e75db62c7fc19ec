"""The CUDA artifacts a GPU check brings back for CPU tests to replay (tests/worker/test_cuda_replay.py):
per workload (forward, train step) of the shared MLPStack, compiled with Inductor's provenance on,

- `<workload>.json.gz`: the profiler's events as the line-cost attribution reads them (every
  plain attribute of each `FunctionEvent`, its parent and children by index, its time range), and
  the provenance maps caught during that compile (`provenance.Graph`);
- `<workload>.trace.json.gz`: torch's own Chrome trace of the same profile (for a person; not replayed).

    python -m benchmarks.gpu.capture OUT_DIR [--device cuda] [--workload forward|train]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import REPO

FORMAT = 1
_SCALARS = (str, int, float, bool, type(None))


def event_record(evt: Any) -> dict[str, Any]:
    """Every plain attribute (properties included: self/total times) of a FunctionEvent."""
    out: dict[str, Any] = {}
    for name in dir(evt):
        if name.startswith("_") or "cuda" in name or name in ("cpu_children", "cpu_parent", "kernels", "time_range"):
            continue
        try:
            value = getattr(evt, name)
        except Exception:  # noqa: BLE001 - a property that does not apply to this event
            continue
        if isinstance(value, _SCALARS):
            out[name] = value
        elif type(value).__name__ == "DeviceType":
            out[name] = str(value).rsplit(".", 1)[-1]
    out["time_range"] = [evt.time_range.start, evt.time_range.end]
    return out


def dump_events(events: list[Any]) -> list[dict[str, Any]]:
    with warnings.catch_warnings():  # deprecated aliases (metadata_json, ...) warn when read
        warnings.simplefilter("ignore")
        return _dump(events)


def _dump(events: list[Any]) -> list[dict[str, Any]]:
    index = {id(e): i for i, e in enumerate(events)}
    rows = []
    for e in events:
        rec = event_record(e)
        rec["cpu_parent"] = index.get(id(e.cpu_parent)) if e.cpu_parent is not None else None
        rec["cpu_children"] = [index[id(c)] for c in e.cpu_children if id(c) in index]
        rows.append(rec)
    return rows


def capture(out: Path, device: str, workload: str) -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config

    from compile_lens.worker.measure import line_windows as windows
    from compile_lens.worker.measure import provenance
    from compile_lens.worker.measure.cold_compile import inductor_cache
    from compile_lens.worker.measure.workload import Model

    os.environ["COMPILE_LENS_BENCH_DEVICE"] = device
    sys.path.insert(0, str(REPO / "benchmarks" / "models"))
    import speedup_models as m

    model = m.MLPStack().to(device)
    inputs = (torch.randn(m.MLP_BATCH, m.MLP_WIDTH, device=device),)
    own = tempfile.mkdtemp(prefix="compile-lens-capture-")
    try:
        with inductor_cache(own), inductor_config.patch(provenance.config_patch(device)), \
                provenance.uncached(), provenance.catching() as caught:
            other = copy.deepcopy(model)
            call = Model(torch.compile(other), other, inputs, False).run(workload)
            call()
            graphs = caught.graphs
        with inductor_cache(own), provenance.kernel_ranges(graphs):
            prof = windows.profile(call, 20, device)
    finally:
        shutil.rmtree(own, ignore_errors=True)
    with warnings.catch_warnings():  # the deprecated cuda_* aliases warn when read
        warnings.simplefilter("ignore")
        events = list(prof.events())
    out.mkdir(parents=True, exist_ok=True)
    record = {"format": FORMAT, "device": device, "workload": workload, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
              "root": str(REPO / "benchmarks" / "models"), "events": dump_events(events), "graphs": [asdict(g) for g in graphs]}
    with gzip.open(out / f"{workload}.json.gz", "wt", encoding="utf-8") as f:
        json.dump(record, f)
    trace = out / f"{workload}.trace.json"
    prof.export_chrome_trace(str(trace))
    with open(trace, "rb") as src, gzip.open(str(trace) + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace.unlink()
    return {"events": len(events), "graphs": len(graphs), "kernels": sum(len(g.kernels) for g in graphs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workload", choices=("forward", "train"), action="append")
    args = parser.parse_args()
    for w in args.workload or ["forward", "train"]:
        print(json.dumps({w: capture(Path(args.out), args.device, w)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
