"""The served ant's pace: its speed, and its progress toward the subgoal it pursues, by distance to that
subgoal, on validation episodes (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps),
in-process (the server's planner code and the bundle's ONNX networks). The expert that recorded the
data follows a commanded direction at 0.165 m a step (docs/measurements/ant-expert/expert_eval.json).

    python benchmarks/experiments/pace.py BUNDLE EPISODES [--action-scale A] [--max-steps T]
"""
import numpy as np

from episodes import episode_parser, load, planner_episode

ap = episode_parser()
ap.add_argument("--action-scale", type=float, help="the planner's action_scale (default: the bundle's)")
a = ap.parse_args()
model = load(a.bundle)
config = model.config(action_scale=a.action_scale)
env = model.env(a.max_steps)
rows = []  # per step: distance to the subgoal, speed, progress toward the subgoal (m)
for seed, task in model.episodes(env, a.episodes):
    for step in planner_episode(model, env, seed, task, config, max_steps=a.max_steps, stop_on_fall=True).steps:
        way = step.goal[:2] - step.achieved
        gap = float(np.linalg.norm(way))
        moved = step.next_achieved - step.achieved
        rows.append((gap, float(np.linalg.norm(moved)), float(moved @ way) / max(gap, 1e-6)))
r = np.array(rows)
print(f"{a.bundle}, action_scale {config.action_scale}, {a.episodes} episodes ({len(r)} steps): speed "
      f"{r[:, 1].mean():.3f} m a step, toward the subgoal {r[:, 2].mean():.3f}")
for low, high in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 6), (6, np.inf)]:
    m = (r[:, 0] >= low) & (r[:, 0] < high)
    if m.any():
        print(f"  subgoal {low}-{high} m away: {m.mean():.0%} of steps, speed {r[m, 1].mean():.3f}, "
              f"toward it {r[m, 2].mean():.3f}")
