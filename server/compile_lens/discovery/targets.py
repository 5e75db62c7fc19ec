"""Find the targets in a file: `nn.Module` subclasses and compiled functions at module level.

A class is a module when its bases say so in this file; one whose bases the source cannot place is
a *possible* module, settled by the worker after import. Each target gets the recipe of its
directive (`directives`), else the guess of `inference`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Optional

from ..lints.facts import dotted_name
from ..protocol import InputRecipe, TargetSpec
from .bases import HOMES, IMPORTS, import_names, imported_names
from .call_sites import CallSite, _literal_keywords, compile_call_sites
from .deps import fingerprint
from .directives import (
    DirectiveError,
    _apply_directive,
    _has_directive,
    _read_directive,
    _stray_directives,
)
from .inference import _module_target
from .order import built_inside
from .values import _ASSIGNED, CLASSES, _module_constants


@dataclass
class Discovery:
    targets: list[TargetSpec] = field(default_factory=list)
    errors: list[DirectiveError] = field(default_factory=list)
    fingerprint: str = ""
    call_sites: list[CallSite] = field(default_factory=list)  # `torch.compile(...)` of each target
    contains: dict[str, list[str]] = field(default_factory=dict)  # class -> targets its __init__ builds (`order`)
    # targets a workspace file importing this one compiles -> that file (`order.note_importers`)
    compiled_elsewhere: dict[str, str] = field(default_factory=dict)


def discover(source: str, tree: Optional[ast.Module] = None, code_fingerprint: str = "", *,
             path: str = "", root: str = "") -> Optional[Discovery]:
    """Targets of one file, or None when it does not parse (mid-typing). `tree` and its
    `code_fingerprint`: already parsed (statement by statement, off the event loop). `path` and
    `root`: where the file is, to read the workspace files its classes' bases come from."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return None
    lines = source.splitlines()
    found = Discovery(fingerprint=code_fingerprint or fingerprint(tree))
    module_classes, maybe_modules = _module_classes(tree)
    constants = _with_imported_bases(tree, path, root)
    # `compiled = torch.compile(fn)`: a plain function compiled at a call site is a target too.
    # One walk for every candidate (functions and classes), filtered below.
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    all_sites = compile_call_sites(tree, functions | module_classes | maybe_modules)
    compiled_at = {site.target: site.options for site in all_sites if site.target in functions}
    used: set[int] = set()  # directive lines that belong to a target
    for node in tree.body:
        spec: Optional[TargetSpec] = None
        if isinstance(node, ast.ClassDef) and (node.name in module_classes or node.name in maybe_modules):
            spec = _module_target(node, constants)
            spec.maybe_module = node.name in maybe_modules
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            options = _compile_decorator(node)
            if options is None and node.name in compiled_at:
                options = dict(compiled_at[node.name])
            if options is None and _has_directive(node, lines):
                options = {}  # the user said how to call it: a plain function is a target too
            if options is not None:
                spec = TargetSpec(node.name, "function", node.lineno, compile_options=options)
                spec.problem = (f"no example inputs for `{node.name}`: add "
                                f"`# compile-lens: inputs=(...)` above it")
        if spec is None:
            continue
        _name_columns(spec, node, lines)
        spec.end_line = getattr(node, "end_lineno", None) or node.lineno
        directive = _read_directive(node, lines, found.errors, used)
        if directive is not None:
            _apply_directive(spec, directive)
        if spec.kind == "module" and spec.inputs is None and (spec.maybe_module or _library_may_tell(spec)):
            # the source alone cannot tell: the worker guesses after import from what a library
            # publishes, and says `problem` if it cannot either (or drops a class that is no module)
            spec.inputs = InputRecipe("inferred", "", None, after_import=True, note=spec.problem or "")
            spec.problem = None
        spec.fingerprint = found.fingerprint
        found.targets.append(spec)
    found.errors += _stray_directives(tree, lines, used, module_classes | maybe_modules)
    # `model = torch.compile(Net(), dynamic=True)`: the module is compiled with those options
    by_name = {t.name: t for t in found.targets}
    found.call_sites = [site for site in all_sites if site.target in by_name]
    found.contains = built_inside(tree, set(by_name))
    for site in found.call_sites:
        if by_name[site.target].kind == "module" and site.options:
            by_name[site.target].compile_options = {**site.options, **by_name[site.target].compile_options}
    return found


def _with_imported_bases(tree: ast.Module, path: str, root: str) -> dict[str, object]:
    """The file's module-level values and classes (`values._module_constants`), with the classes
    its classes derive from that workspace files it imports define (`class Child(Base)`, `from
    .base import Base`), each seeing its own file's names."""
    constants = _module_constants(tree)
    constants[IMPORTS] = import_names(tree)
    classes: dict[str, ast.ClassDef] = constants[CLASSES]  # type: ignore[assignment]
    homes: dict[ast.ClassDef, dict[str, object]] = {}  # by the class itself: an alias may rename it
    read: dict[int, dict[str, object]] = {}  # each imported file's constants, computed once
    for local_name, (name, theirs) in imported_names(tree, path, root, set(classes)).items():
        if id(theirs) not in read:
            read[id(theirs)] = _module_constants(theirs)
            read[id(theirs)][IMPORTS] = import_names(theirs)
        their_constants = read[id(theirs)]
        their_classes: dict[str, ast.ClassDef] = their_constants[CLASSES]  # type: ignore[assignment]
        if name not in their_classes:
            if name in their_constants and local_name not in constants:  # `WIDTH = 16` there
                constants[local_name] = their_constants[name]
            continue
        their_env = {k: v for k, v in their_constants.items() if not k.startswith("<")}
        their_env[_ASSIGNED], their_env[IMPORTS] = their_constants[_ASSIGNED], their_constants[IMPORTS]
        # the class and the bases it has in its own file (`class Base(Core)` there)
        todo = [(local_name, their_classes[name])]
        while todo:
            key, node = todo.pop()
            if key in classes:
                continue
            classes[key], homes[node] = node, their_env
            todo += [(b.id, their_classes[b.id]) for b in node.bases if isinstance(b, ast.Name) and b.id in their_classes]
    constants[HOMES] = homes
    return constants


