"""`compile-lens import` puts Triton kernels on the user's lines from real CUDA provenance logs:
tlparse's test inputs (tests/data/tlparse, BSD: a torch of May 2025 on a CUDA GPU), which have the
older provenance artifacts (`inductor_triton_kernel_to_post_grad_nodes`,
`inductor_post_to_pre_grad_nodes` and the pre-grad graph) and no kernel stack traces. The JIT log is
`torch.compile(model)`; the AOT log is the same model through `torch.export` and AOTInductor, whose
pre-grad graph names torch's `nn` modules for the first three lines. Run in-process through the
CLI's `main` (pure Python, no torch), onto a workspace at another path (`--map`, or the unique
file name)."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from compile_lens.cli.main import main
from paths import DATA

LOGS = DATA / "tlparse"
USER_FILE = "scripts/shangdiy/aot.py"
# What the logs say, as their kernel names and pre-grad graph comments say it (checked against the
# log's text by `test_the_expected_lines_are_the_logs_own`): each Triton kernel and the lines of
# aot.py whose nodes it fused.
JIT_KERNELS = {"triton_poi_fused_addmm_relu_sigmoid_0": {29, 30, 31}, "triton_poi_fused_mul_1": {32},
               "triton_poi_fused_addmm_gelu_2": {33, 34}}
AOT_KERNELS = {"triton_poi_fused_mul_1": {32}, "triton_poi_fused_addmm_gelu_2": {33, 34}}  # 29-31: torch's frames
COMMENT = re.compile(r"# File: (\S+?):(\d+) in (\w+), code: (.*)$", re.M)


def log_text(name: str) -> str:
    """The log with each payload line's leading tab removed (payloads as torch wrote them)."""
    return "\n".join(t[1:] if t.startswith("\t") else t for t in (LOGS / name).read_text().splitlines())


def artifact(text: str, name: str) -> str:
    """The payload of the first artifact called `name`."""
    start = text.index(f'"name": "{name}"')
    body = text.index("\n", start) + 1
    end = re.compile(r"^[VIWEC]\d{4} ", re.M).search(text, body)
    return text[body:end.start() if end else len(text)]


def pre_grad_lines(text: str) -> dict[int, tuple[str, str]]:
    """{line: (path, code)} as the log's pre-grad graph comments give them."""
    return {int(m[2]): (m[1], m[4]) for m in COMMENT.finditer(artifact(text, "before_pre_grad_graph"))}


def workspace(tmp_path, text: str):
    """aot.py at its run path's tail, its lines as the log's comments quote them; the run's prefix."""
    lines = {n: code for n, (path, code) in pre_grad_lines(text).items() if path.endswith(USER_FILE)}
    remote = next(path for path, _ in pre_grad_lines(text).values() if path.endswith(USER_FILE))
    ws = tmp_path / "ws"
    (ws / USER_FILE).parent.mkdir(parents=True)
    (ws / USER_FILE).write_text("".join(f"        {lines.get(n, '# (not in the log)')}\n" for n in range(1, 60)))
    (ws / "linear.py").write_text("# a workspace file named as torch's nn/modules/linear.py: not torch's\n")
    return ws, remote[: -len(USER_FILE) - 1]


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["import", *args])
    assert code in (0, 1), code
    return out.getvalue()


def kernels_on_lines(doc: dict, ws) -> tuple[dict[str, set[int]], list[dict]]:
    """{kernel: its lines} over every target, and every line entry."""
    found: dict[str, set[int]] = {}
    entries = [ln for e in doc["files"] for t in e["targets"] for ln in t["lines"]]
    for ln in entries:
        for k in ln["kernels"]:
            found.setdefault(k["name"], set()).add(ln["line"])
    return found, entries


@pytest.fixture(scope="module")
def jit(tmp_path_factory):
    text = log_text("inductor_provenance_jit_cuda_log.txt")
    ws, remote = workspace(tmp_path_factory.mktemp("jit"), text)
    args = [str(LOGS / "inductor_provenance_jit_cuda_log.txt"), "--root", str(ws), "--map", f"{remote}={ws}"]
    return {"text": text, "ws": ws, "doc": json.loads(run(*args, "--format", "json")), "report": run(*args)}


@pytest.fixture(scope="module")
def aot(tmp_path_factory):
    text = log_text("inductor_provenance_aot_cuda_log.txt")
    ws, _ = workspace(tmp_path_factory.mktemp("aot"), text)
    # no --map: aot.py by its unique name; torch's linear.py must not become the workspace's
    return {"text": text, "ws": ws, "doc": json.loads(run(str(LOGS / "inductor_provenance_aot_cuda_log.txt"),
                                                          "--root", str(ws), "--format", "json"))}


