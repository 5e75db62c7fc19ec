"""Which precision a target is measured in: directive > setting (editor, `--precision`) > pyproject >
recorded run > torch's defaults; and that the choice is part of the figures' cache key."""

from __future__ import annotations

import argparse

import pytest

from compile_lens.cli.common import settings_for
from compile_lens.config import load_project_config
from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.discovery.precision import normal
from compile_lens.jobs.cache import target_keys
from compile_lens.record import store
from compile_lens.settings import Settings

SOURCE = '''
import torch
from torch import nn


# compile-lens: inputs=(torch.randn(2, 4),), precision=bf16-autocast
class Directed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


# compile-lens: precision="fp16-autocast"
class OnlyPrecision(Directed):
    pass


class Recorded(Directed):
    pass


class Plain(Directed):
    pass
'''


def _recorded(precision: dict) -> dict:
    tensor = {"tensor": {"shape": [3, 4], "dtype": "float32", "device": "cpu", "requires_grad": False}}
    return {"kind": "module", "init": {"call": "Recorded()", "cannot_replay": []}, "calls": 1,
            "call": {"args": [{"name": "x", "spec": tensor}], "cannot_replay": None},
            "shapes": [], "more_shapes": 0, "run": {"id": "t"}, "precision": precision}


AUTOCAST = {"device": "cpu", "autocast": "bfloat16", "matmul_tf32": False, "float32_matmul_precision": "highest",
            "cudnn_tf32": True}
TF32 = dict(AUTOCAST, autocast=None, matmul_tf32=True, float32_matmul_precision="high")


def _project(tmp_path, pyproject: str = "", recorded: dict | None = None):
    (tmp_path / "models.py").write_text(SOURCE)
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    if recorded:
        store.merge_write(store.default_path(str(tmp_path)), recorded)
    return str(tmp_path / "models.py")


def _chosen(tmp_path, setting: str = "auto", **project) -> dict[str, tuple[str, str]]:
    path = _project(tmp_path, **project)
    specs = resolve_inputs(path, str(tmp_path), discover(SOURCE).targets, precision=setting)
    return {t.name: (t.precision, t.precision_source) for t in specs}


def test_a_directive_names_it_with_or_without_inputs(tmp_path):
    chosen = _chosen(tmp_path)
    assert chosen["Directed"] == ("bf16-autocast", "directive")
    assert chosen["OnlyPrecision"] == ("fp16-autocast", "directive")
    assert chosen["Plain"] == ("", "")  # torch's defaults: the worker names what was in effect


def test_a_directive_with_precision_keeps_its_inputs():
    specs = {t.name: t for t in discover(SOURCE).targets}
    assert specs["Directed"].inputs.text == "(torch.randn(2, 4),)"


def test_an_unknown_precision_in_a_directive_is_said_at_its_line():
    found = discover(SOURCE.replace("precision=bf16-autocast", "precision=int8"))
    assert [e.line for e in found.errors] == [6]
    assert "precision=int8 is not one of fp32, tf32, bf16-autocast, fp16-autocast" in found.errors[0].message


def test_pyproject_then_the_setting_over_it(tmp_path):
    pyproject = '[tool.compile-lens]\nbenchmark.precision = "tf32"\n'
    assert _chosen(tmp_path, pyproject=pyproject)["Plain"] == ("tf32", "pyproject")
    assert _chosen(tmp_path, "bf16-autocast", pyproject=pyproject)["Plain"] == ("bf16-autocast", "setting")
    # the CLI's settings hold pyproject's value when no flag overrode it: still pyproject's
    assert _chosen(tmp_path, "tf32", pyproject=pyproject)["Plain"] == ("tf32", "pyproject")
    assert _chosen(tmp_path, "fp32", pyproject=pyproject)["Directed"] == ("bf16-autocast", "directive")


def test_an_unknown_precision_in_pyproject_is_a_problem_at_its_line(tmp_path):
    _project(tmp_path, pyproject='[tool.compile-lens]\ndevice = "cpu"\nbenchmark.precision = "int8"\n')
    config = load_project_config(str(tmp_path / "models.py"), str(tmp_path))
    assert [(p.line, p.message) for p in config.problems] == [
        (3, "setting benchmark.precision='int8' is not allowed; using 'auto'")]


def test_the_recorded_run_when_nothing_else_says(tmp_path):
    recorded = {"models.py:Recorded": _recorded(AUTOCAST), "models.py:Directed": _recorded(TF32),
                "models.py:Plain": _recorded(TF32)}
    chosen = _chosen(tmp_path, recorded=recorded)
    assert chosen["Recorded"] == ("bf16-autocast", "recorded")
    assert chosen["Plain"] == ("tf32", "recorded")
    assert chosen["Directed"] == ("bf16-autocast", "directive")
    assert _chosen(tmp_path, "fp32", recorded=recorded)["Recorded"] == ("fp32", "setting")


def test_the_flag_is_the_setting(tmp_path):
    path = _project(tmp_path, pyproject='[tool.compile-lens]\nbenchmark.precision = "tf32"\n')
    args = argparse.Namespace(precision="fp16-autocast", device=None, mode=None)
    assert settings_for(args, [path], str(tmp_path)).precision == "fp16-autocast"
    assert settings_for(argparse.Namespace(precision=None), [path], str(tmp_path)).precision == "tf32"
    assert Settings.from_client({"compileLens.benchmark.precision": "bf16-autocast"})[0].precision == "bf16-autocast"


@pytest.mark.parametrize("text, value", [("bf16 - autocast", "bf16-autocast"), ("'tf32'", "tf32"), ("bf16", "bf16-autocast"),
                                          ("FP32", "fp32"), ("int8", None)])
def test_spellings(text, value):
    assert normal(text) == value


def test_the_figures_are_kept_apart_by_precision(tmp_path):
    specs = {t.name: t for t in resolve_inputs(_project(tmp_path), str(tmp_path), discover(SOURCE).targets)}
    plain, directed = specs["Plain"], specs["Directed"]

    def keys(spec):
        return target_keys("2.13", str(tmp_path / "models.py"), "fp", "deps", spec, "cpu", "default")

    before = keys(plain)
    plain.precision, plain.precision_source = "bf16-autocast", "setting"
    after = keys(plain)
    assert after.bench != before.bench
    assert (after.trace, after.sweep) == (before.trace, before.sweep)  # graph breaks do not depend on it
    directed.inputs = plain.inputs
    directed.name = plain.name
    directed.precision_source = "directive"
    assert keys(directed).bench != after.bench  # where it came from is named with the figures


def test_a_pyproject_target_entry_names_its_own(tmp_path):
    pyproject = ('[tool.compile-lens]\nbenchmark.precision = "tf32"\n\n[[tool.compile-lens.targets]]\n'
                 'target = "models.py:Plain"\ninputs = "(torch.randn(3, 4),)"\nprecision = "fp16-autocast"\n')
    chosen = _chosen(tmp_path, pyproject=pyproject)
    assert chosen["Plain"] == ("fp16-autocast", "pyproject")
    assert chosen["Recorded"] == ("tf32", "pyproject")
    (tmp_path / "pyproject.toml").write_text(pyproject.replace('"fp16-autocast"', '"fp8"'))
    config = load_project_config(str(tmp_path / "models.py"), str(tmp_path))
    assert [(p.line, p.message) for p in config.problems] == [
        (7, "`precision` of `models.py:Plain` must be one of fp32, tf32, bf16-autocast, fp16-autocast")]
