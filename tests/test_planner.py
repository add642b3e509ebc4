"""Tests for the planner core (core/): graph building, hard/soft search, and Algorithm 1.

Two synthetic worlds stand in for the learned networks:
- table world: node k is the 1-d point [k]; V and D are read from test-chosen tables and
  the action returned for candidate row k is one-hot(k), so each pick is checked exactly;
- plane world: points in 2-d, D = V = a "locally accurate" step count (euclidean up to 8
  steps, 3x pessimistic beyond, so long hops lose to landmark routes, as with a learned D),
  and the policy takes a unit step toward its goal.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter

import numpy as np
import pytest

from l3p.core.names import MIN_TEMPERATURE
from l3p.core import (
    DISTANCE,
    MODES,
    POLICY,
    SEARCHES,
    EpisodePlanner,
    LandmarkGraph,
    PlannerConfig,
    StepResult,
    distances_to_goal,
    pairwise_graph,
    shortest_paths_hard,
    shortest_paths_soft,
)

INF = np.inf


# ----------------------------------------------------------------------------- helpers


def dijkstra_all_pairs(w: np.ndarray) -> np.ndarray:
    """Independent reference: one textbook Dijkstra per source (w >= 0, inf = no edge)."""
    n = len(w)
    out = np.full((n, n), INF)
    for src in range(n):
        dist = [INF] * n
        dist[src] = 0.0
        heap = [(0.0, src)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for v in range(n):
                if v != u and w[u, v] < INF and d + w[u, v] < dist[v]:
                    dist[v] = d + w[u, v]
                    heapq.heappush(heap, (dist[v], v))
        out[src] = dist
    return out


def brute_force_all_pairs(w: np.ndarray) -> np.ndarray:
    """Second reference for tiny graphs: minimum over every simple path."""
    n = len(w)
    out = np.full((n, n), INF)
    for i, j in itertools.product(range(n), repeat=2):
        if i == j:
            out[i, j] = 0.0
            continue
        others = [k for k in range(n) if k not in (i, j)]
        for r in range(len(others) + 1):
            for mid in itertools.permutations(others, r):
                path = (i, *mid, j)
                out[i, j] = min(out[i, j], sum(w[a, b] for a, b in zip(path, path[1:])))
    return out


def known_graphs() -> dict[str, np.ndarray]:
    """Small directed graphs with known answers: shortcuts, one-way edges, isolated nodes."""
    g = {}
    # 0 -> 1 -> 2 -> 3 is cheaper (3) than the direct 0 -> 3 (10); 4 is isolated.
    w = np.full((5, 5), INF)
    w[0, 1], w[1, 2], w[2, 3], w[0, 3], w[3, 0] = 1.0, 1.0, 1.0, 10.0, 2.0
    g["shortcut_and_isolated"] = w
    # Two components {0, 1, 2} and {3, 4}; one-way edges only.
    w = np.full((5, 5), INF)
    w[0, 1], w[1, 2], w[2, 0], w[3, 4] = 2.0, 3.5, 1.0, 0.5
    g["two_components"] = w
    # Diamond with two equal routes and a zero-weight edge.
    w = np.full((4, 4), INF)
    w[0, 1], w[0, 2], w[1, 3], w[2, 3], w[3, 1] = 1.0, 2.0, 2.0, 1.0, 0.0
    g["diamond_ties_zero_edge"] = w
    # No edges at all.
    g["empty"] = np.full((3, 3), INF)
    # Random sparse graphs (about 30% of the edges).
    for seed in range(3):
        rng = np.random.default_rng(seed)
        w = rng.uniform(0.5, 9.0, size=(7, 7))
        w[rng.random((7, 7)) > 0.3] = INF
        g[f"random_sparse_{seed}"] = w
    for w in g.values():
        np.fill_diagonal(w, 0.0)
    return g


def assert_same_distances(actual: np.ndarray, expected: np.ndarray, atol: float = 1e-9) -> None:
    np.testing.assert_array_equal(np.isinf(actual), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=0, atol=atol)


def soft_bound(n: int, temperature: float) -> float:
    """Documented worst case of soft - exact: (hops - 1) * temperature * ln(n), hops <= n - 1."""
    return max(n - 2, 0) * temperature * math.log(n)


# Table world: node k is the 1-d point [k]; tables are indexed by those integer ids.
def table_value_fn(table: np.ndarray, calls: list | None = None):
    def value_fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if calls is not None:
            calls.append((a.copy(), b.copy()))
        return table[a[:, 0].astype(int), b[:, 0].astype(int)]

    return value_fn


def table_nodes(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(n, dtype=np.float32)[:, None], np.array([n], dtype=np.float32)


class TableDistance:
    """distance_fn returning preset d_sc; the action for candidate row k is one-hot(k)."""

    def __init__(self, d_sc) -> None:
        self.d_sc = np.asarray(d_sc, dtype=np.float64)
        self.calls = 0

    def __call__(self, obs: np.ndarray, goals: np.ndarray):
        self.calls += 1
        k = len(goals)
        assert obs.shape[0] == k and k == self.d_sc.size
        return self.d_sc.copy(), np.eye(k, dtype=np.float32)


def no_policy(obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
    raise AssertionError("policy_fn must not be called here")


def no_distance(obs: np.ndarray, goals: np.ndarray):
    raise AssertionError("distance_fn must not be called here")


def zero_policy(obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
    return np.zeros((1, 5), np.float32)


def const_policy(obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
    return np.zeros((len(obs), 3), np.float32)


# Plane world.
def plane_steps(e: np.ndarray) -> np.ndarray:
    return np.where(e <= 8.0, e, 8.0 + 3.0 * (e - 8.0))


def plane_value_fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return plane_steps(np.linalg.norm(b.astype(np.float64) - a, axis=1))


def unit(v: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(norm, 1e-12)


class PlaneFns:
    """Counting distance_fn / policy_fn for the plane world (obs = position)."""

    def __init__(self) -> None:
        self.distance_calls: list[tuple[np.ndarray, np.ndarray]] = []
        self.policy_goals: list[np.ndarray] = []

    def distance_fn(self, obs: np.ndarray, goals: np.ndarray):
        self.distance_calls.append((obs.copy(), goals.copy()))
        diff = goals.astype(np.float64) - obs
        return plane_steps(np.linalg.norm(diff, axis=1)), unit(diff)

    def policy_fn(self, obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
        self.policy_goals.append(goals.copy())
        return unit(goals.astype(np.float64) - obs)


def plane_landmarks(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A jittered 7x7 grid over [0, 36]^2 and the goal at the far corner."""
    rng = np.random.default_rng(seed)
    gx, gy = np.meshgrid(np.arange(0.0, 37.0, 6.0), np.arange(0.0, 37.0, 6.0))
    landmarks = np.stack([gx.ravel(), gy.ravel()], axis=1) + rng.uniform(-1, 1, (gx.size, 2))
    return landmarks, np.array([40.0, 40.0])


def run_plane_episode(config: PlannerConfig, steps: int = 120, seed: int | None = 0):
    landmarks, goal = plane_landmarks()
    planner = EpisodePlanner(landmarks, goal, plane_value_fn, config, seed=seed)
    fns = PlaneFns()
    obs, trace = np.zeros(2), []
    for _ in range(steps):
        result = planner.step(obs, fns.distance_fn, fns.policy_fn)
        trace.append(result)
        obs = obs + result.action
        if np.linalg.norm(obs - goal) < 1.0:
            break
    return planner, fns, trace, obs, goal


def random_point_graph(seed: int = 1) -> np.ndarray:
    """80 landmarks + goal uniform in a 10x10 square, V = euclidean / 0.1 (steps), d_max 15."""
    points = np.random.default_rng(seed).uniform(0.0, 10.0, size=(81, 2))

    def value_fn(a, b):
        return np.linalg.norm(b.astype(np.float64) - a, axis=1) / 0.1

    return pairwise_graph(points[:80], points[80], value_fn, d_max=15.0, adaptive_cut=True)


