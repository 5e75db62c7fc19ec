# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A small detector as a vision project writes it: a config dataclass, conv helpers, a backbone of
residual stages, a feature pyramid, a head per level, and the detector that ties them; a helper
that clamps each level's scores by a Python float read from the tensor (`.item()`), in the loop."""

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mylib.utils import seed_everything
from mylib.utils.init import fan_in_uniform


@dataclass
class DetectorConfig:
    in_channels: int = 3
    widths: list[int] = field(default_factory=lambda: [8, 16, 32])
    fpn_width: int = 16
    classes: int = 4
    anchors: int = 3
    image: int = 32
    norm: str = "batch"


def make_norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(4, channels)
    return nn.Identity()


def conv_bn_act(cin: int, cout: int, stride: int = 1, norm: str = "batch") -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         make_norm(norm, cout), nn.SiLU(inplace=True))


def prior_boxes(size: int, stride: int, anchors: int) -> torch.Tensor:
    cells = size // stride
    ys, xs = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
    centres = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32) * stride + stride / 2
    return torch.from_numpy(np.repeat(centres, anchors, axis=0))


def clamp_scores(scores: torch.Tensor, floor: float = -10.0) -> torch.Tensor:
    # the lowest score as a Python number, to clamp against (a habit from numpy code)
    low = max(scores.min().item(), floor)
    return scores.clamp(min=low)


class ResidualUnit(nn.Module):
    def __init__(self, channels: int, norm: str = "batch"):
        super().__init__()
        self.conv1 = conv_bn_act(channels, channels, norm=norm)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = make_norm(norm, channels)

    def forward(self, x):
        return F.silu(x + self.norm(self.conv2(self.conv1(x))))


class Stage(nn.Module):
    def __init__(self, cin: int, cout: int, depth: int = 1, norm: str = "batch"):
        super().__init__()
        self.down = conv_bn_act(cin, cout, stride=2, norm=norm)
        self.units = nn.Sequential(*[ResidualUnit(cout, norm) for _ in range(depth)])

    def forward(self, x):
        return self.units(self.down(x))


class Backbone(nn.Module):
    def __init__(self, config: DetectorConfig = DetectorConfig()):
        super().__init__()
        widths = [config.in_channels] + config.widths
        self.stages = nn.ModuleList(Stage(a, b, norm=config.norm) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        return features


class FeaturePyramid(nn.Module):
    def __init__(self, widths: list[int], out: int):
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(w, out, 1) for w in widths)
        self.smooth = nn.ModuleList(nn.Conv2d(out, out, 3, padding=1) for _ in widths)

    def forward(self, features: list[torch.Tensor]) -> list[torch.Tensor]:
        laterals = [lat(f) for lat, f in zip(self.lateral, features)]
        for i in range(len(laterals) - 1, 0, -1):
            laterals[i - 1] = laterals[i - 1] + F.interpolate(laterals[i], size=laterals[i - 1].shape[-2:], mode="nearest")
        return [s(l) for s, l in zip(self.smooth, laterals)]


class Head(nn.Module):
    def __init__(self, width: int, classes: int, anchors: int):
        super().__init__()
        self.tower = nn.Sequential(conv_bn_act(width, width), conv_bn_act(width, width))
        self.cls = nn.Conv2d(width, anchors * classes, 3, padding=1)
        self.box = nn.Conv2d(width, anchors * 4, 3, padding=1)
        self.classes, self.anchors = classes, anchors
        nn.init.constant_(self.cls.bias, -math.log((1 - 0.01) / 0.01))

    def forward(self, x):
        t = self.tower(x)
        b = x.shape[0]
        scores = self.cls(t).permute(0, 2, 3, 1).reshape(b, -1, self.classes)
        boxes = self.box(t).permute(0, 2, 3, 1).reshape(b, -1, 4)
        return scores, boxes


# compile-lens: inputs=(torch.randn(2, 3, 32, 32),)
class Detector(nn.Module):
    def __init__(self, config: DetectorConfig = DetectorConfig()):
        super().__init__()
        self.config = config
        self.backbone = Backbone(config)
        self.fpn = FeaturePyramid(config.widths, config.fpn_width)
        self.head = Head(config.fpn_width, config.classes, config.anchors)
        strides = [2 ** (i + 1) for i in range(len(config.widths))]
        for i, s in enumerate(strides):
            self.register_buffer(f"priors_{i}", prior_boxes(config.image, s, config.anchors), persistent=False)

    def forward(self, images: torch.Tensor, score_floor: Optional[float] = None):
        levels = self.fpn(self.backbone(images))
        all_scores, all_boxes = [], []
        for i, level in enumerate(levels):
            scores, deltas = self.head(level)
            scores = clamp_scores(scores)
            priors = getattr(self, f"priors_{i}")
            boxes = torch.cat([priors + deltas[..., :2], deltas[..., 2:].exp()], dim=-1)
            all_scores.append(scores)
            all_boxes.append(boxes)
        return torch.cat(all_scores, dim=1).sigmoid(), torch.cat(all_boxes, dim=1)


def build(config: Optional[DetectorConfig] = None) -> Detector:
    seed_everything(0)
    model = Detector(config or DetectorConfig())
    return model.eval()


if __name__ == "__main__":
    model = build()
    scores, boxes = model(torch.randn(2, 3, 32, 32))
    print(scores.shape, boxes.shape)
