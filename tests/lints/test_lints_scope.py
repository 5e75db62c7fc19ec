"""Static lints: what counts as compiled code (modules, compiled functions, helpers, aliases)."""

from __future__ import annotations

import pytest
from lint_support import HEADER, at, code, lint, places, span

from compile_lens.lints import lint_source
from compile_lens.protocol import Frame

# --- scope: what counts as compiled code ---------------------------------------------------

def test_print_in_forward_is_flagged_and_elsewhere_not():
    source = code('''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                print("built")

            def forward(self, x):
                print("x", x.shape)
                return self.fc(x)


        def report(x):
            print(x)
        ''')
    [finding] = lint(source)
    assert (finding.line, finding.column, finding.end_line, finding.end_column) == (12, 9, 12, 28)
    assert finding.code == "CL101" and finding.severity == "information" and finding.predicted
    assert "predicted" in finding.message and "print()" in finding.message
    assert finding.data["kind"] == "print" and finding.data["function"] == "Net.forward"
    assert finding.data["statement"] == [12, 9, 12, 28]
    assert finding.path.endswith(".py") and finding.related == [] and finding.url is None


def test_helpers_called_from_forward_are_flagged_with_the_call_chain():
    source = HEADER + code('''
        def inner(x):
            print("inner")
            return x


        def helper(x):
            return inner(x) * 2


        def unused(x):
            print("not called from compiled code")


        class Net(nn.Module):
            def forward(self, x):
                x = self._debug(x)
                return helper(x)

            def _debug(self, x):
                return x.tolist()
        ''')
    path = "/work/helpers.py"
    found = lint_source(source, path)
    assert places(found) == [at("CL101", source, 'print("inner")'), at("CL103", source, "x.tolist()")]
    printed, listed = found
    assert printed.related == [Frame(path, span(source, "return helper(x)")[0], "Net.forward"),
                               Frame(path, span(source, "inner(x) * 2")[0], "helper")]
    assert "`inner`" in printed.message and "`Net.forward`" in printed.message
    assert printed.data["function"] == "inner" and printed.data["root"] == "Net.forward"
    assert listed.related == [Frame(path, span(source, "self._debug(x)")[0], "Net.forward")]
    assert listed.data["function"] == "Net._debug"


@pytest.mark.parametrize("base", ["nn.Module", "torch.nn.Module", "Module", "Base"])
def test_module_subclasses(base):
    source = code(f'''
        import torch
        import torch.nn as nn
        from torch.nn import Module


        class Base(nn.Module):
            pass


        class Net({base}):
            def forward(self, x):
                return x.item()
        ''')
    assert places(lint(source)) == [at("CL102", source, "x.item()")]


def test_a_class_that_is_not_a_module_is_not_compiled():
    source = code('''
        class Pipeline:
            def forward(self, x):
                print(x)
                return x.item()
        ''')
    assert lint(source) == []


def test_compiled_functions_decorated_or_passed_to_torch_compile():
    source = code('''
        import torch


        @torch.compile
        def bare(x):
            print("bare")


        @torch.compile(mode="max-autotune", fullgraph=False)
        def called(x):
            return x.item()


        def passed(x):
            return x.numpy()


        def plain(x):
            print("never compiled")
            return x.item()


        fast = torch.compile(passed)
        ''')
    assert places(lint(source)) == [at("CL101", source, 'print("bare")'),
                                    at("CL102", source, "x.item()"),
                                    at("CL104", source, "x.numpy()")]


def test_import_aliases_are_followed():
    source = code('''
        import torch as t
        from torch import nn


        class Net(nn.Module):
            def forward(self, x):
                print(x)


        @t.compile
        def f(x):
            print(x)
        ''')
    assert places(lint(source)) == [at("CL101", source, "print(x)"), at("CL101", source, "print(x)", 1)]


def test_helpers_disabled_for_dynamo_are_not_looked_into():
    source = HEADER + code('''
        @torch.compiler.disable
        def log_stats(x):
            print(x.mean().item())


        class Net(nn.Module):
            def forward(self, x):
                log_stats(x)
                return x
        ''')
    assert lint(source) == []


def test_nested_defs_and_lambdas_inside_forward_are_traced():
    source = HEADER + code('''
        class Net(nn.Module):
            def forward(self, x):
                def scale(y):
                    return y * y.max().item()
                f = lambda z: print(z)
                return scale(x)
        ''')
    assert places(lint(source)) == [at("CL102", source, "y.max().item()"), at("CL101", source, "print(z)")]
