"""``l3p expert --evaluate``: how good an ``l3p expert`` policy is, measured two ways.

1. Direction following, what it was trained for: the deterministic policy on
   ``GymXYWrapper(online-ant-v0)`` (a new direction every 100 steps), the mean x-y displacement · z
   per step over whole episodes (an episode ends early if the ant falls over).
2. The oracle-driven expert in a maze, as the datasets drive it but without noise: each step the
   expert follows the direction to the BFS oracle's subgoal (l3p.sim.datasets.steer) on OGBench's
   five evaluation tasks of ``ogbench/antmaze-{maze}-v0``; the success rate per task (OGBench's flag:
   within 0.5 of the goal, 1,000 steps). The issue's bar: >= 90 % on antmaze-large.

It runs the numpy policy file (what the dataset generator runs), so no torch. Episodes use the
held-out seeds (l3p.core.seeds.HELD_OUT + i). Results print as a table and go to a JSON file.

``l3p expert --out runs/ant-expert-s0 --evaluate [--best]`` (``--best``: the run's validation pick,
``best_policy.npz``, to ``expert_eval_best.json``)
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.errors import L3PError
from l3p.core.mlp_policy import MLPPolicy, load_mlp_policy
from l3p.core.seeds import HELD_OUT

ENV_ID = "online-ant-v0"
POLICY = "policy.npz"
BEST = "best_policy.npz"
BEST_INFO = "best_policy.json"
RESULTS = "expert_eval.json"
BEST_RESULTS = "expert_eval_best.json"


def make_direction_env(resample_interval: int = 100, max_episode_steps: int | None = None):
    """``online-ant-v0`` wrapped by OGBench's ``GymXYWrapper``, as OGBench's online scripts make it."""
    import gymnasium
    import ogbench.online_locomotion  # noqa: F401  (registers online-ant-v0)
    from ogbench.online_locomotion.wrappers import GymXYWrapper

    kwargs = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    return GymXYWrapper(gymnasium.make(ENV_ID, **kwargs), resample_interval=resample_interval)


def direction_following(policy: MLPPolicy, episodes: int, seed_base: int,
                        max_steps: int | None = None) -> dict[str, Any]:
    """Mean displacement · z per step of the deterministic policy on OGBench's direction task."""
    env = make_direction_env(max_episode_steps=max_steps)
    rewards, lengths = [], []
    for i in range(episodes):
        np.random.seed(seed_base + i)  # GymXYWrapper draws its directions from numpy's global generator
        obs, _ = env.reset(seed=seed_base + i)
        total, steps, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        rewards.append(total)
        lengths.append(steps)
    env.close()
    return {"episodes": episodes, "displacement_z_per_step": float(np.sum(rewards) / max(np.sum(lengths), 1)),
            "mean_episode_length": float(np.mean(lengths)) if lengths else 0.0}


def oracle_driven(policy: MLPPolicy, maze: str, episodes_per_task: int, seed_base: int, noise: float = 0.0,
                  max_steps: int | None = None) -> dict[str, Any]:
    """Success per OGBench evaluation task of the expert steered by the BFS oracle's directions."""
    from l3p.sim.datasets import steer
    from l3p.sim.envs import make_env
    from l3p.sim.ogbench_mazes import env_id

    env = make_env(env_id(maze, "ant"), max_episode_steps=max_steps)
    rng = np.random.default_rng(seed_base)
    per_task: dict[int, list[float]] = {}
    for task in range(1, env.unwrapped.num_tasks + 1):
        for i in range(episodes_per_task):
            obs, _ = env.reset(seed=seed_base + (task - 1) * episodes_per_task + i, options={"task_id": task})
            success, done = 0.0, False
            while not done:
                action = steer(env.unwrapped, obs["observation"], policy)
                if noise:
                    action = np.clip(action + rng.normal(0.0, noise, action.shape), -1.0, 1.0)
                obs, _, terminated, truncated, info = env.step(action)
                success, done = float(info["success"]), terminated or truncated
            per_task.setdefault(task, []).append(success)
    env.close()
    rates = {task: float(np.mean(s)) for task, s in per_task.items()}
    return {"env_id": env_id(maze, "ant"), "episodes_per_task": episodes_per_task, "noise": noise,
            "success_per_task": rates, "success": float(np.mean([s for v in per_task.values() for s in v]))}


def run_expert_eval(cfg) -> int:
    """Both measurements of the policy in ``cfg.out`` (an `ExpertConfig`), printed and written to
    ``cfg.out/expert_eval.json``."""
    path = Path(cfg.out) / (BEST if cfg.eval_best else POLICY)
    policy = load_mlp_policy(path)
    if policy.input_dim != 29 or policy.action_dim != 8:
        raise L3PError(f"{path}: an ant expert maps 29 inputs to 8 actions, this one {policy.input_dim} to "
                       f"{policy.action_dim}")
    result: dict[str, Any] = {"policy": str(path), "policy_sha256": policy.digest,
                              "policy_env_steps": policy.metadata.get("env_steps"), "seed_base": HELD_OUT}
    t0 = time.time()
    if cfg.eval_direction_episodes:
        result["direction"] = d = direction_following(policy, cfg.eval_direction_episodes, HELD_OUT)
        print(f"direction following: {d['displacement_z_per_step']:.4f} displacement·z per step over "
              f"{cfg.eval_direction_episodes} episodes (mean length {d['mean_episode_length']:.0f})", flush=True)
    if cfg.eval_episodes_per_task:
        result["oracle_driven"] = o = oracle_driven(policy, cfg.eval_maze, cfg.eval_episodes_per_task, HELD_OUT,
                                                    cfg.eval_noise)
        print(f"oracle-driven expert on {o['env_id']} (noise {cfg.eval_noise}): "
              + "  ".join(f"task {t} {100 * r:.0f}%" for t, r in o["success_per_task"].items())
              + f"  overall {100 * o['success']:.1f}%", flush=True)
    result["wall_time_s"] = round(time.time() - t0, 1)
    out = Path(cfg.out) / (BEST_RESULTS if cfg.eval_best else RESULTS)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0
