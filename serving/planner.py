"""L3P planning core: the landmark graph, its search, and the per-episode state machine.

Pure numpy, shared by the torch trainer and the onnxruntime server (they pass in their
own callables). Paper: "World Model as a Graph: Learning Latent Landmarks for Planning"
(Zhang et al., ICML 2021); API: docs/planner_api.md.

Distances are positive step counts and ``np.inf`` means "no edge / unreachable".
Graph nodes are the N landmarks (0..N-1) followed by the episode goal (index N);
subgoal index -1 means "the final goal".

1. Graph (once per episode): edge i -> j weighs V(l_i, node_j), clamped at >= 0. Nothing
   leaves the goal. Edges longer than ``d_max`` are cut; with ``adaptive_cut`` each node
   keeps its single nearest incoming edge so the graph stays connected.
2. Search (once per episode): all-pairs shortest paths, one of `SEARCHES`:
   ``hard`` exact Floyd-Warshall; ``expectation`` the paper's soft update (softmin-weighted
   mean of path lengths, diagonal pinned at 0), which charges paths through near-tie
   alternatives more than their shortest member; ``soft`` that update with a monotone guard
   ``min(w, E)`` (within a few steps of ``hard``). See `shortest_paths_soft`.
   The goal column gives d_cg, every node's distance to the goal.
3. Online (Algorithm 1, every observation): while the counter is >= 1, count down and keep
   the subgoal. Otherwise re-plan: one batched distance_fn call gives d_sc (state ->
   candidate) for every landmark and the goal; pick argmin of d_sc + d_cg (or sample from
   softmax(-(d_sc + d_cg) / temperature)) excluding cut candidates (d_sc > d_max; the goal
   too, as in the reference code, unless no landmark is left: then the goal is pursued
   directly) and the subgoal being replaced, then commit for
   ``counter = min(round(d_sc[pick]) + counter_extra, ceil(d_max))`` steps (0 when
   nothing is reachable and the goal is pursued with a non-finite estimate).
   With ``prune_failed`` (an extension, off by default; see `PlannerConfig`) the episode
   also remembers subgoals it failed to reach and removes them from its graph.
   Mode ``naive`` re-plans every step (no counter, no exclusion) and keeps the same
   local-horizon shortcut, so l3p vs naive measures the counter and the exclusion alone
   (``local_horizon=0`` turns the shortcut off in both); mode ``policy`` skips planning:
   action = pi(obs, goal).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import numbers
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

DistanceFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(obs [K, obs_dim], goals [K, goal_dim]) -> (D(s, pi(s,g), g) [K], pi(s,g) [K, action_dim])"""
PolicyFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(obs [K, obs_dim], goals [K, goal_dim]) -> actions [K, action_dim]"""
ValueFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(goal_a [M, goal_dim], goal_b [M, goal_dim]) -> V(a -> b) [M] steps"""

MODES = ("l3p", "naive", "policy")
SEARCHES = ("soft", "hard", "expectation")

GOAL = -1  # subgoal index of the final goal

# prune_failed thresholds, in steps of the distance network (see PlannerConfig).
PRUNE_AT_STEPS = 1.0
PRUNE_MIN_STEPS = 3.0
PRUNE_PROGRESS = 0.5

# Below this the soft search's exponents -d / temperature overflow (at 5e-324, 1 / temperature
# is inf and 0 * inf is NaN: pairs turned unreachable). The soft search is already min-plus
# (exact) well above it; search="hard" is its limit.
MIN_TEMPERATURE = 1e-6

# Soft search (see `_soft_expectation`). Its fast path computes the softmin sums over k as
# matrix products of factors exp(_SOFT_SHIFT - d / temperature) floored at exp(-_SOFT_FLOOR):
# every product of two factors then lies in [e^-700, e^600], normal doubles. (The shift uses
# the top half of the float range, doubling how long a path the fast path covers; the floor
# avoids subnormal products, which make the BLAS product ~200x slower.)
_SOFT_SHIFT = 300.0
_SOFT_FLOOR = 350.0
_SOFT_FAST_ATOL = 1e-12  # max error (steps) the fast path may add; other pairs go exact
# The exact path materializes [pairs, n] candidate blocks; pairs are processed in blocks so
# memory stays bounded (~8 MB per float64 temporary) whatever the landmark count.
_SOFT_BLOCK_ELEMENTS = 1 << 20
_FINITE_STAND_IN = 1e300  # replaces inf candidates (which carry weight 0) in the soft sum


def _is_real(x: object) -> bool:
    # The exact types first: the ABC checks cost microseconds on every episode start.
    return type(x) is float or type(x) is int or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def _is_int(x: object) -> bool:
    return type(x) is int or (isinstance(x, numbers.Integral) and not isinstance(x, bool))


