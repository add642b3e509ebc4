"""The per-landmark-set cache: the goal-independent part of every episode's graph, solved once
(a server's landmarks are the same for every episode)."""

from __future__ import annotations

import collections
import threading

import numpy as np

from l3p.core.config import PlannerConfig
from l3p.core.search import (BLOCK_ELEMENTS, ValueFn, check_weights, cut_edges, largest_component,
                             soft_expectation, soft_factors, soft_goal_columns, as_nodes, uncut_edges,
                             shortest_paths_hard)



class LandmarkGraph:
    """The goal-independent part of every episode's graph, solved once per landmark set.

    Nothing leaves the goal node, so no path between two landmarks passes through it: the
    landmark-landmark edges, their hard solution and every iterate of the soft search are the
    same whatever the goal. They are computed once here (serving: once per bundle); an episode
    start then costs N value_fn calls (landmark -> goal, one batch) and one pass over the goal
    column: hard, min_k D[i, k] + w[k, goal] (exact); soft and expectation, the goal column of
    each iteration from the cached landmark iterate (matrix-vector instead of matrix products).
    `distances_to_goal` equals the module's `distances_to_goal` up to float summation order.

    Solved blocks are kept per search setting (search, d_max, adaptive_cut and, for soft,
    temperature and iterations): those passed to `prepare` for good, the `max_cached` most
    recently used others besides. Memory: soft keeps up to `iterations` iterates of 3 [N, N]
    float64 matrices (80 landmarks, 20 iterations: 3 MB). Thread-safe.

    With `edges` (a bundle's data-supported edges, training/edges.py) only those landmark edges are
    kept, and the goal joins the graph as the data lets it (`goal_edges`): a learned V calls a
    landmark behind a wall near the goal as readily as two landmarks on either side of one.
    """

    def __init__(self, landmarks: np.ndarray, value_fn: ValueFn, max_cached: int = 8,
                 edges: np.ndarray | None = None) -> None:
        landmarks = np.array(landmarks, dtype=np.float32)
        if landmarks.ndim != 2 or landmarks.shape[1] == 0:
            raise ValueError(f"landmarks must have shape [N, goal_dim], got {landmarks.shape}")
        landmarks.flags.writeable = False
        self.landmarks = landmarks
        n = len(landmarks)
        if edges is not None and np.shape(edges) != (n, n):
            raise ValueError(f"edges must have shape [{n}, {n}] (landmark i -> j), got {np.shape(edges)}")
        self._uncut = np.zeros((0, 0))
        self._supported: np.ndarray | None = None
        self._joined = np.zeros(0, np.int64)  # landmarks a goal may join through (goal_edges)
        if edges is not None:
            self._supported = np.array(edges, bool)
            np.fill_diagonal(self._supported, False)
            self._joined = np.flatnonzero(largest_component(self._supported))
        self._joined_at = landmarks[self._joined].astype(np.float64)  # their goal-space points
        self._joined_sq = (self._joined_at ** 2).sum(axis=1)
        if n > 0:
            values = value_fn(np.repeat(landmarks, n, axis=0), np.tile(landmarks, (n, 1)))
            self._uncut = uncut_edges(values, n, n)
            if edges is not None:  # only the edges the data supports (training/edges.py)
                self._uncut[~np.asarray(edges, bool)] = np.inf
            np.fill_diagonal(self._uncut, np.inf)  # self-loops are not edges
        self._max_cached = max_cached
        self._blocks: collections.OrderedDict[tuple, _HardBlock | _SoftBlock] = (
            collections.OrderedDict()
        )
        self._pinned: set[tuple] = set()
        self._lock = threading.Lock()

    def prepare(self, config: PlannerConfig) -> None:
        """Solves the landmark block for `config` now and keeps it (e.g. a bundle's defaults)."""
        config.validate()
        self._block(config)
        with self._lock:
            self._pinned.add(_block_key(config))

    def distances_to_goal(
        self, goal: np.ndarray, value_fn: ValueFn, config: PlannerConfig
    ) -> np.ndarray:
        """d_cg [N+1] like the module's `distances_to_goal` for these landmarks."""
        return self.distances_to_goals(as_nodes(self.landmarks, goal)[-1:], value_fn, config)[0]

    def distances_to_goals(
        self, goals: np.ndarray, value_fn: ValueFn, config: PlannerConfig
    ) -> np.ndarray:
        """d_cg [R, N+1] for R goals [R, goal_dim] (many episodes started together): one
        value_fn call over the R x N (landmark, goal) pairs, and the goal columns solved side
        by side. Each row is exactly what `distances_to_goal` gives for its goal alone."""
        return self.distances_from_steps(self.steps_to_goals(goals, value_fn), config)

    def steps_to_goals(self, goals: np.ndarray, value_fn: ValueFn) -> np.ndarray:
        """The first half of `distances_to_goals`, its one value_fn call: the edges landmark ->
        goal [R, N] in steps, uncut (NaN as inf, negatives as 0)."""
        goals = np.asarray(goals, dtype=np.float32)
        if goals.ndim != 2 or goals.shape[1] != self.landmarks.shape[1]:
            raise ValueError(
                f"goals must have shape [R, {self.landmarks.shape[1]}], got {goals.shape}"
            )
        n, r = len(self.landmarks), len(goals)
        if n == 0 or r == 0:
            return np.zeros((r, n))
        # Pair (goal g, landmark i) at row g * n + i.
        values = value_fn(np.tile(self.landmarks, (r, 1)), np.repeat(goals, n, axis=0))
        steps = uncut_edges(values, r, n)
        joins = self.goal_edges(goals)
        return steps if joins is None else np.where(joins, steps, np.inf)

    def goal_edges(self, goals: np.ndarray) -> np.ndarray | None:
        """[R, N] bool: the landmarks that keep an edge to each goal [R, goal_dim]; None (every
        landmark) without data-supported edges. With them, a goal is reached through its nearest
        landmark (goal space) among those the supported edges join into one component, from that
        landmark or from a landmark with a supported edge to it."""
        if self._supported is None or self._joined.size == 0:
            return None
        goals = np.asarray(goals, np.float64)
        # |l|^2 - 2 l.g orders the landmarks by distance to g (|g|^2 is the same along a row).
        nearest = self._joined[np.argmin(self._joined_sq[None] - 2.0 * goals @ self._joined_at.T, axis=1)]
        joins = self._supported[:, nearest].T.copy()
        joins[np.arange(len(goals)), nearest] = True
        return joins

    def distances_from_steps(self, steps: np.ndarray, config: PlannerConfig) -> np.ndarray:
        """The second half: d_cg [R, N+1] from `steps_to_goals` rows [R, N] (of one call or
        stacked from several: each row is cut and solved on its own), by config's search."""
        r, n = steps.shape
        if n != len(self.landmarks):
            raise ValueError(f"steps must have shape [R, {len(self.landmarks)}], got {steps.shape}")
        d_cg = np.zeros((r, n + 1))
        if n > 0 and r > 0:
            w = cut_edges(steps.T, config.d_max, config.adaptive_cut)  # cut per goal column
            d_cg[:, :n] = self._block(config).goal_columns(np.ascontiguousarray(w.T))
        return d_cg

    def episode_weights(self, goal: np.ndarray, value_fn: ValueFn, config: PlannerConfig) -> np.ndarray:
        """The episode's whole edge matrix [N+1, N+1], equal to `pairwise_graph` for these
        landmarks and this goal, from the cached landmark block: N value_fn calls (landmark ->
        goal). Edges are cut column by column, so the blocks are cut as in the whole graph."""
        nodes = as_nodes(self.landmarks, goal)
        n = len(self.landmarks)
        w = np.full((n + 1, n + 1), np.inf)
        if n > 0:
            w[:n, :n] = cut_edges(self._uncut, config.d_max, config.adaptive_cut)
            w[:n, n] = cut_edges(self.steps_to_goals(nodes[n:], value_fn).T, config.d_max, config.adaptive_cut)[:, 0]
        np.fill_diagonal(w, 0.0)
        return w

    def _block(self, config: PlannerConfig) -> "_HardBlock | _SoftBlock":
        key = _block_key(config)
        with self._lock:  # held while solving: concurrent first uses solve once
            block = self._blocks.get(key)
            if block is None:
                w = cut_edges(self._uncut, config.d_max, config.adaptive_cut)
                if config.search == "hard":
                    block = _HardBlock(w)
                else:
                    block = _SoftBlock(w, config.temperature, config.search_iterations,
                                       guard=config.search == "soft")
                self._blocks[key] = block
                unpinned = [k for k in self._blocks if k not in self._pinned]
                for old in unpinned[: max(0, len(unpinned) - self._max_cached)]:
                    del self._blocks[old]
            self._blocks.move_to_end(key)
        return block


