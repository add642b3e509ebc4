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

from clients import mazes


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_maze_episode(
    ax: Any,
    layout: np.ndarray,
    scaling: float,
    landmarks: np.ndarray,
    edges: np.ndarray,
    landmark_to_goal: np.ndarray | None,
    trajectory: np.ndarray | None = None,
    subgoal_indices: Sequence[int] | None = None,
    goal: np.ndarray | None = None,
    visited: np.ndarray | None = None,
) -> None:
    """Draw into ``ax``. ``edges`` [N(+1), N(+1)]: finite = an edge of the cut graph (landmark
    i -> j); ``landmark_to_goal`` [N]: solved steps to the goal (inf = unreachable; None: no
    goal, plain landmarks); ``trajectory`` [T+1, 2] achieved goals and ``subgoal_indices`` [T]
    (-1 = final goal); ``visited``: achieved goals from training, drawn faintly underneath."""
    from matplotlib import colormaps
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Rectangle

    x0, x1, y0, y1 = mazes.extent(layout, scaling)
    for x, y, size in mazes.wall_rectangles(layout, scaling):
        ax.add_patch(Rectangle((x, y), size, size, facecolor="0.25", edgecolor="none", zorder=1))

    # The graph: one segment per kept edge (both directions drawn once).
    n = len(landmarks)
    ii, jj = np.nonzero(np.isfinite(edges[:n, :n]) & ~np.eye(n, dtype=bool))
    pairs = {tuple(sorted(p)) for p in zip(ii.tolist(), jj.tolist())}
    segments = [landmarks[[i, j]] for i, j in sorted(pairs)]
    ax.add_collection(LineCollection(segments, colors="tab:blue", linewidths=0.6, alpha=0.35, zorder=2,
                                     label=f"graph edges ({len(pairs)})"))

    if visited is not None:
        ax.scatter(visited[:, 0], visited[:, 1], s=2, c="0.7", zorder=1.5, label="achieved goals (replay)")
    if landmark_to_goal is None:  # no episode goal: the landmarks alone
        ax.scatter(landmarks[:, 0], landmarks[:, 1], s=46, c="tab:red", edgecolors="k", linewidths=0.5,
                   zorder=4, label=f"landmarks ({n})")
    else:
        reach = np.isfinite(landmark_to_goal)
        if reach.any():
            points = ax.scatter(landmarks[reach, 0], landmarks[reach, 1], c=landmark_to_goal[reach],
                                cmap="viridis_r", s=46, edgecolors="k", linewidths=0.5, zorder=4, label="landmarks")
            ax.figure.colorbar(points, ax=ax, fraction=0.03, pad=0.01, label="solved steps to goal")
        if (~reach).any():
            ax.scatter(landmarks[~reach, 0], landmarks[~reach, 1], c="none", edgecolors="tab:red", s=46,
                       linewidths=1.0, zorder=4, label="landmarks (no path to goal)")

    if trajectory is not None and subgoal_indices is not None and len(subgoal_indices):
        # A colour per distinct subgoal, in the order they were first pursued.
        order = list(dict.fromkeys(subgoal_indices))
        palette = colormaps["tab20"]
        colour = {k: palette(i % 20) for i, k in enumerate(order)}
        steps = np.asarray(subgoal_indices)
        segs = np.stack([trajectory[:-1], trajectory[1:]], axis=1)
        ax.add_collection(LineCollection(segs, colors=[colour[k] for k in steps], linewidths=2.2, zorder=5))
        for k in order:
            if k >= 0:
                ax.scatter(*landmarks[k], s=160, facecolors="none", edgecolors=[colour[k]], linewidths=2.0,
                           zorder=6)
        ax.scatter(*trajectory[0], marker="o", s=90, c="white", edgecolors="k", zorder=7, label="start")
    if goal is not None:
        ax.scatter(*goal, marker="*", s=260, c="gold", edgecolors="k", zorder=7, label="goal")

    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)


def plot_maze_episode(path: str | Path, layout: np.ndarray, scaling: float, *drawn: Any, title: str = "") -> Path:
    """`draw_maze_episode` (same arguments after ``scaling``) into a new figure, saved as a PNG."""
    plt = _pyplot()
    x0, x1, y0, y1 = mazes.extent(layout, scaling)
    fig, ax = plt.subplots(figsize=(x1 - x0 + 1.5, y1 - y0 + 1.6), dpi=100)
    draw_maze_episode(ax, layout, scaling, *drawn)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def bundle_graph(bundle: Any, goal: np.ndarray, config: Any) -> tuple[np.ndarray, np.ndarray]:
    """(cut edge weights [N+1, N+1], solved landmark -> goal steps [N]) for ``goal``, exactly as
    the server builds them (serving/planner.py, the bundle's value network)."""
    from serving.planner import distances_to_goal, pairwise_graph

    edges = pairwise_graph(bundle.landmarks, goal, bundle.value_fn, config.d_max, config.adaptive_cut)
    return edges, distances_to_goal(bundle.landmarks, goal, bundle.value_fn, config)[:-1]


def add_plot_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from clients.runner import _variant_arg

    parser.add_argument("--bundle", type=Path, required=True, help="the maze model bundle (its graph is drawn)")
    parser.add_argument("--server", default=None, metavar="HOST:PORT",
                        help="planner server serving that bundle (default: start one on --bundle)")
    parser.add_argument("--seed", type=int, default=mazes.FAR_PAIRS_HELD_OUT_SEED,
                        help="episode seed (and far-pair list seed; default: the held-out list)")
    parser.add_argument("--pairs", choices=("random", "far"), default="far")
    parser.add_argument("--planner", type=_variant_arg, default="l3p", metavar="MODE[@KEY=VALUE...]")
    parser.add_argument("--out", type=Path, default=Path("maze_episode.png"))
    return parser


def run_plot(args: argparse.Namespace) -> int:
    from clients.client import PlannerClient, PlannerError
    from clients.local_server import LocalServer, ServerStartError
    from clients.runner import close_env, episode_plan, make_env, parse_variant, run_episode
    from serving.bundle import BundleError, load_bundle

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
