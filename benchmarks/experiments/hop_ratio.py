"""The hop ratio of a bundle's routes (TTGS's diagnostic, arXiv 2510.07257): at each episode's start,
the shortest route the bundle's graph gives from the state to the goal, and its longest hop over the
route's whole length, in the bundle's own distances (steps). Near 0: many short hops, where a graph
can decompose the task; 1: one hop, the goal straight away, where the planner adds nothing to the
policy. TTGS measures 0.04-0.08 on the giant mazes and 0.46-0.62 on OGBench's manipulation tasks.

The route is the served planner's graph under the bundle's defaults (its d_max cut, its
data-supported edges, the local cut of distances from the state), solved exactly (hard search):
the state joins every node within the local cut by D, the goal's shortcut within local_horizon.

    python benchmarks/experiments/hop_ratio.py --bundle models/FetchPush-v4 --episodes 50
    python benchmarks/experiments/hop_ratio.py --bundle B --pairs tasks --episodes 50 --out hops.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from episodes import Model, load
from l3p.clients.protocol import reset_options
from l3p.core.search import as_nodes
from l3p.core.seeds import VALIDATION


def route(w: np.ndarray, d_state: np.ndarray) -> list[int]:
    """The shortest route [node, ..., goal] (the goal is the last node of ``w`` [N+1, N+1]) from a
    state with edges ``d_state`` [N+1] to every node; [] when none reaches the goal. Dense Dijkstra."""
    n = len(w)
    dist, prev, done = d_state.astype(np.float64).copy(), np.full(n, -1), np.zeros(n, bool)
    while True:
        left = np.where(done, np.inf, dist)
        u = int(np.argmin(left))
        if not np.isfinite(left[u]) or u == n - 1:
            break
        done[u] = True
        better = dist[u] + w[u] < dist
        dist[better], prev[better] = dist[u] + w[u][better], u
    if not np.isfinite(dist[n - 1]):
        return []
    path = [n - 1]
    while prev[path[-1]] >= 0:
        path.append(int(prev[path[-1]]))
    return path[::-1]


def hops(model: Model, obs: np.ndarray, goal: np.ndarray) -> list[float]:
    """The hop lengths of the route from ``obs`` to ``goal`` (steps); [] when there is none."""
    bundle, config = model.bundle, model.config()
    nodes = as_nodes(bundle.landmarks, goal)
    w = model.graph.episode_weights(goal, bundle.value_fn, config)
    d_state, _ = bundle.distance_fn(np.repeat(obs[None], len(nodes), axis=0), nodes)
    d_state = np.maximum(np.nan_to_num(np.asarray(d_state, np.float64), nan=np.inf), 0.0)
    if d_state[-1] <= config.local_horizon:
        return [float(d_state[-1])]
    d_state = np.where(d_state <= config.local_d_max, d_state, np.inf)
    path = route(w, d_state)
    if not path:
        return []
    return [float(d_state[path[0]])] + [float(w[a, b]) for a, b in zip(path, path[1:])]


def measure(bundle_dir: str, episodes: int, seed: int, pairs: str) -> dict[str, Any]:
    model = load(bundle_dir)
    env = model.env()
    rows = []
    try:
        for env_seed, start in model.episodes(env, episodes, seed, pairs):
            obs, _ = env.reset(seed=env_seed, options=reset_options(start))
            h = hops(model, obs["observation"], obs["desired_goal"])
            rows.append({"seed": env_seed, "task": start if isinstance(start, int) else None, "hops": len(h),
                         "length": sum(h), "ratio": max(h) / sum(h) if h and sum(h) > 0 else None})
    finally:
        env.close()
    ratios = np.array([r["ratio"] for r in rows if r["ratio"] is not None])
    return {"bundle": str(bundle_dir), "env_id": model.bundle.env_id, "pairs": pairs, "seed": seed, "episodes": rows,
            "no_route": sum(r["ratio"] is None for r in rows),
            "ratio": {"median": float(np.median(ratios)), "mean": float(ratios.mean()), "max": float(ratios.max()),
                      "single_hop": float((ratios == 1.0).mean())} if ratios.size else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", required=True, help="a model bundle directory")
    p.add_argument("--episodes", type=int, default=50, help="episodes, seeds SEED + i")
    p.add_argument("--seed", type=int, default=VALIDATION, help="the first env seed (default: validation)")
    p.add_argument("--pairs", default="random", choices=("random", "far", "tasks"), help="how starts and goals are drawn")
    p.add_argument("--out", type=Path, default=None, help="write the whole measurement as JSON")
    args = p.parse_args(argv)
    result = measure(args.bundle, args.episodes, args.seed, args.pairs)
    r = result["ratio"]
    print(f"{result['env_id']}: {len(result['episodes'])} episodes, {result['no_route']} without a route; "
          + (f"hop ratio median {r['median']:.3f}, mean {r['mean']:.3f}, max {r['max']:.3f}, "
             f"single hop {100 * r['single_hop']:.0f} %" if r else "no route at all"))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
