"""Running mean/std input normalizer that lives inside the networks (and so inside the ONNX graphs).

Statistics are float64 sums kept as buffers, so they are saved with the state dict and a resumed
run continues with the same normalization. Raw inputs are clipped to ±clip_obs first, normalized
values to ±clip_norm; the std has a floor (eps) so constant dimensions don't blow up.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn


class Normalizer(nn.Module):
    def __init__(self, dim: int, eps: float = 0.01, clip_obs: float = 200.0, clip_norm: float = 5.0):
        super().__init__()
        self.eps, self.clip_obs, self.clip_norm = eps, clip_obs, clip_norm
        self.register_buffer("total", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("total_sq", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    @torch.no_grad()
    def update(self, x: np.ndarray) -> None:
        x = np.clip(np.asarray(x, dtype=np.float64).reshape(-1, self.mean.shape[0]), -self.clip_obs, self.clip_obs)
        self.total += torch.from_numpy(x.sum(axis=0)).to(self.total.device)
        self.total_sq += torch.from_numpy((x * x).sum(axis=0)).to(self.total.device)
        self.count += x.shape[0]
        mean = self.total / self.count
        var = torch.clamp(self.total_sq / self.count - mean * mean, min=self.eps**2)
        self.mean.copy_(mean.float())
        self.std.copy_(var.sqrt().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, -self.clip_obs, self.clip_obs)
        return torch.clamp((x - self.mean) / self.std, -self.clip_norm, self.clip_norm)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.std + self.mean
