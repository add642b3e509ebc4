"""A goal env defined outside the package, as a user would write one: ``goal_envs:PointReach``.

Plain gymnasium, no import of l3p. A point in the square [-1, 1]^2 moves at most ``SPEED`` per
step; the goal is reached within ``REACH``. It declares how L3P reads it with class attributes:
its success flag is ``info["reached"]`` and its sparse reward is 1 at the goal and 0 elsewhere,
so L3P adds -1 (L3P's distance critic needs -1 per step until the goal, 0 there).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SPEED = 0.1
REACH = 0.1


class PointReach(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}
    max_episode_steps = 30  # the time limit make_env applies unless the caller gives another
    l3p_success_key = "reached"
    l3p_reward_offset = -1.0

    def __init__(self, render_mode: str | None = None, width: int = 64, height: int = 64) -> None:
        box = spaces.Box(-1.0, 1.0, (2,), np.float64)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode, self.size = render_mode, (height, width)
        self.pos = np.zeros(2)
        self.goal = np.zeros(2)

    def compute_reward(self, achieved_goal, desired_goal, info):
        return (np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) <= REACH).astype(np.float64)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos, self.goal = self.np_random.uniform(-1.0, 1.0, (2, 2))
        return self._obs(), {"reached": bool(self.compute_reward(self.pos, self.goal, None))}

    def step(self, action):
        self.pos = np.clip(self.pos + SPEED * np.clip(action, -1.0, 1.0), -1.0, 1.0)
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, False, False, {"reached": reward == 1.0}

    def render(self) -> np.ndarray:
        """The square from above: the goal red, the point blue."""
        frame = np.full((*self.size, 3), 255, np.uint8)
        for xy, color in ((self.goal, (220, 30, 30)), (self.pos, (30, 60, 220))):
            r = int((1 - xy[1]) / 2 * (self.size[0] - 1))
            c = int((xy[0] + 1) / 2 * (self.size[1] - 1))
            frame[max(r - 2, 0):r + 3, max(c - 2, 0):c + 3] = color
        return frame
