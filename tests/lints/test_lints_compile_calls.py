"""Static lints: torch.compile called repeatedly (CL201), new closures compiled (CL202), varying scalars (CL203)."""

from __future__ import annotations

from lint_support import HEADER, at, at_arg, code, lint, places, span

from compile_lens.lints import lint_source
from compile_lens.protocol import Frame

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
