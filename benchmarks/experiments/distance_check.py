"""The learned distance D(s, g) and value V(ag, g) against the true step offset along recorded episodes (400
pairs per offset: median [10th, 90th percentile]), and D on random pairs of the dataset by their x-y distance.

    python benchmarks/experiments/distance_check.py BUNDLE DATASET
"""
import sys

import numpy as np

from l3p.core.dataset import load_dataset
from episodes import load

b, ds = load(sys.argv[1]).bundle, load_dataset(sys.argv[2])
obs, ag = ds.observations, ds.achieved_goals
starts = np.array([first for first, _ in ds.episode_bounds()])
L = int(ds.episode_lengths().min())
rng = np.random.default_rng(0)
for k in [5, 15, 30, 60, 100, 150, 190]:
    if k >= L:
        continue
    e = rng.integers(len(starts), size=400)
    t0 = starts[e] + rng.integers(0, L - k, size=400)
    s, g = obs[t0], ag[t0 + k]
    D = np.asarray(b.distance_fn(s, g)[0]).reshape(-1)
    V = np.asarray(b.value_fn(ag[t0], g)).reshape(-1)
    eu = np.linalg.norm(ag[t0] - g, axis=1)
    print(f"offset {k:4d}: D {np.median(D):6.1f} [{np.percentile(D, 10):5.1f},{np.percentile(D, 90):5.1f}]  "
          f"V {np.median(V):7.1f}  euclid {np.median(eu):5.2f} m")
# far random goals
i, j = rng.integers(len(obs), size=400), rng.integers(len(obs), size=400)
D = np.asarray(b.distance_fn(obs[i], ag[j])[0]).reshape(-1)
eu = np.linalg.norm(ag[i] - ag[j], axis=1)
for lo, hi in [(0, 4), (4, 10), (10, 20), (20, 40), (40, 80)]:
    m = (eu >= lo) & (eu < hi)
    if m.any():
        print(f"random pairs {lo}-{hi} m: n={m.sum()} D median {np.median(D[m]):.1f} min {D[m].min():.1f}")
