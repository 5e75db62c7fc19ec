"""`compile-lens import` of tlparse's real logs (tests/data/tlparse, gzipped as shipped): the settings off
torch's defaults behind each compile and what they say of the `torch.compile` call. The multi-rank logs
(tlparse's `multi_rank_logs`) were written by a torch of 2025 whose runnables list `dynamic=False`'s
patches, `capture_scalar_outputs` and, on half the compiles, a raised recompile limit; the autotuning log
is one `torch.compile(mode="max-autotune")` compile."""

from __future__ import annotations

import pytest

from compile_lens.cli.trace_import import import_text
from compile_lens.render.imported_json import import_json
from compile_lens.torch_text import compile_settings
from compile_lens.trace_import.report import import_trace
from paths import DATA

TLPARSE = DATA / "tlparse"
DYN = "torch._dynamo.config."


@pytest.fixture(scope="module")
def multi_rank(tmp_path_factory) -> tuple[dict, str]:
    root = tmp_path_factory.mktemp("ws")
    imported = import_trace(str(TLPARSE / "multi_rank_logs"), str(root))
    return import_json(imported), import_text(imported, str(root))


def _targets(doc: dict) -> dict[str, dict]:
    return {t["log"]: t for f in doc["files"] for t in f["targets"]}


def test_the_multi_rank_logs_settings_per_compile(multi_rank):
    doc, text = multi_rank
    targets = _targets(doc)
    rank1 = targets["dedicated_log_torch_trace_rank_1.log.gz"]
    assert len(rank1["compile_ids"]) == 15
    by_values = {tuple(sorted(s["values"].items())): s for s in rank1["settings"]}
    # read from each graph's runnable: 8 compiles capture .item(), 7 others raised the limit; all dynamic=False
    first = by_values[((DYN + "automatic_dynamic_shapes", "False"), (DYN + "capture_scalar_outputs", "True"))]
    later = by_values[((DYN + "automatic_dynamic_shapes", "False"), (DYN + "recompile_limit", "1000000"))]
    assert len(first["compile_ids"]) + len(later["compile_ids"]) == 15 and first["read_from"] == "fx_graph_runnable"
    assert rank1["call"] == {"site": None, "read_from": "settings", "dynamic": False, "backend": "inductor"}
    assert any("recompile_limit = 1000000" in e for e in rank1["explains"])
    assert any("capture_scalar_outputs = True" in e and "`.item()` is captured" in e for e in rank1["explains"])
    # the ranks whose compile failed have no Inductor graph: the metrics' dynamo_config says suppress_errors
    rank0 = targets["dedicated_log_torch_trace_rank_0.log.gz"]
    assert rank0["settings"] == [{"compile_ids": ["0/0"], "values": {DYN + "suppress_errors": "True"},
                                  "read_from": "compilation_metrics"}]
    assert rank0["call"]["backend"] is None
    # with automatic dynamic shapes off, a size change is no "then dynamic": each new size recompiles (CL211)
    recompiles = [d for f in doc["files"] for d in f["diagnostics"] if d["data"]["kind"] == "recompile"]
    assert len(recompiles) == 20 and {d["code"] for d in recompiles} == {"CL211"}
    said = recompiles[0]["message"]
    assert "Settings off torch's defaults in this run: dynamo.automatic_dynamic_shapes = False" in said
    assert "(the call's dynamic=False, read from them)" in said
    assert "the torch.compile call, read from them (a trace does not record the call): dynamic=False, " \
           "backend='inductor'" in text


def test_the_autotuning_log_reads_back_its_mode(tmp_path):
    doc = import_json(import_trace(str(TLPARSE / "autotune_with_compile_id.log.gz"), str(tmp_path)))
    [target] = [t for f in doc["files"] for t in f["targets"]]
    assert target["settings"] == [{"compile_ids": ["0/0"], "read_from": "fx_graph_runnable", "values": {
        "torch._inductor.config.max_autotune": "True", "torch._inductor.config.coordinate_descent_tuning": "True",
        "torch._inductor.config.triton.cudagraphs": "True"}}]  # AOTAutograd's own three functorch patches left out
    assert target["call"] == {"site": None, "read_from": "settings", "mode": "max-autotune", "backend": "inductor"}


def test_what_an_older_torch_listed_at_its_default_is_not_a_setting():
    """torch's codegen once listed tables and values equal to their default (tlparse's cache_hit_miss.log)."""
    runnable = "\n".join([
        "os.environ['TORCH_TRACE'] = '/tmp/t'", "os.environ['TORCHINDUCTOR_FREEZING'] = '1'",
        "torch._dynamo.config.cache_size_limit = 8", "torch._dynamo.config.suppress_errors = False",
        "torch._dynamo.config._ddp_optimization_mode = ['ddp_optimizer', 'python_reducer']",
        "torch._inductor.config.rocm.ck_supported_arch = ['gfx90a', 'gfx940']",
        "torch._functorch.config.unlift_effect_tokens = True",
        "torch._dynamo.config.recompile_limit = 2", "torch._dynamo.config.capture_scalar_outputs = True",
        "isolate_fails_code_str = None", "torch._inductor.config.max_autotune = True"])  # below: the graph's, not read
    found = compile_settings.non_default(compile_settings.read_codegen(runnable))
    assert found == {"TORCHINDUCTOR_FREEZING": "1", DYN + "recompile_limit": "2", DYN + "capture_scalar_outputs": "True"}
    assert compile_settings.limit_words(found) == ("lowered: torch._dynamo.config.recompile_limit = 2 in this run "
                                                   "(torch's default is 8)")
    assert compile_settings.from_dynamo_config('{"recompile_limit": 8, "capture_scalar_outputs": true}') == {
        DYN + "capture_scalar_outputs": "True"}

