"""The recompile sweep, against real torch on CPU (backend eager, tiny models)."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from paths import SERVER  # noqa: E402

try:
    import compile_lens  # noqa: F401
except ImportError:  # until the package is installed: run from the checkout
    sys.path.insert(0, str(SERVER))

import paths  # noqa: E402
from compile_lens.protocol import InputRecipe, Recompile, TargetSpec  # noqa: E402
from compile_lens.worker.breaks import collector, log_text, recompile_kinds, recompiles, variations  # noqa: E402
from compile_lens.worker.breaks.recompiles import sweep_recompiles  # noqa: E402
from compile_lens.worker.loader import TargetError, build_target, import_file  # noqa: E402

FIXTURES = paths.FIXTURES / "recompiles"
MODELS = str(FIXTURES / "models.py")
DECLARED = ("base inputs", "variant ")


def line_of(name: str, text: str | None = None) -> int:
    """The class/def line of `name` in the fixture file, or the first line containing `text`."""
    source = Path(MODELS).read_text()
    if text is not None:
        return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
    raise KeyError(name)


@pytest.fixture(scope="module")
def module():
    return import_file(MODELS, str(FIXTURES))


def spec(name: str, inputs: str, variants=(), init=None) -> TargetSpec:
    kind = "module" if name[0].isupper() else "function"
    return TargetSpec(name, kind, line_of(name),
                      inputs=InputRecipe("directive", inputs, init=init, variants=list(variants)))


def sweep(module, name, inputs, variants=(), **kwargs) -> list[Recompile]:
    return sweep_recompiles(build_target(module, spec(name, inputs, variants), MODELS),
                            path=MODELS, **kwargs)


def by_label(records: list[Recompile]) -> dict[str, list[Recompile]]:
    out: dict[str, list[Recompile]] = {}
    for r in records:
        out.setdefault(r.variation, []).append(r)
    return out


# --- declared variants equal torch's own log ------------------------------------------------

CASES = [
    ("Mlp", "(torch.randn(8, 16),)",
     ["(torch.randn(16, 16),)", "(torch.randn(7, 16),)", "(torch.randn(1, 16),)",
      "(torch.randn(32, 16),)"]),
    ("Steps", "(torch.randn(8, 16), 2)",
     ["(torch.randn(8, 16), 3)", "(torch.randn(8, 16), 3)", "(torch.randn(16, 16), 5)",
      "(torch.randn(16, 16, dtype=torch.float64), 5)"]),
    ("Chatty", "(torch.randn(8, 16),)", ["(torch.randn(16, 16),)", "(torch.randn(7, 16),)"]),
    ("act", "(torch.randn(8, 16), 'relu')",
     ["(torch.randn(8, 16), 'tanh')", "(torch.randn(8, 16), 'gelu')", "(torch.randn(8, 16), 'relu')"]),
    ("double", "(torch.randn(8, 16),)",
     ["(torch.randn(8, 16, dtype=torch.float64),)", "(torch.arange(8),)", "(torch.randn(3, 16, 1),)",
      "(torch.randn(3, 16),)"]),
    ("Steps", "(torch.randn(8, 16), 2)", [f"(torch.randn(8, 16), {n})" for n in range(3, 14)]),
]

# Runs the same calls in a fresh interpreter with TORCH_LOGS=recompiles and prints torch's stderr:
# an independent reading of the log (environment variable, torch's own formatter, no handler).
REFERENCE = textwrap.dedent("""
    import importlib.util, json, sys, torch
    spec = importlib.util.spec_from_file_location("models_ref", sys.argv[1])
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    ns = mod.__dict__
    for name, inputs, variants in json.loads(sys.argv[2]):
        torch._dynamo.reset()
        obj = getattr(mod, name)
        obj = obj() if isinstance(obj, type) else obj
        compiled = torch.compile(obj, backend="eager")
        print("@@CASE", name, file=sys.stderr, flush=True)
        for text in [inputs] + variants:
            args = eval(text, ns)
            try:
                compiled(*(args if isinstance(args, tuple) else (args,)))
            except Exception:
                pass
