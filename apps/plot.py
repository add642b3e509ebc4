"""Pictures of planning in a maze: walls, landmarks, the solved graph, one episode's trajectory.

``l3p plot --bundle models/PointMaze_Large-v3 --pairs far --out maze.png``
``l3p plot --bundle models/PointMaze_Large-v3 --landmarks-only --out landmarks.png``
``l3p plot --bundle models/FetchPush-v4 --landmarks-only --out landmarks.png`` (any env: goal-space views)
``l3p plot --bundle models/FetchPush-v4 --learning-curve --out learning_curve.png`` (from progress.csv)

The graph is the bundle's own (its value network over the landmarks, cut at the d_max the
bundle serves, or a ``--planner`` override), solved towards the episode's goal with the served
search; landmarks are coloured by their solved distance to that goal. The episode runs through
a planner server (``--server``, or one started on ``--bundle``), and its trajectory is drawn in
segments coloured by the subgoal pursued at each step, with that subgoal marked in the same
colour. ``--landmarks-only`` draws the walls, the landmarks and the graph from the bundle alone:
no episode, no server. ``--learning-curve`` draws the run's in-training evaluations as training
does (`l3p.training.feedback.plot_run_curve`), from the files alone.

Needs the server extra (onnxruntime, to read the bundle's graph) and matplotlib.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

# The child server's modules: without the serve extra the command names it here, at import, rather
# than the child server printing its traceback.
import l3p.serving.server  # noqa: F401
from l3p.clients.runner import episode_protocol
from l3p.core.config import OPTIONS
from l3p.core.errors import L3PError
from l3p.core.options import acting
from l3p.serving.bundle import load_bundle
from l3p.sim import mazes


def bundle_graph(bundle: Any, goal: np.ndarray, config: Any) -> tuple[np.ndarray, np.ndarray]:
    """(cut edge weights [N+1, N+1], solved landmark -> goal steps [N]) for ``goal``, exactly as
    the server builds them (core/, the bundle's value network and its data-supported edges)."""
    from l3p.core import LandmarkGraph
    from l3p.core.search import solve_to_goal

    graph = LandmarkGraph(bundle.landmarks, bundle.value_fn, edges=bundle.edges)
    edges = graph.episode_weights(np.asarray(goal, np.float32), bundle.value_fn, config)
    return edges, solve_to_goal(edges, config)[:-1]


def landmark_edges(bundle: Any, config: Any) -> np.ndarray:
    """The landmark-landmark block [N, N] of the served graph. Edges are cut column by column, so
    the block does not depend on the goal: any landmark stands in for it."""
    n = len(bundle.landmarks)
    if n == 0:
        return np.zeros((0, 0))
    return bundle_graph(bundle, bundle.landmarks[0], config)[0][:n, :n]


def _maze(env_id: str) -> tuple[np.ndarray, float, tuple[float, float]]:
    """The maze's layout, cell size and origin, read from the env."""
    from l3p.sim.envs import make_env

    env = make_env(env_id)
    try:
        return mazes.maze_map(env), mazes.maze_scaling(env), mazes.maze_origin(env)
    finally:
        env.close()


def _d_max_label(config: Any, overrides: dict[str, Any]) -> str:
    return f"d_max {config.d_max:g}" + (" (override)" if "d_max" in overrides else " (served)")


def _plot_landmarks(bundle: Any, config: Any, overrides: dict[str, Any], out: Path) -> int:
    from l3p.sim.draw import plot_landmarks, plot_maze_episode

    cut = ", adaptive cut" if config.adaptive_cut else ""
    title = (f"{bundle.env_id}: {len(bundle.landmarks)} landmarks, graph at {_d_max_label(config, overrides)}"
             f"{cut}")
    if mazes.is_maze(bundle.env_id):
        layout, scaling, origin = _maze(bundle.env_id)
        plot_maze_episode(out, layout, scaling, bundle.landmarks, landmark_edges(bundle, config), None, title=title,
                          origin=origin)
    else:  # goal-space views over the obstacles the env declares (the Fetch box)
        goals = np.zeros((0, bundle.landmarks.shape[1]), np.float32)
        plot_landmarks(bundle.landmarks, goals, out, title, bundle.env_id, bundle.value_fn, config.d_max,
                       config.adaptive_cut)
    print(f"wrote {out}: {title}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    """``l3p plot``: writes the PNG; expected failures (a bundle, the server) raise L3PError."""
    from l3p.core.config import parse_variant

    if args.learning_curve:
        return _plot_curve(args.bundle, args.out or Path("learning_curve.png"))
    bundle = load_bundle(args.bundle)
    if not (args.landmarks_only or mazes.is_maze(bundle.env_id)):
        raise L3PError(f"draws maze episodes only; {args.bundle} is a {bundle.env_id} model")
    mode, overrides = parse_variant(args.planner)
    config = bundle.planner_defaults.for_episode(mode=mode, **overrides)
    if args.landmarks_only:
        return _plot_landmarks(bundle, config, overrides, args.out or Path("landmarks.png"))
    return _plot_episode(args, bundle, config, overrides, args.out or Path("maze_episode.png"))


def _plot_curve(source: Path, out: Path) -> int:
    """A bundle's run (progress.csv beside it, the config in its manifest) or a run directory's."""
    from l3p.core.bundle_format import read_manifest
    from l3p.training.config import TrainConfig
    from l3p.training.feedback import PROGRESS, plot_run_curve, read_progress

    if not (source / PROGRESS).is_file():
        raise L3PError(f"--learning-curve needs {source / PROGRESS} (a run writes it; export copies it beside the "
                       "bundle)")
    if (source / "config.json").is_file():
        where, config = str(source / "config.json"), json.loads((source / "config.json").read_text())
    else:
        where, config = f"{source}'s manifest", read_manifest(source).get("provenance", {}).get("config")
        if config is None:
            raise L3PError(f"{where} records no training config (provenance.config)")
    plot_run_curve(read_progress(source / PROGRESS), TrainConfig.from_dict(config, where), out)
    print(f"wrote {out}")
    return 0


def _plot_episode(args: argparse.Namespace, bundle: Any, config: Any, overrides: dict[str, Any], out: Path) -> int:
    from l3p.clients.client import PlannerClient
    from l3p.clients.runner import episode_plan, run_episode
    from l3p.serving.local_server import LocalServer
    from l3p.sim.draw import plot_maze_episode
    from l3p.sim.envs import make_env
    from l3p.sim.render import close_env

    server = None if args.server else LocalServer(args.bundle)
    protocol = episode_protocol(args, bundle.manifest.get("provenance", {}), bundle.env_id)
    env = make_env(bundle.env_id, max_episode_steps=protocol.max_steps)
    try:
        if server is not None:
            server.start()
            server.wait_ready()
        with PlannerClient(args.server or server.target, model=args.model if args.server else None) as client:
            (seed, pair), = episode_plan(env, bundle.env_id, 1, args.seed, protocol.pairs, protocol.min_cells,
                                         protocol.task)
            ep = run_episode(client, env, index=0, seed=seed, mode=args.planner, pair=pair, record=True)
        edges, to_goal = bundle_graph(bundle, ep.goal, config)
        outcome = "success" if ep.success else "failure"
        where = f", task {pair}" if isinstance(pair, int) else f", cells {pair[0]} -> {pair[1]}" if pair else ""
        values = dataclasses.asdict(config)
        rules = "".join(f", {name}" for name in acting(values, OPTIONS, config.mode) if OPTIONS[name].kind == "bool")
        title = (f"{bundle.env_id}: {args.planner} ({config.search} search, {_d_max_label(config, overrides)}"
                 f"{rules}), seed {seed}{where}: {outcome} in {ep.steps} steps, {ep.replans} re-plans"
                 f"{', ' + ep.fell_text if ep.fell_text else ''}")
        plot_maze_episode(out, mazes.maze_map(env), mazes.maze_scaling(env), bundle.landmarks, edges,
                          to_goal, ep.trajectory, ep.subgoal_indices, ep.goal, title=title, fell_at=ep.fell_at,
                          origin=mazes.maze_origin(env))
    finally:
        close_env(env)
        if server is not None:
            server.stop()
    print(f"wrote {out} ({outcome}, {ep.steps} steps{', ' + ep.fell_text if ep.fell_text else ''})")
    return 0
