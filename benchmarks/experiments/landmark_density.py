"""Landmarks nearer the data's dense middle: a run's last snapshot exported again (the recipe's data graph
and d_max) with its GLS landmarks picked differently, and how far the landmarks lie from the walls (a
diagnostic with the maze's walls, which no served planner knows) beside the dataset's own steps.

    python benchmarks/experiments/landmark_density.py RUN OUT MODE PARAM

MODE: gls (the recipe's pick: GLS over 20,000 sampled goals of the dataset); trim (GLS over the densest
PARAM fraction of them, density = the distance to the 10th nearest sampled goal); snap (GLS, then each
landmark moved to the sampled goal with the most others within PARAM x the graph's near radius of it).
The bundle in OUT then goes to planner_variants.py.
"""
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.spatial import cKDTree

from l3p.training.commands import run_episodes
from l3p.training.edges import data_graph
from l3p.training.export import agent_from_checkpoint, export_bundle, gls_landmarks
from episodes import load
from walls import distance_to_walls


run, out, mode, param = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
snapshot = max((run / "snapshots").glob("*.pt"), key=lambda p: int(p.stem))
state = torch.load(snapshot, weights_only=False)
agent = agent_from_checkpoint(state)
goals, bounds = run_episodes(run, agent.cfg)
sample = goals[np.random.default_rng(0).integers(0, len(goals), 10 * agent.cfg.gls_sample)]  # as the export
tree = cKDTree(sample)
if mode == "trim":
    tenth = tree.query(sample, k=11)[0][:, -1]  # the point itself is the first of the 11
    sample = sample[tenth <= np.quantile(tenth, param)]
nodes = gls_landmarks(agent, sample, n=agent.cfg.export_n_landmarks)
if mode == "snap":
    apart = np.sqrt(((nodes[:, None] - nodes[None]) ** 2).sum(-1))
    np.fill_diagonal(apart, np.inf)
    radius = param * float(np.median(apart.min(axis=1))) / 2
    crowd = np.array([len(near) for near in tree.query_ball_point(sample, radius)])
    for i, landmark in enumerate(nodes):
        near = tree.query_ball_point(landmark, radius)
        nodes[i] = sample[near[int(np.argmax(crowd[near]))]]
elif mode not in ("gls", "trim"):
    raise SystemExit(f"unknown mode {mode!r}")
graph = data_graph(nodes, goals, bounds, agent.value_fn)
provenance = {**state.get("provenance", {}), "landmarks": f"landmark_density.py {mode} {param}",
              "graph": graph.provenance()}
export_bundle(agent, out, provenance, force=True, planner_overrides=graph.planner(), landmarks=nodes,
              edges=graph.manifest_edges())
env = load(out).env(max_steps=10)
env.reset(seed=0)
gap = distance_to_walls(nodes, env)
data_gap = distance_to_walls(goals[np.random.default_rng(1).integers(0, len(goals), 20000)], env)
print(f"{run} {mode} {param}: d_max {graph.d_max}, {int(graph.supported.sum())} edges; wall gap median "
      f"{np.median(gap):.2f} m, {np.mean(gap < 0.8):.1%} of landmarks within 0.8 m (the data's steps: median "
      f"{np.median(data_gap):.2f} m, {np.mean(data_gap < 0.8):.1%})")