# ------------------------------------------------------------------------------ search


@pytest.mark.parametrize("name", sorted(known_graphs()))
def test_hard_search_matches_dijkstra(name: str) -> None:
    w = known_graphs()[name]
    assert_same_distances(shortest_paths_hard(w), dijkstra_all_pairs(w))


def test_hard_search_known_values_and_brute_force() -> None:
    w = known_graphs()["shortcut_and_isolated"]
    d = shortest_paths_hard(w)
    assert d[0, 3] == 3.0  # via 1, 2 instead of the direct 10
    assert d[3, 2] == 4.0  # 3 -> 0 -> 1 -> 2
    assert np.all(np.isinf(d[4, :4])) and np.all(np.isinf(d[:4, 4]))  # isolated node
    assert_same_distances(d, brute_force_all_pairs(w))
    assert_same_distances(shortest_paths_hard(known_graphs()["random_sparse_0"]),
                          brute_force_all_pairs(known_graphs()["random_sparse_0"]))


def test_hard_search_on_cut_graph_matches_dijkstra() -> None:
    w = random_point_graph()
    assert np.isinf(w).sum() > w.size // 2  # the cut really removed most edges
    assert_same_distances(shortest_paths_hard(w), dijkstra_all_pairs(w), atol=1e-9)


@pytest.mark.parametrize("name", sorted(known_graphs()))
def test_soft_search_at_tiny_temperature_is_exact(name: str) -> None:
    w = known_graphs()[name]
    assert_same_distances(shortest_paths_soft(w, 1e-3, 20), dijkstra_all_pairs(w))


@pytest.mark.parametrize("name", sorted(known_graphs()))
def test_soft_search_at_paper_temperature(name: str) -> None:
    w = known_graphs()[name]
    exact = dijkstra_all_pairs(w)
    with np.errstate(all="raise"):  # no NaN / inf arithmetic warnings anywhere
        soft = shortest_paths_soft(w, 1.1, 20)
    assert np.all(np.diag(soft) == 0.0)
    np.testing.assert_array_equal(np.isfinite(soft), np.isfinite(exact))
    finite = np.isfinite(exact)
    excess = soft[finite] - exact[finite]
    assert excess.min() >= -1e-9  # the expectation form is never shorter than exact
    assert excess.max() <= soft_bound(len(w), 1.1)
    assert excess.max() <= 1.0  # measured on these graphs: well under the bound


def test_soft_search_known_small_values() -> None:
    # 0 -> 1 -> 2 (2 + 2) vs direct 0 -> 2 (5): the soft value is between exact and direct.
    w = np.array([[0.0, 2.0, 5.0], [INF, 0.0, 2.0], [INF, INF, 0.0]])
    soft = shortest_paths_soft(w, 1.1, 20)
    assert 4.0 <= soft[0, 2] < 4.01  # 0.446 above exact after one iteration, then decays
    assert soft[0, 1] == 2.0 and soft[1, 2] == 2.0
    assert np.all(np.isinf(soft[np.tril_indices(3, -1)]))


def test_soft_search_80_node_graph_no_diagonal_drift() -> None:
    w = random_point_graph()
    exact = shortest_paths_hard(w)
    soft = shortest_paths_soft(w, 1.1, 20)
    assert np.all(np.diag(soft) == 0.0)  # the update as written drifts to 85 steps here
    np.testing.assert_array_equal(np.isfinite(soft), np.isfinite(exact))
    finite = np.isfinite(exact)
    excess = np.where(finite, soft - np.where(finite, exact, 0.0), 0.0)
    # Measured: max 1.55 steps over all pairs, 1.42 on the node -> goal column (paths up
    # to ~150 steps); mean 0.37.
    assert excess[finite].min() >= -1e-9
    assert excess[finite].max() <= 2.0
    assert excess[finite].mean() <= 0.5
    goal_col = excess[:, -1][finite[:, -1]]
    assert goal_col.max() <= 2.0
    # At tiny temperature the same graph is solved exactly (near-ties within 1e-6 mix).
    assert_same_distances(shortest_paths_soft(w, 1e-3, 20), exact, atol=1e-6)


def test_soft_search_blocks_rows_like_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    import l3p.core.search as planner_module

    w = known_graphs()["random_sparse_1"]
    whole = shortest_paths_soft(w, 1.1, 5)
    monkeypatch.setattr(planner_module, "BLOCK_ELEMENTS", 2 * 7 * 7)  # 2 rows a block
    np.testing.assert_allclose(shortest_paths_soft(w, 1.1, 5), whole, rtol=0, atol=1e-12)


def soft_reference(w: np.ndarray, temperature: float, iterations: int) -> np.ndarray:
    """The soft update straight from its docstring: one [i, k, j] candidate tensor per
    iteration, an exact softmin (no floors, no fast path) and no early exit."""
    d = np.array(w, dtype=np.float64)
    np.fill_diagonal(d, 0.0)
    for _ in range(iterations):
        with np.errstate(invalid="ignore", under="ignore", over="ignore", divide="ignore"):
            cand = d[:, :, None] + d[None, :, :]  # cand[i, k, j] = d_ik + d_kj
            finite = np.isfinite(cand)
            best = cand.min(axis=1, keepdims=True)
            weights = np.where(finite, np.exp(-(cand - best) / temperature), 0.0)
            mean = np.where(finite, weights * cand, 0.0).sum(axis=1) / weights.sum(axis=1)
            expectation = np.where(np.isfinite(best[:, 0]), mean, INF)
        d = np.minimum(d, expectation)
        np.fill_diagonal(d, 0.0)
    return d


def soft_test_graphs() -> dict[str, np.ndarray]:
    """Graphs for the soft search: the known ones, random ones, zero / tiny edges, and
    two-way chains whose long paths (up to ~1000 steps, ~900 temperatures at 1.1) fall
    outside the BLAS fast path of the implementation, alone or mixed with short pairs."""
    g = dict(known_graphs())
    rng = np.random.default_rng(5)
    for n in (12, 40):
        w = rng.uniform(0.5, 30.0, (n, n))
        w[rng.random((n, n)) > 0.2] = INF
        g[f"random_{n}"] = w
        w = rng.uniform(0.0, 3.0, (n, n))
        w[rng.random((n, n)) > 0.3] = INF
        w[rng.random((n, n)) < 0.05] = 0.0
        w[rng.random((n, n)) < 0.05] = 1e-200  # b = a * w must not go subnormal
        g[f"zero_and_tiny_edges_{n}"] = w
        w = np.full((n, n), INF)
        hops = np.arange(n - 1)
        w[hops, hops + 1] = rng.uniform(5.0, 40.0, n - 1)
        w[hops + 1, hops] = rng.uniform(5.0, 40.0, n - 1)
        g[f"long_chain_{n}"] = w
    for w in g.values():
        np.fill_diagonal(w, 0.0)
    return g


@pytest.mark.parametrize("temperature", [1e-3, 0.1, 1.1, 5.0])
@pytest.mark.parametrize("name", sorted(soft_test_graphs()))
def test_soft_search_matches_reference(name: str, temperature: float) -> None:
    w = soft_test_graphs()[name]
    expected = soft_reference(w, temperature, 20)
    with np.errstate(all="raise"):  # no stray floating-point warnings on any path
        soft = shortest_paths_soft(w, temperature, 20)
    assert np.all(np.diag(soft) == 0.0)
    # Fast path and rounding guard: ~1e-10 steps on paths of up to ~1000 steps.
    assert_same_distances(soft, expected, atol=1e-8)
    exact = dijkstra_all_pairs(w)
    finite = np.isfinite(exact)
    assert (soft[finite] - exact[finite]).min() >= -1e-9  # never shorter than exact



