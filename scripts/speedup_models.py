"""Four models of different sizes for `scripts/bench_speedup_check.py` (its default set).

Written as a user would: library base classes, optional constructor arguments, directives for
the inputs. Not part of the examples (the demo) nor of the test fixtures: held out, so that the
tool cannot be tuned to them.
"""

import torch  # noqa: F401 - the directives below evaluate torch.randn in this namespace
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
