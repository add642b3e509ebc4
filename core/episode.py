"""The per-episode state machine of Algorithm 1, over a landmark graph.

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
   With ``local_cut`` < 1 (an extension) distances from the state are cut at local_cut * d_max
   while graph edges are cut at d_max; with ``follow_edges`` (an extension, l3p) every hop is
   an edge of the episode's graph: the state counts as at its nearest landmark by D (and at the
   subgoal being replaced, when it was reached), and the candidates are that landmark and the
   landmarks and goal those anchors have edges to, whatever their distance from the state (the
   goal also within local_horizon), so a short D across a wall is never a hop; local_cut then
   only decides when pruning gives the graph back (the goal beyond local_cut * d_max).
   With ``prune_loops`` (an extension, l3p) a landmark picked again within a few re-plans without
   the estimate of the rest of the way having fallen is pruned like a failed subgoal.
   With ``next_hop`` (an extension, l3p) every step re-plans: outside the local horizon the state
   counts as at the landmark nearest it by D and the subgoal is that landmark's next node on the
   episode graph's route to the goal; no counter, no exclusion, no pruning, no local cut (what it
   makes do nothing is its row of the option table, `PlannerConfig`).
   With ``prune_failed`` (an extension, off by default) the episode
   also remembers subgoals it failed to reach and removes them from its graph, and restores
   them all when that leaves no route and the goal is beyond local_cut * d_max. With ``require_progress``
   (also an extension, off by default) a landmark is a candidate only if its d_cg is below
   that of the last landmark the episode picked, so the picks approach the goal and cannot
   cycle.
   Mode ``naive`` re-plans every step (no counter, no exclusion) and keeps the same
   local-horizon shortcut, so l3p vs naive measures the counter and the exclusion alone
   (``local_horizon=0`` turns the shortcut off in both); mode ``policy`` skips planning:
   action = pi(obs, goal). In every mode the action returned is pi's times ``action_scale``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from l3p.core.config import LOOP_REPLANS, PRUNE_AT_STEPS, PRUNE_MIN_STEPS, PRUNE_PROGRESS, PlannerConfig
from l3p.core.landmarks import LandmarkGraph
from l3p.core.names import GOAL
from l3p.core.search import ValueFn, as_nodes, solve_to_goal, distances_to_goal, pairwise_graph

DistanceFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(obs [K, obs_dim], goals [K, goal_dim]) -> (D(s, pi(s,g), g) [K], pi(s,g) [K, action_dim])"""
PolicyFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(obs [K, obs_dim], goals [K, goal_dim]) -> actions [K, action_dim]"""


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
        self._nodes = as_nodes(graph.landmarks if graph else landmarks, goal)
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
        self._d_cg_start = self._d_cg  # prune_failed replaces _d_cg, never this array
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
        self._bound = GOAL  # require_progress: the last landmark picked (GOAL: none yet)
        self._pruned = np.zeros(self._n, bool)  # prune_failed/prune_loops: landmarks removed this episode
        self._picked: dict[int, tuple[int, float]] = {}  # prune_loops: landmark -> (re-plan, estimate) at its last pick
        self._w_start: np.ndarray | None = None  # prune_failed: the episode's edges, made on the first prune
        self._w: np.ndarray | None = None  # ... less the pruned landmarks' incoming edges
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
        """Landmarks pruned from this episode's graph now (prune_failed; a restore clears them)."""
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
        if self.config.action_scale != 1.0:
            result.action = result.action * np.float32(self.config.action_scale)
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
        elif l3p and cfg.next_hop:
            row = self._next_hop(d_sc)
        else:
            prune = l3p and (cfg.prune_failed or cfg.prune_loops)
            if l3p and cfg.prune_failed and self._subgoal != GOAL and self._failed(d_sc[self._subgoal]):
                self._prune(self._subgoal)
            total = self._totals(d_sc, prune)
            row = self._choose(total)
            looped = l3p and cfg.prune_loops and row < n and self._looped(row, total[row])
            if looped:
                self._prune(row)  # back to a landmark it left without getting nearer the goal
                total = self._totals(d_sc, prune)
                row = self._choose(total)  # the goal itself when the loop was the only way left
            if (not looped and prune and self._pruned.any() and d_sc[n] > cfg.local_d_max
                    and not np.isfinite(total[:n]).any()):
                # Pruning left no route and the goal is out of reach: pressing towards it (into a
                # wall, as often as not) cannot recover, so the episode's graph is restored.
                self._unprune()
                total = self._totals(d_sc, prune)
                row = self._choose(total)
            if l3p and cfg.prune_loops and row < n:
                self._picked[row] = (self.replans, float(total[row]))

        self.replans += 1
        index = GOAL if row == n else row
        d_pick = float(d_sc[row])
        if l3p:
            # "How many steps it thinks it needs", capped so a bad estimate cannot lock the
            # agent on one node; a non-finite estimate (fallback to the goal) commits to nothing.
            steps = round(d_pick) + cfg.counter_extra if math.isfinite(d_pick) and not cfg.next_hop else 0
            self._counter = min(steps, cfg.counter_cap)
            self._subgoal = index
            self._subgoal_d = d_pick
            if index != GOAL:
                self._bound = index
        return StepResult(actions[row], self._nodes[row], index, True, self._counter, d_pick)

    def _totals(self, d_sc: np.ndarray, prune: bool) -> np.ndarray:
        """d_sc + d_cg over the candidates, inf where a candidate is excluded (see the module)."""
        cfg, n = self.config, self._n
        total = np.add(d_sc, self._d_cg, out=self._total)
        follow = cfg.mode == "l3p" and cfg.follow_edges and n > 0
        if follow:  # the route goes on from the anchors by the graph's edges, and nowhere else
            w = self._episode_weights()
            anchors = self._anchors(d_sc)
            excluded = np.ones(n, bool)
            excluded[anchors[0]] = False  # the nearest landmark itself
            for anchor in anchors:
                excluded &= ~np.isfinite(w[anchor, :n])
            goal_cut = not any(np.isfinite(w[anchor, n]) for anchor in anchors)
        else:
            excluded = d_sc[:n] > cfg.local_d_max  # unreliable local D
            goal_cut = d_sc[n] > cfg.local_d_max
        if cfg.mode == "l3p" and self._subgoal != GOAL:
            excluded[self._subgoal] = True  # never re-pick the subgoal being replaced
        if cfg.mode == "l3p" and cfg.require_progress and self._bound != GOAL:
            excluded |= self._d_cg[:n] >= self._d_cg[self._bound]  # nearer the goal than the last pick
        if prune:
            excluded |= self._pruned
            excluded |= d_sc[:n] < PRUNE_AT_STEPS  # already there
        np.copyto(total[:n], np.inf, where=excluded)
        if goal_cut and np.isfinite(total[:n]).any():
            total[n] = np.inf  # a far goal is cut like a landmark while one is usable
        return total

    def _next_hop(self, d_sc: np.ndarray) -> int:
        """next_hop: the row of the node after the landmark nearest the state (by D) on the episode
        graph's route to the goal; the goal's when that landmark has no route (or there are none)."""
        if self._n == 0:
            return self._n
        anchor = int(np.argmin(d_sc[:self._n]))
        via = np.add(self._episode_weights()[anchor], self._d_cg, out=self._total)  # scratch: no per-step array
        via[anchor] = np.inf
        best = int(np.argmin(via))
        return best if math.isfinite(via[best]) else self._n

    def _anchors(self, d_sc: np.ndarray) -> list[int]:
        """follow_edges: the landmarks the state counts as at: the nearest by D (first), and the
        subgoal being replaced when it was reached (not `_failed`: as near as its pursuit got)."""
        nearest = int(np.argmin(d_sc[:self._n]))
        anchors = [nearest]
        if self._subgoal != GOAL and self._subgoal != nearest and not self._failed(d_sc[self._subgoal]):
            anchors.append(self._subgoal)
        return anchors

    def _looped(self, landmark: int, estimate: float) -> bool:
        """prune_loops: the landmark was picked within the last LOOP_REPLANS re-plans, and the
        estimate of the rest of the way (d_sc + d_cg) has not fallen by PRUNE_MIN_STEPS since."""
        last = self._picked.get(landmark)
        return last is not None and self.replans - last[0] <= LOOP_REPLANS and estimate > last[1] - PRUNE_MIN_STEPS

    def _failed(self, d_now: float) -> bool:
        """prune_failed: the subgoal being replaced was not reached (its counter ran out)."""
        return d_now > max(PRUNE_MIN_STEPS, PRUNE_PROGRESS * self._subgoal_d)

    def _start_weights(self) -> np.ndarray:
        """The episode's edges [N+1, N+1] as it started, made once (a restore does not make them again)."""
        if self._w_start is None:
            landmarks, goal, cfg = self._nodes[:-1], self._nodes[-1], self.config
            if self._graph is not None:  # N value calls; the landmark block is cached
                self._w_start = self._graph.episode_weights(goal, self._value_fn, cfg)
            else:  # N x (N+1) value calls
                self._w_start = pairwise_graph(landmarks, goal, self._value_fn, cfg.d_max, cfg.adaptive_cut)
        return self._w_start

    def _episode_weights(self) -> np.ndarray:
        """follow_edges, next_hop: the episode's edges [N+1, N+1] now (less the pruned landmarks' incoming edges)."""
        return self._w if self._w is not None else self._start_weights()

    def _prune(self, landmark: int) -> None:
        """Remove the landmark's incoming edges for this episode and solve d_cg again."""
        if self._w is None:  # the first prune since the start or a restore
            self._w = self._start_weights().copy()
        self._pruned[landmark] = True
        self._w[:, landmark] = np.inf
        self._w[landmark, landmark] = 0.0
        self._d_cg = solve_to_goal(self._w, self.config)
        self._d_cg.flags.writeable = False

    def _unprune(self) -> None:
        """Forget this episode's prunes: its graph and d_cg as they were at the start."""
        self._pruned[:] = False
        self._w = None
        self._d_cg = self._d_cg_start

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
