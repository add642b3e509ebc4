"""The learned pieces of L3P ("World Model as a Graph", ICML 2021), as small torch modules.

- ``Actor`` π(s, g) → action (tanh × action max).
- ``DistanceCritic`` D(s, a, g) ≥ 0 in steps; Q = −(1 − γ^D)/(1 − γ) is derived, never learned.
- ``ValueNet`` V(g_a, g_b) ≥ 0 in steps between two goals.
- ``GoalAutoEncoder`` f_E / f_D between goals and a reachability-shaped latent space.
- ``LatentClusters`` N centroids with one shared diagonal std (uniform prior).

Observation and goal normalizers are submodules shared by reference, so every network (and its
ONNX export) normalizes its raw inputs itself.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from l3p.training.normalizer import Normalizer


def mlp(inp: int, out: int, hidden: int, layers: int, layer_norm: bool = False) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(inp if i == 0 else hidden, hidden), *([nn.LayerNorm(hidden)] if layer_norm else []),
                 nn.ReLU(inplace=True)]
    mods.append(nn.Linear(hidden, out))
    return nn.Sequential(*mods)


def q_from_distance(d: torch.Tensor, gamma: float) -> torch.Tensor:
    """Q = −(1 − γ^D)/(1 − γ): the discounted return of D steps of reward −1."""
    # Constants are filled on d's device: a CUDA graph cannot capture a host-to-device copy.
    return -(1.0 - torch.pow(torch.full((), gamma, dtype=d.dtype, device=d.device), d)) / (1.0 - gamma)


class Actor(nn.Module):
    def __init__(self, o_norm: Normalizer, g_norm: Normalizer, obs_dim: int, goal_dim: int, action_dim: int,
                 action_max: float, hidden: int = 256, layers: int = 3):
        super().__init__()
        self.o_norm, self.g_norm, self.action_max = o_norm, g_norm, action_max
        self.net = mlp(obs_dim + goal_dim, action_dim, hidden, layers)

    def forward(self, obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.o_norm(obs), self.g_norm(goal)], dim=-1)
        return self.action_max * torch.tanh(self.net(x))


class DistanceCritic(nn.Module):
    def __init__(self, o_norm: Normalizer, g_norm: Normalizer, obs_dim: int, goal_dim: int, action_dim: int,
                 action_max: float, hidden: int = 256, layers: int = 3, layer_norm: bool = False):
        super().__init__()
        self.o_norm, self.g_norm, self.action_max = o_norm, g_norm, action_max
        self.net = mlp(obs_dim + goal_dim + action_dim, 1, hidden, layers, layer_norm)

    def forward(self, obs: torch.Tensor, goal: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.o_norm(obs), self.g_norm(goal), action / self.action_max], dim=-1)
        return F.softplus(self.net(x)).squeeze(-1)


class ValueNet(nn.Module):
    def __init__(self, g_norm: Normalizer, goal_dim: int, hidden: int = 256, layers: int = 3, layer_norm: bool = False):
        super().__init__()
        self.g_norm = g_norm
        self.net = mlp(2 * goal_dim, 1, hidden, layers, layer_norm)

    def forward(self, goal_a: torch.Tensor, goal_b: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.g_norm(goal_a), self.g_norm(goal_b)], dim=-1)
        return F.softplus(self.net(x)).squeeze(-1)


class GoalAutoEncoder(nn.Module):
    """Goal ↔ latent. Works on normalized goals internally and decodes back to raw goal units."""

    def __init__(self, g_norm: Normalizer, goal_dim: int, latent_dim: int = 16, hidden: int = 128):
        super().__init__()
        self.g_norm = g_norm
        self.encoder = mlp(goal_dim, latent_dim, hidden, 2)
        self.decoder = mlp(latent_dim, goal_dim, hidden, 2)

    def encode(self, goal: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.g_norm(goal))

    def decode_normalized(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.g_norm.denormalize(self.decoder(z))


class LatentClusters(nn.Module):
    """Gaussian mixture in latent space: N centroids, one shared diagonal std, uniform prior."""

    def __init__(self, n: int, latent_dim: int):
        super().__init__()
        self.centroids = nn.Parameter(torch.zeros(n, latent_dim))
        self.log_std = nn.Parameter(torch.zeros(latent_dim))

    def log_likelihood(self, z: torch.Tensor) -> torch.Tensor:
        """log N(z | c_k, σ) for every latent and centroid: [B, N]."""
        var = torch.exp(2 * self.log_std)
        sq = ((z[:, None, :] - self.centroids[None]) ** 2 / var).sum(-1)
        log_norm = self.log_std.sum() + 0.5 * z.shape[-1] * torch.log(torch.full((), 2 * torch.pi, device=z.device))
        return -0.5 * sq - log_norm


class DistanceWithPolicy(nn.Module):
    """Export wrapper: (obs, goal) → (D(s, π(s,g), g), π(s,g)) in one graph."""

    def __init__(self, actor: Actor, critic: DistanceCritic):
        super().__init__()
        self.actor, self.critic = actor, critic

    def forward(self, obs: torch.Tensor, goal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        action = self.actor(obs, goal)
        return self.critic(obs, goal, action), action
