"""Writes tests/data/cudagraph_skips/torch-<version>.json: torch's own "skipping cudagraphs due to …"
messages, produced on the CPU by torch's own formatters (`torch._inductor.cudagraph_utils`) applied to
the nodes of a real Dynamo graph of `sample_model.py` (whose lines the stack traces name), for the
CUDA-graphs lever's replay tests. `python -m benchmarks.recordings.cudagraph_skips [--out DIR]` (the
`cudagraph_skips` unit writes to its own folder and compares with the committed samples)."""

from __future__ import annotations

import json
import os
import sys

import torch
from torch._inductor import cudagraph_utils as cu

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "cudagraph_skips"))
DIR = "{DIR}"  # the folder of sample_model.py, put back by the tests


def main() -> int:
    sys.path.insert(0, OUT)
    import sample_model  # noqa: PLC0415 - the file whose lines the stack traces name

    graphs = []
    torch.compile(sample_model.step, backend=lambda gm, ex: graphs.append(gm) or gm.forward, fullgraph=True)(
        torch.ones(4), torch.ones(4))
    [gm] = graphs
    placeholders = cu.get_placeholder_info(gm.graph)
    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    messages = {
        "mutated_input": cu.get_mutation_stack_trace(placeholders, [0]),
        "mutated_inputs_no_trace": cu.format_default_skip_message("mutated inputs"),
        "cpu_node": cu.check_multiple_devices_or_any_cpu_nodes({torch.device("cpu"): nodes[1]}),
        "multiple_devices": cu.format_default_skip_message(
            f"multiple devices: {', '.join(repr(d) for d in (torch.device('cuda', 0), torch.device('cuda', 1)))}"),
        "incompatible_ops": cu.format_default_skip_message("incompatible op aten._fused_moving_avg_obs_fq_helper.default"),
        "override_annotation": "disabling cudagraphs due to override_cudagraphs annotation",
    }
    messages = {k: v.replace(OUT, DIR) for k, v in messages.items()}
    doc = {"torch": torch.__version__, "source": "torch/_inductor/cudagraph_utils.py (format_default_skip_message, "
           "get_mutation_stack_trace, check_multiple_devices_or_any_cpu_nodes) and compile_fx.py (the override "
           "annotation), applied to a Dynamo graph of tests/data/cudagraph_skips/sample_model.py; logged by "
           "log_cudagraph_skip_and_bump_counter on the logger torch._inductor.cudagraph_utils.__cudagraphs",
           "messages": messages}
    folder = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else OUT
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"torch-{torch.__version__.split('+')[0]}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
