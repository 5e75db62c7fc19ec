"""trial.json: the typed record written and read back whole, and a file of an older compile-lens (or
not a trial at all) named in one line, never a traceback, with the report showing that line where the
trial's section would be. No run: the figures come from `summary.summarize` of hand-made run records."""

from __future__ import annotations

import json

from compile_lens.render.report_html import render_report
from compile_lens.trial import store, summary
from compile_lens.trial.figures import SCHEMA, TrialRecord


def _figures():
    def run(walls):
        return {"steps": [{"index": i, "wall_s": w, "hook_s": w, "loss": 1.0, "shapes": [[8, 4]],
                           "compiles": 1 if (i == 0 and w > 1) else 0} for i, w in enumerate(walls)],
                "stopped_by_trial": True, "outermost_targets": ["train.py:Net"]}

    return summary.summarize(run([1.0] * 6), 0, run([3.0] + [0.5] * 5), 0, rtol=1e-3, atol=1e-5, command="python t.py")


def test_the_record_is_written_and_read_back_whole(tmp_path):
    figures = _figures()
    path = store.write(str(tmp_path), figures, command="python t.py")
    assert path and json.loads(open(path).read())["schema"] == SCHEMA
    trial, note = store.load(str(tmp_path))
    assert note is None and isinstance(trial, TrialRecord)
    assert trial.figures == figures and trial.targets == ["train.py:Net"]
    assert trial.figures.wall.verdict == "faster" and trial.figures.eager.steps[2].wall_s == 1.0
    assert store.for_target(str(tmp_path), str(tmp_path / "train.py"), "Net") == trial
    assert store.load(str(tmp_path / "elsewhere")) == (None, None)  # no trial: nothing to say


def test_an_older_or_broken_trial_json_is_named_in_one_line(tmp_path):
    saved = tmp_path / ".compile-lens" / "trial.json"
    saved.parent.mkdir()
    saved.write_text(json.dumps({"schema": 1, "at": "2026-01-01T00:00:00Z", "figures": {"eager": {}}}))
    trial, note = store.load(str(tmp_path))
    assert trial is None and "made by an older compile-lens (trial schema 1" in note and note.endswith("rerun the trial")
    assert store.read(str(tmp_path)) is None
    page = render_report([], title="t", torch_version=None, device="cpu", cwd=str(tmp_path), trial_note=note)
    assert "Your training run" in page and "made by an older compile-lens" in page
    for text in (json.dumps({"schema": SCHEMA, "figures": {"eager": "?"}}), "{not json", json.dumps([1])):
        saved.write_text(text)
        trial, note = store.load(str(tmp_path))
        assert trial is None and note.endswith("rerun the trial") and "\n" not in note
