"""Record the episodes a bridge drives, in the project's dataset format (`l3p.core.dataset`), for a
training run to read later (``l3p train --dataset``).

Per step (one per action published): the observation, the action, the goal, the achieved goal (read
from the observation at ``achieved_goal_indices``), and the planner's state: ``subgoal_index``,
``replanned``, ``counter``, ``resumed``, and ``success``: the robot's last success flag (its
``topics.success``) when the step was taken, i.e. after the previous action. ``terminals`` marks
each episode's last step. An episode shorter than 2 steps has no transition and is left out.

Streamed (`l3p.datasets.writer.EpisodeWriter`): each finished episode is written at once (the
current file rewritten atomically), files rotate every 20,000 steps (``NAME.npz``,
``NAME_0001.npz``, ...; a file already there is never written over: a restarted bridge continues the
series), and memory holds only the current file's steps: a bridge that records for days stays
bounded, and a killed one leaves every finished episode readable.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import numpy as np

from l3p.clients.messages import ModelInfo
from l3p.datasets.writer import EpisodeWriter


class Recorder:
    def __init__(self, path: Path, info: ModelInfo, config: Any, namespace: str) -> None:
        self.achieved = list(config.achieved_goal_indices)
        made_by = {
            "recorder": "l3p ros2 bridge",
            "robot": namespace or "/",
            "server": config.server,
            "model": info.model,
            "bundle_sha256": info.bundle_sha256,
            "planner": config.planner,
            "seed": config.seed,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        self.writer = EpisodeWriter(path, info.env_id, made_by)

    @property
    def files(self) -> list[Path]:
        return self.writer.files

    def add(self, obs: np.ndarray, action: np.ndarray, goal: np.ndarray, step: Any, success: bool) -> None:
        self.writer.add(observations=obs.astype(np.float32), actions=action.astype(np.float32),
                        desired_goals=goal.astype(np.float32), achieved_goals=obs[self.achieved].astype(np.float32),
                        subgoal_index=np.int32(step.subgoal_index), replanned=bool(step.replanned),
                        counter=np.int32(step.counter), resumed=bool(step.resumed), success=bool(success))

    def end_episode(self) -> None:
        self.writer.end_episode()

    def save(self) -> str | None:
        """Ends the running episode (kept if it has a transition); the digest of the last file written."""
        return self.writer.close()
