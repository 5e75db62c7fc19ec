"""`compile-lens trial -- torchrun ...`: every rank observed, rank by rank (issue 27, part 1).

Real `torchrun --nproc-per-node 2` runs on gloo (CPU, OMP_NUM_THREADS=1) of
benchmarks/models/trial_example/train_ddp.py, a DDP nanoGPT-shaped model whose rank 1 alone gets a shorter
batch at step 5. Dynamo's `eager` backend keeps them short: recompiles and graph breaks are
Dynamo's, whatever the backend. Each torchrun case runs once per session (module fixtures).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import paths
from compile_lens.trial import ranks, torchrun
from paths import REPO

EXAMPLE = REPO / "benchmarks" / "models" / "trial_example" / "train_ddp.py"
SERVER = str(paths.SERVER)
BIN = os.path.dirname(sys.executable)  # the venv's torchrun
ENV = {**os.environ, "PYTHONPATH": SERVER, "OMP_NUM_THREADS": "1", "PATH": BIN + os.pathsep + os.environ["PATH"]}
TORCHRUN = ["torchrun", "--standalone", "--nproc-per-node", "2"]  # --standalone: a free port


def _trial(root: Path, *flags: str, script_args: tuple = ()) -> tuple[subprocess.CompletedProcess, dict]:
    shutil.copy(EXAMPLE, root / "train_ddp.py")
    out = root / "trial.json"
    command = [sys.executable, "-m", "compile_lens.cli", "trial", *flags, "--json", str(out), "--",
               *TORCHRUN, "train_ddp.py", *script_args]
    done = subprocess.run(command, cwd=root, env=ENV, capture_output=True, text=True, timeout=900)
    assert out.exists(), done.stderr[-3000:]
    return done, json.loads(out.read_text())


@pytest.fixture(scope="module")
def ddp_trial(tmp_path_factory):
    return _trial(tmp_path_factory.mktemp("ddp"), "--steps", "7", "--backend", "eager")


@pytest.fixture(scope="module")
def torch_own_logs(tmp_path_factory):
    """The same program compiled by itself, with torch's per-rank TORCH_LOGS=recompiles output."""
    root = tmp_path_factory.mktemp("ddp-torch")
    shutil.copy(EXAMPLE, root / "train_ddp.py")
    logs = root / "logs"
    subprocess.run([*TORCHRUN, "--log-dir", str(logs), "--redirects", "2", "train_ddp.py", "--steps", "7",
                    "--compile", "eager"], cwd=root, env={**ENV, "TORCH_LOGS": "recompiles"},
                   capture_output=True, text=True, timeout=600, check=True)
    return {int(p.parent.name): p.read_text() for p in logs.rglob("stderr.log")}


@pytest.mark.slow
def test_every_rank_is_observed_and_the_run_steps_at_the_slowest_rank(ddp_trial):
    done, figures = ddp_trial
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["rank"] for r in figures["ranks"]] == [0, 1]
    for rank in figures["ranks"]:
        for run in ("eager", "compiled"):
            assert [s["index"] for s in rank[run]["steps"]] == list(range(7)), (rank["rank"], run)
            assert rank[run]["failure"] is None
    for run in ("eager", "compiled"):
        steps = figures[run]["steps"]
        assert len(steps) == 7
        for i, step in enumerate(steps):
            assert step["wall_s"] == max(r[run]["steps"][i]["wall_s"] for r in figures["ranks"])
    assert figures["loss"]["verdict"] == "match", figures["loss"]["text"]
    assert 5 in figures["compiled"]["warmup_steps"]  # rank 1's recompile makes step 5 a warm-up step for the run


@pytest.mark.slow
def test_per_rank_recompiles_equal_torchs_own_per_rank_logs(ddp_trial, torch_own_logs):
    _, figures = ddp_trial
    assert sorted(torch_own_logs) == [0, 1]
    for rank in figures["ranks"]:
        torch_says = len(re.findall(r"Recompiling function", torch_own_logs[rank["rank"]]))
        assert len(rank["recompiles"]) == torch_says, (rank["rank"], torch_own_logs[rank["rank"]][-2000:])
    rank1 = figures["ranks"][1]["recompiles"]
    assert [(r["step"], r["shapes"]) for r in rank1] == [(5, [[4, 8], [4, 8]])]
    assert figures["ranks"][0]["recompiles"] == []


@pytest.mark.slow
def test_the_ranks_parting_at_step_5_is_an_error_naming_rank_1(ddp_trial):
    done, figures = ddp_trial
    [parting] = figures["rank_divergence"]
    assert parting["step"] == 5 and parting["ranks"] == [1] and parting["other_ranks"] == [0]
    assert parting["what"] == "recompile of `forward`"
    assert "size mismatch at index 1" in parting["guard"]
    assert parting["steps_apart"] >= 1
    assert "NCCL watchdog" in parting["why"]
    assert any("mark_dynamic" in lever for lever in parting["levers"])
    assert any("set_enable_guard_collectives" in lever for lever in parting["levers"])  # torch 2.13 has it
    assert "RANK DIVERGENCE (error): from step 5, rank 1 ran compiled code rank 0 did not" in done.stderr
    assert re.search(r"rank 1: eager 7 steps.*recompiles 1", done.stderr)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    return _trial(tmp_path_factory.mktemp("crash"), "--steps", "5", "--backend", "eager",
                  script_args=("--crash-at", "2"))


