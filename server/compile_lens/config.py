"""Project settings and targets from `pyproject.toml`.

```toml
[tool.compile-lens]
device = "cpu"                      # any compileLens.* setting, without the prefix
worker.timeoutSeconds = 120

[[tool.compile-lens.targets]]
target = "models/net.py:Net"        # relative to this pyproject.toml
init = "Net(hidden=64)"
inputs = "(torch.randn(8, 16),)"
variants = ["(torch.randn(3, 16),)"]
precision = "bf16-autocast"         # optional: this target's (benchmark.precision is every target's)
```

The file used is the nearest `pyproject.toml` at or above the analysed file (up to the workspace
root) that has a `[tool.compile-lens]` table. Mistakes in it become `Problem`s with the
pyproject's path and line, for the editor to show there. No torch, no imports of user code.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

from .protocol import InputRecipe, Problem
from .settings import PRECISIONS, Settings

TABLE = "tool.compile-lens"
TARGET_KEYS = ("target", "init", "inputs", "variants", "precision")
NO_TOML = ("pyproject.toml has [tool.compile-lens] but this Python cannot read TOML: "
           "use Python 3.11 or newer, or `pip install tomli` in the interpreter Compile Lens runs on")


@dataclass
class ConfigTarget:
    """One `[[tool.compile-lens.targets]]` entry."""

    path: str  # the target's file, absolute and resolved
    name: str  # "Net", or "Outer.method"
    init: Optional[str] = None
    inputs: Optional[str] = None
    variants: list[str] = field(default_factory=list)
    line: int = 1  # the entry's line in pyproject.toml
    precision: Optional[str] = None  # what this target is measured in (`discovery/precision.py`)


@dataclass
class ProjectConfig:
    path: Optional[str] = None  # the pyproject.toml read; None when there is none
    settings: dict[str, Any] = field(default_factory=dict)  # flat keys: {"worker.timeoutSeconds": 120}
    targets: list[ConfigTarget] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # kind "config", at the pyproject's lines

    def entry_for(self, file_path: str, target_name: str) -> Optional[ConfigTarget]:
        real = os.path.realpath(file_path)
        return next((t for t in self.targets if t.path == real and t.name == target_name), None)

    def recipe_for(self, file_path: str, target_name: str) -> Optional[InputRecipe]:
        """The configured recipe (source "config"), or None when the entry has no `inputs`."""
        entry = self.entry_for(file_path, target_name)
        if entry is None or entry.inputs is None:
            return None
        return InputRecipe("config", entry.inputs, entry.init, list(entry.variants))


def load_project_config(path: str, root: str) -> ProjectConfig:
    """The settings and targets that apply to `path` (a file or a folder) in the workspace `root`."""
    pyproject = find_pyproject(path, root)
    if pyproject is None:
        return ProjectConfig()
    try:
        stat = os.stat(pyproject)
    except OSError:
        return ProjectConfig()
    return _load(pyproject, stat.st_mtime_ns, stat.st_size)


ROOT_MARKERS = ("pyproject.toml", ".git", ".compile-lens")


SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox", ".mypy_cache"}


def python_files(paths: list[str]) -> list[str]:
    """The `.py` files of `paths` (files as given, folders walked; tool and hidden folders skipped)."""
    found: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            found.append(os.path.abspath(path))
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            found += [os.path.abspath(os.path.join(dirpath, f)) for f in sorted(filenames) if f.endswith(".py")]
    return found


def find_root(path: str, top: Optional[str] = None) -> str:
    """The workspace root of `path` (a file or a folder), found like ruff finds its project: the
    nearest folder at or above it whose pyproject.toml has [tool.compile-lens]; else the nearest
    with a pyproject.toml, a .git or a .compile-lens/ (where `compile-lens record` writes); else
    the file's folder. The search stops at a repository's top (.git) and at `top` (an editor's
    workspace folder), which is the answer when nothing nearer is found inside it."""
    here = os.path.abspath(path)
    directory = here if os.path.isdir(here) else os.path.dirname(here)
    limit = os.path.abspath(top) if top else None
    if limit and not (directory == limit or directory.startswith(limit.rstrip(os.sep) + os.sep)):
        limit = None  # not inside it: search as if there were no workspace folder
    nearest: Optional[str] = None
    while True:
        pyproject = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(pyproject) and _mentions_table(pyproject):
            return directory
        if nearest is None and any(os.path.exists(os.path.join(directory, m)) for m in ROOT_MARKERS):
            nearest = directory
        parent = os.path.dirname(directory)
        if directory == limit or parent == directory or os.path.exists(os.path.join(directory, ".git")):
            break
        directory = parent
    if nearest is not None:
        return nearest
    if limit is not None:
        return limit
    return here if os.path.isdir(here) else os.path.dirname(here)


def find_pyproject(path: str, root: str) -> Optional[str]:
    """The nearest pyproject.toml with a [tool.compile-lens] table, from `path` up to `root`."""
    here = os.path.abspath(path)
    directory = here if os.path.isdir(here) else os.path.dirname(here)
    top = os.path.abspath(root)
    inside = directory == top or directory.startswith(top.rstrip(os.sep) + os.sep)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate) and _mentions_table(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if not inside or directory == top or parent == directory:
            return None
        directory = parent


def _mentions_table(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r"^\s*\[\[?\s*tool\s*\.\s*[\"']?compile-lens", text, re.M) is not None or \
        re.search(r"^\s*compile-lens\s*=", text, re.M) is not None


def _toml_loads() -> Any:
    try:
        import tomllib  # Python 3.11+

        return tomllib.loads, tomllib.TOMLDecodeError
    except ImportError:
        pass
    try:
        import tomli  # type: ignore[import-not-found]

        return tomli.loads, tomli.TOMLDecodeError
    except ImportError:
        return None


@lru_cache(maxsize=32)
def _load(pyproject: str, mtime_ns: int, size: int) -> ProjectConfig:
    config = ProjectConfig(path=pyproject)
    try:
        with open(pyproject, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        config.problems.append(_problem(config, f"cannot read pyproject.toml: {exc}", 1))
        return config
    lines = _KeyLines(text)
    parser = _toml_loads()
    if parser is None:
        config.problems.append(_problem(config, NO_TOML, lines.table_line()))
        return config
    loads, error = parser
    try:
        data = loads(text)
    except error as exc:
        match = re.search(r"line (\d+)", str(exc))
        config.problems.append(_problem(config, f"pyproject.toml is not valid TOML: {exc}", int(match[1]) if match else 1,
                                        "fix the file; until then Compile Lens uses no project settings"))
        return config
    table = data.get("tool", {}).get("compile-lens")
    if table is None:
        return config
    if not isinstance(table, dict):
        config.problems.append(_problem(config, "[tool.compile-lens] must be a table", lines.table_line()))
        return config
    _read_settings(config, {k: v for k, v in table.items() if k != "targets"}, lines)
    targets = table.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, dict) for t in targets):
        config.problems.append(_problem(config, "`targets` must be a list of tables: write each as "
                                                "[[tool.compile-lens.targets]]", lines.setting_line("targets")))
        return config
    for index, entry in enumerate(targets):
        _read_target(config, entry, index, lines)
    return config


def _problem(config: ProjectConfig, message: str, line: int, hint: Optional[str] = None) -> Problem:
    return Problem("config", message, config.path, line, hint)


def _flatten(table: dict, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _read_settings(config: ProjectConfig, table: dict, lines: _KeyLines) -> None:
    known = list(Settings().as_client())
    for key, value in _flatten(table).items():
        line = lines.setting_line(key)
        if key not in known:
            config.problems.append(_problem(config, f"unknown setting `{key}` in [tool.compile-lens]", line,
                                            f"known settings: {', '.join(known)}, and [[tool.compile-lens.targets]]"))
            continue
        _, rejected = Settings.from_client({key: value})
        if rejected:
            config.problems.append(_problem(config, rejected[0], line))
            continue
        config.settings[key] = value


_TARGET = re.compile(r"^(?P<path>.+\.py):(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)$")


def _read_target(config: ProjectConfig, entry: dict, index: int, lines: _KeyLines) -> None:
    where = lines.target_line(index)
    unknown = [k for k in entry if k not in TARGET_KEYS]
    for key in unknown:
        config.problems.append(_problem(config, f"unknown key `{key}` in a [[tool.compile-lens.targets]] entry",
                                        lines.target_line(index, key), f"known keys: {', '.join(TARGET_KEYS)}"))
    spec = entry.get("target")
    if not isinstance(spec, str) or not _TARGET.match(spec.strip()):
        config.problems.append(_problem(
            config, f"`target = {spec!r}` should name a file and what is in it: target = \"models/net.py:Net\"",
            lines.target_line(index, "target") if spec is not None else where))
        return
    match = _TARGET.match(spec.strip())
    assert match is not None
    base = os.path.dirname(config.path or "")
    file_path = os.path.realpath(os.path.join(base, match["path"]))
    name = match["name"]
    if not os.path.isfile(file_path):
        config.problems.append(_problem(config, f"target file `{match['path']}` does not exist "
                                                f"(paths are relative to {os.path.basename(base) or base}/)",
                                        lines.target_line(index, "target")))
        return
    if not _defines(file_path, name.split(".")[0]):
        config.problems.append(_problem(config, f"`{name}` is not defined at the top level of `{match['path']}`",
                                        lines.target_line(index, "target")))
        return
    target = ConfigTarget(file_path, name, line=where)
    for key in ("init", "inputs"):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not _is_expression(value):
            config.problems.append(_problem(config, f"`{key}` of `{spec}` must be a Python expression in a string, "
                                                    f"e.g. {key} = \"{'Net(hidden=64)' if key == 'init' else '(torch.randn(8, 16),)'}\"",
                                            lines.target_line(index, key)))
            return
        setattr(target, key, value.strip())
    variants = entry.get("variants", [])
    if isinstance(variants, str):
        variants = [variants]
    if not isinstance(variants, list) or not all(isinstance(v, str) and _is_expression(v) for v in variants):
        config.problems.append(_problem(config, f"`variants` of `{spec}` must be a list of Python expressions in strings",
                                        lines.target_line(index, "variants")))
        return
    target.variants = [v.strip() for v in variants]
    precision = entry.get("precision")
    if precision is not None and precision not in PRECISIONS[1:]:
        config.problems.append(_problem(config, f"`precision` of `{spec}` must be one of {', '.join(PRECISIONS[1:])}",
                                        lines.target_line(index, "precision")))
        return
    target.precision = precision
    if target.inputs is None and target.init is None and not target.variants and target.precision is None:
        config.problems.append(_problem(config, f"the entry for `{spec}` gives no `inputs`, `init` or `variants`", where))
        return
    if any(t.path == target.path and t.name == target.name for t in config.targets):
        config.problems.append(_problem(config, f"`{spec}` has two [[tool.compile-lens.targets]] entries; "
                                                "the first one is used", where))
        return
    config.targets.append(target)


def _is_expression(text: str) -> bool:
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    return True


def _defines(path: str, name: str) -> bool:
    """The file binds `name` at module level (a class, a def, an assignment, an import)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return True  # cannot tell: let the analysis say what is wrong
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            return True  # conditional definitions: do not guess
    return False