def test_soft_search_is_never_shorter_than_exact() -> None:
    # Integer weights: every path length is exact in floating point, so the documented
    # bound soft >= exact must hold with no tolerance at all (float rounding included).
    rng = np.random.default_rng(11)
    for n in (6, 20, 45):
        for _ in range(5):
            w = rng.integers(1, 30, (n, n)).astype(np.float64)
            w[rng.random((n, n)) > 0.25] = INF
            exact = shortest_paths_hard(w)
            for temperature in (0.1, 1.1, 5.0):
                soft = shortest_paths_soft(w, temperature, 20)
                np.testing.assert_array_equal(np.isfinite(soft), np.isfinite(exact))
                finite = np.isfinite(exact)
                assert np.all(soft[finite] >= exact[finite])

def test_soft_search_80_node_graph_matches_reference() -> None:
    w = random_point_graph()
    assert_same_distances(shortest_paths_soft(w, 1.1, 20), soft_reference(w, 1.1, 20), atol=1e-9)


def test_soft_search_fast_path_matches_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import l3p.core.search as planner_module

    w = random_point_graph()
    fast = shortest_paths_soft(w, 1.1, 20)
    # A zero error budget sends every pair through the exact per-pair path; small blocks.
    monkeypatch.setattr(planner_module, "_SOFT_FAST_ATOL", 0.0)
    monkeypatch.setattr(planner_module, "BLOCK_ELEMENTS", 81 * 100)
    exact_path = shortest_paths_soft(w, 1.1, 20)
    assert_same_distances(fast, exact_path, atol=1e-9)
    monkeypatch.setattr(planner_module, "BLOCK_ELEMENTS", 1 << 20)  # one block
    np.testing.assert_array_equal(shortest_paths_soft(w, 1.1, 20), exact_path)


def test_soft_search_early_exit_returns_the_fixed_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import l3p.core.search as planner_module

    real_update = planner_module.soft_expectation
    calls: list[int] = []

    def counting_update(d: np.ndarray, temperature: float) -> np.ndarray:
        calls.append(1)
        return real_update(d, temperature)

    monkeypatch.setattr(planner_module, "soft_expectation", counting_update)
    cases = [
        (soft_test_graphs()["long_chain_40"], 1e-3, 20),  # min-plus squaring: ~log2(n) steps
        (random_point_graph(), 1.1, 200),  # the fast path also reaches a float fixed point
        (known_graphs()["two_components"], 1.1, 500),  # nothing to relax: 1 step + 1 check
    ]
    for w, temperature, budget in cases:
        calls.clear()
        settled = shortest_paths_soft(w, temperature, budget)
        assert len(calls) < budget  # it stopped early ...
        # ... at a fixed point of the update, i.e. exactly what the remaining iterations return.
        again = np.minimum(settled, real_update(settled, temperature))
        np.fill_diagonal(again, 0.0)
        np.testing.assert_array_equal(again, settled)
        assert_same_distances(settled, soft_reference(w, temperature, len(calls)), atol=1e-8)


def test_soft_search_degenerate_sizes() -> None:
    assert shortest_paths_soft(np.zeros((0, 0)), 1.1, 3).shape == (0, 0)
    np.testing.assert_array_equal(shortest_paths_soft(np.zeros((1, 1)), 1.1, 3), [[0.0]])
    np.testing.assert_array_equal(shortest_paths_soft(np.full((2, 2), INF), 1.1, 3),
                                  [[0.0, INF], [INF, 0.0]])


def test_search_rejects_bad_weights() -> None:
    with pytest.raises(ValueError, match="square"):
        shortest_paths_hard(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=">= 0"):
        shortest_paths_soft(np.array([[0.0, -1.0], [1.0, 0.0]]), 1.1, 5)
    with pytest.raises(ValueError, match="NaN"):
        shortest_paths_hard(np.array([[0.0, np.nan], [1.0, 0.0]]))


# ------------------------------------------------------------------------------- graph


def test_pairwise_graph_cut_adaptive_and_goal_row() -> None:
    # Nodes 0, 1, 2 are landmarks, 3 is the goal. V is asymmetric; d_max = 5.
    table = np.array(
        [
            [0.0, 3.0, 9.0, 8.0],
            [4.0, 0.0, 5.0, 7.0],
            [6.0, 12.0, 0.0, -2.0],  # a slightly negative prediction
            [1.0, 1.0, 1.0, 0.0],  # goal row: must be ignored
        ]
    )
    calls: list = []
    landmarks, goal = table_nodes(3)
    w = pairwise_graph(landmarks, goal, table_value_fn(table, calls), 5.0, adaptive_cut=False)
    assert len(calls) == 1 and len(calls[0][0]) == 3 * 4  # one batched call, N x (N+1) pairs
    expected = np.array(
        [
            [0.0, 3.0, INF, INF],
            [4.0, 0.0, 5.0, INF],  # 5.0 == d_max is kept
            [INF, INF, 0.0, 0.0],  # -2 clamped to 0
            [INF, INF, INF, 0.0],  # nothing leaves the goal
        ]
    )
    np.testing.assert_array_equal(w, expected)

    # Each column's nearest incoming edge is already <= 5, so the adaptive cut adds nothing.
    w = pairwise_graph(landmarks, goal, table_value_fn(table), 5.0, adaptive_cut=True)
    np.testing.assert_array_equal(w, expected)
    # With d_max = 2 only 2 -> 3 survives the cut; the adaptive cut restores exactly the
    # nearest incoming edge of columns 0 (1 -> 0), 1 (0 -> 1) and 2 (1 -> 2), not 1 -> 3 (7).
    w = pairwise_graph(landmarks, goal, table_value_fn(table), 2.0, adaptive_cut=False)
    assert np.isfinite(w).sum() == 4 + 1  # the diagonal and 2 -> 3
    w = pairwise_graph(landmarks, goal, table_value_fn(table), 2.0, adaptive_cut=True)
    np.testing.assert_array_equal(w, expected)


def test_pairwise_graph_adaptive_cut_connects_far_goal() -> None:
    # Landmarks 0 and 1 are 3 steps apart; the goal is 20 and 30 steps from them.
    table = np.array([[0.0, 3.0, 20.0], [3.0, 0.0, 30.0], [0.0, 0.0, 0.0]])
    landmarks, goal = table_nodes(2)
    w_hard_cut = pairwise_graph(landmarks, goal, table_value_fn(table), 15.0, adaptive_cut=False)
    assert np.all(np.isinf(w_hard_cut[:2, 2]))
    w = pairwise_graph(landmarks, goal, table_value_fn(table), 15.0, adaptive_cut=True)
    assert w[0, 2] == 20.0 and np.isinf(w[1, 2])  # only the nearest incoming edge survives
    assert shortest_paths_hard(w)[1, 2] == 23.0
    np.testing.assert_array_equal(w[2], [INF, INF, 0.0])


def test_pairwise_graph_nan_is_no_edge_and_zero_landmarks() -> None:
    table = np.array([[0.0, np.nan], [0.0, 0.0]])
    landmarks, goal = table_nodes(1)
    w = pairwise_graph(landmarks, goal, table_value_fn(table), 15.0, adaptive_cut=True)
    np.testing.assert_array_equal(w, [[0.0, INF], [INF, 0.0]])

    calls: list = []
    w = pairwise_graph(np.zeros((0, 2)), np.ones(2), table_value_fn(table, calls), 15.0, True)
    np.testing.assert_array_equal(w, [[0.0]])
    assert calls == []  # no pairs: the value network is not called with an empty batch


def test_distances_to_goal_hard_and_soft() -> None:
    table = np.array([[0.0, 3.0, 20.0], [3.0, 0.0, 30.0], [0.0, 0.0, 0.0]])
    landmarks, goal = table_nodes(2)
    hard = distances_to_goal(landmarks, goal, table_value_fn(table), PlannerConfig(search="hard"))
    np.testing.assert_array_equal(hard, [20.0, 23.0, 0.0])
    soft = distances_to_goal(landmarks, goal, table_value_fn(table), PlannerConfig())
    assert soft[-1] == 0.0 and soft[0] == 20.0 and 23.0 <= soft[1] <= 23.0 + 1.1 * math.log(3)


# ----------------------------------------------------------------------------- planner


