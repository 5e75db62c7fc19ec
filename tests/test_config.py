"""pyproject.toml: [tool.compile-lens] settings and [[tool.compile-lens.targets]], and what is wrong in them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from compile_lens import config as cfg
from compile_lens.config import load_project_config

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc = nn.Linear(16, hidden)

    def forward(self, x):
        return self.fc(x)
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def project(tmp_path):
    write(tmp_path / "models" / "net.py", MODEL)
    return tmp_path


def test_targets_and_settings(project):
    write(project / "pyproject.toml", """
        [project]
        name = "demo"

        [tool.compile-lens]
        device = "cpu"
        benchmark.onSave = false

        [tool.compile-lens.worker]
        timeoutSeconds = 120

        [[tool.compile-lens.targets]]
        target = "models/net.py:Net"
        init = "Net(hidden=64)"
        inputs = "(torch.randn(8, 16),)"
        variants = ["(torch.randn(3, 16),)"]
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert config.problems == []
    assert config.path == str(project / "pyproject.toml")
    assert config.settings == {"device": "cpu", "benchmark.onSave": False, "worker.timeoutSeconds": 120}
    recipe = config.recipe_for(str(project / "models" / "net.py"), "Net")
    assert (recipe.source, recipe.text, recipe.init, recipe.variants) == (
        "config", "(torch.randn(8, 16),)", "Net(hidden=64)", ["(torch.randn(3, 16),)"])
    assert recipe.line is None  # a line of pyproject.toml, not of the analysed file
    assert config.recipe_for(str(project / "models" / "net.py"), "Other") is None