# Bases that are surely not modules: a class with only these is no target. Any other base the
# source cannot place (a library's `GradientCheckpointingLayer`, a class imported from another
# file) makes the class a *possible* module, which the worker settles with `issubclass` after import.
_NOT_MODULE_BASES = {
    "object", "Exception", "BaseException", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "NamedTuple",
    "TypedDict", "Protocol", "Generic", "ABC", "dict", "list", "tuple", "set", "frozenset", "str", "int",
    "float", "bytes", "type", "ABCMeta", "Dataset", "IterableDataset", "DataLoader", "Sampler",
    "Function", "PretrainedConfig", "PreTrainedConfig", "BaseModel", "Namespace", "OrderedDict",
    "defaultdict", "Thread", "Process", "TestCase", "Callback", "Optimizer", "LRScheduler",
}
_NOT_MODULE_SUFFIXES = ("Error", "Exception", "Warning", "Config", "Dataset", "Enum", "Mixin")


def _base_name(base: ast.expr) -> str:
    return base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""


def _module_base(base: ast.expr, known: set[str], maybe: set[str], others: set[str], aliases: set[str]) -> Optional[bool]:
    """True: surely an nn.Module (`nn.Module`, `nn.Sequential`, `pl.LightningModule`, a module of
    this file or an alias of one); None: cannot tell from the source; False: surely not."""
    if isinstance(base, ast.Subscript):  # Generic[T], nn.Module has no subscripted form
        return False
    name = _base_name(base)
    if not name:
        return None  # a call (`declarative_base()`): the worker decides
    if isinstance(base, ast.Attribute) and dotted_name(base.value) in ("nn", "torch.nn") and name[:1].isupper():
        return True  # nn.Module, nn.Sequential, nn.ModuleList, ...
    if name in ("Module", "LightningModule") or name in known or name in aliases:
        return True
    if name in maybe:
        return None
    if name in others or name in _NOT_MODULE_BASES or name.endswith(_NOT_MODULE_SUFFIXES):
        return False
    return None


def _module_aliases(tree: ast.Module) -> set[str]:
    """`Base = nn.Module` (or `= torch.nn.Module`, `= Module`) at module level."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if (isinstance(value, ast.Attribute) and value.attr == "Module") or \
                    (isinstance(value, ast.Name) and (value.id == "Module" or value.id in found)):
                found.add(node.targets[0].id)
    return found


def _module_classes(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(classes that are surely modules, classes that may be: the worker checks those after import)."""
    known: set[str] = set()
    maybe: set[str] = set()
    others: set[str] = set()
    aliases = _module_aliases(tree)
    for node in tree.body:  # in order: a subclass of a subclass defined above it counts
        if not isinstance(node, ast.ClassDef):
            continue
        verdicts = [_module_base(b, known, maybe, others, aliases) for b in node.bases]
        if any(v is True for v in verdicts):
            known.add(node.name)
        elif any(v is None for v in verdicts) and not _is_dataclass(node):
            maybe.add(node.name)
        else:
            others.add(node.name)
    return known, maybe


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(_base_name(d.func if isinstance(d, ast.Call) else d) == "dataclass" for d in node.decorator_list)


def _compile_decorator(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Optional[dict]:
    """The literal options of `@torch.compile` / `@torch.compile(...)`, or None if not compiled."""
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        func = call.func if call else dec
        if dotted_name(func) in ("torch.compile", "compile") and (call or isinstance(func, ast.Attribute)):
            return _literal_keywords(call) if call else {}
    return None


def _name_columns(spec: TargetSpec, node: ast.AST, lines: list[str]) -> None:
    row = lines[spec.line - 1] if spec.line <= len(lines) else ""
    match = re.search(rf"\b(class|def)\s+({re.escape(spec.name)})\b", row)
    if match:
        spec.column, spec.end_column = match.start(2) + 1, match.end(2) + 1
    else:
        spec.column, spec.end_column = 1, len(row) + 1


def _library_may_tell(spec: TargetSpec) -> bool:
    """The guess stopped at something only known after import: a layer that is not torch.nn's (a
    library model), or a `forward` inherited from a library class or a base the source cannot
    read; and it builds with no arguments."""
    problem = spec.problem or ""
    if "whose input no layer of it sizes" in problem:
        return False  # a module of this file that sizes nothing: no library to ask
    return "constructor arguments" not in problem and any(
        why in problem for why in ("first reaches", "no `forward` here", ": its inputs cannot be read statically"))
