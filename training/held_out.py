"""Training from recordings alone: no env to make, episodes or reward function to borrow.

A robot without a simulator still has its recording. The run's env spec (dimensions, action bounds)
comes from the dataset, success from a radius around the goal (the mapping's ``success_radius`` or
the config's), and each evaluation, in place of episodes in an env, measures a held-out split of
the recording (whole episodes the learner never sees):

- ``held_out_distance_error``: mean |D(s_t, g) - k| in steps, g the achieved goal k recorded steps
  after s_t (k up to ``future_step``); ``held_out_distance_rank``: the rank correlation of D with k
  (1: D orders the goals as the recording reached them). A recorded path need not be the shortest,
  so D below k is not wrong; the rank says whether D measures progress at all;
- ``held_out_action_error``: mean |pi(s_t, g) - a_t| over the action's dimensions, as a fraction of
  the largest action bound: how near the actor stays to what the robot did;
- ``graph_joined`` (once landmarks exist): the fraction of landmarks in the largest strongly
  connected part of the graph the training episodes support (training/edges.py, the graph ``l3p
  export --graph data`` serves): how much of the landmark graph the data joins.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from l3p.core.dataset import Dataset, DatasetError
from l3p.core.names import HELD_OUT_MEASURES
from l3p.core.search import largest_component
from l3p.sim.envs import EnvSpec, UnknownEnvError, make_env
from l3p.training.config import TrainConfig
from l3p.training.edges import supported_edges
from l3p.training.replay import RewardFn

PAIRS = 2048  # held-out (state, later goal) pairs measured per evaluation
HELD_OUT_KEYS = tuple(HELD_OUT_MEASURES)
"""The cells of a progress row that a run without an env measures (in place of success_*)."""


def mapping_settings(dataset: Dataset) -> dict:
    """What the dataset's mapping (kept in its metadata by `l3p dataset import` and by ``--dataset
    MAPPING.yaml``) says about training: ``simulator`` and ``success_radius``."""
    mapping = dataset.metadata.get("made_by", {}).get("mapping")
    return mapping if isinstance(mapping, dict) else {}


def resolve(cfg: TrainConfig, dataset: Dataset) -> tuple[TrainConfig, str | None]:
    """``cfg`` with ``offline_eval`` decided ('env' or 'held_out') and, held out, ``success_radius``
    set; and, when the run trains without an env, the line that says why."""
    settings = mapping_settings(dataset)
    why = None
    if cfg.offline_eval == "auto":
        if settings.get("simulator") is False:
            why = "its mapping says simulator: false"
        else:
            try:
                make_env(cfg.env_id).close()
            except UnknownEnvError as exc:
                why = f"the project cannot make {cfg.env_id} ({exc})"
        cfg = cfg.replace(offline_eval="env" if why is None else "held_out")
    elif cfg.offline_eval == "held_out":
        why = "offline_eval is held_out"
    if cfg.offline_eval != "held_out":
        return cfg, None
    radius = cfg.success_radius or settings.get("success_radius") or None
    if radius is None:
        raise DatasetError(f"dataset {cfg.dataset}: training without an env ({why}) needs a success radius: "
                           f"success_radius in the mapping, or --set success_radius=R (goal units)")
    return cfg.replace(success_radius=float(radius)), why


def radius_reward(radius: float) -> RewardFn:
    """The goal env's reward without the env: 0 within ``radius`` of the goal, -1 elsewhere."""
    def reward(achieved: np.ndarray, goal: np.ndarray) -> np.ndarray:
        return np.where(np.linalg.norm(achieved - goal, axis=-1) <= radius, 0.0, -1.0).astype(np.float32)

    return reward


def dataset_spec(dataset: Dataset, env_id: str, max_steps: int) -> EnvSpec:
    """The env spec a recording gives: its dimensions, and action bounds from its recorded actions
    (a robot's commands keep within its limits; the served actor is clipped to them)."""
    low, high = dataset.actions.min(axis=0), dataset.actions.max(axis=0)
    flat = np.flatnonzero(high - low <= 0)
    if flat.size:
        raise DatasetError(f"dataset {env_id}: action {int(flat[0])} never changes in the recording "
                           f"({float(low[flat[0]]):g}): no bounds to learn it within")
    return EnvSpec(env_id, dataset.observations.shape[1], dataset.achieved_goals.shape[1], dataset.actions.shape[1],
                   tuple(float(x) for x in low), tuple(float(x) for x in high), max_steps)


