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
No torch, no user code: cheap enough to run on every analysis.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Optional

from .config import ProjectConfig, load_project_config
from .protocol import InputRecipe, TargetSpec
from .record.recorded import Recorded, load_recorded

RECORD_HINT = "compile-lens record -- python train.py"  # a run of whatever script uses the target


def resolve_inputs(path: str, root: str, targets: list[TargetSpec], *,
                   config: Optional[ProjectConfig] = None, recorded: Optional[Recorded] = None) -> list[TargetSpec]:
    """The same targets, each with the recipe of the highest-precedence source (changed in place)."""
    config = config if config is not None else load_project_config(path, root)
    recorded = recorded if recorded is not None else load_recorded(root)
    for spec in targets:
        _resolve(spec, path, root, config, recorded)
    return targets


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
        spec.inputs, spec.problem = recipe, None
        return
    spec.inputs = None
    spec.problem = _problem(spec, path, root, config, recorded, problem)


def _needs_arguments(spec: TargetSpec) -> bool:
    """Discovery found required constructor arguments (or could not guess anything)."""
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
