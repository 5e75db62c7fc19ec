"""Import the user's file fresh and build each target from its recipe."""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import sys
import traceback
import types
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from ..protocol import Problem, TargetSpec, fix_hint, where_from
from ..torch_text.frames import is_environment_file, is_tool_file, is_user_file, real, under

sys.dont_write_bytecode = True  # never leave .pyc files in the user's folders


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Workspace files are always compiled from their source: a .pyc (checked by mtime in whole
    seconds and size) could serve an edit saved within the same second as stale code."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return compile(self.get_data(path), path, "exec", dont_inherit=True)


class _WorkspaceFinder(importlib.abc.MetaPathFinder):
    """Finds modules like the normal path finder, but loads workspace files with `_SourceLoader`."""

    root = ""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001 - importlib's signature
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        origin = getattr(spec, "origin", None) if spec else None
        if spec is None or not origin or not origin.endswith(".py") or not self.root:
            return spec
        if under(origin, self.root) and not is_environment_file(origin) and not _vendored(origin, self.root):
            spec.loader = _SourceLoader(fullname, origin)
        return spec


_FINDER = _WorkspaceFinder()
sys.meta_path.insert(0, _FINDER)


class TargetError(Exception):
    """A target could not be built or called; carries the user-facing problem."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


class NotATarget(Exception):
    """A class discovery could not place turned out not to be an nn.Module: nothing to analyse."""


def guess_problem(spec: TargetSpec, exc: BaseException) -> Problem:
    """Compile Lens's own guess did not fit the target: said once, on the class, as information
    (it is the guess that is wrong, not the user's code)."""
    what = f"class {spec.name}" if spec.kind == "module" else f"def {spec.name}"
    recipe = spec.inputs
    guess = f" (the guess, {recipe.origin or 'from its first layer'}: `{recipe.text}`)" if recipe and recipe.text else ""
    return Problem("guess", f"guessed inputs did not fit: {describe(exc)}; add `# compile-lens: inputs=(...)` "
                            f"above `{what}`{guess}")


@dataclass
class BuiltTarget:
    """What a job needs to run a target: a factory (a fresh model each call) and example args."""

    spec: TargetSpec
    make: Callable[[], Any]  # returns a fresh nn.Module instance (same weights each call) or the function
    args: tuple
    namespace: dict
    left_out: list = field(default_factory=list)  # optional parameters the call leaves at their defaults

    def eval_args(self, text: str) -> tuple:
        """Evaluate another argument tuple (a variant) in the module's namespace."""
        return _as_tuple(eval(text, self.namespace))  # noqa: S307 - the user's own directive


# Folders that hold other people's packages inside a workspace (on PYTHONPATH, or pip --target).
VENDOR_DIRS = {"vendor", "vendored", "_vendor", "third_party", "third-party", "thirdparty", "3rdparty",
               "site-packages", "dist-packages", "__pypackages__"}


def _vendored(path: str, root: str) -> bool:
    """Under a vendor folder of the workspace, or in a package pip installed there (its .dist-info)."""
    rel = os.path.relpath(real(path), real(root)).split(os.sep)
    if any(part.lower() in VENDOR_DIRS for part in rel[:-1]):
        return True
    top = real(root)
    return any(_has_dist_info(os.path.join(top, *rel[:i]), rel[i]) for i in range(len(rel) - 1))


@lru_cache(maxsize=4096)
def _has_dist_info(folder: str, package: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    prefix = package.replace("-", "_").lower() + "-"
    return any(n.lower().startswith(prefix) and n.endswith((".dist-info", ".egg-info")) for n in names)


# Every root this process imported from: a module another root's job left (its `helper.py`) must
# not answer the same name in the next root's file.
_ROOTS: list[str] = []
# The sys.path entries the last import put in front (it removes the ones it added before).
_ADDED: list[str] = []


def purge_user_modules(root: str) -> None:
    """Forget the workspace's own Python source modules, so the next import reads today's code —
    those of every root this process imported from before, too.

    Never forgotten: extension modules (a compiled module cannot be loaded twice in a process:
    numpy refuses), every module of a package that has one, vendored packages (`vendor/`,
    `third_party/`, pip-installed into the workspace), and Compile Lens itself."""
    source: dict[str, str] = {}
    keep: set[str] = set()  # top-level packages that are not workspace source
    resolved_root = real(root)
    if resolved_root not in _ROOTS:
        _ROOTS.append(resolved_root)
    roots = {resolved_root: root, **{r: r for r in _ROOTS if r != resolved_root}}
    for name, module in list(sys.modules.items()):
        path, owner = None, root
        for resolved, given in roots.items():
            path = _workspace_path(name, module, resolved)
            if path is not None:
                owner = given
                break
        if path is None:
            continue
        if path is None:
            continue
        top = name.partition(".")[0]
        if not path.endswith(".py") or _vendored(path, owner):
            keep.add(top)
        else:
            source[name] = top
    for name, top in source.items():
        if top not in keep:
            del sys.modules[name]


# The purge before each import looks at every module in sys.modules (≈ 2,000 with torch). Whether a
# module could be anyone's workspace file (not synthetic, torch's, ours, the standard library's or an
# installed package's) and its resolved path do not depend on the root, and cost a few `realpath`s
# each (≈ 0.1–0.4 s for all of them): a module object's answer is kept while it is the one loaded, so
# a job in another root (a multi-root workspace, another project) pays string comparisons only.
_SEEN: dict[str, tuple[weakref.ref, str | None, str | None]] = {}


def _workspace_path(name: str, module: Any, resolved_root: str) -> str | None:
    """The module's file when it is one of the workspace's files, else None."""
    seen = _SEEN.get(name)
    if seen is not None and seen[0]() is module:
        _, path, resolved = seen
    else:
        path = getattr(module, "__file__", None)
        # is_user_file's rule but its last step (under the root), the one that is asked per root
        candidate = (isinstance(path, str) and not is_tool_file(path) and os.path.isabs(path)
                     and not is_environment_file(path))
        resolved = real(path) if candidate else None
        try:
            _SEEN[name] = (weakref.ref(module), path, resolved)
        except TypeError:  # not a module (sys.modules may hold anything) and not weak-referenceable
            pass
    if resolved is None:
        return None
    return path if resolved == resolved_root or resolved.startswith(resolved_root + os.sep) else None


def module_name(path: str, root: str) -> str:
    """The dotted name the file is importable as: its package path under the root, else its stem."""
    directory, stem = os.path.split(os.path.abspath(path))
    parts = [os.path.splitext(stem)[0]]
    while under(directory, root) and os.path.exists(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return ".".join(parts)


def import_file(path: str, root: str) -> types.ModuleType:
    """Import `path` as a fresh module. Its `__main__` block does not run."""
    purge_user_modules(root)
    linecache.checkcache()
    importlib.invalidate_caches()
    name = module_name(path, root)
    top = os.path.abspath(path)
    for _ in name.split("."):
        top = os.path.dirname(top)
    _front_of_path([top, root])
    _FINDER.root = root
    spec = importlib.util.spec_from_file_location(name, path, loader=_SourceLoader(name, path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _front_of_path(entries: list[str]) -> None:
    """Put the file's folders first on sys.path, in this order, and take away the ones an earlier
    import added: a folder already on the path from another file's job would otherwise answer
    `import helper` with its own `helper.py`."""
    for entry in _ADDED:
        if entry in sys.path:
            sys.path.remove(entry)
    _ADDED.clear()
    for entry in reversed(list(dict.fromkeys(entries))):
        if entry in sys.path:  # there before us (the worker's cwd, PYTHONPATH): moved, not taken away
            sys.path.remove(entry)
        else:
            _ADDED.append(entry)
        sys.path.insert(0, entry)


def user_line(exc: BaseException, path: str) -> int | None:
    """The innermost line of `path` in the exception's traceback."""
    line = None
    wanted = os.path.realpath(path)
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename) == wanted:
            line = frame.lineno
    return line


def innermost_user_frame(exc: BaseException, root: str) -> tuple[str, int] | None:
    """The innermost traceback frame in a workspace file (not the environment, not us)."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if is_user_file(frame.filename, root):
            found = (frame.filename, frame.lineno)
    return found


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _as_tuple(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _resolve(module: types.ModuleType, dotted: str) -> Any:
    obj: Any = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def unwrap_compiled(fn: Any) -> Any:
    """The user's function under a `@torch.compile` wrapper (Dynamo keeps it on the wrapper)."""
    for attr in ("_torchdynamo_orig_callable", "_orig_mod", "__wrapped__"):
        inner = getattr(fn, attr, None)
        if inner is not None:
            return unwrap_compiled(inner)
    return fn


def _recipe_scope(namespace: dict) -> dict:
    """Where recipes are evaluated: the module's namespace, with `torch` in it even when the module
    only did `from torch import nn` (inferred inputs are written as `torch.randn(...)`)."""
    if "torch" in namespace:
        return namespace
    import torch

    return {**namespace, "torch": torch}


def build_target(module: types.ModuleType, spec: TargetSpec, path: str) -> BuiltTarget:
    """Resolve the target in the imported module, check it builds, and evaluate its inputs."""
    namespace = _recipe_scope(module.__dict__)
    how = "add `# compile-lens: inputs=(...)` above it" + (
        " and `init=...` if its constructor needs arguments" if spec.kind == "module" else ""
    )
    try:
        obj = _resolve(module, spec.name)
    except AttributeError:
        raise TargetError(Problem(
            "build", f"`{spec.name}` is not defined at module level after import", path, spec.line,
            "define it at the top level of the file")) from None
    if spec.maybe_module and not _is_module_class(obj):
        raise NotATarget(spec.name)
    if spec.inputs is None:
        raise TargetError(Problem(
            "inputs", spec.problem or f"no example inputs for `{spec.name}`", path, spec.line, how))
    if spec.inputs.after_import and not spec.inputs.text:
        spec = _with_library_inputs(spec, namespace, path)

    if spec.kind == "module":
        init = spec.inputs.init or f"{spec.name}()"

        def make() -> Any:
            _seed()
            return eval(init, namespace)  # noqa: S307 - the user's own directive
    else:
        fn = unwrap_compiled(obj)

        def make() -> Any:
            return fn

    # say which source the failing recipe came from, and where to fix it
    if spec.inputs.source != "inferred" or spec.inputs.init:
        how = fix_hint(spec.inputs, spec.name)
    guessed = spec.inputs.source == "inferred"
    try:
        checked = [make()]
    except Exception as exc:  # noqa: BLE001 - user code: report, never crash
        if guessed and spec.inputs.init:  # a guessed constructor (a default config object)
            raise TargetError(guess_problem(spec, exc)) from None
        built = init if spec.kind == "module" else spec.name
        raise TargetError(Problem(
            "build", f"building `{built}` (from {where_from(spec.inputs)}) failed: {describe(exc)}",
            path, user_line(exc, path) or spec.line, how)) from None
    try:
        _seed()
        args = _as_tuple(eval(spec.inputs.text, namespace))  # noqa: S307
    except Exception as exc:  # noqa: BLE001
        if guessed:
            raise TargetError(guess_problem(spec, exc)) from None
        raise TargetError(Problem(
            "inputs", f"evaluating inputs `{spec.inputs.text}` (from {where_from(spec.inputs)}) failed: "
                      f"{describe(exc)}", path, spec.inputs.line or spec.line, fix_hint(spec.inputs, spec.name))) from None
    if spec.kind == "module":
        build = make

        def make() -> Any:  # the instance the check built is the first handed out: a big model is built once
            return checked.pop() if checked else build()
    return BuiltTarget(spec, make, args, namespace, _left_out(obj, spec, args))


def _seed() -> None:
    """Random weights and `torch.randn` inputs drawn the same way every run: a guard on an `.item()`
    value, an output difference or a figure then reads the same on every save, not a new one."""
    import torch

    torch.manual_seed(0)


def _left_out(obj: Any, spec: TargetSpec, args: tuple) -> list[str]:
    """Optional parameters of `forward` (or the function) the example call leaves at their defaults:
    the traced path may not be the one training takes (a GPT-2 wrapper called without `labels`)."""
    from .library_inputs import left_out

    if spec.kind == "module" and isinstance(obj, type):
        return left_out(obj.forward, (None, *args))  # unbound: `self` first
    return left_out(unwrap_compiled(obj), args)


def _is_module_class(obj: Any) -> bool:
    import torch

    return isinstance(obj, type) and issubclass(obj, torch.nn.Module)


def _with_library_inputs(spec: TargetSpec, namespace: dict, path: str) -> TargetSpec:
    """The spec with inputs read from the library model it is or wraps, after building it once."""
    from .library_inputs import guess_inputs

    recipe = spec.inputs
    assert recipe is not None
    needs = Problem("inputs", recipe.note or f"cannot guess inputs for `{spec.name}`", path, spec.line)
    init = recipe.init or f"{spec.name}()"
    try:
        model = eval(init, namespace)  # noqa: S307 - the user's own directive, or `Name()`
    except Exception as exc:  # noqa: BLE001 - user code
        if recipe.init is None:  # it needs constructor arguments: say how to give them
            raise TargetError(needs) from None
        raise TargetError(Problem(
            "build", f"building `{init}` (from {where_from(recipe)}) failed: {describe(exc)}",
            path, user_line(exc, path) or spec.line, fix_hint(recipe, spec.name))) from None
    guess = guess_inputs(model, model.forward)
    if guess is None:
        raise TargetError(needs)
    return dataclasses.replace(spec, inputs=dataclasses.replace(recipe, text=guess.text, origin=guess.origin))