def make_table_planner(d_cg_table: np.ndarray, **config) -> EpisodePlanner:
    n = len(d_cg_table) - 1
    landmarks, goal = table_nodes(n)
    cfg = PlannerConfig(search="hard", **config)
    return EpisodePlanner(landmarks, goal, table_value_fn(d_cg_table), cfg, seed=0)


def chain_table(n: int, hop: float = 4.0) -> np.ndarray:
    """V for a chain 0 -> 1 -> ... -> n-1 -> goal with `hop` steps per edge (far pairs cut)."""
    table = np.full((n + 1, n + 1), 100.0)
    np.fill_diagonal(table, 0.0)
    for k in range(n):
        table[k, k + 1] = hop
    return table


def test_replan_picks_argmin_of_total_with_one_hot_action() -> None:
    planner = make_table_planner(chain_table(3), local_horizon=0.0)
    np.testing.assert_array_equal(planner.landmark_to_goal, [12.0, 8.0, 4.0])
    dist = TableDistance([2.0, 5.0, 13.0, 40.0])  # totals 14, 13, 17, 40
    result = planner.step(np.zeros(3), dist, no_policy)
    assert isinstance(result, StepResult)
    assert (result.subgoal_index, result.replanned, result.counter) == (1, True, 6)
    assert result.estimated_distance == 5.0
    np.testing.assert_array_equal(result.action, [0, 1, 0, 0])  # the picked row's action
    np.testing.assert_array_equal(result.subgoal, [1.0])
    assert (dist.calls, planner.replans, planner.step_count) == (1, 1, 1)


def test_counter_counts_down_then_replans_with_exclusion() -> None:
    planner = make_table_planner(chain_table(3), local_horizon=0.0, counter_extra=1)
    dist = TableDistance([2.0, 3.0, 6.0, 40.0])  # totals 14, 11, 10 -> pick 2, counter 7
    policy_goals = []

    def policy(obs, goals):
        policy_goals.append(goals[0, 0])
        return np.full((1, 4), 7.0, np.float32)

    first = planner.step(np.zeros(3), dist, policy)
    assert (first.subgoal_index, first.counter, first.replanned) == (2, 7, True)
    for expected_counter in range(6, -1, -1):  # the next K = 7 steps report 6 .. 0
        r = planner.step(np.zeros(3), dist, policy)
        assert (r.subgoal_index, r.counter, r.replanned) == (2, expected_counter, False)
        assert r.estimated_distance == 0.0
        np.testing.assert_array_equal(r.action, [7.0] * 4)
    assert policy_goals == [2.0] * 7  # the policy chased the kept subgoal, batch 1
    second = planner.step(np.zeros(3), dist, policy)
    # Same d_sc, but landmark 2 (being replaced) is excluded: next best is 1 (total 11).
    assert (second.subgoal_index, second.replanned, second.counter) == (1, True, 4)
    third = [planner.step(np.zeros(3), dist, policy) for _ in range(5)][-1]
    assert (third.subgoal_index, third.replanned) == (2, True)  # 1 excluded now, 2 allowed
    assert (dist.calls, planner.replans, planner.step_count) == (3, 3, 14)


def test_cut_landmarks_never_committed_and_counter_cap() -> None:
    # Landmark 0 has the best total but d_sc > d_max: it is cut.
    planner = make_table_planner(chain_table(2), local_horizon=0.0, d_max=7.3, counter_extra=5)
    dist = TableDistance([7.31, 7.0, 40.0])  # totals: 15.31 (cut: 7.31 > d_max), 11, 40
    result = planner.step(np.zeros(3), dist, no_policy)
    assert result.subgoal_index == 1
    assert result.counter == 8  # min(round(7.0) + 5, ceil(7.3)) = min(12, 8)
    # Every landmark cut: the goal (never cut) is pursued, counter capped at ceil(d_max).
    planner = make_table_planner(chain_table(2), local_horizon=0.0, d_max=7.3)
    result = planner.step(np.zeros(3), TableDistance([7.5, 30.0, 40.0]), no_policy)
    assert (result.subgoal_index, result.counter, result.estimated_distance) == (-1, 8, 40.0)
    np.testing.assert_array_equal(result.action, [0, 0, 1])


def test_nothing_reachable_falls_back_to_goal_without_commitment() -> None:
    planner = make_table_planner(chain_table(2), local_horizon=0.0)
    result = planner.step(np.zeros(3), TableDistance([np.nan, 30.0, np.inf]), no_policy)
    assert (result.subgoal_index, result.counter, result.replanned) == (-1, 0, True)
    assert result.estimated_distance == INF
    # Counter 0: the very next step re-plans again.
    assert planner.step(np.zeros(3), TableDistance([1.0, 1.0, 50.0]), no_policy).replanned


def test_far_goal_is_cut_like_a_landmark_while_one_is_usable() -> None:
    # The goal's own D (20) beats every landmark route (2 + 8 = 10 is not, 25 is), but 20 >
    # d_max: like the reference code, the goal is cut while a landmark is usable ...
    planner = make_table_planner(chain_table(2), local_horizon=0.0, d_max=15.0)
    result = planner.step(np.zeros(3), TableDistance([14.0, 12.0, 20.0]), no_policy)
    assert result.subgoal_index == 1  # totals: 14 + 8 = 22, 12 + 4 = 16; the goal (20) is cut
    # ... within d_max the goal competes on its total as before ...
    planner = make_table_planner(chain_table(2), local_horizon=0.0, d_max=15.0)
    assert planner.step(np.zeros(3), TableDistance([14.0, 12.0, 15.0]), no_policy).subgoal_index == -1
    # ... and a landmark that cannot reach the goal does not count as usable.
    table = chain_table(2)
    table[1, 2] = 100.0
    planner = make_table_planner(table, local_horizon=0.0, d_max=15.0, adaptive_cut=False)
    assert np.isinf(planner.landmark_to_goal).all()
    assert planner.step(np.zeros(3), TableDistance([1.0, 1.0, 20.0]), no_policy).subgoal_index == -1


def wormhole_table() -> np.ndarray:
    """Landmark 0 claims to be 4 steps from the goal (a wall the robot cannot cross); the
    honest route is 1 -> 2 -> goal (4 + 4 steps); landmark 3 reaches the goal only via 0."""
    table = np.full((5, 5), 100.0)
    np.fill_diagonal(table, 0.0)
    table[0, 4] = 4.0
    table[1, 2] = table[2, 4] = 4.0
    table[3, 0] = 4.0
    return table


def run_stuck_robot(prune_failed: bool, steps: int = 40) -> tuple[EpisodePlanner, list[int]]:
    """The robot never moves: D(state, .) is fixed, so no subgoal is ever reached."""
    planner = make_table_planner(wormhole_table(), local_horizon=0.0, d_max=15.0,
                                 prune_failed=prune_failed)
    dist = TableDistance([5.0, 5.0, 9.0, 6.0, 30.0])  # totals 9, 13, 13, 14, (goal cut)
    results = [planner.step(np.zeros(3), dist, zero_policy) for _ in range(steps)]
    return planner, [r.subgoal_index for r in results if r.replanned]


def test_prune_failed_removes_a_subgoal_the_robot_cannot_reach() -> None:
    # Algorithm 1 alone: after the failed wormhole it takes 1, then returns to the wormhole
    # (only the subgoal being replaced is excluded), for ever.
    planner, picks = run_stuck_robot(prune_failed=False)
    assert picks[:4] == [0, 1, 0, 1] and planner.pruned == 0
    # prune_failed: the wormhole's counter ran out with D still 5 > max(3, 0.5 * 5): pruned.
    # Its incoming edges go and d_cg is solved again, so landmark 3 (which reached the goal
    # only through 0) is unusable too; every later subgoal fails in turn and is pruned, until
    # none is left with a route: the graph is restored rather than the far goal (30 > d_max)
    # pursued, and the tries begin again.
    planner, picks = run_stuck_robot(prune_failed=True)
    assert picks[:6] == [0, 1, 2, 0, 1, 2]
    assert 3 not in picks and -1 not in picks and planner.pruned < 3
    np.testing.assert_array_equal(planner.landmark_to_goal, [4.0, 8.0, 4.0, 8.0])  # as started


