"""In-process validation far pairs (seeds 1 500 000 000 + i, cells >= 10 apart by BFS) for a maze bundle (the
recordings loop's PointMaze_Large-v3): the server's planner code, every episode its whole length, success at the
last step (as l3p ros2 sim judges it); per episode the first step within the env's success radius, the steps
within it, and the final, closest and last-100-step mean distance to the goal (m).

    python benchmarks/experiments/loop_validation_trace.py BUNDLE EPISODES [KEY=VALUE ...] [--max-steps T]
"""
import numpy as np

from l3p.core.overrides import parse_overrides
from episodes import episode_parser, load, planner_episode

a = episode_parser(overrides=True).parse_args()
model = load(a.bundle)
config = model.config(**parse_overrides(a.overrides, "KEY=VALUE"))
env = model.env(a.max_steps)
wins = reached = 0
for seed, pair in model.episodes(env, a.episodes, pairs="far", min_cells=10):
    episode = planner_episode(model, env, seed, pair, config, max_steps=a.max_steps, stop_on_success=False)
    inside = [t for t, step in enumerate(episode.steps) if step.success]
    dists = [float(np.linalg.norm(step.next_achieved - episode.goal)) for step in episode.steps]
    first = inside[0] if inside else None
    wins += episode.success
    reached += first is not None
    print(seed, pair, "success" if episode.success else "FAIL", f"first_in={first} steps_inside={len(inside)} "
          f"final={dists[-1]:.2f} min={min(dists):.2f} last100_mean={np.mean(dists[-100:]):.2f}", flush=True)
print("wins", wins, "reached", reached, "of", a.episodes)