def test_the_nearest_pyproject_with_our_table_wins(project):
    write(project / "pyproject.toml", """
        [tool.compile-lens]
        device = "cpu"
    """)
    write(project / "models" / "pyproject.toml", """
        [tool.ruff]
        line-length = 100
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert config.path == str(project / "pyproject.toml") and config.settings == {"device": "cpu"}
    write(project / "models" / "pyproject.toml", """
        [tool.compile-lens]
        device = "cuda"
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert config.settings == {"device": "cuda"}


def test_nothing_above_the_root_is_read(project, tmp_path_factory):
    write(project / "pyproject.toml", '[tool.compile-lens]\ndevice = "cpu"\n')
    root = project / "models"
    assert load_project_config(str(root / "net.py"), str(root)).path is None


def lines_of(config) -> list[tuple[int, str]]:
    return [(p.line, p.message) for p in config.problems]


def test_mistakes_point_at_their_lines(project):
    write(project / "pyproject.toml", """
        [tool.compile-lens]
        device = "tpu"
        colour = "blue"

        [[tool.compile-lens.targets]]
        target = "models/missing.py:Net"
        inputs = "(torch.randn(8, 16),)"

        [[tool.compile-lens.targets]]
        target = "models/net.py:Net"
        input = "(torch.randn(8, 16),)"
        inputs = "(torch.randn(8, 16),"

        [[tool.compile-lens.targets]]
        target = "models/net.py:Gone"
        inputs = "()"

        [[tool.compile-lens.targets]]
        target = "net"
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    problems = lines_of(config)
    assert all(p.kind == "config" and p.path == str(project / "pyproject.toml") for p in config.problems)
    assert problems[0][0] == 2 and "device='tpu'" in problems[0][1]
    assert problems[1] == (3, "unknown setting `colour` in [tool.compile-lens]")
    assert problems[2][0] == 6 and "`models/missing.py` does not exist" in problems[2][1]
    assert problems[3] == (11, "unknown key `input` in a [[tool.compile-lens.targets]] entry")
    assert problems[4][0] == 12 and "`inputs` of `models/net.py:Net` must be a Python expression" in problems[4][1]
    assert problems[5] == (15, "`Gone` is not defined at the top level of `models/net.py`")
    assert problems[6][0] == 19 and 'target = "models/net.py:Net"' in problems[6][1]
    assert config.targets == [] and config.settings == {}


def test_bad_toml_is_one_problem_at_its_line(project):
    write(project / "pyproject.toml", """
        [tool.compile-lens]
        device = "cpu"
        timeout = = 3
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    [problem] = config.problems
    assert problem.line == 3 and problem.message.startswith("pyproject.toml is not valid TOML")


def test_without_a_toml_parser_it_says_what_to_install(project, monkeypatch):
    write(project / "pyproject.toml", """
        [project]
        name = "x"

        [tool.compile-lens]
        device = "cpu"
    """)
    monkeypatch.setattr(cfg, "_toml_loads", lambda: None)
    config = load_project_config(str(project / "models" / "net.py"), str(project) + "/")
    [problem] = config.problems
    assert problem.line == 4 and "Python 3.11" in problem.message and "pip install tomli" in problem.message


def test_an_entry_with_only_init_gives_no_recipe_but_is_kept(project):
    write(project / "pyproject.toml", """
        [[tool.compile-lens.targets]]
        target = "models/net.py:Net"
        init = "Net(hidden=8)"
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert config.problems == [] and config.recipe_for(str(project / "models" / "net.py"), "Net") is None
    assert config.entry_for(str(project / "models" / "net.py"), "Net").init == "Net(hidden=8)"


def test_the_gpu_bill_keys_and_their_mistakes(project):
    from compile_lens.cost import CostInputs
    from compile_lens.settings import Settings

    write(project / "pyproject.toml", """
        [tool.compile-lens.bill]
        gpuPricePerHour = 2.5
        gpus = 8
        trainingHoursPerMonth = 300
        restartsPerRun = 0
        migrationDays = -3
        engineerDayRate = "800"
        gpuHours = 5
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert config.settings == {"bill.gpuPricePerHour": 2.5, "bill.gpus": 8, "bill.trainingHoursPerMonth": 300,
                               "bill.restartsPerRun": 0}
    where = {p.line: p.message for p in config.problems}
    assert all(p.path == str(project / "pyproject.toml") for p in config.problems)
    assert where[6].startswith("setting bill.migrationDays=-3 must be the engineer-days the migration takes, "
                               "a number above 0")
    assert "bill.engineerDayRate='800' must be the cost of one engineer-day" in where[7]
    assert where[8] == "unknown setting `bill.gpuHours` in [tool.compile-lens]"
    settings, problems = Settings.from_client(config.settings)
    assert problems == []
    inputs = CostInputs.from_settings(settings)
    assert (inputs.price_per_gpu_hour, inputs.gpus, inputs.hours_per_month, inputs.migration_days) == (2.5, 8, 300, None)


def test_no_bill_until_it_is_set_and_null_unsets_it():
    from compile_lens.cost import CostInputs
    from compile_lens.settings import Settings

    assert not CostInputs.from_settings(Settings()).given()  # defaults: no money shown
    priced, _ = Settings.from_client({"compileLens.bill.gpuPricePerHour": 3})
    again, problems = Settings.from_client({**priced.as_client(), "bill.gpuPricePerHour": None})  # VS Code's reset
    assert priced.price_per_gpu_hour == 3.0 and again.price_per_gpu_hour is None and problems == []
    _, problems = Settings.from_client({"bill.gpus": 1.5})
    assert problems and "a whole number from 1" in problems[0]


def test_benchmark_opt_in_is_a_list_of_parts(project):
    write(project / "pyproject.toml", """
        [tool.compile-lens]
        benchmark.optIn = ["strict_export", "batch-sweep"]
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert config.problems == [] and config.settings == {"benchmark.optIn": ["strict_export", "batch-sweep"]}
    from compile_lens.settings import Settings

    settings, rejected = Settings.from_client(config.settings)
    assert rejected == [] and settings.opt_in == ["strict_export", "batch_sweep"]  # one spelling, as the worker reads it


def test_a_part_that_cannot_be_opted_in_is_said_at_its_line(project):
    write(project / "pyproject.toml", """
        [tool.compile-lens]
        device = "cpu"
        benchmark.optIn = ["batch_sweep", "forwards"]

        [tool.compile-lens.worker]
        timeoutSeconds = 120
    """)
    config = load_project_config(str(project / "models" / "net.py"), str(project))
    assert lines_of(config) == [(3, "setting benchmark.optIn=['batch_sweep', 'forwards']: `forwards` is not a part "
                                    "that can be opted in (parts: train_step, memory, lines, export, strict_export, fallback_ops, "
                                    "batch_sweep, warm_remote); "
                                    "using []")]
    assert config.settings == {"device": "cpu", "worker.timeoutSeconds": 120}  # the list is not used, the rest is
