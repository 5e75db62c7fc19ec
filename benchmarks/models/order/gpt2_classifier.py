"""A GPT-2 classifier file as users write one: a bottleneck adapter and a pooling head of their own
around transformers' `GPT2Model`, the model compiled at the bottom (issue 52, item 1: the model the
user compiles is measured first)."""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Config, GPT2Model


class Adapter(nn.Module):
    """A residual bottleneck (Houlsby et al.) on the backbone's hidden states."""

    def __init__(self, d_model: int = 64, rank: int = 8):
        super().__init__()
        self.down = nn.Linear(d_model, rank)
        self.up = nn.Linear(rank, d_model)

    def forward(self, hidden):
        return hidden + self.up(F.gelu(self.down(hidden)))


class PoolingHead(nn.Module):
    """Mean over the unmasked positions, then a classifier."""

    def __init__(self, d_model: int = 64, classes: int = 4, dropout: float = 0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(d_model, classes)

    def forward(self, hidden, mask=None):
        if mask is None:
            pooled = hidden.mean(dim=1)
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.out(self.dropout(pooled))


class GPT2Classifier(nn.Module):
    def __init__(self, classes: int = 4):
        super().__init__()
        config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=128)
        self.backbone = GPT2Model(config)
        self.adapter = Adapter(config.n_embd)
        self.head = PoolingHead(config.n_embd, classes)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(self.adapter(hidden), attention_mask)


def main():
    model = torch.compile(GPT2Classifier())
    batch = torch.randint(0, 1000, (8, 32))
    loss = F.cross_entropy(model(batch), torch.randint(0, 4, (8,)))
    loss.backward()


if __name__ == "__main__":
    main()
