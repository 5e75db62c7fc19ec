"""Where accuracy first drifts: a planted divergence (a module that computes something else when
compiled: `torch.compiler.is_compiling()`, as a custom kernel with another result would) is named, not
its parent block nor a later block whose inputs already differ; gradients that differ with outputs
that agree name the module whose own parameters' gradients differ; a model that compiles to eager's
results names nothing (`measure` is only called after the accuracy check found a difference)."""

from __future__ import annotations

import torch
from torch import nn

from compile_lens.worker.measure.accuracy import drift


class Planted(nn.Module):
    def forward(self, x):
        return x * (1.01 if torch.compiler.is_compiling() else 1.0)


class Block(nn.Module):
    def __init__(self, planted: bool = False):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 16)
        self.scale = Planted() if planted else nn.Identity()

    def forward(self, x):
        return x + self.scale(self.fc(self.ln(x)).relu())


class Stack(nn.Module):
    def __init__(self, planted_at: int = 1):
        super().__init__()
        self.blocks = nn.ModuleList([Block(i == planted_at) for i in range(3)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class GradOnly(torch.autograd.Function):
    """Forward as is; a backward that scales the gradient when compiled: outputs agree, gradients do not."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * (1.5 if torch.compiler.is_compiling() else 1.0)


class Tail(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(GradOnly.apply(x))


class GradStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.tail = Tail()

    def forward(self, x):
        return self.tail(self.first(x))


def test_the_planted_module_is_named_with_its_inputs_agreeing():
    torch.manual_seed(0)
    model = Stack()
    found = drift.output_drift(model, (torch.randn(8, 16),), {})
    assert found is not None and found.module == "blocks.1.scale" and found.of == "output"
    assert found.path == __file__ and found.line == Planted.forward.__code__.co_firstlineno
    assert found.max_rel > 1e-3 and found.inputs_max_abs < 1e-5
    text = drift.words(found)
    assert text.startswith("accuracy drift: output first differs at `blocks.1.scale` (test_drift.py:")
    assert "its inputs agree to" in text


def test_a_model_that_compiles_to_eagers_results_names_no_module():
    torch.manual_seed(0)
    assert drift.output_drift(Stack(planted_at=-1), (torch.randn(8, 16),), {}) is None


def test_gradients_that_differ_under_agreeing_outputs_name_the_first_module_in_backward_order():
    from compile_lens.worker.measure.accuracy.compare import _grads
    from compile_lens.worker.measure.workload.model import Model

    torch.manual_seed(0)
    model = GradStack()
    args = (torch.randn(8, 16),)
    compiled_obj = GradStack()
    compiled_obj.load_state_dict(model.state_dict())
    eager, compiled = Model(model, model, args, False), Model(torch.compile(compiled_obj), compiled_obj, args, False)
    found = drift.measure(model, args, {}, lambda: (_grads(eager, 0), _grads(compiled, 0)))
    # `tail.fc` is before the scaled gradient in backward order: its own gradients agree; `first`'s do not
    assert found.module == "first" and found.of == "grad" and found.inputs_max_abs is None
    assert drift.words(found).startswith("accuracy drift: gradients first differ at `first`")


def test_the_accuracy_finding_points_at_where_the_difference_starts():
    """CL301 stays on the target's line; the drift is its related location, with the drift's words, and
    in the JSON."""
    from compile_lens.protocol import (
        AccuracyDrift,
        Benchmark,
        CompileSeconds,
        Errors,
        PeakMemory,
        TargetResult,
        Timing,
    )
    from compile_lens.render import cli_output
    from compile_lens.render.findings import target_findings

    found = AccuracyDrift("blocks.1.scale", "/ws/model.py", 16, 0.0165, 0.0101, 2.4e-7, "output")
    notes = ["accuracy: compiled outputs differ from eager by up to 0.0165 (relative 0.0101), beyond float32 "
             "tolerance (rtol 0.0001, atol 1e-05)", drift.words(found)]
    b = Benchmark("cpu", "cpu", "default", Timing(1.0, 1.0, 1.0, 0.0, 0.0), None, CompileSeconds(), None, PeakMemory(), Errors(), Errors(), "x",
                  notes=notes, accuracy_drift=found)
    result = TargetResult("Stack", "module", 30, benchmark=b)
    [finding] = [f for f in target_findings(result, "/ws/model.py") if f.code == "CL301"]
    assert finding.line == 30 and len(finding.related) == 1
    rel = finding.related[0]
    assert (rel.path, rel.line, rel.name) == ("/ws/model.py", 16, "blocks.1.scale")
    assert rel.note.startswith("output first differs at `blocks.1.scale` (model.py:16)")
    assert cli_output.benchmark_json(b)["accuracy_drift"] == {
        "module": "blocks.1.scale", "path": "/ws/model.py", "line": 16, "max_abs": 0.0165, "max_rel": 0.0101,
        "inputs_max_abs": 2.4e-7, "of": "output"}