class _KeyLines:
    """Where keys are in the TOML text, for problems that point at the line to fix."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")

    def __init__(self, text: str):
        self.table = 0
        self.settings: dict[str, int] = {}
        self.targets: list[dict[str, int]] = []
        section: Optional[str] = None
        for number, row in enumerate(text.splitlines(), 1):
            header = self._HEADER.match(row)
            if header:
                name = _normal(header[2])
                section = name
                if name == TABLE and header[1] == "[":
                    self.table = self.table or number
                elif name == f"{TABLE}.targets" and header[1] == "[[":
                    self.targets.append({"": number})
                elif name.startswith(TABLE + "."):
                    self.table = self.table or number
                continue
            key = self._KEY.match(row)
            if not key or section is None:
                continue
            dotted = _normal(key[1])
            if section == f"{TABLE}.targets" and self.targets:
                self.targets[-1].setdefault(dotted, number)
            elif section == TABLE or section.startswith(TABLE + "."):
                prefix = section[len(TABLE) + 1:]
                self.settings.setdefault(f"{prefix}.{dotted}" if prefix else dotted, number)

    def table_line(self) -> int:
        return self.table or (self.targets[0][""] if self.targets else 1)

    def setting_line(self, key: str) -> int:
        return self.settings.get(key) or self.table_line()

    def target_line(self, index: int, key: str = "") -> int:
        if index < len(self.targets):
            entry = self.targets[index]
            return entry.get(key) or entry[""]
        return self.setting_line("targets")


def _normal(name: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in name.split("."))
