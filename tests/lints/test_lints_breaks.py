"""Static lints: each CL1xx graph-break code at its exact place, where it stays quiet, and sources that do not parse."""

from __future__ import annotations

import pytest
from lint_support import HEADER, at, code, lint, places, span

from compile_lens.lints import lint_source

# --- each CL1xx code ------------------------------------------------------------------------

def test_tensor_to_python_conversions():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                n = x.sum().item()
                values = self.proj(x).tolist()
                arr = x.detach().cpu().numpy()
                items = {"a": 1}.items()
                return n
        ''')
    found = lint(source)
    assert places(found) == [at("CL102", source, "x.sum().item()"),
                             at("CL103", source, "self.proj(x).tolist()"),
                             at("CL104", source, "x.detach().cpu().numpy()")]
    assert [f.data["kind"] for f in found] == ["item", "tolist", "numpy"]
    assert all(f.predicted and f.severity == "information" for f in found)


DATA_DEPENDENT = [
    "if x.sum() > 0:",
    "if x.max() > 1 and self.training:",
    "if (x > 0).any():",
    "if mask.all():",
    "if x.mean().item() < 0.5:",
    "if torch.any(x > 0):",
    "if torch.allclose(x, y):",
    "if torch.rand(1) < 0.5:",
    "if not torch.isfinite(x).all():",
    "while x.norm() > 1.0:",
]


@pytest.mark.parametrize("line", DATA_DEPENDENT)
def test_data_dependent_branches(line):
    source = HEADER + code(f'''
        class Net(nn.Module):
            def forward(self, x, y=None, mask=None):
                {line}
                    x = x / 2
                return x
        ''')
    condition = line.split(" ", 1)[1].rstrip(":")
    found = [f for f in lint(source) if f.code == "CL105"]
    assert places(found) == [at("CL105", source, condition)]
    assert found[0].data["condition"] == condition
    assert found[0].message.startswith("`while`" if line.startswith("while") else "`if`")


STATIC_CONDITIONS = [
    "if self.training:",
    "if x is None:",
    "if y is not None and x.grad is None:",
    "if x.dim() == 3:",
    "if x.shape[0] > 1:",
    "if x.shape[-1] != self.hidden:",
    "if x.size(0) == 1:",
    "if x.ndim == 4 and x.numel() > 0:",
    "if x.dtype == torch.float16:",
    "if x.device.type == 'cuda':",
    "if x.requires_grad:",
    "if isinstance(x, tuple):",
    "if len(x) > 2:",
    "if max(x.shape) > 3:",
    "if torch.jit.is_scripting():",
    "if not torch.compiler.is_compiling():",
    "if torch.cuda.is_available():",
    "if torch.is_grad_enabled():",
    "if torch.is_tensor(y):",
    "if self.cfg.get('norm'):",
    "if x.is_floating_point():",
    "if x:",  # a truthiness test on an unknown value: not flagged (conservative)
]


@pytest.mark.parametrize("line", STATIC_CONDITIONS)
def test_static_branches_are_not_flagged(line):
    source = HEADER + code(f'''
        class Net(nn.Module):
            def forward(self, x, y=None):
                {line}
                    x = x * 2
                return x
        ''')
    assert lint(source) == []


def test_conditional_expression_on_tensor_value():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                return x if x.mean() > 0 else -x
        ''')
    [finding] = lint(source)
    assert places([finding]) == [at("CL105", source, "x.mean() > 0")]


def test_numpy_calls_need_numpy_imported():
    source = code('''
        import numpy as np
        import torch.nn as nn
        from numpy import mean


        class Net(nn.Module):
            def forward(self, x):
                a = np.asarray(x) + mean(x) + np.linalg.norm(x)
                return x.numpy()
        ''')
    found = lint(source)
    assert places(found) == [at("CL106", source, "np.asarray(x)"), at("CL106", source, "mean(x)"),
                             at("CL106", source, "np.linalg.norm(x)"), at("CL104", source, "x.numpy()")]
    assert found[0].data["call"] == "np.asarray" and "may" in found[0].message
    assert found[0].severity == "information"

    without_import = source.replace("import numpy as np\n", "").replace("from numpy import mean\n", "")
    assert places(lint(without_import)) == [at("CL104", without_import, "x.numpy()")]


def test_logging_calls():
    source = code('''
        import logging

        import torch.nn as nn

        logger = logging.getLogger(__name__)
        log = logging.getLogger("net")


        class Net(nn.Module):
            def forward(self, x):
                logging.info("forward")
                logger.warning("shape %s", x.shape)
                log.debug("x")
                logging.getLogger("other").error("e")
                self.log("loss", x)
                return x


        def train():
            logger.info("not compiled")
        ''')
    found = lint(source)
    assert places(found) == [at("CL107", source, 'logging.info("forward")'),
                             at("CL107", source, 'logger.warning("shape %s", x.shape)'),
                             at("CL107", source, 'log.debug("x")'),
                             at("CL107", source, 'logging.getLogger("other").error("e")')]
    assert [f.data["call"] for f in found] == ["logging.info", "logger.warning", "log.debug",
                                                "logging.getLogger(...).error"]


def test_a_statement_range_is_given_only_for_a_call_on_its_own_line():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                print(x)  # a comment
                y = print(x)
                return y
        ''')
    first, second = lint(source)
    assert first.data["statement"] == list(span(source, "print(x)"))
    assert second.data["statement"] is None


def test_columns_are_characters_not_bytes():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                s = "héllo wörld"; print(s)
                return x
        ''')
    [finding] = lint(source)
    assert places([finding]) == [at("CL101", source, "print(s)")]


def test_windows_newlines_give_the_same_lines():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                return x.item()
        ''')
    assert places(lint(source.replace("\n", "\r\n"))) == [at("CL102", source, "x.item()")]


def test_a_byte_order_mark_is_ignored():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                return x.item()
        ''')
    assert places(lint("\ufeff" + source)) == [at("CL102", source, "x.item()")]


# --- parse failures -------------------------------------------------------------------------

def test_syntax_error_returns_none_and_the_next_good_version_lints():
    good = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                return x.item()
        ''')
    path = "/work/typing.py"
    assert places(lint_source(good, path)) == [at("CL102", good, "x.item()")]
    assert lint_source(good.replace("return x.item()", "return x.item("), path) is None
    assert lint_source(good.replace("def forward(self, x):", "def forward(self, x:"), path) is None
    assert lint_source("\x00", path) is None
    assert lint_source("x = (" * 500, path) is None
    assert places(lint_source(good, path)) == [at("CL102", good, "x.item()")]


def test_empty_and_trivial_sources():
    assert lint("") == []
    assert lint("\n\n# only a comment\n") == []
    assert lint("x = 1") == []
