"""Where the served ant falls: the planner in-process (the server's planner code and the bundle's ONNX
networks) on validation episodes (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps),
at the bundle's d_max or another; wins, falls, and how near a wall the ant was when it began to tip
(its up axis below 0.8; a diagnostic with the maze's walls), beside all its steps. With --expert, the
expert that recorded the data drives the ant instead of the learned actor, given the unit direction
to each subgoal as the dataset generator gives it the oracle's. --action-scale serves a gentler gait
(the planner's `action_scale`); --hold-below U sends a zero action while the up axis is below U
(until it is back above --hold-until), a reflex tried against tipping.

    python docs/measurements/antmaze-offline/falls.py BUNDLE EPISODES [--seed S] [--d-max D] [--action-scale A]
        [--hold-below U [--hold-until U2]] [--expert POLICY.npz]
"""
import argparse

import numpy as np

from l3p.clients.protocol import episode_plan, open_env
from l3p.core.episode import EpisodePlanner
from l3p.core.landmarks import LandmarkGraph
from l3p.core.mlp_policy import load_mlp_policy
from l3p.serving.bundle import load_bundle
from l3p.sim.datasets import follow
from l3p.sim.envs import goal_adapter
from walls import wall_gap

ap = argparse.ArgumentParser()
ap.add_argument("bundle")
ap.add_argument("episodes", type=int)
ap.add_argument("--seed", type=int, default=1_500_000_000, help="episode i's seed is SEED + i")
ap.add_argument("--d-max", type=float, help="the planner's d_max (default: the bundle's)")
ap.add_argument("--action-scale", type=float, help="the planner's action_scale (default: the bundle's)")
ap.add_argument("--hold-below", type=float, help="a zero action while the up axis is below this")
ap.add_argument("--hold-until", type=float, help="... until it is above this (default: --hold-below)")
ap.add_argument("--expert", help="the expert's policy file: it drives the ant toward each subgoal")
a = ap.parse_args()
b = load_bundle(a.bundle)
changes = {"d_max": a.d_max, "action_scale": a.action_scale}
config = b.planner_defaults.replace(**{k: v for k, v in changes.items() if v is not None})
hold_below = -2.0 if a.hold_below is None else a.hold_below
hold_until = hold_below if a.hold_until is None else a.hold_until
policy_fn = b.policy_fn
if a.expert:
    expert = load_mlp_policy(a.expert)

    def policy_fn(obs, goals):
        way = goals[:, :2] - obs[:, :2]
        way /= np.maximum(np.linalg.norm(way, axis=1, keepdims=True), 1e-6)
        return np.stack([follow(expert, o, w) for o, w in zip(obs, way)]).astype(np.float32)


env = open_env(b.env_id, max_steps=1000)
up = goal_adapter(env).uprightness
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=b.edges)
wins, fell, held, tipping, path = 0, 0, 0, [], []
for seed, task in episode_plan(env, b.env_id, a.episodes, a.seed, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    planner = EpisodePlanner(graph, obs["desired_goal"], b.value_fn, config, seed=seed)
    tipped, holding = None, False
    for t in range(1000):
        path.append(obs["achieved_goal"].copy())
        if tipped is None and up(obs["observation"]) < 0.8:
            tipped = obs["achieved_goal"].copy()
        holding = up(obs["observation"]) < (hold_until if holding else hold_below)
        held += holding
        step = planner.step(obs["observation"], b.distance_fn, policy_fn)
        obs, _, _, _, info = env.step(np.zeros_like(step.action) if holding else step.action)
        if info["success"] or up(obs["observation"]) < 0.0:
            break
    wins += bool(info["success"])
    if up(obs["observation"]) < 0.0:
        fell += 1
        tipping.append(tipped if tipped is not None else obs["achieved_goal"])
near = wall_gap(np.array(tipping), env) < 1.0 if tipping else np.zeros(0, bool)
hold = f", held below {hold_below} (to {hold_until}) {held} steps" if a.hold_below is not None else ""
print(f"{a.bundle}{' (the expert driving)' if a.expert else ''}, seeds {a.seed} + i, d_max {config.d_max}, "
      f"action_scale {config.action_scale}{hold}: {wins} of {a.episodes}, "
      f"{fell} fell; {int(near.sum())} of the {fell} began to tip within 1 m of a wall, where "
      f"{np.mean(wall_gap(np.array(path), env) < 1.0):.0%} of all steps lie")
