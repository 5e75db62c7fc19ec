"""The exit-code rule (`cli/main.py`), over every subcommand: 2 for a usage error, for a file
argument that cannot be read or written (said before any work starts: the subcommand's run is
never called) and for an internal error, which is one line naming the file its traceback went to,
never a traceback. In-process: `main()` with the subcommand's run replaced, no torch."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.cli import main as cli_main

# the least each subcommand needs to reach its run; a new subcommand must be added here
MINIMAL = {
    "check": ["model.py"],
    "report": ["model.py"],
    "import": ["trace.log"],
    "record": ["--", "python", "train.py"],
    "trial": ["--", "python", "train.py"],
    "mcp": [],
    "show": ["model.py:1"],
}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli_main.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_is_covered():
    assert set(_subcommands()) == set(MINIMAL)


@pytest.fixture
def runs(monkeypatch):
    """Each subcommand's run replaced: `calls` counts the runs; `fail` makes them raise."""
    state = {"calls": [], "fail": None}

    for name, sub in _subcommands().items():
        real = sub._defaults["run"]

        def fake(args, name=name):
            state["calls"].append(name)
            if state["fail"]:
                raise state["fail"]
            return 0

        monkeypatch.setattr(sys.modules[real.__module__], real.__name__, fake)
    return state


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text("import torch\n")
    (tmp_path / "trace.log").write_text("")
    (tmp_path / "a-file").write_text("")
    return tmp_path


@pytest.mark.parametrize("command", sorted(MINIMAL))
def test_usage_error_is_2(command, runs, workspace, capsys):
    assert cli_main.main([command, "--no-such-flag", *MINIMAL[command]]) == 2
    assert runs["calls"] == []


@pytest.mark.parametrize("command", sorted(MINIMAL))
def test_internal_error_is_one_line_and_2(command, runs, workspace, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COMPILE_LENS_CACHE_DIR", str(tmp_path / "cache"))
    runs["fail"] = KeyError("the thing that broke")
    assert cli_main.main([command, *MINIMAL[command]]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert f"internal error in `{command}`: KeyError" in err and "the thing that broke" in err
    written = Path(err.split("full traceback: ")[1].rstrip(")\n"))
    assert written.parent == tmp_path / "cache" / "errors" and "Traceback" in written.read_text()


def test_a_closed_output_is_one_line_and_2(tmp_path):
    """`compile-lens check … | head`: the reader leaves early; one line, exit 2, no traceback (none
    written either: it is not an internal error). A real pipe, closed before the program writes; a
    file without targets, so no worker starts."""
    code = ("import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
            "from compile_lens.cli.main import main; sys.exit(main(['check', 'plain.py', '--format', 'json']))")
    (tmp_path / "plain.py").write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COMPILE_LENS_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert "broken pipe" in done.stderr and not (tmp_path / "cache" / "errors").exists()


def test_a_clean_run_keeps_its_code(runs, workspace):
    assert cli_main.main(["check", "model.py"]) == 0 and runs["calls"] == ["check"]


# --- file arguments, before any work ------------------------------------------------------------

UNDER_A_FILE = "a-file/out/report"

BAD_FILES = [
    (["check", "model.py", "-o", UNDER_A_FILE], "cannot write -o"),
    (["report", "model.py", "-o", UNDER_A_FILE], "cannot write -o"),
    (["report", "model.py", "-o", "."], "it is a folder"),
    (["import", "trace.log", "-o", UNDER_A_FILE], "cannot write -o"),
    (["record", "-o", UNDER_A_FILE, "--", "python", "t.py"], "cannot write -o"),
    (["trial", "--json", UNDER_A_FILE, "--", "python", "t.py"], "cannot write --json"),
    (["check", "model.py", "--trace-dir", "a-file"], "--trace-dir"),
    (["check", "model.py", "--profile-dir", "a-file"], "--profile-dir"),
    (["check", "model.py", "--root", "nowhere"], "--root nowhere is not a folder"),
    (["report", "model.py", "--root", "nowhere"], "--root nowhere is not a folder"),
    (["import", "trace.log", "--root", "nowhere"], "--root nowhere is not a folder"),
    (["trial", "--root", "nowhere", "--", "python", "t.py"], "--root nowhere is not a folder"),
    (["import", "trace.log", "--map", "/mnt/job"], "REMOTE_PREFIX=LOCAL_PREFIX"),
    (["import", "trace.log", "--map", "/mnt/job=nowhere"], "does not exist here"),
    (["check", "model.py", "--baseline", "missing.json"], "no baseline file"),
    (["check", "model.py", "--baseline", "model.py"], "cannot read the baseline"),
    (["check", "model.py", "--baseline", "wrong.json"], "not a compile-lens baseline"),
    (["check", "model.py", "--baseline", "bad-entry.json"], "finding 1 is not a baseline entry"),
    (["check", "model.py", "--baseline", UNDER_A_FILE, "--write-baseline"], "cannot write the baseline"),
]


@pytest.mark.parametrize("argv,said", BAD_FILES, ids=[" ".join(a) for a, _ in BAD_FILES])
def test_bad_file_arguments_fail_before_any_work(argv, said, runs, workspace, capsys):
    (workspace / "wrong.json").write_text(json.dumps({"version": 9}))
    (workspace / "bad-entry.json").write_text(json.dumps({"version": 2, "findings": [{"count": 1}]}))
    assert cli_main.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert runs["calls"] == []  # nothing ran: no torch process, no program


def test_good_file_arguments_pass(runs, workspace):
    (workspace / "base.json").write_text(json.dumps({"version": 2, "findings": []}))
    assert cli_main.main(["check", "model.py", "-o", "new/dir/out.json", "--baseline", "base.json",
                          "--trace-dir", "traces"]) == 0
    assert cli_main.main(["import", "trace.log", "--map", f"/mnt/job={workspace}"]) == 0
    assert runs["calls"] == ["check", "import"]


def test_unwritable_folder(runs, workspace, capsys):
    """Root (CI) writes past a folder's mode bits, not into /sys: the check makes a file, it does not ask."""
    if os.geteuid() == 0:
        locked = Path("/sys")
    else:
        locked = workspace / "locked"
        locked.mkdir(mode=0o500)
    for argv in (["check", "model.py", "-o", str(locked / "x.json")], ["check", "model.py", "--trace-dir", str(locked / "t")],
                 ["check", "model.py", "--profile-dir", str(locked)]):
        assert cli_main.main(argv) == 2
        err = capsys.readouterr().err
        assert f"{locked} is not writable" in err and err.count("\n") == 1, err
    assert runs["calls"] == []


def test_a_real_process_says_one_line(tmp_path):
    """The console script end to end: `report -o` under a file is refused at once, exit 2, one line."""
    (tmp_path / "model.py").write_text("import torch\n")
    (tmp_path / "a-file").write_text("")
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "report", "model.py", "-o", "a-file/r.html"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot write -o a-file/r.html" in done.stderr