def test_prune_failed_restores_the_graph_only_when_no_route_is_left() -> None:
    # Two routes: 0 -> goal and 1 -> goal; the goal is far (40 > d_max). The robot is stuck.
    table = np.full((3, 3), 100.0)
    np.fill_diagonal(table, 0.0)
    table[0, 2] = table[1, 2] = 4.0
    planner = make_table_planner(table, local_horizon=0.0, d_max=15.0, prune_failed=True)
    dist = TableDistance([5.0, 6.0, 40.0])
    replans = []
    for _ in range(20):
        result = planner.step(np.zeros(3), dist, zero_policy)
        if result.replanned:
            replans.append((result.subgoal_index, planner.pruned))
    # 0 fails and is pruned while 1 still has a route; then 1 fails too: no route is left, so
    # both are restored and 0 (1 is the subgoal being replaced) is tried again.
    assert replans[:3] == [(0, 0), (1, 1), (0, 0)]
    # With the goal within d_max, a dead end still falls back on the goal (nothing is restored).
    planner = make_table_planner(table, local_horizon=0.0, d_max=15.0, prune_failed=True)
    dist = TableDistance([5.0, 6.0, 12.0])  # totals 9, 10, and the goal 12
    picks = [r.subgoal_index for r in (planner.step(np.zeros(3), dist, zero_policy) for _ in range(30))
             if r.replanned]
    assert picks[:3] == [0, 1, -1] and planner.pruned == 2


@pytest.mark.parametrize("search", SEARCHES)
def test_prune_failed_on_a_landmark_graph_acts_like_the_plain_planner(search: str) -> None:
    # A plane with a wall V does not know about: the robot (obs = position) cannot cross x = 15
    # below y = 30, so subgoals beyond it fail and are pruned.
    landmarks, goal = plane_landmarks()
    config = PlannerConfig(search=search, prune_failed=True, local_horizon=0.0)

    def blocked(obs, action):
        nxt = obs + action
        return obs if (obs[0] < 15.0 <= nxt[0] or nxt[0] < 15.0 <= obs[0]) and nxt[1] < 30.0 else nxt

    plain = EpisodePlanner(landmarks, goal, plane_value_fn, config)
    cached = EpisodePlanner(LandmarkGraph(landmarks, plane_value_fn), goal, plane_value_fn, config)
    obs = assert_same_decisions(plain, cached, 150, blocked)
    assert plain.pruned == cached.pruned > 0
    assert np.linalg.norm(obs - goal) < 1.0  # it went round the wall to the goal
    # Algorithm 1 alone stays at the wall, alternating between subgoals behind it.
    stuck = EpisodePlanner(landmarks, goal, plane_value_fn, config.replace(prune_failed=False))
    fns, obs = PlaneFns(), np.zeros(2)
    for _ in range(150):
        obs = blocked(obs, stuck.step(obs, fns.distance_fn, fns.policy_fn).action)
    assert obs[0] < 15.0 and stuck.pruned == 0


def test_prune_failed_keeps_reached_subgoals_and_skips_the_one_it_is_at() -> None:
    table = chain_table(3)
    planner = make_table_planner(table, local_horizon=0.0, prune_failed=True)
    dist = TableDistance([0.5, 6.0, 9.0, 40.0])  # totals 12.5 (at 0: skipped), 14, 13
    first = planner.step(np.zeros(3), dist, no_policy)
    assert (first.subgoal_index, first.counter) == (2, 10)
    for _ in range(10):
        planner.step(np.zeros(3), dist, zero_policy)
    dist.d_sc[:] = [12.0, 4.0, 4.0, 40.0]  # progress: 9 -> 4 <= max(3, 0.5 * 9): reached
    second = planner.step(np.zeros(3), dist, zero_policy)
    assert second.replanned and second.subgoal_index == 1 and planner.pruned == 0
    # Two landmarks at the robot's spot: without prune_failed it alternates between them.
    table = np.full((4, 4), 6.0)
    np.fill_diagonal(table, 0.0)
    dist = TableDistance([0.1, 0.2, 6.0, 30.0])
    for prune, expected in ((False, [0, 1, 0, 1]), (True, [2])):
        planner = make_table_planner(table, local_horizon=0.0, prune_failed=prune)
        results = [planner.step(np.zeros(3), dist, zero_policy) for _ in range(8)]
        picks = [r.subgoal_index for r in results if r.replanned]
        assert picks[: len(expected)] == expected


def test_require_progress_ends_the_alternation_between_two_landmarks() -> None:
    # Two landmarks 3 steps apart, 9 and 8 from the goal; D from either to the goal is 30
    # (beyond d_max), so the goal stays cut while a landmark is usable. Algorithm 1 excludes
    # only the subgoal being replaced: at 1 it goes back to 0, at 0 to 1, for ever.
    table = np.full((3, 3), 100.0)
    np.fill_diagonal(table, 0.0)
    table[0, 1] = table[1, 0] = 3.0
    table[0, 2], table[1, 2] = 9.0, 8.0
    at = {None: [4.0, 6.0, 30.0], 0: [0.0, 3.0, 30.0], 1: [3.0, 0.0, 30.0]}  # d_sc from each spot
    for progress, expected in ((False, [0, 1, 0, 1, 0, 1]), (True, [0, 1, -1, -1, -1, -1])):
        planner = make_table_planner(table, local_horizon=0.0, require_progress=progress)
        np.testing.assert_array_equal(planner.landmark_to_goal, [9.0, 8.0])
        spot, picks = None, []
        while len(picks) < len(expected):
            result = planner.step(np.zeros(3), TableDistance(at[spot]), zero_policy)
            if result.replanned:
                picks.append(result.subgoal_index)
                if result.subgoal_index >= 0:
                    spot = result.subgoal_index  # the robot reaches each landmark it is sent to
        assert picks == expected


def test_unreachable_landmark_never_picked() -> None:
    table = chain_table(2)
    table[0, 1] = 100.0  # landmark 0 cannot reach anything within d_max ...
    planner = make_table_planner(table, local_horizon=0.0, adaptive_cut=False)
    assert np.isinf(planner.landmark_to_goal[0]) and planner.landmark_to_goal[1] == 4.0
    result = planner.step(np.zeros(3), TableDistance([0.0, 14.0, 60.0]), no_policy)
    assert result.subgoal_index == 1  # ... so it is never a subgoal, however close


def test_local_horizon_shortcut_picks_goal() -> None:
    # Non-metric D: landmark 0 route totals 1 + 4 = 5, the goal's own D is 9.4.
    table = chain_table(1)
    d_sc = [1.0, 9.4]
    l3p = make_table_planner(table, local_horizon=10.0, counter_extra=1)
    result = l3p.step(np.zeros(3), TableDistance(d_sc), no_policy)
    assert (result.subgoal_index, result.counter, result.estimated_distance) == (-1, 10, 9.4)
    no_shortcut = make_table_planner(table, local_horizon=9.0)
    assert no_shortcut.step(np.zeros(3), TableDistance(d_sc), no_policy).subgoal_index == 0
    # naive keeps the same shortcut (so l3p vs naive measures counter and exclusion alone) ...
    naive = make_table_planner(table, mode="naive", local_horizon=10.0)
    assert naive.step(np.zeros(3), TableDistance(d_sc), no_policy).subgoal_index == -1
    # ... and local_horizon 0 turns it off for both.
    naive = make_table_planner(table, mode="naive", local_horizon=0.0)
    assert naive.step(np.zeros(3), TableDistance(d_sc), no_policy).subgoal_index == 0


