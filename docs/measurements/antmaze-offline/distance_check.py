"""D(s, g) and V(ag, g) against the true step offset along recorded episodes."""
import sys, numpy as np
from l3p.serving.bundle import load_bundle
b = load_bundle(sys.argv[1]); d = np.load(sys.argv[2], allow_pickle=True)
obs, ag, term = d['observations'], d['achieved_goals'], d['terminals'].astype(bool)
ends = np.flatnonzero(term); starts = np.r_[0, ends[:-1] + 1]
rng = np.random.default_rng(0)
L = int(np.min(ends - starts + 1))
for k in [5, 15, 30, 60, 100, 150, 190]:
    if k >= L: continue
    e = rng.integers(len(starts), size=400); t0 = starts[e] + rng.integers(0, L - k, size=400)
    s, g = obs[t0], ag[t0 + k]
    D = np.asarray(b.distance_fn(s, g)[0]).reshape(-1)
    V = np.asarray(b.value_fn(ag[t0], g)).reshape(-1)
    eu = np.linalg.norm(ag[t0] - g, axis=1)
    print(f"offset {k:4d}: D {np.median(D):6.1f} [{np.percentile(D,10):5.1f},{np.percentile(D,90):5.1f}]  V {np.median(V):7.1f}  euclid {np.median(eu):5.2f} m")
# far random goals
i = rng.integers(len(obs), size=400); j = rng.integers(len(obs), size=400)
D = np.asarray(b.distance_fn(obs[i], ag[j])[0]).reshape(-1); eu = np.linalg.norm(ag[i]-ag[j],axis=1)
for lo, hi in [(0,4),(4,10),(10,20),(20,40),(40,80)]:
    m = (eu>=lo)&(eu<hi)
    if m.any(): print(f"random pairs {lo}-{hi} m: n={m.sum()} D median {np.median(D[m]):.1f} min {D[m].min():.1f}")
