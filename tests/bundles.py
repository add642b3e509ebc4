"""Bundles for tests of serving and clients: valid, exported by the real exporter, but from
untrained networks (seconds, not a training run)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from l3p.sim.envs import VecGoalEnv
from l3p.training.agent import L3PAgent
from l3p.training.presets import preset
from l3p.training.export import export_bundle


def export_untrained_bundle(out_dir: Path, env_id: str = "FetchReach-v4", n_landmarks: int = 16, seed: int = 0) -> Path:
    """A valid bundle from untrained networks (`untrained_agent`)."""
    agent, provenance = untrained_agent(env_id, n_landmarks, seed)
    return export_bundle(agent, Path(out_dir), provenance, force=True)


def untrained_agent(env_id: str = "FetchReach-v4", n_landmarks: int = 16, seed: int = 0) -> tuple[L3PAgent, dict]:
    """Untrained networks and their provenance. Normalizer statistics come from a few random-action
    episodes of the real env, and the landmarks are GLS-spread achieved goals of those episodes, so
    inputs and nodes are in the env's ranges."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = preset(env_id).replace(n_landmarks=n_landmarks, seed=seed)
    env = VecGoalEnv(env_id, 2)
    spec = env.spec
    agent = L3PAgent(cfg, spec)
    obs = env.reset([seed, seed + 1])
    seen_obs, seen_goals = [obs["observation"]], [obs["achieved_goal"], obs["desired_goal"]]
    for _ in range(2 * spec.max_steps):
        obs, _ = env.step(rng.uniform(spec.action_low, spec.action_high, (2, spec.action_dim)).astype(np.float32))
        seen_obs.append(obs["observation"])
        seen_goals += [obs["achieved_goal"], obs["desired_goal"]]
    env.close()
    goals = np.concatenate(seen_goals)
    agent.o_norm.update(np.concatenate(seen_obs))
    agent.g_norm.update(goals)
    agent.init_clusters(goals + 0.05 * rng.standard_normal(goals.shape).astype(np.float32), rng)
    provenance = {"command": "export_untrained_bundle", "config": cfg.to_dict(), "env_steps": 0,
                  "optimizer_steps": 0, "wall_time_s": 0.0, "seed": seed, "success": {}, "untrained": True}
    return agent, provenance
