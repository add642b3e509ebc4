"""Where the served ant falls: the planner in-process (the server's planner code and the bundle's ONNX
networks) on validation episodes (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps),
at the bundle's d_max or another; wins, falls, and how near a wall the ant was when it began to tip
(its up axis below 0.8; a diagnostic with the maze's walls), beside all its steps. With --expert, the
expert that recorded the data drives the ant instead of the learned actor, given the unit direction
to each subgoal as the dataset generator gives it the oracle's.

    python docs/measurements/antmaze-offline/falls.py BUNDLE EPISODES [--d-max D] [--expert POLICY.npz]
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
ap.add_argument("--d-max", type=float, help="the planner's d_max (default: the bundle's)")
ap.add_argument("--expert", help="the expert's policy file: it drives the ant toward each subgoal")
a = ap.parse_args()
b = load_bundle(a.bundle)
config = b.planner_defaults if a.d_max is None else b.planner_defaults.replace(d_max=a.d_max)
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
wins, fell, tipping, path = 0, 0, [], []
for seed, task in episode_plan(env, b.env_id, a.episodes, 1_500_000_000, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    planner = EpisodePlanner(graph, obs["desired_goal"], b.value_fn, config, seed=seed)
    tipped = None
    for t in range(1000):
        path.append(obs["achieved_goal"].copy())
        if tipped is None and up(obs["observation"]) < 0.8:
            tipped = obs["achieved_goal"].copy()
        step = planner.step(obs["observation"], b.distance_fn, policy_fn)
        obs, _, _, _, info = env.step(step.action)
        if info["success"] or up(obs["observation"]) < 0.0:
            break
    wins += bool(info["success"])
    if up(obs["observation"]) < 0.0:
        fell += 1
        tipping.append(tipped if tipped is not None else obs["achieved_goal"])
near = wall_gap(np.array(tipping), env) < 1.0 if tipping else np.zeros(0, bool)
print(f"{a.bundle}{' (the expert driving)' if a.expert else ''}, d_max {config.d_max}: {wins} of {a.episodes}, "
      f"{fell} fell; {int(near.sum())} of the {fell} began to tip within 1 m of a wall, where "
      f"{np.mean(wall_gap(np.array(path), env) < 1.0):.0%} of all steps lie")
