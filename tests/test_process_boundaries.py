"""The server process never imports torch; the worker never imports pygls (DESIGN.md)."""

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                          capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_server_and_cli_do_not_import_torch():
    loaded = _modules_after("import compile_lens.lsp.app, compile_lens.cli.main")
    assert "pygls" in loaded
    assert not {m for m in loaded if m == "torch" or m.startswith("torch.")}


def test_the_worker_does_not_import_pygls():
    loaded = _modules_after("import compile_lens.worker.jobs, compile_lens.worker.measure.deployment.questions, "
                            "compile_lens.worker.breaks.recompiles, compile_lens.worker.measure.compile.bench_child")
    assert "torch" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("pygls", "lsprotocol")}


def test_the_worker_does_not_import_the_servers_modules():
    # discovery.inputs pulls config, discovery and the record reader; jobs.lanes is the server's side
    loaded = _modules_after("import compile_lens.worker.jobs, compile_lens.worker.measure.deployment.questions, "
                            "compile_lens.worker.breaks.recompiles, compile_lens.worker.measure.compile.bench_child, "
                            "compile_lens.worker.measure.run.benchmark")
    assert not loaded & {"compile_lens.discovery", "compile_lens.discovery.inputs", "compile_lens.jobs",
                         "compile_lens.jobs.lanes", "compile_lens.config", "compile_lens.lsp", "compile_lens.cli"}


def test_the_mcp_server_does_not_import_torch():
    """Its tools' modules loaded and a code explained from torch's graph-break registry (read as a file)."""
    import pytest

    pytest.importorskip("mcp")
    loaded = _modules_after("import compile_lens.mcp_server.server as s, compile_lens.mcp_server.explain as e\n"
                            "assert e.explain('GB0124')['torch']['hints']")
    assert "mcp" in loaded
    assert not {m for m in loaded if m == "torch" or m.startswith("torch.")}
