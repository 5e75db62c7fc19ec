"""Which source a target's inputs come from: directive > pyproject.toml > recorded > inferred.

Every resolved recipe is also built and called with the worker's loader, so a precedence that
picks a recipe that does not fit would fail here.
"""

from __future__ import annotations

import textwrap

import pytest

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.protocol import TargetSpec
from compile_lens.record import store

SOURCE = '''
import torch
from torch import nn


class Lin(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = nn.Linear(d, 2)

    def forward(self, x):
        return self.fc(x)


# compile-lens: inputs=(torch.randn(2, 4),)
class AllFour(Lin):
    pass


class ConfigWins(Lin):
    pass


class RecordedWins(Lin):
    pass


class Guessed(Lin):
    pass


class Sized(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 2)

    def forward(self, x):
        return self.fc(x)


class Nothing(Sized):
    pass


class RecordedUnreplayable(Sized):
    pass


class ConfigInitRecordedInputs(Sized):
    pass


@torch.compile
def step(x, n):
    return x * n
'''

PYPROJECT = '''
[[tool.compile-lens.targets]]
target = "models.py:AllFour"
inputs = "(torch.randn(3, 4),)"

[[tool.compile-lens.targets]]
target = "models.py:ConfigWins"
init = "ConfigWins(d=5)"
inputs = "(torch.randn(3, 5),)"
variants = ["(torch.randn(7, 5),)"]

[[tool.compile-lens.targets]]
target = "models.py:ConfigInitRecordedInputs"
init = "ConfigInitRecordedInputs(6)"
'''


def _tensor(*shape: int) -> dict:
    return {"tensor": {"shape": list(shape), "dtype": "float32", "device": "cpu", "requires_grad": False}}


def _entry(init: dict | None, args: list, shapes: list) -> dict:
    return {"kind": "module" if init is not None else "function", "init": init, "calls": len(shapes),
            "call": {"args": args, "cannot_replay": None},
            "shapes": [{"shapes": s, "count": 1} for s in shapes], "more_shapes": 0, "run": {"id": "t"}}


RECORDED = {
    "models.py:AllFour": _entry({"call": "AllFour(d=9)", "cannot_replay": []}, [{"name": "x", "spec": _tensor(9, 9)}], []),
    "models.py:ConfigWins": _entry({"call": "ConfigWins(d=9)", "cannot_replay": []}, [{"name": "x", "spec": _tensor(9, 9)}], []),
    "models.py:RecordedWins": _entry({"call": "RecordedWins(d=3)", "cannot_replay": []},
                                     [{"name": "x", "spec": _tensor(6, 3)}], [[[6, 3]], [[1, 3]]]),
    "models.py:RecordedUnreplayable": _entry(
        {"call": None, "cannot_replay": [{"argument": "d", "type": "Dim", "required": True}]},
        [{"name": "x", "spec": _tensor(2, 3)}], []),
    "models.py:ConfigInitRecordedInputs": _entry(
        {"call": "ConfigInitRecordedInputs(9)", "cannot_replay": []}, [{"name": "x", "spec": _tensor(5, 6)}], []),
    "models.py:step": _entry(None, [{"name": "x", "spec": _tensor(4)}, {"name": "n", "spec": {"value": "3"}}], [[[4]]]),
}


@pytest.fixture(scope="module")
def resolved(tmp_path_factory):
    root = tmp_path_factory.mktemp("precedence")
    (root / "models.py").write_text(SOURCE)
    (root / "pyproject.toml").write_text(PYPROJECT)
    store.merge_write(store.default_path(str(root)), RECORDED)
    path = str(root / "models.py")
    targets = resolve_inputs(path, str(root), discover(SOURCE).targets)
    return root, path, {t.name: t for t in targets}


def recipe(spec: TargetSpec) -> tuple:
    return (spec.inputs.source, spec.inputs.text, spec.inputs.init, spec.inputs.variants)


def test_a_directive_beats_everything(resolved):
    _, _, specs = resolved
    assert recipe(specs["AllFour"]) == ("directive", "(torch.randn(2, 4),)", None, [])


