from .init import fan_in_uniform, seed_everything

__all__ = ["fan_in_uniform", "seed_everything"]
