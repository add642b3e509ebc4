"""What a run of episodes measured: per episode (success, final distance, steps, re-plans,
latencies, resumes, falls) and per run (rates and latency percentiles). numpy only."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np


def percentile_ms(latencies_s: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(latencies_s) * 1e3, q)) if len(latencies_s) else float("nan")


@dataclasses.dataclass
class EpisodeResult:
    index: int
    env_seed: int
    planner_seed: int
    success: bool
    final_distance: float  # |achieved_goal - desired_goal| after the last step
    steps: int
    replans: int
    latencies_s: list[float]  # per step, client-side round trip
    resumes: int = 0  # sessions replaced after their server was lost
    pair: tuple[tuple[int, int], tuple[int, int]] | None = None  # maze start / goal cells, if pinned
    task: int | None = None  # the env's evaluation task, if pinned to one
    # A robot that can fall (its env declares a torso, e.g. the ant): the step after which it first
    # lay fallen, None if it stayed up. can_fall False: the question does not apply.
    can_fall: bool = False
    fell_at: int | None = None
    # The first step after which the env said success; success itself is the last step's word. They
    # differ on an env whose episode goes on past the goal (gymnasium-robotics' mazes): reached, then left.
    reached_at: int | None = None
    # With record=True: achieved goal before each step (and after the last), the goal, and the
    # subgoal index pursued at each step (-1 = final goal).
    trajectory: np.ndarray | None = None
    goal: np.ndarray | None = None
    subgoal_indices: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "index": self.index,
            "env_seed": self.env_seed,
            "planner_seed": self.planner_seed,
            "success": self.success,
            "final_distance": self.final_distance,
            "steps": self.steps,
            "reached_at": self.reached_at,
            "replans": self.replans,
            "resumes": self.resumes,
            "latency_ms": {"p50": percentile_ms(self.latencies_s, 50),
                           "p99": percentile_ms(self.latencies_s, 99)},
        }
        if self.pair is not None:
            out["pair"] = {"start_cell": list(self.pair[0]), "goal_cell": list(self.pair[1])}
        if self.task is not None:
            out["task"] = self.task
        if self.can_fall:
            out["fell_at"] = self.fell_at
        return out

    @property
    def fell_text(self) -> str:
        """"fell at step N" for an episode in which the robot fell, else ""."""
        return f"fell at step {self.fell_at}" if self.fell_at is not None else ""


@dataclasses.dataclass
class RunResult:
    env_id: str
    mode: str
    stream: bool
    episodes: list[EpisodeResult]

    @property
    def successes(self) -> list[bool]:
        return [e.success for e in self.episodes]

    @property
    def latencies_s(self) -> list[float]:
        return [t for e in self.episodes for t in e.latencies_s]

    @property
    def latency_p50_ms(self) -> float:
        return percentile_ms(self.latencies_s, 50)

    @property
    def latency_p99_ms(self) -> float:
        return percentile_ms(self.latencies_s, 99)

    @property
    def mean_final_distance(self) -> float:
        return float(np.mean([e.final_distance for e in self.episodes])) if self.episodes else float("nan")

    @property
    def resumes(self) -> int:
        return sum(e.resumes for e in self.episodes)

    @property
    def reached(self) -> int:
        """Episodes that reached the goal at some step (``reached_at``), whatever the last step said."""
        return sum(e.reached_at is not None for e in self.episodes)

    @property
    def falls(self) -> int | None:
        """Episodes in which the robot fell; None for a robot that cannot."""
        if not any(e.can_fall for e in self.episodes):
            return None
        return sum(e.fell_at is not None for e in self.episodes)

    @property
    def replans_per_episode(self) -> float:
        return float(np.mean([e.replans for e in self.episodes])) if self.episodes else float("nan")