def test_pyproject_beats_recorded_and_inferred(resolved):
    _, _, specs = resolved
    assert recipe(specs["ConfigWins"]) == ("config", "(torch.randn(3, 5),)", "ConfigWins(d=5)", ["(torch.randn(7, 5),)"])


def test_recorded_beats_inferred(resolved):
    _, _, specs = resolved
    assert recipe(specs["RecordedWins"]) == ("recorded", "(torch.randn(6, 3),)", "RecordedWins(d=3)", [])
    assert recipe(specs["step"]) == ("recorded", "(torch.randn(4), 3)", None, [])


def test_the_guess_stays_when_nothing_else_is_there(resolved):
    _, _, specs = resolved
    assert recipe(specs["Guessed"]) == ("inferred", "(torch.randn(8, 4),)", None, [])


def test_a_pyproject_init_applies_to_recorded_inputs(resolved):
    _, _, specs = resolved
    assert recipe(specs["ConfigInitRecordedInputs"]) == (
        "recorded", "(torch.randn(5, 6),)", "ConfigInitRecordedInputs(6)", [])


def test_every_resolved_recipe_builds_and_runs(resolved):
    import torch

    from compile_lens.worker import loader

    root, path, specs = resolved
    module = loader.import_file(path, str(root))
    ran = []
    for spec in specs.values():
        if spec.inputs is None:
            continue
        target = loader.build_target(module, spec, path)
        assert isinstance(target.make()(*target.args), torch.Tensor), spec.name
        ran.append(spec.name)
    assert len(ran) == 7


def test_no_inputs_says_which_sources_would_fix_it(resolved):
    _, _, specs = resolved
    nothing = specs["Nothing"]
    assert nothing.inputs is None
    assert nothing.problem == (
        "`Nothing()` needs constructor arguments (d): add `# compile-lens: init=Nothing(...) inputs=(...)` above "
        "`class Nothing`, or a [[tool.compile-lens.targets]] entry in pyproject.toml with "
        "target = \"models.py:Nothing\", init = \"Nothing(...)\", inputs = \"(...)\", or record a real run: "
        "`compile-lens record -- python train.py`")


def test_a_recorded_constructor_that_cannot_be_replayed_is_named(resolved):
    _, _, specs = resolved
    spec = specs["RecordedUnreplayable"]
    assert spec.inputs is None
    assert "the recorded run built `RecordedUnreplayable` with arguments Compile Lens cannot write out " \
           "(`d` is a `Dim`)" in spec.problem
    assert "init=RecordedUnreplayable(...) inputs=(...)" in spec.problem


def test_functions_get_the_same_advice(tmp_path):
    source = textwrap.dedent('''
        import torch

        @torch.compile
        def f(x):
            return x + 1
    ''')
    (tmp_path / "f.py").write_text(source)
    [spec] = resolve_inputs(str(tmp_path / "f.py"), str(tmp_path), discover(source).targets)
    assert spec.problem.startswith("no example inputs for `f`: add `# compile-lens: inputs=(...)` above `def f`, or a "
                                   "[[tool.compile-lens.targets]] entry in pyproject.toml with target = \"f.py:f\", "
                                   "inputs = \"(...)\"")


def test_a_pyproject_entry_can_name_an_object_discovery_does_not_see(tmp_path):

    from compile_lens.worker import loader

    source = textwrap.dedent('''
        import torch
        from torch import nn

        built = nn.Sequential(nn.Linear(4, 2))
    ''')
    (tmp_path / "objects.py").write_text(source)
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent('''
        [[tool.compile-lens.targets]]
        target = "objects.py:built"
        inputs = "(torch.randn(3, 4),)"
    '''))
    path = str(tmp_path / "objects.py")
    [spec] = resolve_inputs(path, str(tmp_path), discover(source).targets)
    assert (spec.name, spec.kind, spec.line, spec.column, spec.end_column) == ("built", "call", 5, 1, 6)
    assert recipe(spec) == ("config", "(torch.randn(3, 4),)", None, [])
    target = loader.build_target(loader.import_file(path, str(tmp_path)), spec, path)
    assert target.make()(*target.args).shape == (3, 2)
