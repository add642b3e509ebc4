"""Per re-plan of the served planner (validation episodes, in-process): D at the pick, the steps the counter gives, and what the ant did
toward that landmark: its closest approach within the counter, and D(state, pick) when the counter ran out.

    python benchmarks/experiments/counter_trace.py BUNDLE EPISODES [--max-steps T]
"""
import numpy as np

from l3p.core import GOAL
from episodes import episode_parser, load, planner_episode

a = episode_parser().parse_args()
model = load(a.bundle)
env = model.env(a.max_steps)
rows = []  # per landmark pick followed by another re-plan: D at pick, counter, closest m, m and D at re-plan, m at pick
for seed, task in model.episodes(env, a.episodes):
    episode = planner_episode(model, env, seed, task, max_steps=a.max_steps)
    cur = None
    for step in episode.steps:
        r = step.plan
        if r.replanned:
            if cur is not None:
                rows.append((cur["d"], cur["counter"], cur["closest"], np.linalg.norm(step.achieved - cur["sub"]),
                             model.distance(step.obs, cur["sub"]), cur["start_m"]))
            cur = None if r.subgoal_index == GOAL else dict(sub=r.subgoal, d=r.estimated_distance, counter=r.counter,
                                                          closest=np.inf,
                                                          start_m=np.linalg.norm(step.achieved - r.subgoal))
        if cur is not None:
            cur["closest"] = min(cur["closest"], np.linalg.norm(step.next_achieved - cur["sub"]))
table = np.array(rows).reshape(-1, 6)
print("re-plans", len(table))
for name, col in [("D at pick", 0), ("counter", 1), ("closest m", 2), ("m at re-plan", 3), ("D at re-plan", 4), ("m at pick", 5)]:
    print(f"{name:14s} quartiles {np.percentile(table[:, col], [10, 25, 50, 75, 90]).round(2)}")
print("closest <= 0.5 m:", (table[:, 2] <= 0.5).mean().round(3), " <= 1 m:", (table[:, 2] <= 1).mean().round(3))
print("m per D-step at pick (median):", np.median(table[:, 5] / np.maximum(table[:, 0], 1)).round(3))
