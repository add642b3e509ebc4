"""A diagnostic, using the maze's walls (which no served planner knows): keep only the bundle's data
edges whose straight segment stays MARGIN m clear of every wall cell, then the served planner on
validation episodes (seeds 1 500 000 000 + i, OGBench's tasks in turn), in-process.

    python docs/measurements/antmaze-offline/line_of_sight.py BUNDLE EPISODES MARGIN
"""
import sys
import numpy as np
import l3p.core.episode as E
from l3p.clients.protocol import episode_plan, open_env
from l3p.core.landmarks import LandmarkGraph
from l3p.serving.bundle import load_bundle

bundle, episodes, margin = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
b = load_bundle(bundle)
env = open_env(b.env_id, max_steps=1000)
env.reset(seed=0)
inner = env.unwrapped.inner
layout = np.asarray(inner.maze_map)
# wall cell centres in x-y, cells are 4 m squares
walls = np.array([inner.ij_to_xy((i, j)) for i, j in zip(*np.nonzero(layout == 1))])
half = 2.0 + margin
edges = np.array(b.edges, bool)
lm = np.asarray(b.landmarks)
kept = 0
for i, j in np.argwhere(edges):
    t = np.linspace(0.0, 1.0, 25)[:, None]
    pts = lm[i] + t * (lm[j] - lm[i])
    inside = (np.abs(pts[:, None, :] - walls[None]) < half).all(-1).any()
    if inside:
        edges[i, j] = False
    else:
        kept += 1
print(f"edges kept {kept} of {int(np.array(b.edges).sum())}", flush=True)
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=edges)
wins, path, steps = 0, 0.0, 0
for seed, task in episode_plan(env, b.env_id, episodes, 1_500_000_000, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    ep = E.EpisodePlanner(graph, obs["desired_goal"], b.value_fn, b.planner_defaults, seed=seed)
    for t in range(1000):
        before = obs["achieved_goal"]
        obs, _, _, _, info = env.step(ep.step(obs["observation"], b.distance_fn, b.policy_fn).action)
        path += float(np.linalg.norm(obs["achieved_goal"] - before))
        steps += 1
        if info["success"]:
            break
    wins += bool(info["success"])
print(f"line of sight, margin {margin} m: {wins} of {episodes}, {path / steps:.3f} m per step", flush=True)
