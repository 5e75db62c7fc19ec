"""CL2xx: recompile hazards anywhere in the file (repeated compiles, fresh lambdas, varying
Python scalars passed to a compiled callable).
"""

from __future__ import annotations

import ast
from typing import Optional

from .. import codes
from .facts import Func, Kind, Site, _Loop, _scalar_kind, _walk, dotted_name
from .index import _CACHE_DECORATORS, Index, _compile_arg, _frame, with_nested
from .output import Output


def _recompile_hazards(index: Index, out: Output) -> None:
    in_functions = _repeated_compiles(index, out)
    _compiles_in_repeated_calls(index, out, in_functions)
    _varying_scalar_args(index, out)


def _repeated_compiles(index: Index, out: Output) -> dict[Func, list[Site]]:
    """CL201 (in a loop, or in forward) and CL202 (a fresh lambda/closure). Returns, per function,
    the compile calls not flagged yet: they are hazards if the function runs in a loop."""
    in_functions: dict[Func, list[Site]] = {}
    for site in index.compile_calls:
        if site.guarded or _compile_arg(site) is None:
            continue  # guarded: `if self._compiled is None: ...`, compiled once; no argument: a decorator
        func = site.func
        fresh = _fresh_callable(index, site)
        if fresh is not None and (site.loops or (func is not None and func.name != "__init__")):
            _fresh_compile(out, site, fresh)
        elif site.loops and not _compiles_loop_item(_compile_arg(site), site.loops):
            loop_line = site.loops[-1].node.lineno + site.facts.delta
            out.add(site.call, site.facts, codes.COMPILE_REPEATED, "torch.compile() inside a loop compiles again on "
                    f"every iteration: hoist it out of the loop (line {loop_line})",
                    {"kind": "compile-in-loop", "loop_line": loop_line})
        elif func is not None and func.name == "forward" and func.cls in index.module_classes:
            out.add(site.call, site.facts, codes.COMPILE_REPEATED, f"torch.compile() inside `{func.qualname}` compiles "
                    "again on every call of the model: compile once, in `__init__` or where the model "
                    "is built", {"kind": "compile-in-forward", "function": func.qualname})
        elif func is not None:
            in_functions.setdefault(func, []).append(site)
    for func in index.compile_decorated:
        decorator = index.compile_decorator(func)
        outer = func.parent
        if decorator is not None and func.cls is None and outer is not None and outer.name != "__init__":
            _fresh_compile(out, Site(decorator, None, outer, (), False, func.facts), func)
    return in_functions


def _fresh_callable(index: Index, site: Site) -> Optional[Func]:
    """The lambda or nested def a torch.compile call compiles, when it is created anew each time."""
    arg = _compile_arg(site)
    if isinstance(arg, ast.Lambda):
        return index.lambdas.get(arg)
    func = index.compiled_function(site)
    return func if func is not None and func.parent is not None and isinstance(arg, ast.Name) else None


def _fresh_compile(out: Output, site: Site, fresh: Func) -> None:
    outer = site.func.qualname if site.func is not None else "the loop"
    runs = "on every iteration of the loop" if site.loops else f"each time `{outer}` runs"
    if fresh.name == "<lambda>":
        what, kind = "torch.compile(lambda ...) compiles a new lambda", "compile-lambda"
    else:
        what, kind = f"torch.compile(`{fresh.name}`) compiles a new closure", "compile-closure"
    out.add(site.call, site.facts, codes.COMPILE_FRESH, f"{what} {runs}: define the function once (at module "
            "level) and compile it once", {"kind": kind, "function": outer, "closure": fresh.name,
                                           "in_loop": bool(site.loops)})


def _compiles_loop_item(arg: Optional[ast.expr], loops: tuple[_Loop, ...]) -> bool:
    """`for m in models: torch.compile(m)` compiles a different object each time: not a hazard."""
    if arg is None:
        return False
    names = {n.id for n in _walk(arg) if isinstance(n, ast.Name)}
    return any(names & loop.targets for loop in loops)


def _compiles_in_repeated_calls(index: Index, out: Output, sites: dict[Func, list[Site]]) -> None:
    """CL201: a function that calls torch.compile (directly or through helpers) called in a loop."""
    if not sites:
        return
    compiling = _functions_reaching(index, set(sites))
    names = {f.name for f in compiling}
    flagged: set[ast.Call] = set()
    for loop_call in index.loop_calls:
        if (loop_call.callee or "").rpartition(".")[2] not in names:
            continue  # cheap test first: most calls in loops are not to these functions
        callee = index.call_target(loop_call.call, loop_call.func)
        if callee is None or callee not in compiling:
            continue
        caller_line = loop_call.call.lineno + loop_call.facts.delta
        chain = (_frame(loop_call.call, loop_call.func, loop_call.facts),)
        for func, via in _paths_to_sites(index, callee, compiling, sites, chain):
            for site in sites[func]:
                if site.call in flagged:
                    continue
                flagged.add(site.call)
                out.add(site.call, site.facts, codes.COMPILE_REPEATED, f"torch.compile() runs on every call of "
                        f"`{callee.qualname}`, which is called in a loop (line {caller_line}): each "
                        "call compiles again — compile once, outside the loop, and reuse it",
                        {"kind": "compile-in-repeated-call", "function": callee.qualname,
                         "caller_line": caller_line}, via)


def _calls_of(index: Index, func: Func) -> list[tuple[Func, ast.Call, Func]]:
    """(callee, call, the def the call is in) for the calls a function makes to this file's defs."""
    out = []
    for inner in with_nested(func):
        for _, call in inner.name_calls + inner.self_calls:
            target = index.call_target(call, inner)
            if target is not None:
                out.append((target, call, inner))
    return out


