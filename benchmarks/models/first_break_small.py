"""The first-squiggle benchmark's small programs (`benchmarks/editor/first_break.py`): a `Net` that breaks
the graph one way each, the common ways users hit."""

from __future__ import annotations

import textwrap

_HEAD = "import logging\n\nimport torch\nfrom torch import nn\n\n"
_INPUTS = "# compile-lens: inputs=(torch.randn(4, 16),)\n"


def _module(body: str, before: str = "") -> str:
    return _HEAD + textwrap.dedent(before) + "\n\n" + _INPUTS + textwrap.dedent("""\
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 16)

            def forward(self, x):
        """) + textwrap.indent(textwrap.dedent(body), " " * 8)


# Small programs that break the graph, one way each (the common ones users hit).
SMALL_PROGRAMS: dict[str, str] = {
    "print_shape.py": _module("""\
        y = self.fc(x)
        print("shape", y.shape)
        return torch.relu(y)
        """),
    "item.py": _module("""\
        y = self.fc(x)
        scale = y.abs().max().item()
        return y / (scale + 1e-6)
        """),
    "branch.py": _module("""\
        y = self.fc(x)
        if y.sum() > 0:
            return y * 2
        return y - 1
        """),
    "tolist.py": _module("""\
        y = self.fc(x)
        sizes = y[0].tolist()
        return y * len(sizes)
        """),
    "explicit.py": _module("""\
        y = self.fc(x)
        torch._dynamo.graph_break()
        return torch.relu(y)
        """),
    "logged.py": _module("""\
        y = self.fc(x)
        log.warning("forward on %s", tuple(y.shape))
        return torch.relu(y)
        """, before="log = logging.getLogger(__name__)\n"),
    "helper.py": _module("""\
        y = self.fc(x)
        return scale(y)
        """, before="""\
        def scale(y):
            m = y.abs().max().item()
            return y / (m + 1e-6)
        """),
    "loop.py": _module("""\
        y = self.fc(x)
        for i in range(3):
            print("step", i)
            y = torch.relu(y) + i
        return y
        """),
    "to_numpy.py": _module("""\
        y = self.fc(x)
        arr = y.detach().numpy()
        return y * float(arr.mean())
        """),
    "nonzero.py": _module("""\
        y = self.fc(x)
        keep = torch.nonzero(y > 0)
        return y.sum() + keep.shape[0]
        """),
    "two_breaks.py": _module("""\
        y = self.fc(x)
        print("first")
        y = torch.relu(y)
        n = y.sum().item()
        return y * n
        """),
    "compiled_fn.py": _HEAD + textwrap.dedent("""\
        # compile-lens: inputs=(torch.randn(4, 16),)
        @torch.compile
        def scaled(x):
            y = torch.sin(x)
            print("scaled", y.shape)
            return y * 2
        """),
    "gpt_block.py": _HEAD + textwrap.dedent("""\
        import math

        import torch.nn.functional as F


        class Attention(nn.Module):
            def __init__(self, n_embd, n_head):
                super().__init__()
                self.c_attn = nn.Linear(n_embd, 3 * n_embd)
                self.c_proj = nn.Linear(n_embd, n_embd)
                self.n_head = n_head

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(C, dim=2)
                q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = F.softmax(att, dim=-1)
                y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
                return self.c_proj(y)


        # compile-lens: init=Block(32, 4), inputs=(torch.randn(2, 8, 32),)
        class Block(nn.Module):
            def __init__(self, n_embd, n_head):
                super().__init__()
                self.ln_1 = nn.LayerNorm(n_embd)
                self.attn = Attention(n_embd, n_head)
                self.ln_2 = nn.LayerNorm(n_embd)
                self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

            def forward(self, x):
                x = x + self.attn(self.ln_1(x))
                print("block", x.shape)
                x = x + self.mlp(self.ln_2(x))
                return x
        """),
}
