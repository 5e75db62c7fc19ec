"""Which example inputs each target gets: directive > pyproject.toml > recorded run > inferred guess.

`discover` fills in directives and guesses from the source alone; `resolve_inputs` then looks at
the project's `[[tool.compile-lens.targets]]` and at `.compile-lens/recorded.json`:

- `inputs` come from the highest of the four sources that has them;
- `init` (how a module is built) from that source or a higher one: a pyproject `init` applies
  to recorded inputs, but a recorded constructor never to a pyproject's or a directive's inputs;
  with none, the guess's own `init` (a default config object, say) stays;
- `variants` likewise, and the recorded sequence of shapes goes with any recipe (for the
  recompile sweep) when `InputRecipe` has a `recorded_shapes` field.

A target that still has no inputs gets a `problem` that says what failed and each way to fix it.
A pyproject entry may also name something discovery does not treat as a target (a module-level
`model = GPT2LMHeadModel(config)`, a subclass of a library's model): it is added as one.
No torch, no user code: cheap enough to run on every analysis.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from typing import Optional

from ..config import ConfigTarget, ProjectConfig, load_project_config
from ..protocol import RECORD_HINT, InputRecipe, TargetSpec
from ..record.recorded import Recorded, load_recorded
from .deps import fingerprint
from .precision import choose_for as choose_precision


def resolve_inputs(path: str, root: str, targets: list[TargetSpec], *, source: Optional[str] = None,
                   config: Optional[ProjectConfig] = None, recorded: Optional[Recorded] = None,
                   precision: str = "auto") -> list[TargetSpec]:
    """The targets, each with the recipe of the highest-precedence source (changed in place), and
    after them the pyproject entries for this file that discovery did not find (new TargetSpecs);
    each with the precision it is measured in (`discovery/precision.py`; `precision`: the setting).

    `source`: the file's text, when the caller has it (else it is read when needed)."""
    config = config if config is not None else load_project_config(path, root)
    recorded = recorded if recorded is not None else load_recorded(root)
    targets += _config_only_targets(path, targets, config, source)
    for spec in targets:
        _resolve(spec, path, root, config, recorded)
        choose_precision(spec, path, precision, config, recorded)
    return targets


def _config_only_targets(path: str, targets: list[TargetSpec], config: ProjectConfig,
                         source: Optional[str]) -> list[TargetSpec]:
    known = {t.name for t in targets}
    entries = [e for e in config.targets if e.name not in known and e.path == os.path.realpath(path)]
    if not entries:
        return []
    try:
        if source is None:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    digest = fingerprint(tree)
    return [_spec_for_entry(entry, tree, lines, digest) for entry in entries]


def _spec_for_entry(entry: ConfigTarget, tree: ast.Module, lines: list[str], digest: str) -> TargetSpec:
    """A target for a name of the file: a class (built by `init`), a function, or an object."""
    top = entry.name.split(".")[0]
    node: Optional[ast.stmt] = None
    for stmt in tree.body:
        names = [stmt.name] if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else \
            [n.id for t in getattr(stmt, "targets", [getattr(stmt, "target", None)]) if t is not None
             for n in ast.walk(t) if isinstance(n, ast.Name)]
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name.split(".")[0] for a in stmt.names]
        if top in names:
            node = stmt
    if entry.init is not None or isinstance(node, ast.ClassDef) or (isinstance(node, (ast.Import, ast.ImportFrom)) and top[:1].isupper()):
        kind = "module"
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and top == entry.name:
        kind = "function"
    else:
        kind = "call"  # an object: called as it is
    line = node.lineno if node is not None else 1
    spec = TargetSpec(entry.name, kind, line, end_line=getattr(node, "end_lineno", None) or line, fingerprint=digest)
    row = lines[line - 1] if 0 < line <= len(lines) else ""
    match = re.search(rf"\b{re.escape(top)}\b", row)
    spec.column, spec.end_column = (match.start() + 1, match.end() + 1) if match else (1, len(row) + 1)
    spec.problem = f"no example inputs for `{entry.name}`"
    return spec


