"""A tiny model that measures quickly: CodeLens, inlay hint, hover card and "Wrap in torch.compile".

Inputs are inferred from the first layer (Linear(16, ...)). `model` is compiled at the call site
(the inlay hint goes after it); `plain` is not (the light bulb offers to wrap it).
"""

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.fc(x))


model = torch.compile(Tiny())
plain = Tiny()
