# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class ModelConfig:
    width: int = 32
    depth: int = 2
    heads: int = 4
    dropout: float = 0.0
    tags: list[str] = field(default_factory=lambda: ["base"])

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def small(cls) -> "ModelConfig":
        return cls(width=16, depth=1, heads=2)
