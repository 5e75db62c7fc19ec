"""A target is built once on its way to its trace: the loader builds it to check that its constructor
runs, and that instance is the first one handed out (nanoGPT's 124M GPT was initialised twice before
its first squiggle, 2 s of CPU); every later `make()` builds a fresh one."""

from __future__ import annotations

from compile_lens.discovery import discover
from compile_lens.worker.breaks.graph_breaks import trace_graph_breaks
from compile_lens.worker.loader import build_target, import_file

SOURCE = """\
import torch
from torch import nn

BUILT = []


# compile-lens: inputs=(torch.randn(2, 8),)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        BUILT.append(self)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        print("shape", x.shape)
        return self.fc(x)
"""


def test_the_checked_instance_is_the_one_traced_and_later_makes_are_fresh(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(SOURCE)
    module = import_file(str(path), str(tmp_path))
    [spec] = discover(SOURCE).targets
    target = build_target(module, spec, str(path))
    assert len(module.BUILT) == 1  # the check
    graphs, breaks = trace_graph_breaks(target, str(tmp_path))
    assert len(module.BUILT) == 1 and breaks and graphs >= 1  # the trace used the checked instance
    assert target.make() is not module.BUILT[0] and len(module.BUILT) == 2
