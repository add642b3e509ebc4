"""Goal-conditioned env adapter for gymnasium-robotics (Fetch and PointMaze families).

Episodes have a fixed length T (these tasks end by truncation only), so n envs are stepped in
lockstep and every episode is stored whole: obs [T+1], achieved goals [T+1], goal, actions [T].
"""
from __future__ import annotations

from dataclasses import dataclass

import farama_notifications
import gymnasium as gym
import numpy as np

from l3p.sim.mazes import success_flag

# gymnasium-robotics prints a notice about Adroit envs (unrelated to ours) on every import.
farama_notifications.notifications.pop("gymnasium_robotics", None)
import gymnasium_robotics  # noqa: E402

gym.register_envs(gymnasium_robotics)

SUPPORTED_PREFIXES = ("Fetch", "PointMaze_", "AntMaze_")


class UnknownEnvError(ValueError):
    """An env id that gymnasium does not know or that is not a goal-conditioned task."""


@dataclass(frozen=True)
class EnvSpec:
    env_id: str
    obs_dim: int
    goal_dim: int
    action_dim: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    max_steps: int

    @property
    def action_max(self) -> float:
        return float(max(abs(x) for x in self.action_high))


def make_env(env_id: str, render_mode: str | None = None, max_episode_steps: int | None = None) -> gym.Env:
    """The env with its own time limit, or ``max_episode_steps`` (the maze protocol trains on
    episodes shorter than the env's evaluation limit)."""
    if not env_id.startswith(SUPPORTED_PREFIXES):
        raise UnknownEnvError(f"unsupported env id {env_id!r}: expected a Fetch*, PointMaze_* or AntMaze_* goal env")
    try:
        return gym.make(env_id, render_mode=render_mode, max_episode_steps=max_episode_steps)
    except gym.error.Error as exc:  # NameNotFound, VersionNotFound, ...
        raise UnknownEnvError(f"unknown env id {env_id!r}: {exc}") from None


def env_spec(env: gym.Env) -> EnvSpec:
    space = env.observation_space
    act = env.action_space
    return EnvSpec(
        env_id=env.spec.id,
        obs_dim=int(space["observation"].shape[0]),
        goal_dim=int(space["desired_goal"].shape[0]),
        action_dim=int(act.shape[0]),
        action_low=tuple(float(x) for x in act.low),
        action_high=tuple(float(x) for x in act.high),
        max_steps=int(env.spec.max_episode_steps),
    )


class VecGoalEnv:
    """n copies of one goal env stepped in lockstep, reset with explicit per-env seeds."""

    def __init__(self, env_id: str, n: int, max_episode_steps: int | None = None):
        self.envs = [make_env(env_id, max_episode_steps=max_episode_steps) for _ in range(n)]
        self.spec = env_spec(self.envs[0])
        self._unwrapped = self.envs[0].unwrapped
        # Maze envs' sparse reward is 1 at the goal and 0 elsewhere; L3P's distance critic needs -1 / 0.
        self._reward_offset = 0.0 if env_id.startswith("Fetch") else -1.0

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, seeds: list[int], options: list[dict | None] | None = None) -> dict[str, np.ndarray]:
        """Reset env i with ``seeds[i]`` (and ``options[i]``, e.g. a maze's pinned start/goal cells)."""
        options = options or [None] * len(self.envs)
        return _stack([env.reset(seed=int(s), options=o)[0] for env, s, o in zip(self.envs, seeds, options)])

    def step(self, actions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        obs, success = [], []
        for env, a in zip(self.envs, actions):
            o, _, _, _, info = env.step(a)
            obs.append(o)
            success.append(float(success_flag(info)))
        return _stack(obs), np.asarray(success, dtype=np.float32)

    def compute_reward(self, achieved: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The env's own reward (vectorized over the leading axis): -1 until within threshold, 0 after."""
        reward = self._unwrapped.compute_reward(achieved, goal, None)
        return np.asarray(reward, dtype=np.float32) + self._reward_offset

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _stack(obs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([o[k] for o in obs]).astype(np.float32) for k in ("observation", "achieved_goal", "desired_goal")}
