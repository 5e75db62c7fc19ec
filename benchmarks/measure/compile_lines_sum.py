"""Do a frame's compile lines add up to its Dynamo time? (issue 53, items 1–2)

Each model is compiled cold (Inductor, an empty cache, a fresh process) with `compile_lines.recorded()`
around its first forward, as `bench_child` does; `compile_frames.collect` gives each frame its Dynamo
time (torch's compilation metrics: the frame's compile less its backend) and the lines. Prints, per
frame: Dynamo's time, its lines' tracing, guards, the sum of the frame's own lines (the def line's
guards, graph and bytecode included) against Dynamo's time, the costliest lines with their share and
the inlay hints the editor would show (a loop repeating a block names regional compilation).

    .venv/bin/python -m benchmarks.measure.compile_lines_sum [--only Stack]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS = ("Stack (8 blocks in a ModuleList loop)", "nanoGPT-style GPT (12 layers)", "GPT-2 (6 layers, 128 wide)")


def build(label: str):
    import torch

    if label.startswith("Stack"):
        from compile_lens.worker.loader import import_file

        folder = os.path.join(REPO, "tests", "fixtures", "levers")
        mod = import_file(os.path.join(folder, "blocks.py"), folder)
        return mod.Stack(depth=8), (torch.randn(2, 8, 32),), folder
    if label.startswith("nanoGPT"):
        sys.path.insert(0, os.path.join(REPO, "benchmarks", "models"))
        import speedup_models as m

        return m.GPT(layers=12), (torch.randint(0, m.GPT_VOCAB, (m.GPT_BATCH, m.GPT_SEQ)),), os.path.dirname(m.__file__)
    from transformers import GPT2Config, GPT2Model

    model = GPT2Model(GPT2Config(n_layer=6, n_embd=128, n_head=4, vocab_size=1000, n_positions=128))
    return model, (torch.randint(0, 1000, (2, 32)),), os.path.dirname(sys.modules[GPT2Model.__module__].__file__)


def child(label: str) -> dict:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="clines-")
    import time

    import torch
    import torch._dynamo  # noqa: F401 - as bench_child: the trace_source logger exists once Dynamo is imported
    import torch._inductor.compile_fx  # noqa: F401

    from compile_lens.render import compile_lines as text
    from compile_lens.worker.measure.compile import per_frame as compile_frames
    from compile_lens.worker.measure.compile import per_line as compile_lines

    model, inputs, root = build(label)
    model.eval()
    t0 = time.perf_counter()
    with compile_lines.recorded() as traced, torch.no_grad():
        torch.compile(model)(*inputs)
    cold = time.perf_counter() - t0
    ct = compile_frames.collect(traced, root)
    frames = []
    for f in ct.frames:
        own = [c for c in ct.lines if c.compile_id == f.compile_id]
        top = sum(c.s for c in own if c.top)
        dynamo = f.stages_s.get("dynamo") or 0.0
        after = sum(c.after_s for c in own)
        frames.append({"frame": f"{f.compile_id} {f.function}", "total_s": f.total_s, "dynamo_s": dynamo,
                       "traced_s": f.traced_s, "guards_s": f.guards_s, "lines_s": round(top, 4),
                       "lines_over_dynamo": round(top / dynamo, 4) if dynamo else None,
                       "tracing_over_dynamo": round((top - after) / dynamo, 4) if dynamo else None,
                       "top": [f"{os.path.basename(c.path)}:{c.line} {c.s:.3f} s ({c.s / dynamo:.0%}) {c.traced}×"
                               + (" guards, graph and bytecode" if c.after_s else "") for c in own[:4]] if dynamo else []})
    path = ct.lines[0].path if ct.lines else ""
    hints = [f"{os.path.basename(c.path)}:{c.line} {text.hint_label(c, ct)}"
             for c, _, _ in text.hints_in_file({"m": SimpleNamespace(compile_time=ct)}, path)]
    return {"label": label, "cold_s": round(cold, 2), "frames": frames, "hints": hints,
            "text": text.top_text(ct, root)}  # as `check` prints it


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    from benchmarks.figures import Figure, Result, emit

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(REPO, "server"), REPO])}
    figures: dict[str, Figure] = {}
    failed: list[str] = []
    for label in MODELS:
        if args.only and args.only not in label:
            continue
        run = subprocess.run([sys.executable, "-m", "benchmarks.measure.compile_lines_sum", "--child", label],
                             capture_output=True, text=True, env=env, cwd=REPO)
        if run.returncode:
            print(f"{label}: failed\n{run.stderr[-2000:]}")
            failed.append(f"{label}: {run.stderr[-300:]}")
            continue
        found = json.loads(run.stdout.strip().splitlines()[-1])  # the grandchild's one line: its figures
        print(f"{label}: cold compile {found['cold_s']} s")
        figures[f"{label}.cold_s"] = Figure(found["cold_s"], "s")
        for f in found["frames"]:
            # reported, not held (as before): the lines' sum against the frame's Dynamo time, and tracing alone
            figures |= {f"{label} {f['frame']}.dynamo_s": Figure(f["dynamo_s"], "s"),
                        f"{label} {f['frame']}.lines_over_dynamo": Figure(f["lines_over_dynamo"], "x", "near"),
                        f"{label} {f['frame']}.tracing_over_dynamo": Figure(f["tracing_over_dynamo"], "x")}
        for f in found["frames"]:
            print(f"  frame {f['frame']}: Dynamo {f['dynamo_s']:.3f} s, lines {f['lines_s']:.3f} s "
                  f"({f['lines_over_dynamo']:.1%}; tracing alone {f['tracing_over_dynamo']:.1%}), "
                  f"guards {f['guards_s']} s")
            for row in f["top"]:
                print(f"    {row}")
        print("  hints: " + " | ".join(found["hints"]))
        print("\n".join(found["text"]))
    emit(Result(figures, ok=False if failed else None, notes={"failed": failed} if failed else {}))


if __name__ == "__main__":
    main()
