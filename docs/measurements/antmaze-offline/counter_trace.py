"""Per re-plan of the served planner (validation episodes, in-process): D at the pick, the steps the counter gives, and what the ant did
toward that landmark: its closest approach within the counter, and D(state, pick) when the counter ran out.

    python docs/measurements/antmaze-offline/counter_trace.py BUNDLE EPISODES
"""
import sys
import numpy as np
import l3p.core.episode as E
from l3p.clients.protocol import episode_plan, open_env
from l3p.core.landmarks import LandmarkGraph
from l3p.serving.bundle import load_bundle

bundle, episodes = sys.argv[1], int(sys.argv[2])
b = load_bundle(bundle)
env = open_env(b.env_id, max_steps=1000)
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=b.edges)
rows = []
for seed, task in episode_plan(env, b.env_id, episodes, 1_500_000_000, "tasks"):
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    ep = E.EpisodePlanner(graph, obs["desired_goal"], b.value_fn, b.planner_defaults, seed=seed)
    cur = None
    for t in range(1000):
        xy = obs["achieved_goal"].copy()
        r = ep.step(obs["observation"], b.distance_fn, b.policy_fn)
        if r.replanned:
            if cur is not None:
                d_end = float(b.distance_fn(obs["observation"][None], cur["sub"][None])[0][0])
                rows.append((cur["d"], cur["counter"], cur["closest"], np.linalg.norm(xy - cur["sub"]), d_end,
                             cur["start_m"]))
            cur = None if r.subgoal_index == -1 else dict(sub=np.array(r.subgoal), d=r.estimated_distance,
                                                          counter=r.counter, closest=np.inf,
                                                          start_m=np.linalg.norm(xy - r.subgoal))
        obs, _, _, _, info = env.step(r.action)
        if cur is not None:
            cur["closest"] = min(cur["closest"], np.linalg.norm(obs["achieved_goal"] - cur["sub"]))
        if info["success"]:
            break
a = np.array(rows)
print("re-plans", len(a))
for name, col in [("D at pick", 0), ("counter", 1), ("closest m", 2), ("m at re-plan", 3), ("D at re-plan", 4), ("m at pick", 5)]:
    print(f"{name:14s} quartiles {np.percentile(a[:, col], [10, 25, 50, 75, 90]).round(2)}")
print("closest <= 0.5 m:", (a[:, 2] <= 0.5).mean().round(3), " <= 1 m:", (a[:, 2] <= 1).mean().round(3))
print("m per D-step at pick (median):", np.median(a[:, 5] / np.maximum(a[:, 0], 1)).round(3))