def test_naive_replans_every_step_without_exclusion() -> None:
    planner = make_table_planner(chain_table(3), mode="naive", local_horizon=10.0)
    dist = TableDistance([2.0, 3.0, 6.0, 40.0])
    results = [planner.step(np.zeros(3), dist, no_policy) for _ in range(6)]
    assert all(r.replanned and r.counter == 0 for r in results)
    assert [r.subgoal_index for r in results] == [2] * 6  # no exclusion (goal beyond the horizon)
    assert [r.estimated_distance for r in results] == [6.0] * 6
    assert (dist.calls, planner.replans, planner.step_count) == (6, 6, 6)


def test_policy_mode_never_replans_and_chases_goal() -> None:
    landmarks, goal = plane_landmarks()
    planner = EpisodePlanner(landmarks, goal, plane_value_fn, PlannerConfig(mode="policy"))
    fns = PlaneFns()
    obs = np.zeros(2)
    for _ in range(10):
        r = planner.step(obs, no_distance, fns.policy_fn)
        assert (r.subgoal_index, r.replanned, r.counter) == (-1, False, 0)
        assert r.estimated_distance == 0.0
        np.testing.assert_array_equal(r.subgoal, goal)
        np.testing.assert_allclose(r.action, unit((goal - obs)[None])[0], rtol=1e-5)
        obs = obs + r.action
    assert len(fns.policy_goals) == 10 and planner.replans == 0 and planner.step_count == 10
    assert all(np.array_equal(g, goal[None]) for g in fns.policy_goals)


@pytest.mark.parametrize("search", SEARCHES)
def test_plane_episode_state_machine_invariants(search: str) -> None:
    config = PlannerConfig(search=search, d_max=15.0, local_horizon=5.0, counter_extra=1)
    planner, fns, trace, obs, goal = run_plane_episode(config)
    assert np.linalg.norm(obs - goal) < 1.0  # the landmark route reaches the goal
    assert len(trace) < 80  # the straight-line distance is 56.6 steps
    landmark_picks = [r.subgoal_index for r in trace if r.replanned and r.subgoal_index >= 0]
    assert len(landmark_picks) >= 4  # it really plans through landmarks

    cap = math.ceil(config.d_max)
    t, previous = 0, None
    while t < len(trace):
        r = trace[t]
        assert r.replanned and 0 <= r.counter <= cap
        assert r.subgoal_index == -1 or r.estimated_distance <= config.d_max  # never a cut node
        if previous is not None and previous >= 0:
            assert r.subgoal_index != previous  # the replaced subgoal is never re-picked
        kept = trace[t + 1 : t + 1 + r.counter]
        assert [k.counter for k in kept] == list(range(r.counter - 1, -1, -1))[: len(kept)]
        assert all(not k.replanned and k.subgoal_index == r.subgoal_index for k in kept)
        assert all(k.estimated_distance == 0.0 for k in kept)
        previous, t = r.subgoal_index, t + 1 + r.counter

    # Exactly one batched distance call per re-plan, one batch-1 policy call otherwise.
    assert len(fns.distance_calls) == planner.replans == sum(r.replanned for r in trace)
    assert len(fns.policy_goals) == len(trace) - planner.replans
    assert planner.step_count == len(trace)
    obs_batch, goals_batch = fns.distance_calls[0]
    assert obs_batch.shape == (50, 2) and np.all(obs_batch == 0.0)
    np.testing.assert_array_equal(goals_batch[-1], goal)
    assert all(g.shape == (1, 2) for g in fns.policy_goals)


def test_sampling_is_seeded_and_respects_cut() -> None:
    table = np.full((5, 5), 3.0)
    np.fill_diagonal(table, 0.0)  # every landmark is 3 steps from everything
    d_sc = [1.0, 1.5, 2.0, 20.0, 30.0]  # totals 4, 4.5, 5, cut, 30
    landmarks, goal = table_nodes(4)

    def sequence(seed: int | None, steps: int = 300) -> list[int]:
        cfg = PlannerConfig(mode="naive", search="hard", sample_subgoal=True)
        planner = EpisodePlanner(landmarks, goal, table_value_fn(table), cfg, seed=seed)
        dist = TableDistance(d_sc)
        return [planner.step(np.zeros(3), dist, no_policy).subgoal_index for _ in range(steps)]

    a = sequence(7)
    assert a == sequence(7)
    assert a != sequence(8)
    counts = Counter(a)
    assert 3 not in counts  # a cut landmark is never drawn
    logits = -np.array([4.0, 4.5, 5.0, 30.0]) / 1.1
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    for row, p in zip([0, 1, 2], probs):
        assert abs(counts[row] / len(a) - p) < 0.08
    assert counts[-1] <= 1  # the goal (total 30) has probability ~1e-10


def test_l3p_sampled_episodes_repeat_with_same_seed() -> None:
    config = PlannerConfig(sample_subgoal=True, search="hard", local_horizon=5.0)
    picks = []
    for seed in (3, 3, 4, 5):
        _, _, trace, _, _ = run_plane_episode(config, steps=60, seed=seed)
        picks.append([(r.subgoal_index, r.counter) for r in trace])
    assert picks[0] == picks[1]
    assert picks[0] != picks[2] or picks[0] != picks[3]


def test_zero_landmarks_pursues_goal() -> None:
    calls: list = []
    for landmarks in (np.zeros((0, 2)), []):
        planner = EpisodePlanner(landmarks, [40.0, 40.0], table_value_fn(np.zeros((1, 1)), calls),
                                 PlannerConfig(local_horizon=5.0))
        assert planner.landmark_to_goal.shape == (0,)
        fns = PlaneFns()
        first = planner.step(np.zeros(2), fns.distance_fn, fns.policy_fn)
        assert (first.subgoal_index, first.replanned) == (-1, True)
        assert first.counter == 15  # min(round(153.7) + 1, ceil(d_max))
        second = planner.step(np.zeros(2), fns.distance_fn, fns.policy_fn)
        assert (second.subgoal_index, second.replanned, second.counter) == (-1, False, 14)
        assert fns.distance_calls[0][1].shape == (1, 2)
    assert calls == []


def test_planner_input_validation() -> None:
    landmarks, goal = plane_landmarks()
    with pytest.raises(ValueError, match="landmarks must have shape"):
        EpisodePlanner(landmarks, np.zeros(3), plane_value_fn, PlannerConfig())
    with pytest.raises(ValueError, match="goal must be"):
        EpisodePlanner(landmarks, np.zeros((1, 2)), plane_value_fn, PlannerConfig())
    with pytest.raises(ValueError, match="d_max"):
        EpisodePlanner(landmarks, goal, plane_value_fn, PlannerConfig(d_max=0.0))
    planner = EpisodePlanner(landmarks, goal, plane_value_fn, PlannerConfig())
    fns = PlaneFns()
    with pytest.raises(ValueError, match="obs must be"):
        planner.step(np.zeros((1, 2)), fns.distance_fn, fns.policy_fn)
    with pytest.raises(ValueError, match="distance_fn must return"):
        planner.step(np.zeros(2), lambda o, g: (np.zeros(3), np.zeros((3, 2))), fns.policy_fn)
    planner.step(np.zeros(2), fns.distance_fn, fns.policy_fn)
    with pytest.raises(ValueError, match="earlier steps had 2"):
        planner.step(np.zeros(3), fns.distance_fn, fns.policy_fn)


def test_planner_outputs_are_protected() -> None:
    landmarks, goal = plane_landmarks()
    planner = EpisodePlanner(landmarks, goal, plane_value_fn, PlannerConfig())
    fns = PlaneFns()
    result = planner.step(np.zeros(2), fns.distance_fn, fns.policy_fn)
    with pytest.raises(ValueError):
        result.subgoal[0] = 1.0  # a view of the planner's nodes: read-only
    with pytest.raises(ValueError):
        planner.landmark_to_goal[0] = 0.0


