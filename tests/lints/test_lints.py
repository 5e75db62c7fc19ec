"""Static lints (compile_lens.lints): each code at its exact place, and where it must stay quiet."""

from __future__ import annotations

import ast
import itertools
import textwrap

import pytest

from compile_lens import lints
from compile_lens.lints import forget, lint_source
from compile_lens.protocol import Finding, Frame

_paths = itertools.count()


def lint(source: str) -> list[Finding]:
    found = lint_source(source, f"/work/model_{next(_paths)}.py")
    assert found is not None, "the source parses: lint_source must return a list"
    return found


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def span(source: str, text: str, nth: int = 0) -> tuple[int, int, int, int]:
    """(line, column, end_line, end_column) of the nth occurrence of `text`: 1-based, characters."""
    at = -1
    for _ in range(nth + 1):
        at = source.index(text, at + 1)
    end = at + len(text)

    def position(offset: int) -> tuple[int, int]:
        return source.count("\n", 0, offset) + 1, offset - (source.rfind("\n", 0, offset) + 1) + 1

    return (*position(at), *position(end))


def places(findings: list[Finding], prefix: str = "CL") -> list[tuple]:
    return [(f.code, f.line, f.column, f.end_line, f.end_column) for f in findings
            if f.code.startswith(prefix)]


def at(code_: str, source: str, text: str, nth: int = 0) -> tuple:
    return (code_, *span(source, text, nth))


def at_arg(code_: str, source: str, text: str, nth: int = 0) -> tuple:
    """An argument found with the character after it (`"lr)"`): the place of `text[:-1]`."""
    line, column, end_line, end_column = span(source, text, nth)
    return (code_, line, column, end_line, end_column - 1)


HEADER = "import torch\nimport torch.nn as nn\n\n\n"


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


# --- CL201: torch.compile called repeatedly -------------------------------------------------

def test_compile_inside_a_loop():
    source = HEADER + code('''
        model = nn.Linear(4, 4)
        for step in range(10):
            compiled = torch.compile(model)
            compiled(torch.randn(2, 4))
        while True:
            torch.compile(model, mode="reduce-overhead")
            break
        ''')
    found = lint(source)
    assert places(found) == [at("CL201", source, "torch.compile(model)"),
                             at("CL201", source, 'torch.compile(model, mode="reduce-overhead")')]
    assert found[0].severity == "warning" and not found[0].predicted
    assert found[0].data == {"kind": "compile-in-loop", "loop_line": span(source, "for step")[0]}
    assert "hoist" in found[0].message


def test_compile_in_a_loop_that_is_not_repeated_work():
    source = HEADER + code('''
        models = [nn.Linear(4, 4), nn.Linear(4, 8)]
        compiled = []
        for m in models:
            compiled.append(torch.compile(m))
        for name, child in models[0].named_children():
            setattr(models[0], name, torch.compile(child))
        fast = None
        for step in range(10):
            if fast is None:
                fast = torch.compile(models[0])
        for m in models:
            pass
        else:
            once = torch.compile(models[1])
        ''')
    assert lint(source) == []


def test_compile_inside_a_function_called_in_a_loop():
    source = HEADER + code('''
        def make(model):
            return torch.compile(model)


        def build(model):
            return make(model)


        def once(model):
            return torch.compile(model, mode="max-autotune")


        def train(model, batches):
            fast = once(model)
            for batch in batches:
                step = build(model)
                step(batch)
        ''')
    path = "/work/repeat.py"
    [finding] = lint_source(source, path)
    assert places([finding]) == [at("CL201", source, "torch.compile(model)")]
    call_line = span(source, "step = build(model)")[0]
    assert finding.related == [Frame(path, call_line, "train"),
                               Frame(path, span(source, "return make(model)")[0], "build")]
    assert finding.data == {"kind": "compile-in-repeated-call", "function": "build",
                            "caller_line": call_line}


def test_a_cached_factory_called_in_a_loop_is_fine():
    source = HEADER + code('''
        import functools


        @functools.lru_cache(maxsize=None)
        def make(size):
            return torch.compile(nn.Linear(size, size))


        for size in (4, 8, 4):
            make(size)
        ''')
    assert lint(source) == []


