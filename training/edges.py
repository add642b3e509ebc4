"""The served graph from the data (``l3p export --graph data``): which landmark edges the recorded
trajectories support, and the d_max that joins the landmarks through them.

A learned value V can call two landmarks on either side of a wall close; the data never crossed
that wall. So an edge i -> j is kept only where an episode of the dataset (offline) or the replay
(online) passes from near landmark i to near landmark j in at most ``SUPPORT_RATIO`` x V(l_i, l_j)
steps. "Near" is within half the median nearest-neighbour distance between the landmarks (goal
space): each recorded step is labelled with its nearest landmark when that close. The server's
graph holds those edges, and an episode's goal joins it through its nearest landmark in the
edges' component (`LandmarkGraph.goal_edges`).

d_max then follows from the graph, not from a sweep: d_connect is the shortest cut at which the
supported edges join every landmark they join at all (one strongly connected component), and the
served d_max is ``D_MAX_MARGIN`` x d_connect. An actor that learned on goals at most k recorded
steps ahead (offline ``actor_goal_steps``) is handed no farther subgoals than those unless the graph
needs it: its reach is the median V between achieved goals k steps apart in one recorded episode,
and d_max is then at most that reach, never below d_connect. Distances from the state are cut at ``LOCAL_CUT`` x
d_max (`PlannerConfig.local_cut`: far estimates from the state cut through walls, the graph's edges
are checked against the data), the route follows the graph's edges from the landmark the state
is at (`PlannerConfig.follow_edges`), and a landmark the agent comes back to without getting
nearer the goal is pruned for the episode (`PlannerConfig.prune_loops`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from l3p.core.search import largest_component

SUPPORT_RATIO = 1.5  # a passage may take this many times V's steps (recorded paths are not shortest)
D_MAX_MARGIN = 1.5  # served d_max = this x d_connect
LOCAL_CUT = 0.5  # served local_cut (fraction of d_max)
LABEL_CHUNK = 65536  # recorded steps labelled per matrix product
REACH_PAIRS = 4096  # recorded pairs V reads for the actor's reach

ValueFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class DataGraph:
    """What the recipe serves: the supported edges and the planner values it derives."""

    supported: np.ndarray  # [N, N] bool, landmark i -> j
    radius: float  # "near a landmark", goal units
    d_connect: float  # steps
    reach: float | None = None  # steps: V across the actor's farthest goals (actor_goal_steps); None: unbounded
    reach_steps: int | None = None  # the recorded steps apart that ``reach`` reads

    @property
    def d_max(self) -> float:
        """``D_MAX_MARGIN`` x d_connect, cut to the actor's reach; never below d_connect, which joins the graph."""
        d = D_MAX_MARGIN * self.d_connect
        if self.reach is not None and self.reach < d:
            d = self.reach
        return max(round(d, 2), math.ceil(self.d_connect * 100) / 100)

    def planner(self) -> dict:
        """The served planner defaults the recipe sets."""
        return {"d_max": self.d_max, "local_cut": LOCAL_CUT, "follow_edges": True, "prune_loops": True}

    def manifest_edges(self) -> dict:
        """The manifest's ``edges`` entry (core/bundle_format.py `supported_edges`)."""
        return {"supported": np.argwhere(self.supported).tolist()}

    def provenance(self) -> dict:
        return {"edges": "data-supported", "support_ratio": SUPPORT_RATIO, "near_radius": round(self.radius, 4),
                "supported_edges": int(self.supported.sum()), "d_connect": self.d_connect,
                "d_max_margin": D_MAX_MARGIN, "local_cut": LOCAL_CUT,
                **({} if self.reach is None else {"reach": round(self.reach, 2), "reach_steps": self.reach_steps})}


def near_labels(goals: np.ndarray, landmarks: np.ndarray, radius: float) -> np.ndarray:
    """Per recorded step, the index of its nearest landmark if within ``radius``, else -1."""
    landmarks = np.asarray(landmarks, np.float64)
    squared = (landmarks ** 2).sum(axis=1)
    labels = np.empty(len(goals), np.int64)
    for start in range(0, len(goals), LABEL_CHUNK):
        chunk = np.asarray(goals[start:start + LABEL_CHUNK], np.float64)
        d2 = squared[None, :] - 2.0 * chunk @ landmarks.T  # |g|^2 is the same along a row
        nearest = np.argmin(d2, axis=1)
        dist2 = d2[np.arange(len(chunk)), nearest] + (chunk ** 2).sum(axis=1)
        labels[start:start + LABEL_CHUNK] = np.where(dist2 <= radius ** 2, nearest, -1)
    return labels