# ------------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "greedy"}, "mode must be one of ('l3p', 'naive', 'policy'), got 'greedy'"),
        ({"search": "astar"}, "search must be one of ('soft', 'hard', 'expectation'), got 'astar'"),
        ({"d_max": -1.0}, "d_max must be a finite number > 0, got -1.0"),
        ({"d_max": math.inf}, "d_max must be a finite number > 0, got inf"),
        ({"temperature": 0.0}, "temperature must be a finite number > 0, got 0.0"),
        ({"temperature": math.nan}, "temperature must be a finite number > 0, got nan"),
        ({"search_iterations": 0}, "search_iterations must be an integer in [1, 1000], got 0"),
        (
            {"search_iterations": 1001},
            "search_iterations must be an integer in [1, 1000], got 1001",
        ),
        ({"search_iterations": 2.5}, "search_iterations must be an integer in [1, 1000], got 2.5"),
        ({"local_horizon": -0.5}, "local_horizon must be a finite number >= 0, got -0.5"),
        ({"counter_extra": -1}, "counter_extra must be an integer >= 0, got -1"),
        ({"sample_subgoal": "yes"}, "sample_subgoal must be a bool, got 'yes'"),
        # Subnormal: 1 / temperature overflows and the soft search would turn pairs unreachable.
        (
            {"temperature": 5e-324},
            "temperature must be >= 1e-06 (smaller values underflow the soft search; "
            "search=hard is its exact limit), got 5e-324",
        ),
    ],
)
def test_config_validation_messages(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        PlannerConfig(**overrides).validate()
    assert str(err.value) == message
    with pytest.raises(ValueError):
        PlannerConfig().replace(**overrides)


def test_config_defaults_and_replace() -> None:
    default = PlannerConfig()
    default.validate()
    assert (default.mode, default.search, default.search_iterations) == ("l3p", "soft", 20)
    assert (default.d_max, default.temperature, default.local_horizon) == (15.0, 1.1, 10.0)
    assert default.counter_extra == 1
    assert not default.sample_subgoal and default.adaptive_cut
    assert MODES == ("l3p", "naive", "policy") and SEARCHES == ("soft", "hard", "expectation")
    changed = default.replace(mode="naive", d_max=7, local_horizon=0)
    assert (changed.mode, changed.d_max, changed.local_horizon) == ("naive", 7, 0)
    assert default.mode == "l3p"  # the original is untouched (frozen)
    assert changed.counter_cap == 7 and default.replace(d_max=7.01).counter_cap == 8
    with pytest.raises(TypeError):
        default.replace(not_a_field=1)


# ------------------------------------------------------------- soft vs hard: a wormhole


def wormhole_world(wormhole_margin: float):
    """A start s, two first hops A and W, and a goal g 13 steps right of A.

    Between A and g lie 30 landmarks near the straight line (V = true distance): many near-tie
    routes. W is walled off from g (true distance 120 steps) but V has a "wormhole": W -> g is
    estimated at (A's exact distance) + ``wormhole_margin``. Returns (landmarks, goal,
    value_fn, index of A, index of W, A's exact distance to g)."""
    rng = np.random.default_rng(7)
    a, w, goal = np.array([0.0, 0.0]), np.array([0.0, -30.0]), np.array([13.0, 0.0])
    room = np.column_stack([rng.uniform(1.0, 12.0, 30), rng.uniform(-1.0, 1.0, 30)])
    landmarks = np.vstack([a, w, room]).astype(np.float32)
    exact_a = float(np.linalg.norm(goal - landmarks[0]))

    def value_fn(x, y):
        v = np.linalg.norm(y.astype(np.float64) - x, axis=1)
        from_w, to_w, to_g = (np.all(x == w, axis=1), np.all(y == w, axis=1), np.all(y == goal, axis=1))
        v[(from_w & ~to_g) | to_w] = 200.0  # W leads nowhere but through the wormhole
        v[from_w & to_g] = exact_a + wormhole_margin  # the truth is 120 steps
        return v

    return landmarks, goal, value_fn, 0, 1, exact_a


def first_pick(search: str, landmarks, goal, value_fn) -> int:
    planner = EpisodePlanner(landmarks, goal, value_fn, PlannerConfig(search=search, local_horizon=0.0))
    # The robot is 5 steps from both A and W; every other landmark is cut (> d_max).
    d_sc = np.full(len(landmarks) + 1, 50.0)
    d_sc[[0, 1]] = 5.0
    return planner.step(np.zeros(2), TableDistance(list(d_sc)), no_policy).subgoal_index


def test_wormhole_hard_and_expectation_pick_different_subgoals() -> None:
    landmarks, goal, value_fn, a, w, exact_a = wormhole_world(wormhole_margin=0.5)
    solved = {s: distances_to_goal(landmarks, goal, value_fn, PlannerConfig(search=s)) for s in SEARCHES}
    # Exact: A's honest route is half a step shorter than W's (too short) wormhole estimate.
    assert solved["hard"][a] == pytest.approx(exact_a) and solved["hard"][w] == pytest.approx(exact_a + 0.5)
    # The guarded soft search keeps A's direct edge: never longer than it (min guard).
    assert solved["soft"][a] == pytest.approx(exact_a)
    # The paper's expectation averages A's direct edge with its many near-tie detours across
    # the room and charges A more than the half step; the lone wormhole edge has no
    # alternative, so it is charged nothing ...
    assert solved["expectation"][a] - exact_a > 0.5
    assert solved["expectation"][w] == pytest.approx(exact_a + 0.5)
    # ... so the searches choose differently: hard (and soft) take the truly short route A,
    # the expectation takes the wormhole W.
    assert first_pick("hard", landmarks, goal, value_fn) == a
    assert first_pick("soft", landmarks, goal, value_fn) == a
    assert first_pick("expectation", landmarks, goal, value_fn) == w
    # A clearly too-short wormhole fools every search alike: none of them down-weights it.
    landmarks, goal, value_fn, a, w, _ = wormhole_world(wormhole_margin=-5.0)
    assert {first_pick(s, landmarks, goal, value_fn) for s in SEARCHES} == {w}


# ------------------------------------------------------- landmark graph (per-bundle cache)


def scattered_landmarks(seed: int, n: int = 60) -> np.ndarray:
    """n points in a 60 x 60 plane world: long paths, many cut edges, some far landmarks."""
    return np.random.default_rng(seed).uniform(0.0, 60.0, (n, 2)).astype(np.float32)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize(
    "overrides",
    [{}, {"temperature": 1e-3}, {"temperature": 0.1}, {"temperature": 5.0},
     {"d_max": 6.0, "adaptive_cut": False}, {"d_max": 40.0}, {"search_iterations": 3}],
)
def test_landmark_graph_equals_the_from_scratch_solve(search: str, overrides: dict) -> None:
    config = PlannerConfig(search=search, **overrides)
    rng = np.random.default_rng(7)
    for seed in range(3):
        landmarks = scattered_landmarks(seed)
        graph = LandmarkGraph(landmarks, plane_value_fn)
        for goal in rng.uniform(-10.0, 70.0, (4, 2)):  # some goals outside the landmarks' area
            expected = distances_to_goal(landmarks, goal, plane_value_fn, config)
            cached = graph.distances_to_goal(goal, plane_value_fn, config)
            # Equal up to float summation order (matrix-vector vs matrix products).
            assert_same_distances(cached, expected, atol=1e-9)
            assert cached[-1] == 0.0


@pytest.mark.parametrize("adaptive_cut", [True, False])
def test_landmark_graph_episode_weights_equal_the_whole_graph(adaptive_cut: bool) -> None:
    landmarks = scattered_landmarks(3)
    graph = LandmarkGraph(landmarks, plane_value_fn)
    config = PlannerConfig(d_max=12.0, adaptive_cut=adaptive_cut)
    calls: list = []
    for goal in ([30.0, 30.0], [-20.0, 80.0]):  # inside the landmarks' area, and far outside
        w = graph.episode_weights(np.array(goal), table_calls(calls), config)
        np.testing.assert_array_equal(w, pairwise_graph(landmarks, np.array(goal), plane_value_fn, 12.0, adaptive_cut))
    assert [len(a) for a, _ in calls] == [60, 60]  # landmark -> goal only


def table_calls(calls: list):
    def value_fn(a, b):
        calls.append((a, b))
        return plane_value_fn(a, b)

    return value_fn


@pytest.mark.parametrize("search", SEARCHES)
def test_landmark_graph_unreachable_and_tiny_cases(search: str) -> None:
    # Two one-way islands; the goal is reachable from the first only.
    table = np.full((5, 5), 100.0)
    np.fill_diagonal(table, 0.0)
    table[0, 1] = table[1, 4] = 2.0
    table[2, 3] = table[3, 2] = 1.0
    landmarks, goal = table_nodes(4)
    config = PlannerConfig(search=search, adaptive_cut=False)
    graph = LandmarkGraph(landmarks, table_value_fn(table))
    cached = graph.distances_to_goal(goal, table_value_fn(table), config)
    assert_same_distances(cached, distances_to_goal(landmarks, goal, table_value_fn(table), config))
    assert np.isinf(cached[2:4]).all() and cached[1] == pytest.approx(2.0)

    calls: list = []
    empty = LandmarkGraph(np.zeros((0, 3)), table_value_fn(table, calls))
    np.testing.assert_array_equal(empty.distances_to_goal(np.ones(3), no_value, config), [0.0])
    assert calls == []


def no_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    raise AssertionError("value_fn must not be called here")


def test_landmark_graph_costs_n_value_calls_per_start() -> None:
    landmarks = scattered_landmarks(1, n=20)
    calls: list = []

    def counting(a, b):
        calls.append(len(a))
        return plane_value_fn(a, b)

    graph = LandmarkGraph(landmarks, counting)
    assert calls == [20 * 20]  # the landmark-landmark block, once
    graph.prepare(PlannerConfig())
    for goal in ([3.0, 4.0], [50.0, 10.0]):
        calls.clear()
        graph.distances_to_goal(np.array(goal), counting, PlannerConfig())
        assert calls == [20]  # landmark -> goal only


def test_landmark_graph_keeps_prepared_blocks_and_bounds_the_others() -> None:
    graph = LandmarkGraph(scattered_landmarks(2, n=12), plane_value_fn, max_cached=2)
    default = PlannerConfig()
    graph.prepare(default)
    goal = np.array([30.0, 30.0])
    for temperature in (0.5, 0.6, 0.7, 0.8):
        config = default.replace(temperature=temperature)
        assert_same_distances(graph.distances_to_goal(goal, plane_value_fn, config),
                              distances_to_goal(graph.landmarks, goal, plane_value_fn, config))
    keys = list(graph._blocks)
    assert len(keys) == 3 and keys[0][3] == default.temperature  # pinned + the 2 latest
    assert [k[3] for k in keys[1:]] == [0.7, 0.8]


@pytest.mark.parametrize("search", SEARCHES)
def test_planner_on_a_landmark_graph_acts_like_the_plain_planner(search: str) -> None:
    landmarks, goal = plane_landmarks()
    config = PlannerConfig(search=search, sample_subgoal=True, local_horizon=0.0)
    graph = LandmarkGraph(landmarks, plane_value_fn)
    plain = EpisodePlanner(landmarks, goal, plane_value_fn, config, seed=3)
    cached = EpisodePlanner(graph, goal, plane_value_fn, config, seed=3)
    np.testing.assert_allclose(cached.landmark_to_goal, plain.landmark_to_goal, rtol=0, atol=1e-9)
    assert_same_decisions(plain, cached, 60)


def assert_same_decisions(plain: EpisodePlanner, cached: EpisodePlanner, steps: int,
                          move=lambda obs, action: obs + action) -> np.ndarray:
    """Both planners drive their own robot on the plane from the origin and must decide (and
    act) alike at every step; returns the first robot's last position."""
    fns = PlaneFns()
    obs_a = obs_b = np.zeros(2)
    for _ in range(steps):
        a = plain.step(obs_a, fns.distance_fn, fns.policy_fn)
        b = cached.step(obs_b, fns.distance_fn, fns.policy_fn)
        assert (a.subgoal_index, a.replanned, a.counter) == (b.subgoal_index, b.replanned, b.counter)
        np.testing.assert_array_equal(a.action, b.action)
        obs_a, obs_b = move(obs_a, a.action), move(obs_b, b.action)
    return obs_a


def test_prepare_and_complete_split_a_step() -> None:
    landmarks, goal = plane_landmarks()
    config = PlannerConfig(local_horizon=0.0)
    whole = EpisodePlanner(landmarks, goal, plane_value_fn, config, seed=0)
    split = EpisodePlanner(landmarks, goal, plane_value_fn, config, seed=0)
    fns = PlaneFns()
    obs = np.zeros(2)
    kinds = set()
    for _ in range(40):
        expected = whole.step(obs, fns.distance_fn, fns.policy_fn)
        need = split.prepare(obs)
        kinds.add(need.fn)
        if need.fn == DISTANCE:
            assert need.obs.shape == (len(landmarks) + 1, 2) and need.goals.shape == need.obs.shape
            output = fns.distance_fn(need.obs, need.goals)
        else:
            assert need.fn == POLICY and need.obs.shape == (1, 2) and need.goals.shape == (1, 2)
            output = fns.policy_fn(need.obs, need.goals)
        if len(kinds) == 1 and need.fn == DISTANCE:  # a failed call: prepare again, no change
            split.prepare(obs)
        result = split.complete(output)
        assert (result.subgoal_index, result.replanned, result.counter) == (
            expected.subgoal_index, expected.replanned, expected.counter)
        np.testing.assert_array_equal(result.action, expected.action)
        obs = obs + result.action
    assert kinds == {POLICY, DISTANCE} and split.step_count == 40
    with pytest.raises(RuntimeError, match="complete.. needs a prepare"):
        split.complete(output)


def test_soft_search_rejects_a_subnormal_temperature() -> None:
    w = known_graphs()["random_sparse_0"]
    with pytest.raises(ValueError, match="temperature must be >= 1e-06"):
        shortest_paths_soft(w, 5e-324, 20)
    # The smallest accepted temperature is still the exact (min-plus) search.
    assert_same_distances(shortest_paths_soft(w, MIN_TEMPERATURE, 20), dijkstra_all_pairs(w))


@pytest.mark.parametrize("search", SEARCHES)
def test_goals_solved_together_equal_each_solved_alone(search: str) -> None:
    """A server solves the goals of episodes started together in one pass; each goal's result
    must not depend on which others share it (bit for bit)."""
    landmarks = scattered_landmarks(4)
    graph = LandmarkGraph(landmarks, plane_value_fn)
    config = PlannerConfig(search=search, temperature=0.3)  # some far pairs take the exact path
    goals = np.random.default_rng(5).uniform(-10.0, 70.0, (9, 2)).astype(np.float32)
    together = graph.distances_to_goals(goals, plane_value_fn, config)
    for goal, row in zip(goals, together):
        np.testing.assert_array_equal(row, graph.distances_to_goal(goal, plane_value_fn, config))
    np.testing.assert_array_equal(graph.distances_to_goals(goals[3:5], plane_value_fn, config), together[3:5])
    # The two halves of a start (a server makes them in separate calls): rows of separate value
    # calls, stacked, solve to the same bits.
    steps = np.concatenate([graph.steps_to_goals(goals[:4], plane_value_fn),
                            graph.steps_to_goals(goals[4:], plane_value_fn)])
    np.testing.assert_array_equal(graph.distances_from_steps(steps, config), together)
    with pytest.raises(ValueError, match="steps must have shape"):
        graph.distances_from_steps(steps[:, 1:], config)
    assert graph.distances_to_goals(goals[:0], plane_value_fn, config).shape == (0, len(landmarks) + 1)
    # A planner takes its row as solved.
    planner = EpisodePlanner(graph, goals[2], plane_value_fn, config, d_cg=together[2])
    np.testing.assert_array_equal(planner.landmark_to_goal, together[2, :-1])
    with pytest.raises(ValueError, match="d_cg"):
        EpisodePlanner(landmarks, goals[2], plane_value_fn, config, d_cg=together[2])
