"""The landmark graph and its search: edges from the value function, cut at d_max, and
all-pairs shortest paths (exact, or the paper's soft relaxation made safe).

Distances are positive step counts and ``np.inf`` means "no edge / unreachable". Graph nodes
are the N landmarks (0..N-1) followed by the episode goal (index N).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from l3p.core.config import PlannerConfig, check_temperature
from l3p.core.names import is_int

ValueFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(goal_a [M, goal_dim], goal_b [M, goal_dim]) -> V(a -> b) [M] steps"""

# Soft search (see `soft_expectation`). Its fast path computes the softmin sums over k as
# matrix products of factors exp(_SOFT_SHIFT - d / temperature) floored at exp(-_SOFT_FLOOR):
# every product of two factors then lies in [e^-700, e^600], normal doubles. (The shift uses
# the top half of the float range, doubling how long a path the fast path covers; the floor
# avoids subnormal products, which make the BLAS product ~200x slower.)
_SOFT_SHIFT = 300.0
_SOFT_FLOOR = 350.0
_SOFT_FAST_ATOL = 1e-12  # max error (steps) the fast path may add; other pairs go exact
# The exact path materializes [pairs, n] candidate blocks; pairs are processed in blocks so
# memory stays bounded (~8 MB per float64 temporary) whatever the landmark count.
BLOCK_ELEMENTS = 1 << 20
_FINITE_STAND_IN = 1e300  # replaces inf candidates (which carry weight 0) in the soft sum


def as_nodes(landmarks: np.ndarray, goal: np.ndarray) -> np.ndarray:
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
    nodes = as_nodes(landmarks, goal)
    n = nodes.shape[0] - 1
    w = np.full((n + 1, n + 1), np.inf)
    if n > 0:
        src = np.repeat(nodes[:n], n + 1, axis=0)  # pair (i, j) at row i * (n+1) + j
        dst = np.tile(nodes, (n, 1))
        uncut = uncut_edges(value_fn(src, dst), n, n + 1)
        np.fill_diagonal(uncut, np.inf)  # self-loops are not edges (diag set to 0 below)
        w[:n] = cut_edges(uncut, d_max, adaptive_cut)
    np.fill_diagonal(w, 0.0)
    return w


def uncut_edges(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """value_fn's output as [rows, cols] steps: NaN -> inf (no edge), negatives -> 0."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size != rows * cols:
        raise ValueError(f"value_fn returned {values.size} values for {rows * cols} pairs")
    # A network can predict slightly negative steps; a negative edge would break the search.
    return np.maximum(np.where(np.isnan(values), np.inf, values), 0.0).reshape(rows, cols)


def cut_edges(uncut: np.ndarray, d_max: float, adaptive_cut: bool) -> np.ndarray:
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


def largest_component(adjacent: np.ndarray) -> np.ndarray:
    """[N] bool: the members of the largest strongly connected component of a directed graph
    [N, N] bool (the first such when several tie; none for N = 0)."""
    n = len(adjacent)
    if n == 0:
        return np.zeros(0, bool)
    reach = (np.asarray(adjacent, bool) | np.eye(n, dtype=bool)).astype(np.float32)
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):  # transitive closure by squaring
        reach = ((reach @ reach) > 0).astype(np.float32)
    both = (reach > 0) & (reach > 0).T
    return both[int(np.argmax(both.sum(axis=1)))]


# -------------------------------------------------------------------------- search


def check_weights(w: np.ndarray) -> np.ndarray:
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
    d = check_weights(w)
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
    check_temperature(temperature)
    if not (is_int(iterations) and iterations >= 1):
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")
    d = check_weights(w)
    for _ in range(iterations):
        new = soft_expectation(d, temperature)
        if guard:
            np.minimum(d, new, out=new)
        np.fill_diagonal(new, 0.0)
        if np.array_equal(new, d):  # a fixed point: the remaining iterations change nothing
            break
        d = new
    return d


def soft_factors(d: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) = (exp(_SOFT_SHIFT - d / T) floored at exp(-_SOFT_FLOOR), a * d): the factors of
    the fast path of `soft_expectation`, 0 where d is inf. Call under np.errstate(over=
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
    """Where the fast path's error is within _SOFT_FAST_ATOL (see `soft_expectation`)."""
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


def soft_expectation(
    d: np.ndarray, temperature: float, factors: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """E_ij for all pairs: the softmin-weighted mean of c_ijk = d_ik + d_kj over k.

    inf where no candidate is finite. Fast path: exp(-c_ijk / T) = exp(-d_ik / T) *
    exp(-d_kj / T), so with a = exp(-d / T) and b = a * d (0 where d is inf)

        sum_k exp(-c_ijk / T)         = (a @ a)_ij
        sum_k exp(-c_ijk / T) c_ijk   = (b @ a + a @ b)_ij

    three BLAS products instead of [n, n, n] candidate tensors (~20-30x faster at n = 101).
    The factors (`soft_factors`, or `factors` when the caller has them) carry a common
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
    with np.errstate(over="ignore", under="ignore"):  # see soft_factors
        a, b = soft_factors(d, temperature) if factors is None else factors
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
    block = max(1, BLOCK_ELEMENTS // n)
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


def soft_goal_columns(block, c: np.ndarray, temperature: float) -> np.ndarray:
    """E_ig for every landmark i and each of R goals g of graphs whose goal is a sink:
    `soft_expectation`'s goal column, from the landmark block (an iterate with its
    `soft_factors`) and c [R, n] (landmark i -> goal g at [g, i]), as one [n, 2n] x [2n, 2]
    product per goal instead of [n, n] products.

    The candidates of pair (i, g) are block_ik + c_gk over the landmarks k, and c_gi + 0
    through the goal itself (its row is inf but for the diagonal). Every operation is
    elementwise or per goal (a stacked matmul is one BLAS call per goal), so a goal's result
    does not depend on which other goals are solved with it. Call under the np.errstate of
    `soft_factors`.
    """
    r, n = c.shape
    ac, bc = soft_factors(c, temperature)
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
    return solve_to_goal(pairwise_graph(landmarks, goal, value_fn, config.d_max, config.adaptive_cut), config)


def solve_to_goal(w: np.ndarray, config: PlannerConfig) -> np.ndarray:
    """The goal column (last node) of the all-pairs solution of w [N+1, N+1] by config.search."""
    if config.search == "hard":
        d = shortest_paths_hard(w)
    else:
        d = shortest_paths_soft(w, config.temperature, config.search_iterations, guard=config.search == "soft")
    return d[:, -1].copy()