def test_compile_inside_forward():
    source = HEADER + code('''
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = torch.compile(nn.Linear(4, 4))

            def forward(self, x):
                return torch.compile(self.block)(x)
        ''')
    [finding] = lint(source)
    assert places([finding]) == [at("CL201", source, "torch.compile(self.block)")]
    assert finding.data == {"kind": "compile-in-forward", "function": "Net.forward"}


def test_compile_of_a_method_through_self_in_a_loop():
    source = HEADER + code('''
        class Trainer:
            def compiled_step(self):
                return torch.compile(self.step)

            def step(self, x):
                return x

            def fit(self, data):
                for x in data:
                    self.compiled_step()(x)
        ''')
    assert places(lint(source)) == [at("CL201", source, "torch.compile(self.step)")]


# --- CL202: a new lambda or closure compiled each time --------------------------------------

def test_compiling_lambdas_and_closures():
    source = HEADER + code('''
        def train(model, data):
            act = torch.compile(lambda x: x * 2)

            def loss_fn(y):
                return y.sum()

            fast_loss = torch.compile(loss_fn)

            @torch.compile
            def step(x):
                return model(x)

            return act, fast_loss, step


        for scale in range(3):
            f = torch.compile(lambda x: x * scale)
        ''')
    found = lint(source)
    assert places(found) == [at("CL202", source, "torch.compile(lambda x: x * 2)"),
                             at("CL202", source, "torch.compile(loss_fn)"),
                             at("CL202", source, "torch.compile", 2),
                             at("CL202", source, "torch.compile(lambda x: x * scale)")]
    kinds = [(f.data["kind"], f.data["closure"], f.data["in_loop"]) for f in found]
    assert kinds == [("compile-lambda", "<lambda>", False), ("compile-closure", "loss_fn", False),
                     ("compile-closure", "step", False), ("compile-lambda", "<lambda>", True)]
    assert "each time `train` runs" in found[0].message
    assert all(f.severity == "warning" for f in found)


def test_compiling_once_is_not_a_closure_hazard():
    source = HEADER + code('''
        act = torch.compile(lambda x: x * 2)


        def loss_fn(y):
            return y.sum()


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = torch.compile(lambda x: x.relu())


        def build():
            return torch.compile(loss_fn)
        ''')
    assert lint(source) == []


# --- CL203: a varying Python scalar passed to a compiled callable ---------------------------

def test_scalars_varying_in_a_loop():
    source = HEADER + code('''
        def step(x, lr, scale=1.0):
            return x * lr * scale


        step_fn = torch.compile(step)
        model = torch.compile(nn.Linear(4, 4))
        x = torch.randn(2, 4)

        for lr in [0.1, 0.01, 0.001]:
            step_fn(x, lr)

        for i in range(10):
            step_fn(x, 0.1, scale=i * 0.5)

        lr = 0.1
        for _ in range(3):
            lr = lr * 0.5
            step_fn(x, lr)

        for k, batch in enumerate([x, x]):
            step_fn(batch, k)
        ''')
    found = lint(source)
    assert places(found) == [at_arg("CL203", source, "lr)"), at("CL203", source, "i * 0.5"),
                             at_arg("CL203", source, "lr)", 1), at_arg("CL203", source, "k)")]
    assert found[0].data == {"kind": "scalar-arg", "name": "lr", "callee": "step_fn",
                             "loop_line": span(source, "for lr in")[0]}
    assert "`lr`" in found[0].message and found[0].severity == "warning"


def test_scalars_in_a_training_function_and_decorated_callables():
    source = HEADER + code('''
        @torch.compile
        def scaled(x, factor: float):
            return x * factor


        def train(model, loader, epochs: int = 3, base_lr=0.1):
            compiled = torch.compile(model)
            for epoch in range(epochs):
                lr = base_lr * 0.9 ** epoch
                for x, y in loader:
                    out = compiled(x)
                    scaled(out, lr)
                    compiled(x, epoch)
        ''')
    assert places(lint(source)) == [at_arg("CL203", source, "lr)"), at_arg("CL203", source, "epoch)")]


