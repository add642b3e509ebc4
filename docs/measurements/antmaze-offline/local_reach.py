"""The learned actor's local reach: from N upright states of the dataset (the ant put in that exact state), the
actor alone toward the achieved goal the data reached K steps later, for up to 3K steps; reached
within OGBench's 0.5, how many ended flipped over, and of the misses, how near the ant came to the
goal and where it ended.

    python docs/measurements/antmaze-offline/local_reach.py BUNDLE DATASET K N
"""
import sys

import numpy as np

from l3p.clients.protocol import open_env
from l3p.core.dataset import load_dataset
from l3p.serving.bundle import load_bundle
from l3p.sim.envs import goal_adapter

bundle, data, k, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b, ds = load_bundle(bundle), load_dataset(data)
env = open_env(b.env_id, max_steps=10 * k)
on_its_back = goal_adapter(env).fallen  # the ant declares its torso (sim/ogbench_mazes.py)
env.reset(seed=0)
maze = env.unwrapped
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
    maze.inner.unwrapped.set_state(state[:15], state[15:29])  # qpos (x, y, z, quaternion, 8 joints), qvel
    obs = maze._obs()
    closest = np.inf
    for s in range(3 * k):
        obs, *_ = env.step(b.policy_fn(obs["observation"][None], goal[None])[0])
        closest = min(closest, float(np.linalg.norm(obs["achieved_goal"] - goal)))
        if closest <= 0.5:
            reached += 1
            steps.append(s + 1)
            break
    else:
        missed.append((closest, float(np.linalg.norm(obs["achieved_goal"] - goal))))
    flipped += bool(on_its_back(obs["observation"]))
print(f"{bundle} on {data}: goals {k} data steps ahead: reached {reached} of {n} (median {int(np.median(steps)) if steps else '-'} "
      f"steps), flipped over {flipped}" + (f"; the misses came within {np.median([c for c, _ in missed]):.2f} m "
      f"(median) and ended {np.median([e for _, e in missed]):.1f} m away" if missed else ""))