def test_the_expected_lines_are_the_logs_own():
    jit_lines, aot_lines = (pre_grad_lines(log_text(f"inductor_provenance_{n}_cuda_log.txt")) for n in ("jit", "aot"))
    quoted = {n: code for n, (_, code) in jit_lines.items()}
    assert quoted == {29: "x = self.fc1(x)", 30: "x = self.relu(x)", 31: "x = self.sigmoid(x)", 32: "d = a * 3.14",
                      33: "y = torch.addmm(c, d, b)", 34: "z = torch.nn.functional.gelu(y)"}
    # addmm (fc1) + relu + sigmoid; mul; addmm + gelu: each kernel's name says the ops of its lines
    assert all(path.endswith(USER_FILE) for path, _ in jit_lines.values())
    assert {n for n, (path, _) in aot_lines.items() if path.endswith(USER_FILE)} == {32, 33, 34}
    assert {p.split("link-tree/")[1] for p, _ in aot_lines.values() if not p.endswith(USER_FILE)} == {
        "torch/nn/modules/linear.py", "torch/nn/modules/activation.py"}


def test_jit_each_triton_kernel_on_its_lines(jit):
    found, entries = kernels_on_lines(jit["doc"], jit["ws"])
    assert {k: v for k, v in found.items() if k.startswith("triton_")} == JIT_KERNELS
    assert found["extern_kernels.mm"] == {29, 33}  # the two matmuls (fc1's addmm, torch.addmm), not d's mul
    assert {e["path"] for e in entries} == {str(jit["ws"] / USER_FILE)}
    fused = next(e for e in entries if e["line"] == 29)
    assert [r["line"] for r in fused["fused_with"]] == [30, 31]
    assert all(k["us"] is None for e in entries for k in e["kernels"])


def test_jit_text_shows_each_line(jit):
    report = jit["report"]
    assert "aot.py:29: triton_poi_fused_addmm_relu_sigmoid_0 (fused ×3), extern_kernels.mm (extern)" in report
    assert "aot.py:32: triton_poi_fused_mul_1 (generated)" in report
    assert "aot.py:34: triton_poi_fused_addmm_gelu_2 (fused ×2)" in report


def test_triton_sources_are_the_output_codes(jit, aot):
    for case in (jit, aot):
        _, entries = kernels_on_lines(case["doc"], case["ws"])
        sources = {k["name"]: k["source"] for e in entries for k in e["kernels"]}
        for name in (n for n in sources if n.startswith("triton_")):
            source = sources[name]
            assert f"@triton.jit\ndef {name}(" in source, name
            # as the log has it (AOTInductor's wrapper holds it indented inside a C++ comment)
            body = source.splitlines()[-1]
            assert body.strip() and body in case["text"], name
        assert all(sources[n] is None for n in sources if not n.startswith("triton_"))


def test_aot_lines_are_the_users_never_torchs(aot):
    found, entries = kernels_on_lines(aot["doc"], aot["ws"])
    assert {k: v for k, v in found.items() if k.startswith("triton_")} == AOT_KERNELS
    assert found["aoti_torch_cuda_mm_out"] == {33}  # fc1's matmul is at torch's linear.py:125: no line
    assert {e["path"] for e in entries} == {str(aot["ws"] / USER_FILE)}
    assert all(k["kind"] == "extern" for e in entries for k in e["kernels"] if k["name"].startswith("aoti_torch_"))
    # no Dynamo frame: the kernels are under the user's call that compiled them
    (target,) = [t for e in aot["doc"]["files"] for t in e["targets"] if t["lines"]]
    call = pre_grad_call(aot["text"])
    assert (target["name"], target["line"]) == call
    assert not any("linear.py" in e["path"] and "link-tree" not in e["path"] for e in aot["doc"]["files"])


def pre_grad_call(text: str) -> tuple[str, int]:
    """The innermost frame of aot.py in the pre-grad graph record's `stack` (`aoti_compile_and_package(ep)`)."""
    head = next(t for t in text.splitlines() if '"name": "before_pre_grad_graph"' in t)
    strings = {m[2]: m[1] for m in re.finditer(r'\{"str": \["([^"]+)", (\d+)\]\}', text)}
    stack = json.loads(head[head.index("{"):])["stack"]
    frame = [f for f in stack if strings[str(f["filename"])].endswith(USER_FILE)][-1]
    assert "aoti_compile_and_package" in frame["loc"]
    return frame["name"], frame["line"]