def _is_cached(func: Func) -> bool:
    return any(d.rsplit(".", 1)[-1] in _CACHE_DECORATORS for d in func.decorators)


def _functions_reaching(index: Index, targets: set[Func]) -> set[Func]:
    """The functions that, when called, run one of `targets` (themselves included); a cached
    function (`@functools.cache`) runs its body once, so it stops the chain."""
    reaching = {f for f in targets if not _is_cached(f)}
    callers: dict[str, list[tuple[Func, ast.Call]]] = {}  # called name -> (caller, call)
    for func in index.all_funcs:
        for name, call in func.name_calls + func.self_calls:
            callers.setdefault(name, []).append((func, call))
    pending = list(reaching)
    while pending:
        target = pending.pop()
        for inner, call in callers.get(target.name, ()):
            if index.call_target(call, inner) is not target:
                continue
            caller = inner
            while caller.parent is not None and caller.cls is None:  # a nested def runs in its parent
                caller = caller.parent
            if caller not in reaching and not _is_cached(caller):
                reaching.add(caller)
                pending.append(caller)
    return reaching


def _paths_to_sites(index, start, compiling, sites, chain):
    """(function with compile calls, call chain to it) reachable from `start` through `compiling`."""
    out, seen, queue = [], {start}, [(start, chain)]
    while queue:
        func, via = queue.pop(0)
        if func in sites:
            out.append((func, via))
        for target, call, inner in _calls_of(index, func):
            if target in compiling and target not in seen:
                seen.add(target)
                queue.append((target, via + (_frame(call, inner, inner.facts),)))
    return out


def _varying_scalar_args(index: Index, out: Output) -> None:
    """CL203: `for lr in ...: step(x, lr)` where `step` is compiled: each new value may recompile."""
    compiled = _compiled_callables(index)
    module_scalars: Optional[set[str]] = None
    scalars: dict[Func, set[str]] = {}
    for site in index.loop_calls:
        name = _compiled_callee_name(index, site, compiled)
        if name is None:
            continue
        args = [a for a in site.call.args + [k.value for k in site.call.keywords] if _scalar_kind(a)]
        if not args:
            continue
        if module_scalars is None:
            module_scalars = _scalar_fixed_point(index.bindings, set())
        if site.func is None:
            known = module_scalars
        else:
            if site.func not in scalars:
                scalars[site.func] = _scalar_fixed_point(site.func.bindings, module_scalars)
            known = scalars[site.func]
        for arg in args:
            varying = _varying_scalar(arg, site.loops, known)
            if varying is not None:
                var, loop = varying
                loop_line = loop.node.lineno + site.facts.delta
                out.add(arg, site.facts, codes.VARYING_SCALAR, f"each new value of `{var}` may recompile `{name}` "
                        f"(`{var}` changes in the loop at line {loop_line}): pass it as a tensor or "
                        "mark it dynamic", {"kind": "scalar-arg", "name": var, "callee": name,
                                            "loop_line": loop_line})


def _compiled_callables(index: Index) -> dict[str, list[Optional[Func]]]:
    """Names bound to a compiled callable -> the scopes where the binding is visible (None: all).
    `dynamic=True` ones are left out: they do not recompile for new scalar values."""
    compiled: dict[str, list[Optional[Func]]] = {}
    for name, call, scope in index.compiled_assigns:
        if index.is_torch_compile(dotted_name(call.func)) and not _is_dynamic(call):
            visible = None if scope is None or "." in name else scope
            compiled.setdefault(name, []).append(visible)
    for func in index.compile_decorated:
        decorator = index.compile_decorator(func)
        if decorator is not None and not (isinstance(decorator, ast.Call) and _is_dynamic(decorator)):
            name = f"self.{func.name}" if func.cls is not None else func.name
            compiled.setdefault(name, []).append(None if func.parent is None else func.parent)
    return compiled


def _is_dynamic(call: ast.Call) -> bool:
    return any(k.arg == "dynamic" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def _compiled_callee_name(index: Index, site: Site, compiled) -> Optional[str]:
    """The name a call in a loop calls, when that is a compiled callable visible there."""
    callee = site.call.func
    if isinstance(callee, ast.Call):  # torch.compile(f)(x, lr)
        if index.is_torch_compile(dotted_name(callee.func)) and not _is_dynamic(callee):
            return "torch.compile(...)"
        return None
    visible = compiled.get(site.callee or "")
    if not visible:
        return None
    scopes = set()
    scope = site.func
    while scope is not None:
        scopes.add(scope)
        scope = scope.parent
    return site.callee if any(v is None or v in scopes for v in visible) else None


def _scalar_fixed_point(bindings: dict[str, list[Kind]], known: set[str]) -> set[str]:
    """Names all of whose bindings in a scope are Python scalars; `known`: the enclosing (module)
    scope's, which count where the scope does not rebind them."""
    inherited = known - set(bindings)
    names = {n for n, kinds in bindings.items() if all(k is not None for k in kinds)}
    changed = True
    while changed:
        changed = False
        allowed = names | inherited
        for name in list(names):
            if any(not kind <= allowed for kind in bindings[name]):  # type: ignore[operator]
                names.discard(name)
                changed = True
    return names | inherited


def _varying_scalar(arg: ast.expr, loops: tuple[_Loop, ...], scalars: set[str]):
    """(name, loop) when `arg` is a scalar expression using a scalar name that the loop changes."""
    kind = _scalar_kind(arg)
    if not kind or not kind <= scalars:
        return None
    for name in sorted(kind):
        for loop in reversed(loops):
            if name in loop.targets or name in loop.assigned:
                return name, loop
    return None
