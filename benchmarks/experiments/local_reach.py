"""The learned actor's local reach: from N upright states of the dataset (the ant put in that exact state), the
actor alone toward the achieved goal the data reached K steps later, for up to 3K steps; reached
within OGBench's 0.5, how many ended flipped over, and of the misses, how near the ant came to the
goal and where it ended.

    python benchmarks/experiments/local_reach.py BUNDLE DATASET K N
"""
import sys

import numpy as np

from l3p.core.dataset import load_dataset
from l3p.sim.envs import goal_adapter
from episodes import actor_episode, load

bundle, data, k, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model, ds = load(bundle), load_dataset(data)
env = model.env(10 * k)
on_its_back = goal_adapter(env).fallen  # the ant declares its torso (sim/ogbench_mazes.py)
ant = env.unwrapped.inner  # OGBench's ant maze: its MuJoCo state and observation
rng = np.random.default_rng(7)
bounds = [(a, c) for a, c in ds.episode_bounds() if c - a > k + 1]
reached, flipped, steps, missed = 0, 0, [], []
for i in range(n):
    while True:  # an upright start (a flipped ant in the data never rights itself)
        first, last = bounds[rng.integers(len(bounds))]
        t = int(rng.integers(first, last - k))
        if not on_its_back(ds.observations[t]):
            break
    state, goal = ds.observations[t], ds.achieved_goals[t + k]
    env.reset(seed=i)
    ant.unwrapped.set_state(state[:15], state[15:29])  # qpos (x, y, z, quaternion, 8 joints), qvel
    obs = {"observation": ant.get_ob(), "achieved_goal": ant.get_xy(), "desired_goal": env.unwrapped.goal}
    episode = actor_episode(model, env, obs, lambda obs: goal, max_steps=3 * k, stop_on_success=False,
                            until=lambda step: np.linalg.norm(step.next_achieved - goal) <= 0.5)
    closest = min(float(np.linalg.norm(step.next_achieved - goal)) for step in episode.steps)
    if closest <= 0.5:
        reached += 1
        steps.append(len(episode.steps))
    else:
        missed.append((closest, float(np.linalg.norm(episode.steps[-1].next_achieved - goal))))
    flipped += episode.fallen
print(f"{bundle} on {data}: goals {k} data steps ahead: reached {reached} of {n} (median {int(np.median(steps)) if steps else '-'} "
      f"steps), flipped over {flipped}" + (f"; the misses came within {np.median([c for c, _ in missed]):.2f} m "
      f"(median) and ended {np.median([e for _, e in missed]):.1f} m away" if missed else ""))
