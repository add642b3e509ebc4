"""Planner variants on an ant bundle, in-process (the server's planner code, one choice patched):
validation episodes (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps); wins and
the mean speed (m per step) over all episodes.

    python docs/measurements/antmaze-offline/planner_variants.py BUNDLE EPISODES VARIANT [KEY=VALUE ...]

VARIANT: served (the bundle's planner); farthest (from the pick, the route's next landmarks while
the state reaches them directly, D <= d_max: the farthest); successor (the route's next landmark
after the landmark nearest the state by D, chosen afresh each re-plan); past (the pick and its
counter as served, but the actor is given the route's next landmark past the pick); sight (a diagnostic that uses
the maze's walls, which no served planner knows: only the data edges whose straight segment stays
``margin`` m clear of every wall cell, KEY margin=M, default 0); counter (the counter scaled, KEY scale=K:
min(round(K * D) + counter_extra, ceil(K * d_max)), and, KEY arrive=A > 0, a re-plan as soon as D(state,
subgoal) <= A; defaults 1 and 0, the served counter). KEY=VALUE: planner overrides
(e.g. mode=naive). The outputs' first lines were measured with the planner before commit 3d26ae5, whose
follow_edges took the nearest landmark as an anchor only within 3 steps (at6: within 6).
"""
import math
import sys

import numpy as np

import l3p.core.episode as E
from l3p.clients.protocol import episode_plan, open_env
from l3p.core.landmarks import LandmarkGraph
from l3p.serving.bundle import load_bundle
from walls import wall_boxes

served_choose = E.EpisodePlanner._choose


def next_on_route(self, node: int) -> int:
    """The route's node after ``node``: argmin over edges node -> j of w + d_cg(j) (N: the goal)."""
    via = self._episode_weights()[node] + self._d_cg
    via[node] = np.inf
    return int(np.argmin(via)) if np.isfinite(via).any() else node


def farthest(self, total):
    row = served_choose(self, total)
    n, d_sc = self._n, self._d_sc
    seen = {row}
    while row < n:
        nxt = next_on_route(self, row)
        if nxt in seen or d_sc[nxt] > self.config.d_max:
            break
        seen.add(nxt)
        row = nxt
    return row


def successor(self, total):
    return next_on_route(self, int(np.argmin(self._d_sc[:self._n])))


served_replan, served_prepare = E.EpisodePlanner._replan, E.EpisodePlanner.prepare


def past_replan(self, output):
    r = served_replan(self, output)
    row = self._n if r.subgoal_index == E.GOAL else r.subgoal_index
    self._past = row if row == self._n else next_on_route(self, row)
    return E.StepResult(np.asarray(output[1])[self._past], r.subgoal, r.subgoal_index, r.replanned, r.counter,
                        r.estimated_distance)


def past_prepare(self, obs):
    need = served_prepare(self, obs)
    if need.fn == E.POLICY and self.config.mode == "l3p" and getattr(self, "_past", None) is not None:
        return E.Inference(E.POLICY, need.obs, self._nodes[self._past:self._past + 1])
    return need


def scaled_replan(self, output):
    r = served_replan(self, output)
    if math.isfinite(r.estimated_distance) and self.config.mode == "l3p":
        self._counter = r.counter = min(round(scale * r.estimated_distance) + self.config.counter_extra,
                                        math.ceil(scale * self.config.d_max))
    return r


bundle, episodes, variant = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if variant == "farthest":
    E.EpisodePlanner._choose = farthest
elif variant == "successor":
    E.EpisodePlanner._choose = successor
elif variant == "past":
    E.EpisodePlanner._replan, E.EpisodePlanner.prepare = past_replan, past_prepare
elif variant == "counter":
    E.EpisodePlanner._replan = scaled_replan
elif variant not in ("served", "sight"):
    raise SystemExit(f"unknown variant {variant!r}")
overrides = {}
for kv in sys.argv[4:]:
    key, value = kv.split("=")
    overrides[key] = (value == "true" if value in ("true", "false") else int(value) if value.isdigit()
                      else float(value) if value[0].isdigit() else value)


def clear_of_walls(edges: np.ndarray, landmarks: np.ndarray, env, margin: float) -> np.ndarray:
    """The edges whose straight segment stays ``margin`` m clear of every wall cell."""
    env.reset(seed=0)
    low, high = wall_boxes(env)
    low, high = low - margin, high + margin
    kept = np.array(edges, bool)
    t = np.linspace(0.0, 1.0, 25)[:, None]
    for i, j in np.argwhere(kept):
        points = (landmarks[i] + t * (landmarks[j] - landmarks[i]))[:, None, :]
        kept[i, j] = not ((points > low) & (points < high)).all(-1).any()
    print(f"edges clear of the walls by {margin} m: {int(kept.sum())} of {int(np.sum(edges))}")
    return kept


margin = float(overrides.pop("margin", 0.0))
scale, arrive = float(overrides.pop("scale", 1.0)), float(overrides.pop("arrive", 0.0))
b = load_bundle(bundle)
env = open_env(b.env_id, max_steps=1000)
edges = clear_of_walls(b.edges, np.asarray(b.landmarks), env, margin) if variant == "sight" else b.edges
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=edges)
wins, path, steps = 0, 0.0, 0
for seed, task in episode_plan(env, b.env_id, episodes, 1_500_000_000, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    ep = E.EpisodePlanner(graph, obs["desired_goal"], b.value_fn, b.planner_defaults.replace(**overrides), seed=seed)
    for t in range(1000):
        before = obs["achieved_goal"]
        if arrive > 0 and ep._counter >= 1 and ep._subgoal != E.GOAL:
            reached = b.distance_fn(obs["observation"][None], ep._nodes[ep._subgoal][None])[0][0] <= arrive
            ep._counter = 0 if reached else ep._counter  # at the subgoal: re-plan now
        obs, _, _, _, info = env.step(ep.step(obs["observation"], b.distance_fn, b.policy_fn).action)
        path += float(np.linalg.norm(obs["achieved_goal"] - before))
        steps += 1
        if info["success"]:
            break
    wins += bool(info["success"])
shown = {**overrides, **({"scale": scale, "arrive": arrive} if variant == "counter" else {})}
print(f"{variant} {shown}: {wins} of {episodes}, {path / steps:.3f} m per step")
