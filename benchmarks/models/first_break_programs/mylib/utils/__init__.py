# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
from .init import fan_in_uniform, seed_everything

__all__ = ["fan_in_uniform", "seed_everything"]
