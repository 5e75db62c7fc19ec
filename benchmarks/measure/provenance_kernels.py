"""Does Inductor's provenance tracking change any kernel? (issue 43, item 2)

Compiles each model of `benchmarks/models/line_costs_models.py` (forward and train step) in a fresh process
with a fresh Inductor cache, once with `trace.provenance_tracking_level` 0 and once with 1, catches
every graph's output code, and compares them with comment lines left out. Prints the differing
graphs (none expected) and each compile's seconds.

    .venv/bin/python -m benchmarks.measure.provenance_kernels [--only nanoGPT]
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time


def child(level: int, out: str, only: str | None) -> None:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="prov-")
    import torch
    import torch._inductor.config as inductor_config

    torch.set_num_threads(1)
    inductor_config.trace.provenance_tracking_level = level
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
    import line_costs_models as lcm

    from compile_lens.worker.dynamo import structured_trace
    from compile_lens.worker.measure.workload.model import Model

    class Codes(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.codes: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            if "inductor_output_code" in (getattr(record, "metadata", None) or {}):
                self.codes.append(str(getattr(record, "payload", "") or ""))

    found = {}
    for label, model, inputs in lcm.models(tempfile.mkdtemp(prefix="ws-")):
        if only and only not in label:
            continue
        for wl in ("forward", "train"):
            torch._dynamo.reset()
            m = copy.deepcopy(model)
            h = Codes()
            with structured_trace(h):
                t0 = time.perf_counter()
                Model(torch.compile(m), m, inputs, False).run(wl)()
                found[f"{label} · {wl}"] = {"s": time.perf_counter() - t0, "codes": h.codes}
    with open(out, "w") as f:
        json.dump(found, f)


def code_only(code: str) -> list[str]:
    out = []
    for line in code.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", "//")):
            continue
        out.append(re.sub(r"/tmp/\S+", "<path>", re.sub(r"\s+#.*$", "", line)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.only)
        return
    runs = {}
    for level in (0, 1):
        out = tempfile.mktemp(suffix=".json")
        subprocess.run([sys.executable, __file__, "--child", str(level), out] + (["--only", args.only] if args.only else []),
                       check=True, stderr=subprocess.DEVNULL)
        with open(out) as f:
            runs[level] = json.load(f)
    same = 0
    for key, off in runs[0].items():
        on = runs[1][key]
        print(f"{key}: {len(off['codes'])} graphs, compile {off['s']:.1f} s off / {on['s']:.1f} s on")
        for a, b in zip(off["codes"], on["codes"]):
            if code_only(a) == code_only(b):
                same += 1
            else:
                print("  DIFFERS:\n" + "\n".join(list(difflib.unified_diff(code_only(a), code_only(b), lineterm="", n=0))[:20]))
    total = sum(len(r["codes"]) for r in runs[0].values())
    print(f"identical without comments: {same} of {total} graphs")
    from benchmarks.figures import Figure, Result, emit

    emit(Result({"graphs": Figure(total, "count"), "differing_graphs": Figure(total - same, "count", "lower", 0),
                 **{f"{key}.compile_off_s": Figure(off["s"], "s") for key, off in runs[0].items()},
                 **{f"{key}.compile_on_s": Figure(on["s"], "s") for key, on in runs[1].items()}}))


if __name__ == "__main__":
    main()