def _check_temperature(temperature: float) -> None:
    if not (_is_real(temperature) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if temperature < MIN_TEMPERATURE:
        raise ValueError(
            f"temperature must be >= {MIN_TEMPERATURE:g} (smaller values underflow the soft "
            f"search; search=hard is its exact limit), got {temperature!r}"
        )


@dataclass(frozen=True)
class PlannerConfig:
    mode: str = "l3p"
    d_max: float = 15.0  # edges / local distances longer than this are cut
    temperature: float = 1.1  # beta of the soft search and of subgoal sampling
    search: str = "soft"
    search_iterations: int = 20
    local_horizon: float = 10.0  # goal within this many steps (by D): go straight for it
    counter_extra: int = 1  # added to the counter at each re-plan (reference code)
    sample_subgoal: bool = False  # sample from softmax(-d/temperature) instead of argmin
    adaptive_cut: bool = True  # a node keeps its nearest incoming edge even beyond d_max
    # Extension beyond Algorithm 1 (mode l3p). Algorithm 1 forgets a failed subgoal after one
    # re-plan: a learned distance that is too short (an edge through a wall) makes the agent
    # alternate between that subgoal and another, and two landmarks at one spot make it
    # alternate between them. With prune_failed: (a) a landmark the state is already at
    # (D < PRUNE_AT_STEPS) is not a candidate; (b) a landmark subgoal whose counter ran out
    # with D(state, subgoal) still > max(PRUNE_MIN_STEPS, PRUNE_PROGRESS * D at its pick) is
    # pruned for the rest of the episode: its incoming edges are removed, d_cg is solved
    # again (one search), and it is never picked again.
    prune_failed: bool = False

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field and its allowed range."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.search not in SEARCHES:
            raise ValueError(f"search must be one of {SEARCHES}, got {self.search!r}")
        for name in ("d_max", "temperature"):
            value = getattr(self, name)
            if not (_is_real(value) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        _check_temperature(self.temperature)
        if not (_is_int(self.search_iterations) and 1 <= self.search_iterations <= 1000):
            raise ValueError(
                f"search_iterations must be an integer in [1, 1000], got {self.search_iterations!r}"
            )
        lh = self.local_horizon
        if not (_is_real(lh) and math.isfinite(lh) and lh >= 0):
            raise ValueError(f"local_horizon must be a finite number >= 0, got {lh!r}")
        if not (_is_int(self.counter_extra) and self.counter_extra >= 0):
            raise ValueError(f"counter_extra must be an integer >= 0, got {self.counter_extra!r}")
        for name in ("sample_subgoal", "adaptive_cut", "prune_failed"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def replace(self, **overrides: object) -> "PlannerConfig":
        """A validated copy with `overrides` applied (unknown names raise TypeError)."""
        config = dataclasses.replace(self, **overrides)
        config.validate()
        return config

    @property
    def counter_cap(self) -> int:
        """Upper bound of the re-plan counter: ceil(d_max)."""
        return math.ceil(self.d_max)


# --------------------------------------------------------------------------- graph


def _as_nodes(landmarks: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """[N+1, goal_dim] float32 (landmarks then goal), the layout every callable receives."""
    goal = np.asarray(goal, dtype=np.float32)
    if goal.ndim != 1 or goal.size == 0:
        raise ValueError(f"goal must be a non-empty 1-d array, got shape {goal.shape}")
    landmarks = np.asarray(landmarks, dtype=np.float32)
    if landmarks.size == 0:
        landmarks = landmarks.reshape(0, goal.size)  # zero landmarks: just pursue the goal
    if landmarks.ndim != 2 or landmarks.shape[1] != goal.size:
        raise ValueError(
            f"landmarks must have shape [N, {goal.size}] to match the goal, got {landmarks.shape}"
        )
    return np.concatenate([landmarks, goal[None]], axis=0)


def pairwise_graph(
    landmarks: np.ndarray,
    goal: np.ndarray,
    value_fn: ValueFn,
    d_max: float,
    adaptive_cut: bool,
) -> np.ndarray:
    """Edge weights [N+1, N+1]: w[i, j] = V(l_i, node_j) >= 0, inf = no edge.

    One batched value_fn call over all N x (N+1) (landmark, node) pairs; skipped when N = 0.
    The diagonal is 0 and the goal row (index N) is inf elsewhere: the episode ends there.
    NaN values count as "no edge".
    """
    nodes = _as_nodes(landmarks, goal)
    n = nodes.shape[0] - 1
    w = np.full((n + 1, n + 1), np.inf)
    if n > 0:
        src = np.repeat(nodes[:n], n + 1, axis=0)  # pair (i, j) at row i * (n+1) + j
        dst = np.tile(nodes, (n, 1))
        uncut = _uncut_edges(value_fn(src, dst), n, n + 1)
        np.fill_diagonal(uncut, np.inf)  # self-loops are not edges (diag set to 0 below)
        w[:n] = _cut_edges(uncut, d_max, adaptive_cut)
    np.fill_diagonal(w, 0.0)
    return w


def _uncut_edges(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """value_fn's output as [rows, cols] steps: NaN -> inf (no edge), negatives -> 0."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size != rows * cols:
        raise ValueError(f"value_fn returned {values.size} values for {rows * cols} pairs")
    # A network can predict slightly negative steps; a negative edge would break the search.
    return np.maximum(np.where(np.isnan(values), np.inf, values), 0.0).reshape(rows, cols)


def _cut_edges(uncut: np.ndarray, d_max: float, adaptive_cut: bool) -> np.ndarray:
    """Edges longer than d_max cut (inf). Column by column, so any subset of destination
    columns is cut exactly as in the whole graph."""
    w = np.where(uncut <= d_max, uncut, np.inf)
    if adaptive_cut and uncut.shape[0] > 0:
        # Every node (goal included) keeps its nearest incoming edge, so no node is
        # isolated just because all its neighbours are slightly beyond d_max.
        nearest = np.argmin(uncut, axis=0)  # source landmark per destination column
        cols = np.arange(uncut.shape[1])
        w[nearest, cols] = uncut[nearest, cols]  # stays inf if the column had no edge
    return w


# -------------------------------------------------------------------------- search


def _check_weights(w: np.ndarray) -> np.ndarray:
    """Float64 copy with diagonal 0; rejects non-square, NaN or negative weights."""
    d = np.array(w, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"weights must be a square matrix, got shape {d.shape}")
    if np.isnan(d).any() or (d < 0).any():
        raise ValueError("weights must be >= 0 (inf for no edge), found NaN or negative entries")
    np.fill_diagonal(d, 0.0)  # a node is 0 steps from itself
    return d


def shortest_paths_hard(w: np.ndarray) -> np.ndarray:
    """Exact all-pairs shortest paths (Floyd-Warshall in the min-plus semiring).

    w: [n, n] non-negative edge weights, inf = no edge. Returns [n, n], inf = unreachable.
    The diagonal is 0.
    """
    d = _check_weights(w)
    for k in range(d.shape[0]):  # the loop over k is inherent; each step is one numpy op
        np.minimum(d, d[:, k, None] + d[None, k, :], out=d)
    return d


def shortest_paths_soft(w: np.ndarray, temperature: float, iterations: int, guard: bool = True) -> np.ndarray:
    """The paper's soft relaxation, made safe. Returns [n, n] like `shortest_paths_hard`.

    Each iteration updates every pair from the previous matrix (Jacobi style):

        c_ijk = w_ik + w_kj                                  (k over all nodes)
        E_ij  = sum_k softmax_k(-c_ijk / temperature) * c_ijk  (the paper's expectation)
        w_ij <- min(w_ij, E_ij) (guard=True)  or  E_ij (guard=False, the paper's update)
        w_ii <- 0

    Fixes to the update as written in the paper / reference code:
    - the diagonal is held at 0 (unpinned, it drifts to -500 steps on an 80-node graph);
    - inf-safe: inf candidates get zero weight, and a pair with only inf candidates stays
      inf (no NaN), so the result is finite exactly where a path exists (given
      2**iterations >= n - 1, every path length is covered);
    - optionally `min(w_ij, E_ij)`: the expectation leans above the best candidate and can
      exceed the current value; the guard makes every iteration monotone, which also makes
      the result hug the exact distance (search ``soft``). Without it (search
      ``expectation``) a pair keeps the expectation's surcharge: a route whose hops have
      several near-tie alternatives costs more than one clear hop of the same length.

    Early exit: the update is a deterministic function of the matrix alone, so once an
    iteration leaves the matrix bit-for-bit unchanged every later one would too; stopping
    there returns exactly what running all `iterations` returns (common at low temperature,
    where the relaxation is min-plus squaring and settles after ~log2(n) iterations).

    Tolerance. Each E_ij averages path lengths >= the exact distance, so the result is
    never shorter than exact (up to float rounding). Each update exceeds the best
    candidate by at most temperature * ln(n) (the softmax entropy), so a pair whose
    shortest path has h edges ends at most (h - 1) * temperature * ln(n) above exact once
    2**iterations >= h. temperature -> 0 is min-plus squaring: exact after log2(n)
    iterations. Measured at temperature 1.1, 20 iterations, on the 80-landmark random
    2-d graph of tests/test_planner.py (paths up to 150 steps): node -> goal at most
    1.42 steps above exact (all pairs: max 1.55, mean 0.37, <= 3.2 % relative); the
    update as written (no pin, no guard) drifts the diagonal to 85 steps and is 12 steps
    pessimistic on node -> goal on average there.
    """
    _check_temperature(temperature)
    if not (_is_int(iterations) and iterations >= 1):
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")
    d = _check_weights(w)
    for _ in range(iterations):
        new = _soft_expectation(d, temperature)
        if guard:
            np.minimum(d, new, out=new)
        np.fill_diagonal(new, 0.0)
        if np.array_equal(new, d):  # a fixed point: the remaining iterations change nothing
            break
        d = new
    return d


def _soft_factors(d: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) = (exp(_SOFT_SHIFT - d / T) floored at exp(-_SOFT_FLOOR), a * d): the factors of
    the fast path of `_soft_expectation`, 0 where d is inf. Call under np.errstate(over=
    "ignore", under="ignore"): overflow (absurd weights or temperatures) only ever turns
    values into inf, which the callers' masks send to the exact path, and underflow cannot
    happen past the floors."""
    finite = d < np.inf
    exponent = np.multiply(d, -1.0 / temperature)  # -inf where d is inf
    exponent += _SOFT_SHIFT
    np.maximum(exponent, -_SOFT_FLOOR, out=exponent)
    a = np.exp(exponent)
    a *= finite  # no edge: weight exactly 0
    b = a * np.where(finite, d, 0.0)
    np.maximum(b, math.exp(-_SOFT_FLOOR), out=b, where=b > 0.0)  # keeps every b * a normal
    return a, b


def _soft_fast_mask(den: np.ndarray, num: np.ndarray, terms: int, c_max: float) -> np.ndarray:
    """Where the fast path's error is within _SOFT_FAST_ATOL (see `_soft_expectation`)."""
    # |E_fast - E| <= terms * exp(SHIFT - FLOOR) * (6 c_max + 2) / den (a loose bound),
    # c_max the longest finite candidate.
    bound = terms * math.exp(_SOFT_SHIFT - _SOFT_FLOOR) * (6.0 * c_max + 2.0)
    return (den * _SOFT_FAST_ATOL >= bound) & np.isfinite(num)


def _soft_ratio(num: np.ndarray, den: np.ndarray, fast: np.ndarray, terms: int) -> np.ndarray:
    """num / den where fast (inf elsewhere), scaled up past the sums' rounding error."""
    expectation = np.full_like(den, np.inf)
    np.divide(num, den, out=expectation, where=fast)
    # Rounding guard: the sums carry a relative error below (2 terms + 4) ulp; scaling up by
    # (4 terms + 8) ulp keeps E >= the best candidate, so the search is never shorter than
    # exact (as with the exact path). The bias is ~5e-14 relative at 101 terms.
    expectation *= 1.0 + (4 * terms + 8) * 2.0**-53
    return expectation


def _soft_expectation(
    d: np.ndarray, temperature: float, factors: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """E_ij for all pairs: the softmin-weighted mean of c_ijk = d_ik + d_kj over k.

    inf where no candidate is finite. Fast path: exp(-c_ijk / T) = exp(-d_ik / T) *
    exp(-d_kj / T), so with a = exp(-d / T) and b = a * d (0 where d is inf)

        sum_k exp(-c_ijk / T)         = (a @ a)_ij
        sum_k exp(-c_ijk / T) c_ijk   = (b @ a + a @ b)_ij

    three BLAS products instead of [n, n, n] candidate tensors (~20-30x faster at n = 101).
    The factors (`_soft_factors`, or `factors` when the caller has them) carry a common
    scale exp(_SOFT_SHIFT) (it cancels in the ratio) and are floored at exp(-_SOFT_FLOOR);
    positive b are floored there too. The floors only raise weights and candidates (so E
    stays >= the best candidate) and change each term by at most exp(_SOFT_SHIFT -
    _SOFT_FLOOR) * (c + 1), which is negligible unless the pair's weight sum `den` is tiny,
    i.e. its best candidate is longer than ~600 temperatures. Pairs whose error bound
    exceeds _SOFT_FAST_ATOL are recomputed by `_soft_expectation_exact`. Unreachable pairs
    need no work: no product underflows, so den == 0 exactly when every candidate of the
    pair is inf (E = inf).
    """
    n = d.shape[0]
    with np.errstate(over="ignore", under="ignore"):  # see _soft_factors
        a, b = _soft_factors(d, temperature) if factors is None else factors
        den = a @ a
        num = b @ a
        num += a @ b
        c_max = 2.0 * float(np.max(d, initial=0.0, where=np.isfinite(d)))
        fast = _soft_fast_mask(den, num, n, c_max)
        expectation = _soft_ratio(num, den, fast, n)
    slow = ~fast & (den > 0.0)
    if slow.any():
        rows, cols = np.nonzero(slow)
        expectation[rows, cols] = _soft_expectation_exact(d, rows, cols, temperature)
    return expectation


def _soft_expectation_exact(
    d: np.ndarray, rows: np.ndarray, cols: np.ndarray, temperature: float
) -> np.ndarray:
    """E_ij for the listed pairs (each with a finite candidate), straight from the definition."""
    n = d.shape[0]
    d_t = np.ascontiguousarray(d.T)  # d_t[j, k] = d_kj: gathered rows stay contiguous
    out = np.empty(rows.size)
    block = max(1, _SOFT_BLOCK_ELEMENTS // n)
    for start in range(0, rows.size, block):
        pairs = slice(start, start + block)
        # cand[p, k] = d_ik + d_kj for pair p
        out[pairs] = _softmin_mean(d[rows[pairs]] + d_t[cols[pairs]], temperature)
    return out


def _softmin_mean(cand: np.ndarray, temperature: float) -> np.ndarray:
    """[P] softmin-weighted mean of each row of cand [P, K] (every row with a finite entry).

    Computed as best + softmin-weighted mean of (c - best): a sum of non-negative terms, so
    rounding can never take E below the best candidate.
    """
    finite = cand < np.inf
    best = cand.min(axis=1, keepdims=True)  # finite by the caller's contract
    # Softmax shifted by the best candidate for stability. Exponents are floored at -600
    # so np.exp never underflows (its underflow path is ~10x slower); inf candidates are
    # then zeroed exactly by the mask, and clamped to a finite stand-in so 0 * inf is
    # not NaN.
    excess = np.minimum(cand, _FINITE_STAND_IN)
    excess -= best  # c - best >= 0
    weights = np.multiply(excess, -1.0 / temperature)
    np.maximum(weights, -600.0, out=weights)
    np.exp(weights, out=weights)
    weights *= finite
    # The best candidate has weight 1, so the denominator is >= 1.
    return best[:, 0] + np.einsum("pk,pk->p", weights, excess) / weights.sum(axis=1)


def _soft_goal_columns(block: "_SoftIterate", c: np.ndarray, temperature: float) -> np.ndarray:
    """E_ig for every landmark i and each of R goals g of graphs whose goal is a sink:
    `_soft_expectation`'s goal column, from the landmark block (an iterate with its
    `_soft_factors`) and c [R, n] (landmark i -> goal g at [g, i]), as one [n, 2n] x [2n, 2]
    product per goal instead of [n, n] products.

    The candidates of pair (i, g) are block_ik + c_gk over the landmarks k, and c_gi + 0
    through the goal itself (its row is inf but for the diagonal). Every operation is
    elementwise or per goal (a stacked matmul is one BLAS call per goal), so a goal's result
    does not depend on which other goals are solved with it. Call under the np.errstate of
    `_soft_factors`.
    """
    r, n = c.shape
    ac, bc = _soft_factors(c, temperature)
    stacked = np.zeros((r, 2 * n, 2))
    stacked[:, :n, 0] = ac
    stacked[:, :n, 1] = bc
    stacked[:, n:, 1] = ac
    sums = np.matmul(block.ab, stacked)  # [R, n, 2]: a @ ac, a @ bc + b @ ac
    self_weight = math.exp(_SOFT_SHIFT)  # a of d_gg = 0 (and b of it is 0)
    den = sums[:, :, 0] + ac * self_weight
    num = sums[:, :, 1] + bc * self_weight
    c_max = block.finite_max + np.max(c, axis=1, initial=0.0, where=c < np.inf)  # [R]
    fast = _soft_fast_mask(den, num, n + 1, c_max[:, None])
    expectation = _soft_ratio(num, den, fast, n + 1)
    slow = ~fast & (den > 0.0)
    if slow.any():
        goals, rows = np.nonzero(slow)
        cand = np.concatenate([block.d[rows] + c[goals], c[goals, rows][:, None]], axis=1)
        expectation[goals, rows] = _softmin_mean(cand, temperature)
    return expectation


def distances_to_goal(
    landmarks: np.ndarray, goal: np.ndarray, value_fn: ValueFn, config: PlannerConfig
) -> np.ndarray:
    """d_cg [N+1]: solved distance from each landmark (then the goal itself, 0) to the goal."""
    return _solve_to_goal(pairwise_graph(landmarks, goal, value_fn, config.d_max, config.adaptive_cut), config)


def _solve_to_goal(w: np.ndarray, config: PlannerConfig) -> np.ndarray:
    """The goal column (last node) of the all-pairs solution of w [N+1, N+1] by config.search."""
    if config.search == "hard":
        d = shortest_paths_hard(w)
    else:
        d = shortest_paths_soft(w, config.temperature, config.search_iterations, guard=config.search == "soft")
    return d[:, -1].copy()


# ------------------------------------------------------- per-landmark-set cache


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
    """

    def __init__(self, landmarks: np.ndarray, value_fn: ValueFn, max_cached: int = 8) -> None:
        landmarks = np.array(landmarks, dtype=np.float32)
        if landmarks.ndim != 2 or landmarks.shape[1] == 0:
            raise ValueError(f"landmarks must have shape [N, goal_dim], got {landmarks.shape}")
        landmarks.flags.writeable = False
        self.landmarks = landmarks
        n = len(landmarks)
        self._uncut = np.zeros((0, 0))
        if n > 0:
            values = value_fn(np.repeat(landmarks, n, axis=0), np.tile(landmarks, (n, 1)))
            self._uncut = _uncut_edges(values, n, n)
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
        return self.distances_to_goals(_as_nodes(self.landmarks, goal)[-1:], value_fn, config)[0]

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
        return _uncut_edges(values, r, n)

    def distances_from_steps(self, steps: np.ndarray, config: PlannerConfig) -> np.ndarray:
        """The second half: d_cg [R, N+1] from `steps_to_goals` rows [R, N] (of one call or
        stacked from several: each row is cut and solved on its own), by config's search."""
        r, n = steps.shape
        if n != len(self.landmarks):
            raise ValueError(f"steps must have shape [R, {len(self.landmarks)}], got {steps.shape}")
        d_cg = np.zeros((r, n + 1))
        if n > 0 and r > 0:
            w = _cut_edges(steps.T, config.d_max, config.adaptive_cut)  # cut per goal column
            d_cg[:, :n] = self._block(config).goal_columns(np.ascontiguousarray(w.T))
        return d_cg

    def episode_weights(self, goal: np.ndarray, value_fn: ValueFn, config: PlannerConfig) -> np.ndarray:
        """The episode's whole edge matrix [N+1, N+1], equal to `pairwise_graph` for these
        landmarks and this goal, from the cached landmark block: N value_fn calls (landmark ->
        goal). Edges are cut column by column, so the blocks are cut as in the whole graph."""
        nodes = _as_nodes(self.landmarks, goal)
        n = len(self.landmarks)
        w = np.full((n + 1, n + 1), np.inf)
        if n > 0:
            w[:n, :n] = _cut_edges(self._uncut, config.d_max, config.adaptive_cut)
            values = value_fn(np.ascontiguousarray(nodes[:n]), np.repeat(nodes[n:], n, axis=0))
            w[:n, n] = _cut_edges(_uncut_edges(values, n, 1), config.d_max, config.adaptive_cut)[:, 0]
        np.fill_diagonal(w, 0.0)
        return w

    def _block(self, config: PlannerConfig) -> "_HardBlock | _SoftBlock":
        key = _block_key(config)
        with self._lock:  # held while solving: concurrent first uses solve once
            block = self._blocks.get(key)
            if block is None:
                w = _cut_edges(self._uncut, config.d_max, config.adaptive_cut)
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
        chunk = max(1, _SOFT_BLOCK_ELEMENTS // max(1, n * n))  # bounds the [chunk, n, n] sums
        for start in range(0, r, chunk):
            goals = slice(start, start + chunk)
            # The last edge of any path to the goal is some k -> goal (k = i: the direct edge).
            out[goals] = np.min(self.d[None] + w[goals, None, :], axis=2, initial=np.inf)
        return out


class _SoftIterate:
    def __init__(self, d: np.ndarray, temperature: float) -> None:
        self.d = d
        with np.errstate(over="ignore", under="ignore"):
            self.a, self.b = _soft_factors(d, temperature)
        self.ab = np.hstack([self.a, self.b])  # [n, 2n], for _soft_goal_column's one product
        self.finite_max = float(np.max(d, initial=0.0, where=np.isfinite(d)))


class _SoftBlock:
    """The landmark iterates of `shortest_paths_soft` (guard: search "soft"; without:
    "expectation"), each with its `_soft_factors`."""

    def __init__(self, w: np.ndarray, temperature: float, iterations: int, guard: bool) -> None:
        self.temperature, self.iterations, self.guard = temperature, iterations, guard
        self.iterates: list[_SoftIterate] = []
        self.fixed_at = iterations  # first iteration that leaves the block unchanged
        d = _check_weights(w)
        for t in range(iterations):
            iterate = _SoftIterate(d, temperature)
            self.iterates.append(iterate)
            new = _soft_expectation(d, temperature, (iterate.a, iterate.b))
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
        with np.errstate(over="ignore", under="ignore"):  # see _soft_factors
            for t in range(self.iterations):
                block = self.iterates[min(t, len(self.iterates) - 1)]
                current = c[active]
                new = _soft_goal_columns(block, current, self.temperature)
                if self.guard:
                    np.minimum(current, new, out=new)
                c[active] = new
                # shortest_paths_soft stops once its whole matrix is unchanged: block and column.
                if t >= self.fixed_at:
                    active = active[~(new == current).all(axis=1)]
                    if active.size == 0:
                        break
        return c


# ---------------------------------------------------------------- episode planner


@dataclass
class StepResult:
    action: np.ndarray  # [action_dim]
    subgoal: np.ndarray  # [goal_dim] the goal pursued this step (read-only)
    subgoal_index: int  # landmark index, or -1 for the final goal
    replanned: bool  # this step ran the re-plan of Algorithm 1
    counter: int  # steps left before the next re-plan
    estimated_distance: float  # D(obs, subgoal) in steps on re-plan steps, else 0.0


POLICY, DISTANCE = "policy", "distance"


@dataclass(frozen=True)
class Inference:
    """The one network call a step needs (`EpisodePlanner.prepare`): `fn` is POLICY
    (policy_fn, output actions [K, action_dim]) or DISTANCE (distance_fn, output
    (distances [K], actions [K, action_dim])), on `obs` [K, obs_dim] and `goals` [K, goal_dim],
    float32 arrays owned by the planner (read them before the next prepare)."""

    fn: str
    obs: np.ndarray
    goals: np.ndarray


class EpisodePlanner:
    """Per-episode planning state (Algorithm 1). Not thread-safe: one per session.

    The graph is solved once here; `step` then costs one batched distance_fn call on
    re-plan steps and one batch-1 policy_fn call otherwise. Callables receive float32
    C-contiguous arrays owned by the planner and must not keep references to them.
    A server batching many episodes' calls splits `step` into `prepare` (what to compute)
    and `complete` (the network's output in, the step's result out).

    `landmarks` is an [N, goal_dim] array, or a `LandmarkGraph` that already holds the
    landmark-landmark part of the solve (a server's landmarks are the same for every episode;
    training's are not: it adds temporary ones per episode). With a LandmarkGraph, `d_cg` may
    pass this goal's row of `LandmarkGraph.distances_to_goals` (episodes started together).
    """

    def __init__(
        self,
        landmarks: "np.ndarray | LandmarkGraph",
        goal: np.ndarray,
        value_fn: ValueFn,
        config: PlannerConfig,
        seed: int | None = None,
        *,
        d_cg: np.ndarray | None = None,
    ) -> None:
        config.validate()
        self.config = config
        graph = landmarks if isinstance(landmarks, LandmarkGraph) else None
        self._nodes = _as_nodes(graph.landmarks if graph else landmarks, goal)
        self._nodes.flags.writeable = False  # subgoals are returned as views of it
        self._n = self._nodes.shape[0] - 1
        if d_cg is not None:  # solved already, with other episodes' goals
            if graph is None or np.shape(d_cg) != (self._n + 1,):
                raise ValueError("d_cg [N+1] comes with a LandmarkGraph (distances_to_goals)")
            self._d_cg = np.array(d_cg, dtype=np.float64)
        elif graph is not None:
            self._d_cg = graph.distances_to_goal(self._nodes[-1], value_fn, config)
        else:
            self._d_cg = distances_to_goal(self._nodes[:-1], self._nodes[-1], value_fn, config)
        self._d_cg.flags.writeable = False
        self.landmark_to_goal: np.ndarray = self._d_cg[:-1]  # [N], inf where unreachable (at start)
        self._value_fn = value_fn  # kept for prune_failed's re-solve
        self._graph = graph
        self._seed = seed
        self._rng: np.random.Generator | None = None  # made on first use (sample_subgoal)
        self.step_count: int = 0
        self.replans: int = 0
        self._counter = 0
        self._subgoal = GOAL  # the goal until the first re-plan picks something else
        self._subgoal_d = 0.0  # D(state, subgoal) when it was picked
        self._pruned = np.zeros(self._n, bool)  # prune_failed: landmarks removed this episode
        self._w: np.ndarray | None = None  # prune_failed: this episode's graph, made on first prune
        self._pending: tuple[int, int] | None = None  # prepared: (index, counter) or re-plan
        self._prepared = False
        self._obs = np.empty((0, 0), np.float32)  # [N+1, obs_dim] batch, sized on first step
        self._d_sc = np.empty(self._n + 1)  # scratch: state -> candidate distances
        self._total = np.empty(self._n + 1)  # scratch: d_sc + d_cg

    @property
    def n_landmarks(self) -> int:
        return self._n

    @property
    def pruned(self) -> int:
        """Landmarks pruned so far this episode (prune_failed)."""
        return int(self._pruned.sum())

    def step(self, obs: np.ndarray, distance_fn: DistanceFn, policy_fn: PolicyFn) -> StepResult:
        """One observation [obs_dim] in, one action out."""
        need = self.prepare(obs)
        return self.complete((distance_fn if need.fn == DISTANCE else policy_fn)(need.obs, need.goals))

    def prepare(self, obs: np.ndarray) -> Inference:
        """First half of `step`: the network call this observation needs. Changes no episode
        state, so a step whose call fails can be prepared again (retried)."""
        self._load_obs(obs)
        mode = self.config.mode
        if mode == "policy":
            self._pending = (GOAL, 0)
        elif mode == "l3p" and self._counter >= 1:
            self._pending = (self._subgoal, self._counter - 1)
        else:
            self._pending = None
        self._prepared = True
        if self._pending is None:
            self._obs[1:] = self._obs[0]
            return Inference(DISTANCE, self._obs, self._nodes)
        row = self._row(self._pending[0])
        return Inference(POLICY, self._obs[:1], self._nodes[row : row + 1])

    def complete(self, output) -> StepResult:
        """Second half of `step`: the output of the call `prepare` asked for -> the result."""
        if not self._prepared:
            raise RuntimeError("complete() needs a prepare() first")
        if self._pending is None:
            result = self._replan(output)
        else:
            index, counter = self._pending
            actions = np.asarray(output)
            if actions.ndim != 2 or actions.shape[0] != 1:
                raise ValueError(f"policy_fn must return [1, action_dim], got shape {actions.shape}")
            result = StepResult(actions[0], self._nodes[self._row(index)], index, False, counter, 0.0)
            if self.config.mode == "l3p":
                self._counter = counter
        self._prepared = False
        self.step_count += 1
        return result

    # -- internals

    def _load_obs(self, obs: np.ndarray) -> None:
        obs = np.asarray(obs)
        if obs.ndim != 1 or obs.size == 0:
            raise ValueError(f"obs must be a non-empty 1-d array, got shape {obs.shape}")
        if self._obs.shape[1] != obs.size:
            if self._obs.shape[1] > 0:
                raise ValueError(f"obs has {obs.size} dims, earlier steps had {self._obs.shape[1]}")
            self._obs = np.empty((self._n + 1, obs.size), np.float32)  # first step
        self._obs[0] = obs  # the other rows are filled only when re-planning needs them

    def _row(self, index: int) -> int:
        return self._n if index == GOAL else index

    def _replan(self, output) -> StepResult:
        cfg, n = self.config, self._n
        raw_d, actions = output
        raw_d, actions = np.asarray(raw_d), np.asarray(actions)
        if raw_d.size != n + 1 or actions.ndim != 2 or actions.shape[0] != n + 1:
            raise ValueError(
                f"distance_fn must return ([{n + 1}], [{n + 1}, action_dim]), "
                f"got {raw_d.shape} and {actions.shape}"
            )
        d_sc = self._d_sc
        np.copyto(d_sc, raw_d.reshape(-1))
        # NaN would win argmin and negative steps mean nothing: treat as unreachable / 0.
        np.copyto(d_sc, np.inf, where=np.isnan(d_sc))
        np.maximum(d_sc, 0.0, out=d_sc)
        l3p = cfg.mode == "l3p"

        if d_sc[n] <= cfg.local_horizon:
            row = n  # the goal is close: go straight for it
        else:
            prune = l3p and cfg.prune_failed
            if prune and self._subgoal != GOAL and self._failed(d_sc[self._subgoal]):
                self._prune(self._subgoal)
            total = np.add(d_sc, self._d_cg, out=self._total)
            excluded = d_sc[:n] > cfg.d_max  # unreliable local D
            if l3p and self._subgoal != GOAL:
                excluded[self._subgoal] = True  # never re-pick the subgoal being replaced
            if prune:
                excluded |= self._pruned
                excluded |= d_sc[:n] < PRUNE_AT_STEPS  # already there
            np.copyto(total[:n], np.inf, where=excluded)
            if d_sc[n] > cfg.d_max and np.isfinite(total[:n]).any():
                total[n] = np.inf  # a far goal is cut like a landmark while one is usable
            row = self._choose(total)

        self.replans += 1
        index = GOAL if row == n else row
        d_pick = float(d_sc[row])
        if l3p:
            # "How many steps it thinks it needs", capped so a bad estimate cannot lock the
            # agent on one node; a non-finite estimate (fallback to the goal) commits to nothing.
            steps = round(d_pick) + cfg.counter_extra if math.isfinite(d_pick) else 0
            self._counter = min(steps, cfg.counter_cap)
            self._subgoal = index
            self._subgoal_d = d_pick
        return StepResult(actions[row], self._nodes[row], index, True, self._counter, d_pick)

    def _failed(self, d_now: float) -> bool:
        """prune_failed: the subgoal being replaced was not reached (its counter ran out)."""
        return d_now > max(PRUNE_MIN_STEPS, PRUNE_PROGRESS * self._subgoal_d)

    def _prune(self, landmark: int) -> None:
        """Remove the landmark's incoming edges for this episode and solve d_cg again."""
        if self._w is None:  # the episode's edges, on the first prune only
            landmarks, goal, cfg = self._nodes[:-1], self._nodes[-1], self.config
            if self._graph is not None:  # N value calls; the landmark block is cached
                self._w = self._graph.episode_weights(goal, self._value_fn, cfg)
            else:  # N x (N+1) value calls
                self._w = pairwise_graph(landmarks, goal, self._value_fn, cfg.d_max, cfg.adaptive_cut)
        self._pruned[landmark] = True
        self._w[:, landmark] = np.inf
        self._w[landmark, landmark] = 0.0
        self._d_cg = _solve_to_goal(self._w, self.config)
        self._d_cg.flags.writeable = False

    def _choose(self, total: np.ndarray) -> int:
        """Row of the pick: argmin, or a softmax(-total / temperature) sample; goal if all inf."""
        best = int(np.argmin(total))
        if not math.isfinite(total[best]):
            return self._n  # nothing reachable: pursue the goal directly
        if not self.config.sample_subgoal:
            return best
        # Inverse-CDF sampling; inf entries get weight exp(-inf) = 0 and are never drawn.
        weights = np.exp((total[best] - total) / self.config.temperature)
        cdf = np.cumsum(weights)
        if self._rng is None:
            self._rng = np.random.default_rng(self._seed)
        row = int(np.searchsorted(cdf, self._rng.random() * cdf[-1], side="right"))
        return row if row < total.size and weights[row] > 0 else best
