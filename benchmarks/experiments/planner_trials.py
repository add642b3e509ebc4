"""Validation episodes in-process (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps) with the
bundle's planner and KEY=VALUE overrides: per episode the seed, task, success, last step, start and final
distance to the goal (m), and the torso's height z at the end (an ant on its back: 0.27).

    python benchmarks/experiments/planner_trials.py BUNDLE EPISODES [KEY=VALUE ...] [--max-steps T]
"""
import numpy as np

from l3p.core.overrides import parse_overrides
from episodes import episode_parser, load, planner_episode

a = episode_parser(overrides=True).parse_args()
model = load(a.bundle)
config = model.config(**parse_overrides(a.overrides, "KEY=VALUE"))
env = model.env(a.max_steps)
wins = 0
for seed, task in model.episodes(env, a.episodes):
    episode = planner_episode(model, env, seed, task, config, max_steps=a.max_steps)
    first, last = episode.steps[0], episode.steps[-1]
    wins += episode.success
    print(seed, task, episode.success, len(episode.steps) - 1, f"start {np.linalg.norm(first.achieved - episode.goal):.1f} "
          f"final {episode.final_distance:.1f} z={last.next_obs[2]:.2f}", flush=True)
print("wins", wins, "of", a.episodes)
