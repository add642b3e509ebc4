"""Pictures of planning in a maze: walls, landmarks, the solved graph, one episode's trajectory.

``l3p plot --bundle models/PointMaze_Large-v3 --pairs far --seed 2000000000 --out maze.png``

The graph is the bundle's own (its value network over the landmarks, cut at the planner's d_max),
solved towards the episode's goal with the bundle's default search; landmarks are coloured by
their solved distance to that goal. The episode runs through a planner server (``--server``, or
one started on ``--bundle``), and its trajectory is drawn in segments coloured by the subgoal
pursued at each step, with that subgoal marked in the same colour.

Needs the server extra (onnxruntime, to read the bundle's graph) and matplotlib.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from l3p.sim import mazes
from l3p.sim.draw import plot_maze_episode


def bundle_graph(bundle: Any, goal: np.ndarray, config: Any) -> tuple[np.ndarray, np.ndarray]:
    """(cut edge weights [N+1, N+1], solved landmark -> goal steps [N]) for ``goal``, exactly as
    the server builds them (core/, the bundle's value network)."""
    from l3p.core import distances_to_goal, pairwise_graph

    edges = pairwise_graph(bundle.landmarks, goal, bundle.value_fn, config.d_max, config.adaptive_cut)
    return edges, distances_to_goal(bundle.landmarks, goal, bundle.value_fn, config)[:-1]


def add_plot_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from l3p.core.names import VARIANT_HELP, variant_arg

    parser.add_argument("--bundle", type=Path, required=True, help="the maze model bundle (its graph is drawn)")
    parser.add_argument("--server", default=None, metavar="HOST:PORT",
                        help="planner server serving that bundle (default: start one on --bundle)")
    parser.add_argument("--seed", type=int, default=mazes.FAR_PAIRS_HELD_OUT_SEED,
                        help="episode seed (and far-pair list seed; default: the held-out list)")
    parser.add_argument("--pairs", choices=("random", "far"), default="far")
    parser.add_argument("--planner", type=variant_arg, default="l3p", metavar="MODE[@KEY=VALUE...]",
                        help=VARIANT_HELP)
    parser.add_argument("--out", type=Path, default=Path("maze_episode.png"))
    return parser


def run_plot(args: argparse.Namespace) -> int:
    from l3p.clients.client import PlannerClient, PlannerError
    from l3p.serving.local_server import LocalServer, ServerStartError
    from l3p.clients.runner import close_env, episode_plan, make_env, run_episode
    from l3p.core.names import parse_variant
    from l3p.serving.bundle import BundleError, load_bundle

    try:
        bundle = load_bundle(args.bundle)
    except BundleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not mazes.is_maze(bundle.env_id):
        print(f"error: l3p plot draws maze episodes; {args.bundle} is a {bundle.env_id} model", file=sys.stderr)
        return 2
    server = None if args.server else LocalServer(args.bundle)
    env = make_env(bundle.env_id)
    try:
        if server is not None:
            server.start()
            server.wait_ready()
        with PlannerClient(args.server or server.target) as client:
            (seed, pair), = episode_plan(env, bundle.env_id, 1, args.seed, args.pairs)
            ep = run_episode(client, env, index=0, seed=seed, mode=args.planner, pair=pair, record=True)
        mode, overrides = parse_variant(args.planner)
        config = bundle.planner_defaults.replace(mode=mode, **overrides)
        edges, to_goal = bundle_graph(bundle, ep.goal, config)
        outcome = "success" if ep.success else "failure"
        where = f", cells {pair[0]} -> {pair[1]}" if pair else ""
        pruning = ", prune_failed" if config.prune_failed and mode == "l3p" else ""
        title = (f"{bundle.env_id}: {args.planner} ({config.search} search, d_max {config.d_max:g}{pruning}), "
                 f"seed {seed}{where}: {outcome} in {ep.steps} steps, {ep.replans} re-plans")
        plot_maze_episode(args.out, mazes.maze_map(env), mazes.maze_scaling(env), bundle.landmarks, edges,
                          to_goal, ep.trajectory, ep.subgoal_indices, ep.goal, title=title)
    except (ServerStartError, PlannerError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        close_env(env)
        if server is not None:
            server.stop()
    print(f"wrote {args.out} ({outcome}, {ep.steps} steps)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_plot_arguments(argparse.ArgumentParser(prog="l3p plot", description=__doc__.split("\n")[0]))
    return run_plot(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
