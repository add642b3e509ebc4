"""Replay of whole episodes with hindsight relabelling (HER "future" strategy).

Episodes are stored as fixed-length arrays (obs and achieved goals have T+1 entries). A sample
picks (episode, t) uniformly; with probability ``relabel_p`` the goal is replaced by the achieved
goal 1..``future_step`` steps ahead in the same episode, and the reward is recomputed by the env's
own reward function for whichever goal the transition ends up with. With a ``failed_fn`` (a robot
that can fall), a transition into a failed state is marked, whatever its goal.

Offline (a recorded dataset, ``in_sample=True``), a sample also carries the action the data took
next (so the critic bootstraps only through recorded actions), a fraction ``random_goal_p`` of the
goals are achieved goals drawn from anywhere in the data (they teach the critic what is far), and
``bc_mask`` marks the samples whose goal came from their own trajectory. With ``actor_goal_steps``
the actor gets goals of its own, each 1..k steps ahead in the same trajectory (all in ``bc_mask``):
the planner hands it nearby subgoals, so it learns on those rather than on the critic's far goals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

RewardFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
FailedFn = Callable[[np.ndarray], np.ndarray]  # observations [..., obs_dim] -> bool [...]


def within_radius(reward_fn: RewardFn, radius: float | None) -> RewardFn:
    """``reward_fn`` (0 at the goal, -1 elsewhere), and 0 only where the achieved goal also lies
    within ``radius`` of the goal; None: ``reward_fn`` itself."""
    if radius is None:
        return reward_fn

    def reward(achieved: np.ndarray, goal: np.ndarray) -> np.ndarray:
        inside = np.linalg.norm(achieved - goal, axis=-1) <= radius
        return np.where(inside, reward_fn(achieved, goal), -1.0).astype(np.float32)

    return reward


@dataclass
class Batch:
    obs: np.ndarray
    obs_next: np.ndarray
    ag: np.ndarray
    ag_next: np.ndarray
    goal: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    failed: np.ndarray  # 1.0 where obs_next is a failed state (a fall), else 0.0
    action_next: np.ndarray | None = None  # in-sample: the recorded action at obs_next
    bc_mask: np.ndarray | None = None      # in-sample: 1.0 where the actor's goal came from the same trajectory
    actor_goal: np.ndarray | None = None   # in-sample with actor_goal_steps: the actor's own goals (else goal)


class EpisodeReplay:
    FIELDS = ("obs", "ag", "goal", "action")

    def __init__(self, capacity: int, horizon: int, obs_dim: int, goal_dim: int, action_dim: int):
        self.capacity, self.horizon = capacity, horizon
        self.obs = np.zeros((capacity, horizon + 1, obs_dim), np.float32)
        self.ag = np.zeros((capacity, horizon + 1, goal_dim), np.float32)
        self.goal = np.zeros((capacity, goal_dim), np.float32)
        self.action = np.zeros((capacity, horizon, action_dim), np.float32)
        self.size = 0
        self.next = 0  # ring-buffer write position
        self.episodes_seen = 0

    def add(self, obs: np.ndarray, ag: np.ndarray, goal: np.ndarray, action: np.ndarray) -> None:
        """Store a batch of whole episodes: obs [E, T+1, o], ag [E, T+1, g], goal [E, g], action [E, T, a]."""
        for i in range(obs.shape[0]):
            k = self.next
            self.obs[k], self.ag[k], self.goal[k], self.action[k] = obs[i], ag[i], goal[i], action[i]
            self.next = (k + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)
            self.episodes_seen += 1

    def sample(self, batch_size: int, rng: np.random.Generator, reward_fn: RewardFn,
               relabel_p: float = 0.8, future_step: int = 50, failed_fn: FailedFn | None = None,
               in_sample: bool = False, random_goal_p: float = 0.0, actor_goal_steps: int | None = None) -> Batch:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay")
        ep = rng.integers(0, self.size, batch_size)
        # In-sample, the last transition of an episode has no recorded next action: not drawn.
        t = rng.integers(0, self.horizon - 1 if in_sample else self.horizon, batch_size)
        goal = self.goal[ep].copy()
        draw = rng.random(batch_size)
        relabel = draw < relabel_p
        future = self._future_goals(ep, t, future_step, rng)
        goal[relabel] = future[relabel]
        extra = {}
        if in_sample:
            random_goal = (draw >= relabel_p) & (draw < relabel_p + random_goal_p)
            goal[random_goal] = self.sample_goals(int(random_goal.sum()), rng)
            extra = {"action_next": self.action[ep, t + 1]}
            if actor_goal_steps is None:
                extra["bc_mask"] = (~random_goal).astype(np.float32)
            else:  # every actor goal lies on its own trajectory
                extra.update(actor_goal=self._future_goals(ep, t, actor_goal_steps, rng),
                             bc_mask=np.ones(batch_size, np.float32))
        ag_next, obs_next = self.ag[ep, t + 1], self.obs[ep, t + 1]
        failed = np.zeros(batch_size, np.float32) if failed_fn is None else failed_fn(obs_next).astype(np.float32)
        return Batch(
            obs=self.obs[ep, t], obs_next=obs_next, ag=self.ag[ep, t], ag_next=ag_next,
            goal=goal, action=self.action[ep, t], reward=reward_fn(ag_next, goal), failed=failed, **extra,
        )

    def _future_goals(self, ep: np.ndarray, t: np.ndarray, steps: int, rng: np.random.Generator) -> np.ndarray:
        """The achieved goal 1..min(steps, T - t) steps after each (ep, t), the offset uniform (index ≤ T)."""
        offset = 1 + np.floor(rng.random(len(t)) * np.minimum(steps, self.horizon - t)).astype(np.int64)
        return self.ag[ep, t + offset]

    def sample_goals(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Achieved goals drawn uniformly over stored transitions (for GLS)."""
        ep = rng.integers(0, self.size, n)
        t = rng.integers(0, self.horizon + 1, n)
        return self.ag[ep, t]

    def state_dict(self) -> dict[str, np.ndarray]:
        n = self.size
        return {"obs": self.obs[:n], "ag": self.ag[:n], "goal": self.goal[:n], "action": self.action[:n],
                "counters": np.array([self.size, self.next, self.episodes_seen], dtype=np.int64)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        size, nxt, seen = (int(x) for x in state["counters"])
        if size > self.capacity:
            raise ValueError(f"checkpoint replay holds {size} episodes, capacity is {self.capacity}")
        for name in self.FIELDS:
            getattr(self, name)[:size] = state[name]
        self.size, self.next, self.episodes_seen = size, nxt, seen