@pytest.mark.slow
def test_a_crashing_rank_is_named_with_its_step_and_error_and_the_other_rank_is_kept(crashed):
    done, figures = crashed
    assert done.returncode != 0
    failure = figures["eager"]["failure"]
    assert failure["rank"] == 1 and failure["step"] == 2
    assert "rank 1: RuntimeError: rank 1 read a corrupt shard at step 2" in failure["message"]
    rank0 = figures["ranks"][0]["eager"]
    assert len(rank0["steps"]) == 2  # steps 0 and 1: kept though torchrun ended rank 0
    # the eager run failed: the trial stops there (the compiled run would only repeat the failure)
    assert "eager run failed at step 2: rank 1: RuntimeError" in done.stderr
    assert figures["compiled"]["ran"] is False and "the eager run failed" in figures["compiled"]["failure"]["message"]


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    return _trial(tmp_path_factory.mktemp("hang"), "--steps", "5", "--backend", "eager", "--hang-timeout", "20",
                  script_args=("--hang-at", "2"))


@pytest.mark.slow
def test_a_hanging_rank_ends_the_run_after_the_hang_timeout_and_says_where_ranks_were(hung):
    done, figures = hung
    assert "no rank finished a step for 20 s: ending the run" in done.stderr
    failure = figures["eager"]["failure"]
    assert failure["kind"] == "hang" and failure["ranks"] == [0, 1] and failure["step"] == 2
    assert "rank 0 at step 2, rank 1 at step 2" in failure["message"]
    for rank in figures["ranks"]:
        assert len(rank["eager"]["steps"]) == 2  # from the step logs, whatever signal ended the rank


def test_torchrun_not_found_exits_127(tmp_path):
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "trial", "--steps", "2", "--", "torchrun",
                           "--nproc-per-node", "2", "train.py"], cwd=tmp_path,
                          env={**ENV, "PATH": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 127
    assert "compile-lens trial: command not found: torchrun" in done.stderr


def test_seconds_with_torchrun_is_refused_with_the_reason(tmp_path):
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "trial", "--seconds", "5", "--", sys.executable,
                           "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py"], cwd=tmp_path,
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--seconds cannot bound a torchrun run" in done.stderr and "--steps N" in done.stderr


def test_what_counts_as_torchrun():
    assert torchrun.is_torchrun(["torchrun", "--nproc-per-node", "2", "t.py"])
    assert torchrun.is_torchrun(["/x/bin/torchrun", "t.py"])
    assert torchrun.is_torchrun(["python", "-m", "torch.distributed.run", "t.py"])
    assert not torchrun.is_torchrun(["python", "t.py", "-m", "torch.distributed.run"][:2])
    assert not torchrun.is_torchrun(["python", "-m", "torchrun_helper"])