def spec_record(spec: EnvSpec) -> dict:
    """What a checkpoint keeps of a spec made from a recording (`l3p export` makes no env either)."""
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(EnvSpec) if f.name != "adapter"}


def split(dataset: Dataset, fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """(training, held out): ``fraction`` of the episodes (at least one, at most all but one),
    picked by ``seed``, whole, each part in file order."""
    bounds = dataset.episode_bounds()
    if len(bounds) < 2:
        raise DatasetError("a held-out split needs a recording of at least 2 episodes, it has 1")
    n = min(max(1, round(fraction * len(bounds))), len(bounds) - 1)
    held = np.zeros(len(bounds), bool)
    held[np.random.default_rng(seed).permutation(len(bounds))[:n]] = True
    return _episodes(dataset, bounds, ~held), _episodes(dataset, bounds, held)


def _episodes(dataset: Dataset, bounds: list[tuple[int, int]], keep: np.ndarray) -> Dataset:
    rows = np.concatenate([np.arange(first, last + 1) for (first, last), k in zip(bounds, keep) if k])
    return Dataset(dataset.observations[rows], dataset.actions[rows], dataset.terminals[rows],
                   dataset.achieved_goals[rows], dataset.metadata,
                   None if dataset.desired_goals is None else dataset.desired_goals[rows])


class HeldOut:
    """The held-out measures (see the module docstring) on fixed pairs of a held-out split."""

    def __init__(self, held: Dataset, training: Dataset, max_offset: int, action_max: float, seed: int = 0):
        rng = np.random.default_rng(seed)
        bounds = held.episode_bounds()
        episode = rng.integers(0, len(bounds), PAIRS)
        first, last = (np.array([bounds[e][i] for e in episode]) for i in (0, 1))
        offset = 1 + (rng.random(PAIRS) * np.minimum(last - first, max_offset)).astype(np.int64)
        start = first + (rng.random(PAIRS) * (last - first - offset + 1)).astype(np.int64)
        self.obs, self.action = held.observations[start], held.actions[start]
        self.goal, self.offset = held.achieved_goals[start + offset], offset.astype(np.float64)
        self.episodes, self.action_max = len(bounds), action_max
        self._training = training.achieved_goals, training.episode_bounds()

    def measure(self, agent, landmarks: np.ndarray | None) -> dict[str, float]:
        """The measures now; ``graph_joined`` only given ``landmarks``."""
        distance, _ = agent.distance_fn(self.obs, self.goal)
        distance = np.asarray(distance, np.float64).reshape(-1)
        error = np.abs(agent.act(self.obs, self.goal) - self.action).mean() / self.action_max
        row = {"held_out_distance_error": float(np.abs(distance - self.offset).mean()),
               "held_out_distance_rank": _rank_correlation(distance, self.offset),
               "held_out_action_error": float(error)}
        if landmarks is not None and len(landmarks) >= 2:
            supported, _, _ = supported_edges(landmarks, *self._training, agent.value_fn)
            row["graph_joined"] = float(largest_component(supported).mean())
        return row

    def record(self) -> dict:
        """What a bundle says was measured (its provenance), beside the last row's values."""
        return {"episodes": self.episodes, "pairs": PAIRS, "max_offset": int(self.offset.max())}


def _rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (tied values share their mean rank; 0 where either is constant)."""
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    norm = math.sqrt(float((ra ** 2).sum() * (rb ** 2).sum()))
    return float((ra * rb).sum() / norm) if norm > 0 else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(x))
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    _, tie = np.unique(x, return_inverse=True)
    return (np.bincount(tie, ranks) / np.bincount(tie))[tie]


def describe(row: dict) -> str:
    """The held-out cells of a progress row as the run's evaluation line says them."""
    parts = [f"D off by {row['held_out_distance_error']:.1f} steps (rank {row['held_out_distance_rank']:.2f})",
             f"action error {row['held_out_action_error']:.3f}"]
    if "graph_joined" in row:
        parts.append(f"graph joined {row['graph_joined']:.2f}")
    return "held out: " + ", ".join(parts)
