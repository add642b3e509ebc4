"""Typed training configuration with per-environment presets.

Defaults start from the L3P authors' settings (see shared ALGORITHM.md §5) and are scaled to a
2-core machine: fewer parallel envs, smaller batches, fewer updates per transition. Every run
writes its exact config next to its outputs (``config.json``), and the bundle manifest copies it.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any


@dataclass
class TrainConfig:
    env_id: str = "FetchPush-v4"
    seed: int = 0
    torch_threads: int = 1

    # --- budget and collection ---
    total_env_steps: int = 200_000
    n_envs: int = 8                     # episodes collected in lockstep per cycle
    warmup_episodes: int = 100          # uniform random actions, no updates
    noise_eps: float = 0.2              # Gaussian exploration noise, fraction of action max
    random_eps: float = 0.3             # probability of a uniform random action
    updates_per_cycle: int = 40         # optimizer steps after each cycle of n_envs episodes
    batch_size: int = 256
    buffer_episodes: int = 20_000

    # --- hindsight relabelling ---
    relabel_p: float = 0.8              # fraction of goals replaced by future achieved goals
    future_step: int = 50               # future window (steps ahead); 50 = rest of the episode

    # --- DDPG with a distance critic ---
    gamma: float = 0.98
    clip_return: float = 50.0
    lr_actor: float = 1e-3
    lr_critic: float = 1e-3
    lr_value: float = 1e-3
    polyak: float = 0.95                # target update after every cycle's updates
    action_l2: float = 1.0
    hidden: int = 256
    layers: int = 3
    clip_obs: float = 200.0
    clip_norm: float = 5.0
    norm_eps: float = 0.01

    # --- latent landmarks ---
    n_landmarks: int = 80
    latent_dim: int = 16
    ae_hidden: int = 128
    lr_ae: float = 3e-4
    lr_clusters: float = 3e-4
    ae_lambda: float = 1.0
    gls_sample: int = 2000             # replay goals encoded for Greedy Latent Sparsification
    cluster_batch: int = 150
    cluster_refresh_every: int = 5     # optimizer steps between GLS cluster-batch refreshes
    cluster_every: int = 2             # one cluster step every this many optimizer steps
    planning_start_episodes: int = 1000
    plan_eps: float = 0.5              # fraction of episodes collected with the planner
    extra_landmarks: int = 20          # GLS replay goals added as temporary nodes at train time

    # --- planner defaults written to the bundle ---
    d_max: float = 15.0
    temperature: float = 1.1
    search: str = "soft"
    search_iterations: int = 20
    local_horizon: float = 10.0
    counter_extra: int = 1

    # --- evaluation, logging, checkpoints ---
    eval_every_cycles: int = 25
    eval_episodes: int = 20
    checkpoint_every_cycles: int = 25

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **overrides: Any) -> "TrainConfig":
        return dataclasses.replace(self, **overrides)

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# Per-environment presets. FetchReach is solved by the policy alone in one short run; Push and
# PickAndPlace need far more data, so their presets use more lockstep envs and a larger batch.
PRESETS: dict[str, TrainConfig] = {
    "FetchReach-v4": TrainConfig(
        env_id="FetchReach-v4", total_env_steps=12_000, n_envs=2, warmup_episodes=10,
        updates_per_cycle=40, n_landmarks=20, planning_start_episodes=40, eval_every_cycles=20,
        checkpoint_every_cycles=20, gls_sample=1000, buffer_episodes=2_000,
    ),
    # Push: many episodes per cycle and few large-batch updates, the regime of multi-worker HER
    # (which learns Push) rather than the single-worker one (which stalls at the trivial rate).
    "FetchPush-v4": TrainConfig(
        env_id="FetchPush-v4", total_env_steps=1_500_000, n_envs=16, updates_per_cycle=40, batch_size=1024,
        buffer_episodes=40_000, planning_start_episodes=2_000, eval_every_cycles=50, checkpoint_every_cycles=50,
    ),
    "FetchPickAndPlace-v4": TrainConfig(env_id="FetchPickAndPlace-v4", total_env_steps=1_000_000),
    "FetchSlide-v4": TrainConfig(env_id="FetchSlide-v4", total_env_steps=1_000_000),
    # PointMaze: long-horizon navigation; the authors use gamma 0.99 and N = 50 for mazes.
    "PointMaze_UMaze-v3": TrainConfig(
        env_id="PointMaze_UMaze-v3", gamma=0.99, n_landmarks=50, total_env_steps=300_000,
    ),
    "PointMaze_Medium-v3": TrainConfig(
        env_id="PointMaze_Medium-v3", gamma=0.99, n_landmarks=50, total_env_steps=600_000,
    ),
    "PointMaze_Large-v3": TrainConfig(
        env_id="PointMaze_Large-v3", gamma=0.99, n_landmarks=50, total_env_steps=1_000_000,
    ),
}


def preset(env_id: str) -> TrainConfig:
    """The preset for ``env_id``; raises ``KeyError`` with the known ids listed."""
    if env_id not in PRESETS:
        known = ", ".join(sorted(PRESETS))
        raise KeyError(f"unknown env id {env_id!r}; known: {known}")
    return dataclasses.replace(PRESETS[env_id])
