"""`compile-lens record`: the user's program runs unchanged, and the record replays.

One real run of a small training script (tests/fixtures/record/train.py) plainly and one under the
recorder; the rest reads the file it wrote. The overhead is measured by benchmarks/trial/record.py,
not here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import paths
from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.record import load_recorded, store
from compile_lens.record.recorded import spec_text
from compile_lens.render import settings_text
from paths import FIXTURES

FIXTURE = FIXTURES / "record" / "train.py"
SERVER = str(paths.SERVER)


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SERVER}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("record")
    shutil.copy(FIXTURE, root / "train.py")
    plain = _run([sys.executable, "train.py"], root)
    recorded = _run([sys.executable, "-m", "compile_lens.cli", "record", "--", sys.executable, "train.py"], root)
    return root, plain, recorded


def test_the_program_runs_unchanged(runs):
    _, plain, recorded = runs
    assert plain.returncode == recorded.returncode == 3
    # Same output, Dynamo's compiled frames included: the recorder is not part of any graph.
    assert recorded.stdout == plain.stdout
    assert "compiled frames [('loss_fn', '0/0'), ('loss_fn', '0/1'), ('forward', '1/0')" in plain.stdout
    # Our summary comes after everything the program wrote, and is all that is added.
    assert recorded.stderr.startswith(plain.stderr)
    added = recorded.stderr[len(plain.stderr):].splitlines()
    assert added[0] == "compile-lens: recorded 4 targets in .compile-lens/recorded.json:"
    assert all(line.startswith("  ") for line in added[1:])


def test_the_file_has_the_documented_shape(runs):
    root, _, _ = runs
    data = json.loads((root / ".compile-lens" / "recorded.json").read_text())
    assert data["schema"] == 1
    assert sorted(data["targets"]) == ["train.py:Head", "train.py:Net", "train.py:Tagger", "train.py:loss_fn"]
    net = data["targets"]["train.py:Net"]
    assert net["kind"] == "module" and net["calls"] == 9
    assert net["init"] == {"call": "Net(d_in=16, hidden=24)", "cannot_replay": []}
    assert net["call"]["args"] == [{"name": "x", "spec": {"tensor": {
        "shape": [32, 16], "dtype": "float32", "device": "cpu", "requires_grad": False}}}]
    assert net["shapes"] == [{"shapes": [[32, 16]], "count": 6}, {"shapes": [[4, 16]], "count": 2},
                             {"shapes": [[5, 16]], "count": 1}]
    head = data["targets"]["train.py:Head"]  # nn.Linear's own forward, recorded for the subclass
    assert head["init"]["call"] == "Head(in_features=2, out_features=1)" and head["calls"] == 1
    assert list(net) == sorted(net)  # stable order


def test_compiled_calls_are_recorded_once(runs):
    root, _, _ = runs
    targets = store.read(str(root / ".compile-lens" / "recorded.json"))
    assert targets["train.py:loss_fn"]["calls"] == 8
    tagger = targets["train.py:Tagger"]
    assert tagger["calls"] == 2  # torch.compile(Tagger(...)), with a graph break inside
    assert tagger["call"]["args"][1] == {"name": "scale", "spec": {"value": "0.5"}}  # a keyword, as positional
    assert tagger["call"]["args"][0]["spec"]["tensor"]["min"] >= 3
    # each torch.compile call where the program made it, with the setting off its default at the run's end
    lines = (root / "train.py").read_text().splitlines()
    at = {what: f"train.py:{next(n for n, t in enumerate(lines, 1) if what in t)}"
          for what in ("tagger = torch.compile(", "@torch.compile(")}
    limit = {"torch._dynamo.config.recompile_limit": "16"}
    assert tagger["compile"] == {"what": "torch.compile", "where": at["tagger = torch.compile("], "backend": "eager",
                                 "settings": limit}
    assert targets["train.py:loss_fn"]["compile"] == {"what": "torch.compile", "where": at["@torch.compile("],
                                                      "backend": "eager", "settings": limit}  # the decorator's
    assert targets["train.py:Net"].get("compile") is None  # never compiled
    # the hover card's line for it
    line = settings_text.recorded_line(tagger["compile"])
    assert line.startswith("- compiled in your recorded run by `torch.compile(backend='eager') at train.py:")
    assert "settings off torch's defaults: `dynamo.recompile_limit = 16`" in line


def test_the_record_replays(runs):
    import torch

    from compile_lens.worker import loader

    root, _, _ = runs
    path = str(root / "train.py")
    found = discover((root / "train.py").read_text())
    specs = {t.name: t for t in resolve_inputs(path, str(root), found.targets)}
    net = specs["Net"]
    assert net.inputs.source == "recorded"
    assert (net.inputs.text, net.inputs.init) == ("(torch.randn(32, 16),)", "Net(d_in=16, hidden=24)")
    fn = specs["loss_fn"]
    assert fn.inputs.source == "recorded" and fn.inputs.text == "(torch.randn(32, 2, requires_grad=True), torch.randint(0, 2, (32,)))"
    module = loader.import_file(path, str(root))
    for spec in (net, fn):
        target = loader.build_target(module, spec, path)
        assert isinstance(target.make()(*target.args), torch.Tensor)
    assert load_recorded(str(root)).shapes_for(path, "Net") == [[[32, 16]], [[4, 16]], [[5, 16]]]


def test_constructor_arguments_that_cannot_be_replayed_are_named(runs):
    root, _, _ = runs
    path = str(root / "train.py")
    recorded = load_recorded(str(root))
    assert recorded.init_for(path, "Tagger") is None
    assert "`settings` is a `Settings`" in recorded.init_problem(path, "Tagger")
    found = discover((root / "train.py").read_text())
    tagger = next(t for t in resolve_inputs(path, str(root), found.targets) if t.name == "Tagger")
    assert tagger.inputs is None
    assert "`settings` is a `Settings`" in tagger.problem
    assert "add `# compile-lens: init=Tagger(...) inputs=(...)` above `class Tagger`" in tagger.problem


def test_a_new_run_replaces_its_targets_and_keeps_the_others(tmp_path):
    path = str(tmp_path / "recorded.json")
    store.merge_write(path, {"a.py:A": {"calls": 1}, "b.py:B": {"calls": 2}})
    store.merge_write(path, {"a.py:A": {"calls": 5}})
    assert store.read(path) == {"a.py:A": {"calls": 5}, "b.py:B": {"calls": 2}}
    (tmp_path / "other.json").write_text('{"schema": 99, "targets": {"x": {}}}')
    assert store.read(str(tmp_path / "other.json")) == {}


def test_recipes_from_specs():
    assert spec_text({"tensor": {"shape": [4, 6], "dtype": "int64", "min": 3, "max": 39}}) == "torch.randint(3, 40, (4, 6))"
    assert spec_text({"tensor": {"shape": [4], "dtype": "int32"}}) == "torch.randint(0, 2, (4,), dtype=torch.int32)"
    assert spec_text({"tensor": {"shape": [2, 3], "dtype": "bool"}}) == "torch.randint(0, 2, (2, 3)).bool()"
    assert spec_text({"tensor": {"shape": [], "dtype": "float16"}}) == "torch.randn((), dtype=torch.float16)"
    assert spec_text({"tuple": [{"value": "1"}, {"list": [{"value": "'a'"}]}]}) == "(1, ['a'])"
    assert spec_text({"unknown": "Foo"}) is None


def test_no_program_is_a_usage_error():
    from compile_lens.cli.main import main

    assert main(["record", "--"]) == 2
