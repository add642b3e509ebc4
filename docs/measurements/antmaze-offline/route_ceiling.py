"""The learned actor alone along the maze's own shortest route: what the actor can do with a perfect
planner. Each step its goal is the centre of the next cell on the BFS path to the goal's cell (the
subgoal OGBench's oracle steers its expert by), the goal itself once in the goal's cell; with
--snap, that centre's nearest landmark of the bundle instead. Validation episodes (seeds
1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps), in-process with the bundle's ONNX
actor; the mean speed over all episodes.

    python docs/measurements/antmaze-offline/route_ceiling.py BUNDLE EPISODES [--snap]
"""
import argparse

import numpy as np

from l3p.clients.protocol import episode_plan, open_env
from l3p.serving.bundle import load_bundle
from l3p.sim.envs import goal_adapter

ap = argparse.ArgumentParser()
ap.add_argument("bundle")
ap.add_argument("episodes", type=int)
ap.add_argument("--snap", action="store_true", help="the nearest landmark to each route cell's centre")
a = ap.parse_args()
b = load_bundle(a.bundle)
env = open_env(b.env_id, max_steps=1000)
on_its_back = goal_adapter(env).fallen  # the ant declares its torso (sim/ogbench_mazes.py)
wins: dict[int, int] = {}
fallen, path, steps = 0, 0.0, 0
for seed, task in episode_plan(env, b.env_id, a.episodes, 1_500_000_000, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    goal, maze = obs["desired_goal"], env.unwrapped
    goal_cell = maze.inner.xy_to_ij(goal)
    for t in range(1000):
        if maze.inner.xy_to_ij(obs["achieved_goal"]) == goal_cell:
            sub = goal
        else:
            sub = maze.oracle_subgoal()
            if a.snap:
                sub = b.landmarks[int(np.argmin(((b.landmarks - sub) ** 2).sum(axis=1)))]
        before = obs["achieved_goal"]
        obs, _, _, _, info = env.step(b.policy_fn(obs["observation"][None], sub[None])[0])
        path += float(np.linalg.norm(obs["achieved_goal"] - before))
        steps += 1
        if info["success"]:
            break
    flipped = bool(on_its_back(obs["observation"]))
    wins[task] = wins.get(task, 0) + bool(info["success"])
    fallen += flipped
    print(seed, task, "success" if info["success"] else "failure", t + 1, "steps", "fallen" if flipped else "", flush=True)
print(f"{a.bundle}{' (snapped to landmarks)' if a.snap else ''}: {sum(wins.values())} of {a.episodes}, per task "
      f"{dict(sorted(wins.items()))}, fallen at the end {fallen}, {path / steps:.3f} m per step")