def passages(labels: np.ndarray, bounds: list[tuple[int, int]], n: int) -> np.ndarray:
    """[N, N]: the fewest steps any episode took from leaving near landmark i to arriving near j
    (inf where none did), over episodes ``bounds`` (first, last step)."""
    steps = np.full((n, n), np.inf)
    for first, last in bounds:
        at = np.flatnonzero(labels[first:last + 1] >= 0)
        if at.size < 2:
            continue
        visited = labels[first + at]
        change = np.flatnonzero(np.diff(visited) != 0) + 1  # runs of one label
        starts, ends = np.concatenate([[0], change]), np.concatenate([change, [at.size]]) - 1
        run, arrive, leave = visited[starts], at[starts], at[ends]
        a, b = np.triu_indices(run.size, k=1)
        keep = run[a] != run[b]
        np.minimum.at(steps, (run[a][keep], run[b][keep]), (arrive[b] - leave[a])[keep])
    return steps


def landmark_values(landmarks: np.ndarray, value_fn: ValueFn) -> np.ndarray:
    """V(l_i, l_j) [N, N] in steps (NaN as inf, negatives as 0), inf on the diagonal."""
    n = len(landmarks)
    values = np.asarray(value_fn(np.repeat(landmarks, n, axis=0), np.tile(landmarks, (n, 1))), np.float64)
    w = np.maximum(np.where(np.isnan(values), np.inf, values), 0.0).reshape(n, n)
    np.fill_diagonal(w, np.inf)
    return w


def connecting_cut(w: np.ndarray, supported: np.ndarray) -> float:
    """The shortest cut d at which the supported edges with V <= d join as many landmarks in one
    strongly connected component as all supported edges do."""
    edges = supported & np.isfinite(w)
    lengths = np.unique(w[edges])
    if lengths.size == 0:
        raise ValueError("no supported edge: the data never passes from one landmark to another")
    target = int(largest_component(edges).sum())
    low, high = 0, lengths.size - 1  # lengths[high] joins them: the whole supported graph
    while low < high:
        mid = (low + high) // 2
        if largest_component(edges & (w <= lengths[mid])).sum() >= target:
            high = mid
        else:
            low = mid + 1
    return float(lengths[low])


def actor_reach(goals: np.ndarray, bounds: list[tuple[int, int]], value_fn: ValueFn, steps: int,
                seed: int = 0) -> float:
    """The median V(ag_t, ag_t+steps) over up to ``REACH_PAIRS`` recorded pairs ``steps`` apart in one
    episode: how far, in V's steps, the farthest goals an actor learned on (``actor_goal_steps``) lie."""
    long = [(first, last) for first, last in bounds if last - first >= steps]
    if not long:
        raise ValueError(f"no recorded episode is longer than {steps} steps (actor_goal_steps)")
    rng = np.random.default_rng(seed)
    first, last = np.array(long).T
    pick = rng.integers(0, len(long), REACH_PAIRS)
    t = first[pick] + rng.integers(0, last[pick] - first[pick] - steps + 1)
    values = np.asarray(value_fn(goals[t], goals[t + steps]), np.float64).ravel()
    return float(np.nanmedian(values))


def data_graph(landmarks: np.ndarray, goals: np.ndarray, bounds: list[tuple[int, int]],
               value_fn: ValueFn, reach_steps: int | None = None) -> DataGraph:
    """The recipe on recorded episodes: achieved goals [T, goal_dim], episodes ``bounds``;
    ``reach_steps``: the actor learned on goals at most this many recorded steps ahead (d_max's cap)."""
    supported, radius, w = supported_edges(landmarks, goals, bounds, value_fn)
    reach = None if reach_steps is None else actor_reach(goals, bounds, value_fn, reach_steps)
    return DataGraph(supported, radius, connecting_cut(w, supported), reach, reach_steps)


def supported_edges(landmarks: np.ndarray, goals: np.ndarray, bounds: list[tuple[int, int]],
                    value_fn: ValueFn) -> tuple[np.ndarray, float, np.ndarray]:
    """(supported [N, N] bool, the "near" radius, V between the landmarks [N, N]): the edges the
    recorded episodes pass along (the module docstring)."""
    landmarks = np.asarray(landmarks, np.float64)
    if len(landmarks) < 2:
        raise ValueError("a data-supported graph needs at least 2 landmarks")
    apart = np.sqrt(((landmarks[:, None] - landmarks[None]) ** 2).sum(-1))
    np.fill_diagonal(apart, np.inf)
    radius = float(np.median(apart.min(axis=1))) / 2
    w = landmark_values(landmarks, value_fn)
    steps = passages(near_labels(goals, landmarks, radius), bounds, len(landmarks))
    return np.isfinite(w) & (steps <= SUPPORT_RATIO * w), radius, w
