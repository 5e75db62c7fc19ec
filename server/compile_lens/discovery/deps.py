"""Fingerprints: of a file's code (comments and layout aside), and of the workspace files it
imports (a change in a dependency invalidates the file's cached results).
"""

from __future__ import annotations

import ast
import hashlib
import os


def fingerprint(tree: ast.AST) -> str:
    """A hash of what the code does: comments and formatting do not change it."""
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


def workspace_imports(path: str, source: str, root: str) -> list[str]:
    """Workspace files this file imports (directly), resolved like the worker's sys.path does."""
    import os

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = os.path.dirname(path)
            for _ in range(node.level - 1):
                base = os.path.dirname(base)
            rel = os.path.relpath(base, root).replace(os.sep, ".")
            prefix = "" if rel == "." else rel + "."
            mod = prefix + (node.module or "")
            names += [mod] + [f"{mod}.{a.name}".strip(".") for a in node.names]
    found: list[str] = []
    for name in names:
        for base in (root, os.path.dirname(path)):
            stem = os.path.join(base, *name.strip(".").split("."))
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(candidate) and os.path.realpath(candidate) != os.path.realpath(path):
                    real = os.path.realpath(candidate)
                    if real not in found:
                        found.append(real)
    return found


def dependency_fingerprint(path: str, source: str, root: str) -> tuple[str, list[str]]:
    """A hash of the ASTs of every workspace file this one imports, transitively; and those files."""
    seen: list[str] = []
    queue = workspace_imports(path, source, root)
    digest = hashlib.sha256()
    while queue:
        dep = queue.pop(0)
        if dep in seen:
            continue
        seen.append(dep)
        try:
            with open(dep, encoding="utf-8") as f:
                text = f.read()
            # named relative to the root: the same project in another folder has the same fingerprint
            digest.update(os.path.relpath(dep, root).encode() + fingerprint(ast.parse(text)).encode())
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            digest.update(os.path.relpath(dep, root).encode() + b"?")
            continue
        queue += workspace_imports(dep, text, root)
    return digest.hexdigest()[:16], seen
