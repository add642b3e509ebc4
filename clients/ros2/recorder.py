"""Record the episodes a bridge drives, in the project's dataset format (`l3p.core.dataset`), for a
training run to read later (``l3p train --dataset``).

Per step (one per action published): the observation, the action, the goal, the achieved goal (read
from the observation at ``achieved_goal_indices``), and the planner's state: ``subgoal_index``,
``replanned``, ``counter``, ``resumed``, and ``success``: the robot's last success flag (its
``topics.success``) when the step was taken, i.e. after the previous action. ``terminals`` marks
each episode's last step. An episode shorter than 2 steps has no transition and is left out. The
file is rewritten (atomically) at each episode end and when the bridge stops.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import numpy as np

from l3p.clients.messages import ModelInfo
from l3p.core.dataset import save_dataset

EXTRAS = ("subgoal_index", "replanned", "counter", "resumed", "success")


class Recorder:
    def __init__(self, path: Path, info: ModelInfo, config: Any, namespace: str) -> None:
        self.path = Path(path)
        self.info = info
        self.achieved = list(config.achieved_goal_indices)
        self.made_by = {
            "recorder": "l3p ros2 bridge",
            "robot": namespace or "/",
            "server": config.server,
            "model": info.model,
            "bundle_sha256": info.bundle_sha256,
            "planner": config.planner,
            "seed": config.seed,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        self.rows: list[tuple[Any, ...]] = []  # the running episode
        self.episodes: list[list[tuple[Any, ...]]] = []

    def add(self, obs: np.ndarray, action: np.ndarray, goal: np.ndarray, step: Any, success: bool) -> None:
        self.rows.append((obs.astype(np.float32), action.astype(np.float32), goal.astype(np.float32),
                          obs[self.achieved].astype(np.float32), step.subgoal_index, step.replanned,
                          step.counter, step.resumed, success))

    def end_episode(self) -> None:
        if len(self.rows) >= 2:
            self.episodes.append(self.rows)
            self.save()
        self.rows = []

    def save(self) -> str | None:
        """Write every finished episode (and the running one, if it has a transition); the digest."""
        episodes = self.episodes + ([self.rows] if len(self.rows) >= 2 else [])
        if not episodes:
            return None
        rows = [r for ep in episodes for r in ep]
        terminals = np.concatenate([np.eye(1, len(ep), len(ep) - 1, dtype=np.float32)[0] for ep in episodes])
        col = lambda i, dtype: np.array([r[i] for r in rows], dtype=dtype)  # noqa: E731
        return save_dataset(
            self.path, observations=col(0, np.float32), actions=col(1, np.float32), terminals=terminals,
            achieved_goals=col(3, np.float32), desired_goals=col(2, np.float32), env_id=self.info.env_id,
            made_by={**self.made_by, "episodes": len(episodes)},
            subgoal_index=col(4, np.int32), replanned=col(5, np.bool_), counter=col(6, np.int32),
            resumed=col(7, np.bool_), success=col(8, np.bool_))
