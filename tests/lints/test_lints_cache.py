"""Static lints' statement cache: edits, moved lines, odd splits, many files."""

from __future__ import annotations

import ast

from lint_support import HEADER, at, code, lint, places

from compile_lens import lints
from compile_lens.lints import forget, lint_source

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
