"""The learned actor alone along the maze's own shortest route: what the actor can do with a perfect
planner. Each step its goal is the centre of the next cell on the BFS path to the goal's cell (the
subgoal OGBench's oracle steers its expert by), the goal itself once in the goal's cell; with
--snap, that centre's nearest landmark of the bundle instead. Validation episodes (seeds
1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps), in-process with the bundle's ONNX
actor; the mean speed over all episodes.

    python benchmarks/experiments/route_ceiling.py BUNDLE EPISODES [--snap] [--max-steps T]
"""
import numpy as np

from l3p.clients.protocol import reset_options
from episodes import actor_episode, episode_parser, load

ap = episode_parser()
ap.add_argument("--snap", action="store_true", help="the nearest landmark to each route cell's centre")
a = ap.parse_args()
model = load(a.bundle)
landmarks = model.bundle.landmarks
env = model.env(a.max_steps)
maze = env.unwrapped  # OGBench's maze: its cells and its oracle


def route_goal(obs: dict) -> np.ndarray:
    """The goal in the goal's cell, else the oracle's next cell centre (--snap: its nearest landmark)."""
    goal = obs["desired_goal"]
    if maze.inner.xy_to_ij(obs["achieved_goal"]) == maze.inner.xy_to_ij(goal):
        return goal
    sub = maze.oracle_subgoal()
    return landmarks[int(np.argmin(((landmarks - sub) ** 2).sum(axis=1)))] if a.snap else sub


wins: dict[int, int] = {}
fallen, path, steps = 0, 0.0, 0
for seed, task in model.episodes(env, a.episodes):
    obs, _ = env.reset(seed=seed, options=reset_options(task))
    episode = actor_episode(model, env, obs, route_goal, max_steps=a.max_steps)
    path += sum(float(np.linalg.norm(step.next_achieved - step.achieved)) for step in episode.steps)
    steps += len(episode.steps)
    wins[task] = wins.get(task, 0) + episode.success
    fallen += episode.fallen
    print(seed, task, "success" if episode.success else "failure", len(episode.steps), "steps",
          "fallen" if episode.fallen else "", flush=True)
print(f"{a.bundle}{' (snapped to landmarks)' if a.snap else ''}: {sum(wins.values())} of {a.episodes}, per task "
      f"{dict(sorted(wins.items()))}, fallen at the end {fallen}, {path / steps:.3f} m per step")
