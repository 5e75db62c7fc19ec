"""A user's own model package: configs, layers and init helpers."""

from .config import ModelConfig
from .layers import MLP, Residual

__all__ = ["MLP", "ModelConfig", "Residual"]
