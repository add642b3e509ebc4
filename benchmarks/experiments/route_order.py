"""Is the planner's route the maze's? Per landmark, its solved steps to the goal (d_cg, the bundle's
graph and planner defaults) against the maze's BFS cells from its cell to the goal's, for one
validation episode of OGBench task TASK (seed 1 500 000 000 + TASK - 1): the rank correlation, and
d_cg per BFS distance.

    python benchmarks/experiments/route_order.py BUNDLE TASK
"""
import sys

import numpy as np

from l3p.core.seeds import VALIDATION
from l3p.sim import mazes
from episodes import load


def ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x)).astype(float)


model, task = load(sys.argv[1]), int(sys.argv[2])
b = model.bundle
env = model.env()
obs, _ = env.reset(seed=VALIDATION + task - 1, options={"task_id": task})
goal, inner = obs["desired_goal"], env.unwrapped.inner
dcg = model.graph.distances_to_goal(goal, b.value_fn, b.planner_defaults)[:-1]
bfs = mazes.bfs_cells(np.asarray(inner.maze_map), inner.xy_to_ij(goal)).astype(float)
cells = np.array([bfs[inner.xy_to_ij(landmark)] for landmark in b.landmarks])
ok = np.isfinite(dcg) & (cells >= 0)
apart = ok & (cells > 2)
print(f"task {task}: steps per BFS cell (median d_cg/cells) {np.median(dcg[apart] / cells[apart]):.1f}; "
      f"unreachable landmarks {int((~np.isfinite(dcg)).sum())}")
print("rank correlation of d_cg and BFS cells:", round(float(np.corrcoef(ranks(dcg[ok]), ranks(cells[ok]))[0, 1]), 3))
for c in sorted(set(cells[ok].astype(int))):
    v = dcg[ok & (cells == c)]
    print(f"cells {c:2d}: n={len(v):2d} d_cg min {v.min():6.1f} median {np.median(v):6.1f} max {v.max():6.1f}")