""")


def start_reference() -> subprocess.Popen:
    env = dict(os.environ, TORCH_LOGS="recompiles")
    return subprocess.Popen(
        [sys.executable, "-c", REFERENCE, MODELS, json.dumps(CASES)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=str(FIXTURES))


def torch_log_reasons(reference: subprocess.Popen) -> list[list[str]]:
    """Per case, the first guard failure of each "Recompiling function" entry torch logged."""
    _, stderr = reference.communicate(timeout=180)
    assert reference.returncode == 0, stderr[-2000:]
    cases: list[list[str]] = []
    expecting = False
    for line in stderr.splitlines():
        if line.startswith("@@CASE"):
            cases.append([])
        elif "Recompiling function" in line:
            expecting = True
        elif expecting and "[__recompiles]" in line:
            failure = re.search(r"\[__recompiles\]\s+- (?:\d+/\d+: )?(.*)$", line)
            if failure and not failure.group(1).startswith("triggered by"):
                cases[-1].append(failure.group(1).strip())
                expecting = False
    return cases


def test_declared_variants_equal_torch_log_in_number_and_reason(module):
    reference = start_reference()  # runs while this process sweeps the same cases
    try:
        ours = [[r for r in sweep(module, name, inputs, variants) if r.variation.startswith(DECLARED)]
                for name, inputs, variants in CASES]
    finally:
        logged_cases = torch_log_reasons(reference)
    assert len(logged_cases) == len(CASES)
    assert sum(map(len, logged_cases)) >= 15  # the cases do recompile
    for (name, _, _), records, logged in zip(CASES, ours, logged_cases):
        assert len(records) == len(logged), (name, [r.reason for r in records], logged)
        for record, line in zip(records, logged):
            guard = record.reason.split(" — ")[0]
            assert line.startswith(guard), (name, record.reason, line)


def test_declared_limit_is_the_last_logged_entry_and_no_probe_follows(module):
    name, inputs, variants = CASES[-1]
    records = sweep(module, name, inputs, variants)
    declared = [r for r in records if r.variation.startswith("variant")]
    assert [r.kind for r in declared] == ["specialization"] * 7 + ["limit"]
    limit = declared[-1]
    assert limit.variation == "variant 8" and limit.changed == "steps"
    assert limit.reason == ("steps == 9 — torch._dynamo hit config.recompile_limit (8): "
                            "after 8 compiles it runs eager")
    assert limit.compile_s is None
    assert [r for r in records if r.kind == "limit"] == [limit]


# --- automatic variations, one kind at a time -----------------------------------------------

def test_batch_sizes_include_an_odd_last_batch():
    assert variations._batch_sizes(8) == [16, 7]
    assert variations._batch_sizes(4) == [8, 3]
    assert variations._batch_sizes(2) == [4, 5]
    assert variations._batch_sizes(1) == [2, 3]


def test_batch_change_is_one_recompile_then_dynamic(module):
    labels = by_label(sweep(module, "Mlp", "(torch.randn(8, 16),)"))
    [record] = labels["batch 16"]
    assert record.kind == "automatic-dynamic"
    assert record.reason == "tensor 'x' size mismatch at index 0. expected 8, actual 16"
    assert record.changed == "x"
    assert record.line == line_of("Mlp") and record.path is None
    assert record.compile_s is not None and record.compile_s > 0
    assert "batch 7" not in labels  # the odd last batch runs in the dynamic graph


def test_sequence_length_of_index_tensors(module):
    labels = by_label(sweep(module, "Tagger", "(torch.randint(0, 50, (4, 12)),)"))
    [record] = labels["sequence 13"]
    assert record.kind == "automatic-dynamic"
    assert record.reason == "tensor 'idx' size mismatch at index 1. expected 12, actual 13"
    assert "sequence 11" not in labels
    assert "requires_grad=True" not in labels  # no float inputs


def test_sequence_length_of_float_btc_inputs(module):
    labels = by_label(sweep(module, "SeqMean", "(torch.randn(4, 10, 16),)"))
    assert labels["sequence 11"][0].reason.startswith("tensor 'x' size mismatch at index 1.")
    assert labels["batch 8"][0].kind == "automatic-dynamic"


def test_eval_mode_names_the_user_line_of_the_guard(module):
    labels = by_label(sweep(module, "Dropper", "(torch.randn(8, 16),)"))
    [record] = labels["eval mode"]
    assert record.kind == "specialization"
    assert record.reason == "self._modules['drop'].training == True"
    assert record.changed == "self.drop.training"
    assert record.line == line_of("Dropper", "return self.drop(self.fc(x))")
    assert record.path == MODELS


def test_requires_grad_toggle_and_autocast(module):
    labels = by_label(sweep(module, "Mlp", "(torch.randn(8, 16),)"))
    [grad] = labels["requires_grad=True"]
    assert grad.kind == "specialization" and grad.changed == "x"
    assert grad.reason == "tensor 'x' requires_grad mismatch. expected requires_grad=0"
    [autocast] = labels["autocast bfloat16"]
    assert autocast.kind == "specialization"
    assert autocast.reason == "GLOBAL_STATE changed: autocast(cpu)_enabled"
    assert "autocast" in autocast.changed
    assert "eval mode" not in labels  # nothing in Mlp reads self.training


def test_int_used_in_range_recompiles_for_every_value(module):
    records = sweep(module, "Steps", "(torch.randn(8, 16), 2)")
    labels = by_label(records)
    steps = labels["steps=3"] + labels["steps=5"]
    assert [r.reason for r in steps] == ["steps == 2", "steps == 2"]
    assert {r.kind for r in steps} == {"specialization"}
    assert {r.changed for r in steps} == {"steps"}
    assert {r.line for r in steps} == {line_of("Steps", "for _ in range(steps):")}
    assert {r.path for r in steps} == {MODELS}


def test_int_or_float_used_as_a_value_becomes_dynamic(module):
    labels = by_label(sweep(module, "Scaled", "(torch.randn(8, 16), 2.0)"))
    [record] = labels["scale=4.0"]
    assert record.kind == "automatic-dynamic" and record.reason == "scale == 2.0"
    assert "scale=6.0" not in labels
    assert not any(r.kind == "limit" for r in sum(labels.values(), []))


def test_string_argument_is_a_specialization(module):
    labels = by_label(sweep(module, "act", "(torch.randn(8, 16), 'relu')"))
    [record] = labels["mode='tanh'"]  # the other literal the function compares with
    assert record.kind == "specialization" and record.reason == "mode == 'relu'"
    assert record.line == line_of("act", 'if mode == "relu":')


def test_dtype_change_is_a_specialization(module):
    records = sweep(module, "double", "(torch.randn(8, 16),)",
                    ["(torch.randn(8, 16, dtype=torch.float64),)"], automatic=False)
    assert [(r.variation, r.kind, r.changed) for r in records] == [
        ("variant 1", "specialization", "x")]
    assert records[0].reason == "tensor 'x' dtype mismatch. expected Float, actual Double"


def test_limit_probe_runs_for_a_specialised_scalar(module):
    records = sweep(module, "Steps", "(torch.randn(8, 16), 2)")
    [limit] = [r for r in records if r.kind == "limit"]
    assert limit.variation.startswith("limit probe: steps=")
    assert limit.changed == "steps"
    assert limit.reason.endswith("torch._dynamo hit config.recompile_limit (8): after 8 compiles it runs eager")
    assert limit.line == line_of("Steps", "for _ in range(steps):")


def test_no_limit_probe_without_a_specialised_value(module):
    calls: list[str] = []
    records = sweep(module, "Scaled", "(torch.randn(8, 16), 2.0)", progress=calls.append)
    assert not any("limit probe" in c for c in calls)
    assert not any(r.kind == "limit" for r in records)


def test_recorded_shapes_replay_distinct_shapes_in_order(module):
    calls: list[str] = []
    records = sweep(module, "Tagger", "(torch.randint(0, 50, (4, 12)),)", automatic=False,
                    recorded_shapes=[[[4, 12]], [[4, 12]], [[4, 20]], [[2, 12]], [[4, 20]]],
                    progress=calls.append)
    assert [c for c in calls if "recorded" in c] == [
        "recompiles: recorded shape (4, 20)", "recompiles: recorded shape (2, 12)"]
    assert [(r.variation, r.kind) for r in records] == [
        ("recorded shape (4, 20)", "automatic-dynamic"), ("recorded shape (2, 12)", "automatic-dynamic")]
    assert records[0].reason == "tensor 'idx' size mismatch at index 1. expected 12, actual 20"


def test_a_variation_that_raises_is_skipped(module, caplog):
    caplog.set_level(logging.INFO, logger="compile_lens.worker.breaks.recompiles")
    records = sweep(module, "Fixed", "(torch.randn(8, 16),)")
    assert not [r for r in records if r.variation.startswith("batch")]
    assert "skipped batch 16" in caplog.text and "skipped batch 7" in caplog.text
    assert by_label(records)["requires_grad=True"]  # the rest of the sweep still ran


def test_time_budget_stops_automatic_variations_but_not_declared_ones(module):
    records = sweep(module, "Mlp", "(torch.randn(8, 16),)", ["(torch.randn(16, 16),)"],
                    max_seconds=0)
    assert [r.variation for r in records] == ["variant 1"]


def test_base_inputs_that_fail_are_a_target_error(module):
    with pytest.raises(TargetError) as err:
        sweep(module, "Fixed", "(torch.randn(4, 16),)")
    assert err.value.problem.kind == "call"


# --- dynamic=True and mark_dynamic stop the size warnings -----------------------------------

def _size_records(records):
    return [r for r in records if "size mismatch" in r.reason or ".size()" in r.reason]


def test_dynamic_true_stops_size_recompiles(module):
    variants = ["(torch.randn(16, 16),)", "(torch.randn(7, 16),)"]
    assert _size_records(sweep(module, "Mlp", "(torch.randn(8, 16),)", variants))
    assert not _size_records(sweep(module, "Mlp", "(torch.randn(8, 16),)", variants,
                                   compile_kwargs={"dynamic": True}))


def test_decorator_options_are_used_for_a_compiled_function(module):
    # `dyn` is decorated with @torch.compile(dynamic=True); the loader unwraps it, the caller
    # passes the decorator's options back in.
    assert _size_records(sweep(module, "dyn", "(torch.randn(8, 16),)"))
    assert not _size_records(sweep(module, "dyn", "(torch.randn(8, 16),)",
                                   compile_kwargs={"dynamic": True, "mode": "max-autotune"}))


def test_mark_dynamic_in_user_code_stops_size_recompiles(module):
    variants = ["(torch.randn(16, 16),)", "(torch.randn(3, 16),)"]
    assert _size_records(sweep(module, "double", "(torch.randn(8, 16),)", variants))
    assert not _size_records(sweep(module, "double", "(marked(torch.randn(8, 16)),)", variants))


# --- no state left behind -------------------------------------------------------------------

def test_logging_and_dynamo_state_are_restored(module):
    dynamo = logging.getLogger("torch._dynamo")
    recompiles_log = logging.getLogger("torch._dynamo.guards.__recompiles")
    mine = logging.NullHandler()
    dynamo.addHandler(mine)  # someone else's handler (the trace job's, say) must survive

    def state():
        # torch's own stderr handler is re-created by set_logs(): compare its kind, not identity
        return (sorted((type(h).__name__, h.level) for h in dynamo.handlers), dynamo.level,
                dynamo.propagate, recompiles_log.isEnabledFor(logging.DEBUG),
                recompiles.recompile_limit())

    try:
        before = state()
        first = sweep(module, "Steps", "(torch.randn(8, 16), 2)", ["(torch.randn(8, 16), 3)"])
        assert state() == before
        assert mine in dynamo.handlers
        assert not any(isinstance(h, collector.CompileCollector) for h in dynamo.handlers)
    finally:
        dynamo.removeHandler(mine)
    assert not torch._dynamo.utils.get_compilation_metrics()
    second = sweep(module, "Steps", "(torch.randn(8, 16), 2)", ["(torch.randn(8, 16), 3)"])

    def strip(rs):
        return [(r.variation, r.kind, r.reason, r.changed, r.line) for r in rs]

    assert strip(first) == strip(second)


# --- reading torch's text (including older torch's wording) ---------------------------------

@pytest.mark.parametrize("text, changed, category", [
    ("tensor 'x' size mismatch at index 0. expected 8, actual 16", "x", ("size", 0, False)),
    ("tensor 'L['x']' size mismatch at index 1. expected 8, actual 1", "x", ("size", 1, True)),
    ("tensor 'x' dtype mismatch. expected Float, actual Double", "x", ("dtype", None, False)),
    ("tensor 'x' requires_grad mismatch. expected requires_grad=0", "x", ("requires_grad", None, False)),
    ("steps == 2", "steps", ("value", "int", False)),
    ("L['steps'] == 2", "steps", ("value", "int", False)),
    ("scale == 2.0", "scale", ("value", "float", False)),
    ("mode == 'a'", "mode", ("value", "other", False)),
    ("flag == True", "flag", ("value", "bool", False)),
    ("G['G'] == 1.0", "G", ("value", "float", False)),
    ("len(L['ys']) == 2", "ys", ("length", None, False)),
    ("L['zs'][0] == 3.0", "zs[0]", ("value", "float", False)),
    ("L['self']._modules['d'].training == True", "self.d.training", ("value", "bool", False)),
    ("2 <= x.size()[0]", "x", ("size", 0, True)),
    ("expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>", "mask",
     ("type", None, False)),
    ("mask is None", "mask", ("other", None, False)),
    ("GLOBAL_STATE changed: grad_mode autocast(cpu)_enabled", "grad_mode, autocast(cpu)_enabled",
     ("global", None, False)),
])
def test_guard_text_names_the_input(text, changed, category):
    assert recompile_kinds.what_changed(text) == changed
    assert recompile_kinds._category(text) == category


def test_parse_entry_new_and_old_formats():
    new = log_text.recompile(
        "Recompiling function f in /tmp/m.py:8\n"
        "    triggered by the following guard failure(s):\n"
        "    - 0/1: steps == 2                       # for i in range(steps):  # mp/m.py:9 in f\n"
        "    - User stack trace:\n"
        '    -   File "/tmp/m.py", line 9, in f\n'
        "    -     for i in range(steps):\n"
        "    - 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 7")
    assert new is not None and (new.frame, new.frame_line) == ("f", 8)
    assert [(f.entry, f.text) for f in new.failures] == [
        ("0/1", "steps == 2"), ("0/0", "tensor 'x' size mismatch at index 0. expected 8, actual 7")]
    assert new.failures[0].stack == [("/tmp/m.py", 9)]
    assert recompile_kinds.base_failure(new) == 1

    old = log_text.recompile(
        "Recompiling function forward in /tmp/m.py:3\n"
        "    triggered by the following guard failure(s):\n"
        "    - tensor 'L['x']' size mismatch at index 0. expected 8, actual 16")
    assert old is not None
    assert [(f.entry, f.text) for f in old.failures] == [
        (None, "tensor 'L['x']' size mismatch at index 0. expected 8, actual 16")]
    assert log_text.recompile("something else") is None

    odd = log_text.recompile("Recompiling function g (a wording from another release)\n"
                             "    because: something torch says")
    assert odd is not None and [f.text for f in odd.failures] == ["because: something torch says"]
