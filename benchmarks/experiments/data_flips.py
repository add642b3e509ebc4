"""How much of a regenerated ant dataset lies on its back: per dataset, the episodes in which the ant
flips over (torso's z axis pointing down) and the share of steps recorded flipped (an OGBench ant
never rights itself, so an episode stays flipped from its first flip to its end).

    python benchmarks/experiments/data_flips.py data/antmaze-large-navigate-v0.npz ...
"""
import sys

import numpy as np

from l3p.core.dataset import load_dataset
from l3p.sim.envs import class_adapter
from l3p.sim.ogbench_mazes import OGBenchAntMaze

ANT = class_adapter(OGBenchAntMaze)  # where the ant's torso quaternion sits in its observation

for path in sys.argv[1:]:
    ds = load_dataset(path)
    flipped = ANT.fallen(ds.observations)
    bounds = ds.episode_bounds()
    first = [int(np.argmax(flipped[a:b + 1])) for a, b in bounds if flipped[a:b + 1].any()]
    print(f"{path}: {len(bounds)} episodes of {ds.episode_lengths().max()} steps; {len(first)} "
          f"({len(first) / len(bounds):.1%}) flip, at step {int(np.median(first)) if first else '-'} (median); "
          f"{flipped.mean():.1%} of steps flipped")