def _resolve(spec: TargetSpec, path: str, root: str, config: ProjectConfig, recorded: Recorded) -> None:
    entry = config.entry_for(path, spec.name)
    guess = spec.inputs if spec.inputs is not None and spec.inputs.source == "inferred" else None
    shapes = recorded.shapes_for(path, spec.name)
    if spec.inputs is not None and spec.inputs.source == "directive":
        _with_shapes(spec.inputs, shapes)
        return
    recipe: Optional[InputRecipe] = None
    problem: Optional[str] = None
    if entry is not None and entry.inputs is not None:
        recipe = InputRecipe("config", entry.inputs, entry.init or (guess.init if guess else None), list(entry.variants))
    else:
        taken = recorded.recipe_for(path, spec.name)
        if taken is not None:
            init = (entry.init if entry else None) or taken.init or (guess.init if guess else None)
            if init is None and spec.kind == "module" and recorded.init_problem(path, spec.name) and _needs_arguments(spec):
                problem = recorded.init_problem(path, spec.name)
            else:
                recipe = InputRecipe("recorded", taken.text, init, list(entry.variants) if entry else [])
        elif guess is not None:
            recipe = guess
            if entry is not None:  # a pyproject entry with `init` / `variants` but no `inputs`
                recipe.init = entry.init or recipe.init
                recipe.variants = list(entry.variants) or recipe.variants
    if recipe is not None:
        _with_shapes(recipe, shapes)
        if recipe.after_import and recipe.note and "compile-lens record" not in recipe.note:
            # what the worker says when no library tells the inputs either: every way to give them
            spec.problem = recipe.note
            recipe.note = _problem(spec, path, root, config, recorded, None)
        spec.inputs, spec.problem = recipe, None
        return
    spec.inputs = None
    spec.problem = _problem(spec, path, root, config, recorded, problem)


def _needs_arguments(spec: TargetSpec) -> bool:
    """Discovery found required constructor arguments (or could not guess anything)."""
    if spec.inputs is not None and spec.inputs.after_import:
        return "constructor arguments" in spec.inputs.note
    return spec.inputs is None


def _with_shapes(recipe: InputRecipe, shapes: list) -> None:
    if shapes and "recorded_shapes" in {f.name for f in dataclasses.fields(recipe)}:
        recipe.recorded_shapes = shapes  # type: ignore[attr-defined]


def _problem(spec: TargetSpec, path: str, root: str, config: ProjectConfig, recorded: Recorded,
             recorded_problem: Optional[str]) -> str:
    """What is missing, and the three ways to supply it, as one message for the target's line."""
    name = spec.name
    what = f"class {name}" if spec.kind == "module" else f"def {name.split('.')[-1]}"
    why = _why(spec.problem, name)
    reasons = [why]
    entry = config.entry_for(path, name)
    if entry is not None and entry.inputs is None:
        reasons.append("its [[tool.compile-lens.targets]] entry has no `inputs`")
    told = recorded_problem or recorded.call_problem(path, name)
    if told:
        reasons.append(told)
    needs_init = "constructor arguments" in why or (recorded_problem is not None)
    init = f"init={name}(...) " if needs_init and spec.kind == "module" else ""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root)).replace(os.sep, "/")
    if rel.startswith("../"):
        rel = os.path.basename(path)
    toml_init = f'init = "{name}(...)", ' if init else ""
    return (f"{'; '.join(r for r in reasons if r)}: add `# compile-lens: {init}inputs=(...)` above `{what}`, "
            f"or a [[tool.compile-lens.targets]] entry in pyproject.toml with target = \"{rel}:{name}\", "
            f"{toml_init}inputs = \"(...)\", or record a real run: `{RECORD_HINT}`")


_FIX = re.compile(r"\s*[:;,]\s*add `# compile-lens:.*$")


def _why(problem: Optional[str], name: str) -> str:
    """The reason part of discovery's message, without its own (directive-only) advice."""
    if not problem:
        return f"no example inputs for `{name}`"
    return _FIX.sub("", problem).strip() or f"no example inputs for `{name}`"