def test_no_scalar_hazard_for_tensors_constants_dynamic_or_uncompiled():
    source = HEADER + code('''
        def step(x, lr):
            return x * lr


        dyn = torch.compile(step, dynamic=True)
        fast = torch.compile(step)
        x = torch.randn(2, 4)
        for lr in [0.1, 0.01]:
            dyn(x, lr)
            step(x, lr)
            fast(x, 0.1)
        for x in [torch.randn(2), torch.randn(3)]:
            fast(x, 0.5)
        for batch in range(3):
            t = torch.tensor(batch)
            fast(t, 0.5)
        for t in torch.arange(3):
            fast(x, t)
        ''')
    assert lint(source) == []


# --- the cache: edits, moved lines, odd splits ------------------------------------------------

def whole_file(source: str, path: str):
    """The reference: the whole file parsed at once, nothing cached."""
    source = lints._normalise_newlines(source)
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    return lints._lint_chunks([lints._Chunk.parse(source, 0)], source, path)


BASE = HEADER + code('''
    def helper(x):
        print(x)
        return x


    class Net(nn.Module):
        def forward(self, x):
            x = helper(x)
            if x.sum() > 0:
                x = -x
            return x.item()


    for epoch in range(3):
        torch.compile(Net())(epoch)
    ''')


def test_edits_keep_positions_right():
    path = "/work/edits.py"
    versions = [
        BASE,
        "# a new first line\n\n" + BASE,  # everything moves down
        BASE.replace("    return x\n", "    return x * 2\n"),  # one statement changes
        BASE.replace("class Net", "\n\n\nclass Net"),  # the lines above the class grow
        BASE.replace("import torch\n", ""),  # lines removed at the top
        BASE + "\n" + BASE,  # the same statements twice
        BASE,
    ]
    for version in versions:
        assert lint_source(version, path) == whole_file(version, path)
    forget(path)
    assert lint_source(BASE, path) == whole_file(BASE, path)


def test_lines_at_column_zero_inside_strings_and_brackets():
    source = code('''
        """A module docstring.

        def not_code():
            print("inside the docstring")
        """
        import torch
        import torch.nn as nn

        TABLE = {
        "a": 1,
        }


        class Net(nn.Module):
            def forward(self, x):
                doc = """
        print(x)
        """
                return x.tolist()
        try:
            import numpy
        except ImportError:
            numpy = None
        else:
            pass
        finally:
            pass
        if TABLE:
            pass
        elif x:
            pass
        ''')
    found = lint(source)
    assert places(found) == [at("CL103", source, "x.tolist()")]
    assert found == whole_file(source, found[0].path)


def test_lints_many_files_without_mixing_them_up():
    sources = [BASE.replace("print(x)", f"print({k})") for k in range(20)]
    for _ in range(2):
        for k, source in enumerate(sources):
            path = f"/work/many_{k}.py"
            assert lint_source(source, path) == whole_file(source, path)


def test_codes_table_covers_every_code():
    assert set(lints.CODES) == {f"CL10{k}" for k in range(1, 8)} | {"CL201", "CL202", "CL203"}
    assert all(severity == "information" for c, (severity, _) in lints.CODES.items() if c < "CL2")
    assert all(severity == "warning" for c, (severity, _) in lints.CODES.items() if c >= "CL2")


def test_statements_are_cached_one_by_one_even_around_docstrings():
    """A keystroke re-parses one statement: column-0 text inside a docstring is no boundary."""
    source = code('''
        """Module docstring.

        Usage at column 0:
        python train.py
        """
        import torch


        def f(x):
            """Doc.

        also at column 0
            """
            return x


        class C:
            pass
        ''')
    path = "/work/docstrings.py"
    lint_source(source, path)
    cached = lints._CACHE._files[path]
    assert [text.split("\n", 1)[0] for text in cached] == ['"""Module docstring.', "import torch",
                                                          "def f(x):", "class C:"]


def test_recursive_helpers_terminate():
    source = HEADER + code('''
        def ping(x, n):
            return pong(x, n - 1) if n else x.item()


        def pong(x, n):
            return ping(x, n)


        class Net(nn.Module):
            def forward(self, x):
                return self.forward(x) + ping(x, 3)
        ''')
    assert places(lint(source)) == [at("CL102", source, "x.item()")]
