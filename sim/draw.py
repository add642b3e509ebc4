"""Pictures: maze episodes (walls, landmarks, the solved graph, a trajectory coloured by the
subgoal pursued), landmarks over achieved goals, and learning curves. matplotlib, drawn off-screen."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core import pairwise_graph
from l3p.sim import mazes
from l3p.sim.envs import make_env


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
    fell_at: int | None = None,
    origin: tuple[float, float] = (0.0, 0.0),
) -> None:
    """Draw into ``ax``. ``edges`` [N(+1), N(+1)]: finite = an edge of the cut graph (landmark
    i -> j); ``landmark_to_goal`` [N]: solved steps to the goal (inf = unreachable; None: no
    goal, plain landmarks); ``trajectory`` [T+1, 2] achieved goals and ``subgoal_indices`` [T]
    (-1 = final goal); ``visited``: achieved goals from training, drawn faintly underneath;
    ``fell_at``: the step after which the robot lay fallen, marked on the trajectory; ``origin``: the
    maze's shift (`mazes.maze_origin`)."""
    from matplotlib import colormaps
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Rectangle

    x0, x1, y0, y1 = mazes.extent(layout, scaling, origin)
    for x, y, size in mazes.wall_rectangles(layout, scaling, origin):
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
        if fell_at is not None:
            ax.scatter(*trajectory[fell_at], marker="X", s=220, c="tab:red", edgecolors="k", zorder=8,
                       label=f"fell (step {fell_at})")
    if goal is not None:
        ax.scatter(*goal, marker="*", s=260, c="gold", edgecolors="k", zorder=7, label="goal")

    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)


def plot_maze_episode(path: str | Path, layout: np.ndarray, scaling: float, *drawn: Any, title: str = "",
                      fell_at: int | None = None, origin: tuple[float, float] = (0.0, 0.0)) -> Path:
    """`draw_maze_episode` (same arguments after ``scaling``) into a new figure, saved as a PNG."""
    plt = _pyplot()
    x0, x1, y0, y1 = mazes.extent(layout, scaling, origin)
    # Figure size in inches from the map's size in cells (1 m point mazes and 4 m ones alike).
    fig, ax = plt.subplots(figsize=((x1 - x0) / scaling + 1.5, (y1 - y0) / scaling + 1.6), dpi=100)
    draw_maze_episode(ax, layout, scaling, *drawn, fell_at=fell_at, origin=origin)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def goal_space_obstacles(env_id: str) -> np.ndarray:
    """The obstacles an env declares for pictures (``l3p_obstacles``: axis-aligned boxes [k, 2 (low,
    high), goal_dim] in goal coordinates, e.g. the Fetch box's walls); none if it declares none."""
    env = make_env(env_id)
    try:
        return np.asarray(getattr(env.unwrapped, "l3p_obstacles", np.zeros((0, 2, 0))), dtype=np.float64)
    finally:
        env.close()


def plot_landmarks(landmarks: np.ndarray, goals: np.ndarray, path: Path, title: str, env_id: str = "",
                   value_fn=None, d_max: float = 0.0, adaptive_cut: bool = True) -> None:
    """Landmarks over a sample of achieved goals. Mazes: over the maze's walls, with the graph's
    landmark edges (V <= d_max, given ``value_fn``); otherwise in the goal space's first two (and,
    if 3-d, x-z) axes, over the obstacles the env declares (``goal_space_obstacles``)."""
    n = len(landmarks)
    edges = (pairwise_graph(landmarks, landmarks[0], value_fn, d_max, adaptive_cut)[:n, :n]
             if value_fn is not None and n else np.full((n, n), np.inf))
    if mazes.is_maze(env_id):
        env = make_env(env_id)
        layout, scaling, origin = mazes.maze_map(env), mazes.maze_scaling(env), mazes.maze_origin(env)
        env.close()
        plot_maze_episode(path, layout, scaling, landmarks, edges, None, None, None, None, goals, title=title,
                          origin=origin)
        return
    plt = _pyplot()
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Rectangle

    ii, jj = np.nonzero(np.isfinite(edges) & ~np.eye(n, dtype=bool))
    pairs = sorted({tuple(sorted(p)) for p in zip(ii.tolist(), jj.tolist())})

    obstacles = goal_space_obstacles(env_id) if env_id else np.zeros((0, 2, 0))
    views = [(0, 1)] + ([(0, 2)] if goals.shape[1] > 2 else [])
    fig, axes = plt.subplots(1, len(views), figsize=(5 * len(views), 4), dpi=100, squeeze=False)
    for ax, (i, j) in zip(axes[0], views):
        for k, (low, high) in enumerate(obstacles):
            corner, width, height = (low[i], low[j]), high[i] - low[i], high[j] - low[j]
            ax.add_patch(Rectangle(corner, width, height, facecolor="tab:brown", alpha=0.45, zorder=0,
                                   label=None if k else "obstacles"))
            # The outline again above the edges: a dense graph would hide the obstacle otherwise.
            ax.add_patch(Rectangle(corner, width, height, fill=False, edgecolor="saddlebrown", linewidth=1.5,
                                   zorder=4))
        if len(goals):
            ax.scatter(goals[:, i], goals[:, j], s=3, c="0.75", label="achieved goals (replay)")
        if pairs:  # the graph's landmark edges, both directions drawn once
            ax.add_collection(LineCollection([landmarks[[a, b]][:, [i, j]] for a, b in pairs], colors="tab:blue",
                                             linewidths=0.5, alpha=0.3, label=f"graph edges ({len(pairs)})"))
        ax.scatter(landmarks[:, i], landmarks[:, j], s=30, c="tab:red", marker="*", label="landmarks")
        ax.set_xlabel("xyz"[i] if goals.shape[1] == 3 else f"g[{i}]")
        ax.set_ylabel("xyz"[j] if goals.shape[1] == 3 else f"g[{j}]")
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="best", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_learning_curve(history: list[dict], path: Path, title: str, planner_label: str = "L3P planner",
                        x: str = "env_steps") -> None:
    """Evaluation success over ``x`` (env steps online; optimizer steps for a run trained offline)."""
    plt = _pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    for key, label in (("success_policy", "policy π(s, g)"), ("success_l3p", planner_label)):
        rows = [r for r in history if r.get(key) is not None]  # cells not measured are absent
        ax.plot([r[x] for r in rows], [r[key] for r in rows], marker=".", label=label)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("eval success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
