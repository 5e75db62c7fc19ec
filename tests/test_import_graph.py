"""The package's shape: every module imports, no two modules import each other, directly or round a
longer circle (a lazy import inside a function counts: it is a circle all the same), and no import
runs back up the floors of `LAYERS`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import compile_lens

PACKAGE = Path(compile_lens.__file__).parent
MAX_LINES = 500  # no exemption: a module over it is split by concern

# The floors of the package, lowest first: a module imports from its own floor or a lower one.
# A name is a package (`worker` holds `worker.*`) or a top-level module; `compile_lens` is the
# package's own `__init__` (the version). The "Development" tree of docs/architecture.md is checked against it.
LAYERS: list[tuple[str, ...]] = [
    ("compile_lens", "protocol", "measured", "codes", "comments", "cost", "processes", "ranks", "timeline",
     "busy", "interpreters", "torch_diff", "remote_cache", "speed_words", "torch_text", "kineto"),  # plain data and rules · is the machine busy (the rule; psutil, NVML) · profiler traces read
    ("positions", "settings"),
    ("config",),  # pyproject.toml's [tool.compile-lens]
    ("record",),  # runs inside the user's program: stdlib and protocol only
    ("discovery", "lints"),  # source text → targets, inputs, static findings; no torch
    ("worker",),  # the torch process (what it shares with trial/, render/ and trace_import/ is torch_text/, floor 0)
    ("jobs", "trial"),  # what runs where (lanes, cache) · a trial's runs and their figures
    ("render", "trace_import"),  # results in, LSP types or CLI text/JSON/SARIF/HTML out · a torch trace read
    ("actions", "engine"),  # code actions: edits from findings · the batch sequence the front ends share
    ("lsp", "cli", "mcp_server", "__main__"),  # the front ends: editor, terminal, agents (and `python -m compile_lens`)
]
# Imports that run back up a floor on purpose, each with its reason (none today: the boot hook
# installs the trial's hook by the name `compile-lens trial` puts in its environment).
UPWARD_ALLOWED: set[tuple[str, str]] = set()


def _modules(with_boot: bool = False) -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "_boot" in parts and not with_boot:  # sitecustomize: runs in the user's program, installs the recorder on import
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `name` imports (type-checking-only imports left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for child in node.body for n in ast.walk(child)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle, as the modules round it; [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def _without_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ runs before its modules: `pkg.mod` -> `pkg` is not an edge of design."""
    return {n: {t for t in ts if not n.startswith(t + ".")} for n, ts in graph.items()}


def test_no_import_circle():
    modules = _modules()
    graph = _without_parents({name: _imports(name, path, modules) for name, path in modules.items()})
    assert "compile_lens.cli.check" in graph["compile_lens.cli.report"]  # the scan sees relative imports
    assert _cycle(graph) == []


def test_the_scan_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]


def test_every_module_imports():
    names = [n for n in _modules() if not n.endswith("__main__")]
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_modules_are_small():
    long = [str(p.relative_to(PACKAGE)) for p in _modules(with_boot=True).values()
            if len(p.read_text(encoding="utf-8").splitlines()) > MAX_LINES]
    assert long == []


MAX_FUNCTION_LINES = 80  # a function over it is split where its steps are


def test_functions_are_short():
    long = [f"{p.relative_to(PACKAGE)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for p in _modules(with_boot=True).values() for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


CODE = (".py", ".ts", ".mjs", ".js", ".sh")


def test_every_code_file_is_small():
    """The same floor for the tests, the scripts, the extension and the e2e driver: every tracked code
    file (test data and fixtures aside, which are written as users write code)."""
    repo = PACKAGE.parents[1]
    listed = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True)
    tracked = listed.stdout.split() if listed.returncode == 0 else [  # not a git checkout: the tree, less what is built
        str(p.relative_to(repo)) for p in repo.rglob("*") if not set(p.relative_to(repo).parts[:1]) &
        {".venv", "node_modules", "build", "dist", "bundled", ".git"} and "extension/out" not in str(p)]
    long = [f for f in tracked if f.endswith(CODE) and not f.startswith(("tests/fixtures/", "tests/data/"))
            and (repo / f).is_file() and len((repo / f).read_text(encoding="utf-8").splitlines()) > MAX_LINES]
    assert long == []


