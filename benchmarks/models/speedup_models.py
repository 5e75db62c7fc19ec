"""The benchmark models: four of different sizes for `benchmarks/measure/speedup_check.py` (its default
set, the figures BENCHMARKS.md already shows), and the shared set at the end — an MLP stack, a
nanoGPT-style GPT and a ResNet-style conv net, sized per device — that `benchmarks/` and
`scripts/gpu-check` measure.

Written as a user would: library base classes, optional constructor arguments, directives for
the inputs. Not part of the examples (the demo) nor of the test fixtures: held out, so that the
tool cannot be tuned to them.
"""

import os

import torch  # noqa: F401 - the directives below evaluate torch.randn in this namespace
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Config, GPT2Model


# compile-lens: inputs=(torch.randn(8, 16),)
class TinyMLP(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x):
        return self.net(x)


# compile-lens: inputs=(torch.randn(64, 128),)
class MLP3(nn.Module):
    """The held-out 3-layer MLP of issue 14: 128 → 256 → 256 → 10, batch 64."""

    def __init__(self, sizes=(128, 256, 256, 10)):
        super().__init__()
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.layers = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.layers(x)


# compile-lens: inputs=(torch.randn(8, 3, 32, 32),)
class SmallConv(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


# compile-lens: inputs=(torch.randint(0, 1000, (4, 32)),)
class TinyGPT2(nn.Module):
    """A 2-layer GPT-2 from transformers, n_embd 64: the hidden states of the last layer."""

    def __init__(self, layers: int = 2, width: int = 64):
        super().__init__()
        config = GPT2Config(vocab_size=1000, n_positions=64, n_embd=width, n_layer=layers, n_head=4)
        self.gpt = GPT2Model(config)

    def forward(self, input_ids):
        return self.gpt(input_ids=input_ids).last_hidden_state


# --- the shared set: the benchmarks (`benchmarks/`), this file's checks and scripts/gpu-check ---
# Sized per device: tiny on the CPU (a 2-core box shared with other work), GPU-sized on cuda, where
# a tiny model measures only launch overhead. COMPILE_LENS_BENCH_DEVICE picks (the runner sets it).
_GPU = os.environ.get("COMPILE_LENS_BENCH_DEVICE", "cpu").startswith("cuda")
MLP_BATCH, MLP_WIDTH, MLP_DEPTH = (1024, 2048, 6) if _GPU else (32, 64, 3)
GPT_BATCH, GPT_SEQ, GPT_WIDTH, GPT_LAYERS, GPT_VOCAB = (16, 256, 512, 4, 8192) if _GPU else (2, 16, 32, 2, 256)
CONV_BATCH, CONV_SIDE, CONV_WIDTH = (64, 64, 64) if _GPU else (2, 16, 8)
SHARED = ("MLPStack", "GPT", "ConvNet")


# compile-lens: inputs=(torch.randn(MLP_BATCH, MLP_WIDTH),)
class MLPStack(nn.Module):
    """Linear + GELU layers of one width: time in matmuls and one fused activation each."""

    def __init__(self, width: int = MLP_WIDTH, depth: int = MLP_DEPTH):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return x


class _Attention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(width, 3 * width), nn.Linear(width, width), heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = _Attention(width, heads)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


# compile-lens: inputs=(torch.randint(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ)),)
class GPT(nn.Module):
    """nanoGPT-style: token + position embeddings, pre-norm blocks, a tied head; the logits."""

    def __init__(self, vocab: int = GPT_VOCAB, width: int = GPT_WIDTH, layers: int = GPT_LAYERS,
                 seq: int = GPT_SEQ, heads: int = 4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(_Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class _Residual(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


# compile-lens: inputs=(torch.randn(CONV_BATCH, 3, CONV_SIDE, CONV_SIDE),)
class ConvNet(nn.Module):
    """ResNet-style: a stem, two residual stages (the second at half resolution), pooled head."""

    def __init__(self, width: int = CONV_WIDTH, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stage1 = nn.Sequential(_Residual(width), _Residual(width))
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.stage2 = nn.Sequential(_Residual(2 * width), _Residual(2 * width))
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(x.mean(dim=(2, 3)))
