"""The served ant's pace: its speed, and its progress toward the subgoal it pursues, by distance to that
subgoal, on validation episodes (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps),
in-process (the server's planner code and the bundle's ONNX networks). The expert that recorded the
data follows a commanded direction at 0.165 m a step (docs/measurements/ant-expert/expert_eval.json).

    python docs/measurements/antmaze-offline/pace.py BUNDLE EPISODES [--action-scale A]
"""
import argparse

import numpy as np

from l3p.clients.protocol import episode_plan, open_env
from l3p.core.episode import EpisodePlanner
from l3p.core.landmarks import LandmarkGraph
from l3p.serving.bundle import load_bundle
from l3p.sim.envs import goal_adapter

ap = argparse.ArgumentParser()
ap.add_argument("bundle")
ap.add_argument("episodes", type=int)
ap.add_argument("--action-scale", type=float, help="the planner's action_scale (default: the bundle's)")
a = ap.parse_args()
b = load_bundle(a.bundle)
config = b.planner_defaults if a.action_scale is None else b.planner_defaults.replace(action_scale=a.action_scale)
env = open_env(b.env_id, max_steps=1000)
up = goal_adapter(env).uprightness
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=b.edges)
rows = []  # per step: distance to the subgoal, speed, progress toward the subgoal (m)
for seed, task in episode_plan(env, b.env_id, a.episodes, 1_500_000_000, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    planner = EpisodePlanner(graph, obs["desired_goal"], b.value_fn, config, seed=seed)
    for t in range(1000):
        here = obs["achieved_goal"].copy()
        step = planner.step(obs["observation"], b.distance_fn, b.policy_fn)
        obs, _, _, _, info = env.step(step.action)
        way = step.subgoal[:2] - here
        gap = float(np.linalg.norm(way))
        moved = obs["achieved_goal"] - here
        rows.append((gap, float(np.linalg.norm(moved)), float(moved @ way) / max(gap, 1e-6)))
        if info["success"] or up(obs["observation"]) < 0.0:
            break
r = np.array(rows)
print(f"{a.bundle}, action_scale {config.action_scale}, {a.episodes} episodes ({len(r)} steps): speed "
      f"{r[:, 1].mean():.3f} m a step, toward the subgoal {r[:, 2].mean():.3f}")
for low, high in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 6), (6, np.inf)]:
    m = (r[:, 0] >= low) & (r[:, 0] < high)
    if m.any():
        print(f"  subgoal {low}-{high} m away: {m.mean():.0%} of steps, speed {r[m, 1].mean():.3f}, "
              f"toward it {r[m, 2].mean():.3f}")
