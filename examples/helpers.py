"""Workspace helpers used by the models in this folder."""

import torch


def report(name, t):
    print(f"{name}: mean={t.mean():.3f}")  # a debugging print: breaks the graph of every caller
    return t


def to_list(t: torch.Tensor):
    return t.tolist()