def test_a_killed_ranks_step_log_is_its_record(tmp_path):
    out = str(tmp_path / "compiled.json")
    lines = [{"head": {"mode": "compiled", "rank": 1}},
             {"step": {"index": 0, "wall_s": 1.0}, "events": [{"kind": "recompile", "step": 0}], "compiles": []},
             {"step": {"index": 1, "wall_s": 0.1}, "events": [], "compiles": []}]
    Path(torchrun.rank_log(out, "1")).write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"step": {"ind')
    Path(torchrun.rank_out(out, "0")).write_text(json.dumps({"steps": [{"index": 0, "wall_s": 2.0}], "killed": None}))
    records = torchrun.read_ranks(out)
    assert records[0]["finished"] is True
    assert records[1]["finished"] is False and records[1]["mode"] == "compiled"
    assert [s["index"] for s in records[1]["steps"]] == [0, 1] and len(records[1]["events"]) == 1
    merged = ranks.merge(records)
    assert [s["wall_s"] for s in merged["steps"]] == [2.0]  # the steps every rank finished, at the slowest


@pytest.mark.slow
def test_the_reports_trial_section_shows_each_rank_and_the_divergence(ddp_trial, tmp_path):
    from compile_lens.render import report_trial
    from compile_lens.render.html_parts import _Page
    from compile_lens.trial.figures import TrialRecord

    _, figures = ddp_trial
    trial = TrialRecord.from_dict({"figures": figures, "command": figures["command"]})
    html = report_trial.trial_section(_Page("/w", False), trial, None)
    assert "<h3>Ranks: 2 (torchrun)</h3>" in html
    assert re.search(r"<td>rank 1</td>.*?<td class=\"num\">1</td>", html)  # rank 1's one recompile
    assert "Rank divergence (error)</b> from step 5, rank 1 ran compiled code rank 0 did not" in html
    (Path(os.environ.get("COMPILE_LENS_SHOTS", tmp_path)) / "trial-ranks.html").write_text(
        f"<html><body>{html}</body></html>")


@pytest.fixture(scope="module")
def own_ddp_compile(tmp_path_factory):
    return _trial(tmp_path_factory.mktemp("own"), "--steps", "3", script_args=("--own-compile", "--compile", "eager"))


@pytest.fixture(scope="module")
def torch_own_compile_logs(tmp_path_factory):
    """The same program, `torch.compile(DDP(model))` its own, with torch's per-rank TORCH_LOGS=dynamo,graph_breaks:
    each rank's frames compiled (compile id, function, file:first line) and the places torch reports breaks at."""
    root = tmp_path_factory.mktemp("ddp-own-torch")
    shutil.copy(EXAMPLE, root / "train_ddp.py")
    logs = root / "logs"
    subprocess.run([*TORCHRUN, "--log-dir", str(logs), "--redirects", "2", "train_ddp.py", "--steps", "3",
                    "--own-compile", "--compile", "eager"], cwd=root, env={**ENV, "TORCH_LOGS": "dynamo,graph_breaks"},
                   capture_output=True, text=True, timeout=600, check=True)
    out = {}
    for path in logs.rglob("stderr.log"):
        text = path.read_text()
        frames = [(cid, name, f"{os.path.basename(file)}:{line}") for cid, name, file, line in
                  re.findall(r"\[(\d+/\d+)\] Step 1: torchdynamo start tracing (\S+) (\S+):(\d+)", text)]
        breaks = {f"{os.path.realpath(file)}:{line}" for file, line in
                  re.findall(r"Graph break (?:\(user stack suppressed due to duplicate graph break\) )?in user code "
                             r"at (\S+):(\d+)", text)}
        out[int(path.parent.name)] = {"frames": frames, "breaks": breaks}
    return out


def _line_of(text: str) -> int:
    return EXAMPLE.read_text().splitlines().index(text) + 1


@pytest.mark.slow
def test_a_program_compiling_its_ddp_model_keeps_its_compile_and_ddp_splits_are_named(own_ddp_compile):
    done, figures = own_ddp_compile
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in figures["ranks"]:
        [split] = rank["ddp_splits"]  # one bucket for a model this small: DDPOptimizer still logs its split
        assert split["step"] == 0 and split["buckets"] >= 1
    assert "at DDP's bucket boundaries" in done.stderr and "not a graph break in your code" in done.stderr


@pytest.mark.slow
def test_its_model_forward_is_compiled_once_per_rank_as_torchs_own_logs_say(own_ddp_compile, torch_own_compile_logs):
    _, figures = own_ddp_compile
    forward = f"train_ddp.py:{_line_of('    def forward(self, idx, targets):')}"  # GPT.forward
    assert sorted(torch_own_compile_logs) == [0, 1]
    for rank in figures["ranks"]:
        ours = [(f["compile_id"], f["function"], os.path.basename(f["where"])) for f in rank["frames_compiled"]]
        torchs = torch_own_compile_logs[rank["rank"]]["frames"]
        assert ours == torchs, rank["rank"]  # the same frames, the same compile ids: nothing of the trial's own
        assert sum(f[1:] == ("forward", forward) for f in ours) == 1  # its own compile, not a second of the trial's


@pytest.mark.slow
def test_breaks_inside_ddp_forward_are_shown_at_the_line_that_called_the_model(own_ddp_compile, torch_own_compile_logs):
    done, figures = own_ddp_compile
    call = f"train_ddp.py:{_line_of('        loss = model(x, y)')}"
    for rank in figures["ranks"]:
        breaks = rank["graph_breaks"]
        assert breaks, rank["rank"]  # DDP's forward breaks under Dynamo: torch's own log says so too
        for b in breaks:
            assert b["where"].endswith("/" + call), b
            assert b["inside"]["function"] == "DistributedDataParallel.forward", b
            assert b["inside"]["shown"].startswith("torch/nn/parallel/distributed.py:"), b
            assert re.fullmatch(r"GB\d{4}", b["gb"] or ""), b
            assert b["step"] == 0 and b["shapes"] == [[4, 16], [4, 16]], b  # the step's inputs, though DDP broke first
        # torch's own places, kept beside ours: the same set torch's TORCH_LOGS=graph_breaks reports
        assert {b["inside"]["reported"] for b in breaks} == torch_own_compile_logs[rank["rank"]]["breaks"]
        assert any(b["inside"]["reported_shown"].startswith("torch/nn/parallel/distributed.py:") for b in breaks)
    assert re.search(r"inside `DistributedDataParallel.forward` \(torch/nn/parallel/distributed.py:\d+; torch reports "
                     rf"it at [^)]+\), called from {call}", done.stderr)