def floor_of(module: str) -> int:
    """The floor of `compile_lens.x.y` by its first part (`compile_lens` alone: the package's __init__)."""
    name = module.split(".")[1] if "." in module else module
    for i, names in enumerate(LAYERS):
        if name in names:
            return i
    raise AssertionError(f"{module} is on no floor of LAYERS: add `{name}` to one")


def _allowed(importer: str, target: str) -> bool:
    """On the allow-list, or the package an allowed module is imported through."""
    return any(importer == a and (target == b or b.startswith(target + ".")) for a, b in UPWARD_ALLOWED)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if floor_of(b) > floor_of(a) and not _allowed(a, b))


def test_no_import_runs_back_up_a_floor():
    modules = _modules(with_boot=True)
    graph = _without_parents({name: _imports(name, path, modules) for name, path in modules.items()})
    assert "compile_lens.record.hook" in graph["compile_lens.record._boot.sitecustomize"]  # the boot hook is scanned
    assert _upward(graph) == []


def test_the_scan_reads_imports_inside_functions(tmp_path):
    lazy = tmp_path / "summary.py"
    lazy.write_text("def f():\n    from compile_lens.render import cards\n    import compile_lens.cost\n")
    modules = {"compile_lens.trial.summary": lazy, "compile_lens.render.cards": lazy, "compile_lens.cost": lazy}
    assert _imports("compile_lens.trial.summary", lazy, modules) == {"compile_lens.render.cards", "compile_lens.cost"}


def test_every_package_and_top_level_module_is_on_a_floor():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    on_floors = {name for names in LAYERS for name in names} - {"compile_lens"}
    assert tops == on_floors


def test_the_scan_finds_an_import_up_a_floor():
    assert _upward({"compile_lens.trial.summary": {"compile_lens.render.cards", "compile_lens.cost"},
                    "compile_lens.render.cards": {"compile_lens.protocol"}}) == \
        ["compile_lens.trial.summary -> compile_lens.render.cards"]


ARCHITECTURE = PACKAGE.parent.parent / "docs" / "architecture.md"


def _docs_tree() -> tuple[dict[int, set[str]], str]:
    """docs/architecture.md's "Development" tree: the names on each floor's line, and the whole block's text."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## Development", 1)[1]
    block = text.split("```", 2)[1]
    floors: dict[int, set[str]] = {}
    for line in block.splitlines():
        head, _, rest = line.partition("  ")
        if head.isdigit():
            names = []
            for token in rest.split():
                if not token.endswith(("/", ".py")):
                    break
                names.append(token)
            floors[int(head)] = {n.removesuffix("/").removesuffix(".py") for n in names}
    return floors, block


def test_the_docs_tree_has_the_floors_of_layers():
    floors, _ = _docs_tree()
    sub = {p.name for p in PACKAGE.rglob("*") if p.is_dir() and (p / "__init__.py").is_file() and p.parent != PACKAGE
           and p != PACKAGE}
    wanted = {i: {"__init__" if n == "compile_lens" else n for n in names} for i, names in enumerate(LAYERS)}
    # a floor's line also names the subpackages of its packages (worker/ breaks/ measure/)
    assert {i: names - sub for i, names in floors.items()} == wanted
    assert sub <= set().union(*floors.values())


def test_the_docs_tree_names_every_module():
    _, block = _docs_tree()
    words = set(block.replace("/", " ").replace("+", " ").replace(".py", " ").replace(",", " ")
                .replace("(", " ").replace(")", " ").replace(":", " ").replace(";", " ").split())
    missing = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if p.stem not in ("__init__",) and p.stem not in words and "_boot" not in p.parts)
    assert missing == []
