# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A user's own model package: configs, layers and init helpers."""

from .config import ModelConfig
from .layers import MLP, Residual

__all__ = ["MLP", "ModelConfig", "Residual"]