def _block_key(config: PlannerConfig) -> tuple:
    key = (config.search, config.d_max, config.adaptive_cut)
    if config.search == "hard":
        return key
    return key + (config.temperature, config.search_iterations)


class _HardBlock:
    def __init__(self, w: np.ndarray) -> None:
        self.d = shortest_paths_hard(w)  # landmark -> landmark, diagonal 0

    def goal_columns(self, w: np.ndarray) -> np.ndarray:
        """[R, n] distances to R goals from their edges w [R, n] (landmark i -> goal g at [g, i])."""
        r, n = w.shape
        out = np.empty((r, n))
        chunk = max(1, BLOCK_ELEMENTS // max(1, n * n))  # bounds the [chunk, n, n] sums
        for start in range(0, r, chunk):
            goals = slice(start, start + chunk)
            # The last edge of any path to the goal is some k -> goal (k = i: the direct edge).
            out[goals] = np.min(self.d[None] + w[goals, None, :], axis=2, initial=np.inf)
        return out


class _SoftIterate:
    def __init__(self, d: np.ndarray, temperature: float) -> None:
        self.d = d
        with np.errstate(over="ignore", under="ignore"):
            self.a, self.b = soft_factors(d, temperature)
        self.ab = np.hstack([self.a, self.b])  # [n, 2n], for _soft_goal_column's one product
        self.finite_max = float(np.max(d, initial=0.0, where=np.isfinite(d)))


class _SoftBlock:
    """The landmark iterates of `shortest_paths_soft` (guard: search "soft"; without:
    "expectation"), each with its `soft_factors`."""

    def __init__(self, w: np.ndarray, temperature: float, iterations: int, guard: bool) -> None:
        self.temperature, self.iterations, self.guard = temperature, iterations, guard
        self.iterates: list[_SoftIterate] = []
        self.fixed_at = iterations  # first iteration that leaves the block unchanged
        d = check_weights(w)
        for t in range(iterations):
            iterate = _SoftIterate(d, temperature)
            self.iterates.append(iterate)
            new = soft_expectation(d, temperature, (iterate.a, iterate.b))
            if guard:
                np.minimum(d, new, out=new)
            np.fill_diagonal(new, 0.0)
            if np.array_equal(new, d):
                self.fixed_at = t
                break
            d = new

    def goal_columns(self, w: np.ndarray) -> np.ndarray:
        """[R, n] distances to R goals from their edges w [R, n] (landmark i -> goal g at [g, i])."""
        c = np.array(w, dtype=np.float64)
        active = np.arange(len(c))  # goals still iterating
        with np.errstate(over="ignore", under="ignore"):  # see soft_factors
            for t in range(self.iterations):
                block = self.iterates[min(t, len(self.iterates) - 1)]
                current = c[active]
                new = soft_goal_columns(block, current, self.temperature)
                if self.guard:
                    np.minimum(current, new, out=new)
                c[active] = new
                # shortest_paths_soft stops once its whole matrix is unchanged: block and column.
                if t >= self.fixed_at:
                    active = active[~(new == current).all(axis=1)]
                    if active.size == 0:
                        break
        return c

