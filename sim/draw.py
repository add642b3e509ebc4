"""Pictures: maze episodes (walls, landmarks, the solved graph, a trajectory coloured by the
subgoal pursued), landmarks over achieved goals, and learning curves. matplotlib, drawn off-screen."""
from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core import LandmarkGraph, PlannerConfig
from l3p.sim import mazes
from l3p.sim.envs import make_env

# Pictures are read in a model card or a docs page, shown at the column's width: 998 px in the docs
# at a 1280 px window, ~830 px on GitHub, READ_AT_PX and up on smaller screens. A browser scales a
# picture down to its column, never up, so text of s points in a figure W inches wide drawn at d dpi
# is s / 72 * min(d, R / W) px tall at R px shown (`text_px`). Every figure here is WIDTH_IN wide:
# at R = 700 that is 1.39 px a point, and the smallest text (9 pt) is 12.5 px, above MIN_TEXT_PX.
READ_AT_PX = 700
MIN_TEXT_PX = 11
WIDTH_IN = 7.0
DPI = 150  # 1,050 px: sharp in the 998 px column and on high-density screens
SMALL_PT, TEXT_PT = 9, 10  # legends and tick labels; titles and axis labels
STYLE = {"font.size": TEXT_PT, "axes.titlesize": TEXT_PT, "axes.labelsize": TEXT_PT, "figure.titlesize": TEXT_PT,
         "legend.fontsize": SMALL_PT, "xtick.labelsize": SMALL_PT, "ytick.labelsize": SMALL_PT,
         "savefig.dpi": DPI}


def text_px(points: float, width_in: float, dpi: float, shown_px: float = READ_AT_PX) -> float:
    """How tall text of ``points`` is, in screen px, in a figure ``width_in`` wide drawn at ``dpi``
    and shown at most ``shown_px`` wide (never scaled up past its own width)."""
    return points / 72 * min(dpi, shown_px / width_in)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def figure(path: str | Path, height_in: float, ncols: int = 1, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """A WIDTH_IN-wide figure with the pictures' text sizes, (fig, axes row); saved as a PNG at
    ``path`` (folders made) and closed when the block ends without an error."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, ncols, figsize=(WIDTH_IN, height_in), dpi=DPI, squeeze=False,
                                 layout="constrained", **subplots)
        try:
            yield fig, axes[0]
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path)
        finally:
            plt.close(fig)


def wrapped(title: str, points: float = TEXT_PT) -> str:
    """``title`` in lines that fit the figure's width (about 0.6 em a character)."""
    return textwrap.fill(title, width=int(WIDTH_IN * 72 / (0.6 * points)))


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
        ax.add_collection(LineCollection(segs, colors=[colour[k] for k in steps], linewidths=2.2, zorder=5,
                                         capstyle="round"))  # no gaps between the short segments
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
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False)


def plot_maze_episode(path: str | Path, layout: np.ndarray, scaling: float, *drawn: Any, title: str = "",
                      fell_at: int | None = None, origin: tuple[float, float] = (0.0, 0.0)) -> Path:
    """`draw_maze_episode` (same arguments after ``scaling``) into a new figure, saved as a PNG."""
    x0, x1, y0, y1 = mazes.extent(layout, scaling, origin)
    # The map fills the width but the colour bar's; below it the legend, above it the title.
    height = (WIDTH_IN - 1.0) * (y1 - y0) / (x1 - x0) + 1.4
    with figure(path, height) as (fig, (ax,)):
        draw_maze_episode(ax, layout, scaling, *drawn, fell_at=fell_at, origin=origin)
        if title:
            ax.set_title(wrapped(title))
    return Path(path)


def goal_space_obstacles(env_id: str) -> np.ndarray:
    """The obstacles an env declares for pictures (``l3p_obstacles``: axis-aligned boxes [k, 2 (low,
    high), goal_dim] in goal coordinates, e.g. the Fetch box's walls); none if it declares none."""
    env = make_env(env_id)
    try:
        return np.asarray(getattr(env.unwrapped, "l3p_obstacles", np.zeros((0, 2, 0))), dtype=np.float64)
    finally:
        env.close()


def plot_landmarks(landmarks: np.ndarray, goals: np.ndarray, path: Path, title: str, env_id: str = "",
                   value_fn=None, d_max: float = 0.0, adaptive_cut: bool = True,
                   supported: np.ndarray | None = None) -> None:
    """Landmarks over a sample of achieved goals. Mazes: over the maze's walls, with the graph's
    landmark edges (V <= d_max, given ``value_fn``; only the ``supported`` ones of a data graph, as
    the server keeps them); otherwise in the goal space's first two (and, if 3-d, x-z) axes, over
    the obstacles the env declares (``goal_space_obstacles``)."""
    n = len(landmarks)
    edges = np.full((n, n), np.inf)
    if value_fn is not None and n:
        graph = LandmarkGraph(landmarks, value_fn, edges=supported)
        config = PlannerConfig(d_max=d_max, adaptive_cut=adaptive_cut)
        edges = graph.episode_weights(landmarks[0], value_fn, config)[:n, :n]
    if mazes.is_maze(env_id):
        env = make_env(env_id)
        layout, scaling, origin = mazes.maze_map(env), mazes.maze_scaling(env), mazes.maze_origin(env)
        env.close()
        plot_maze_episode(path, layout, scaling, landmarks, edges, None, None, None, None, goals, title=title,
                          origin=origin)
        return
    ii, jj = np.nonzero(np.isfinite(edges) & ~np.eye(n, dtype=bool))
    pairs = sorted({tuple(sorted(p)) for p in zip(ii.tolist(), jj.tolist())})

    obstacles = goal_space_obstacles(env_id) if env_id else np.zeros((0, 2, 0))
    views = [(0, 1)] + ([(0, 2)] if goals.shape[1] > 2 else [])
    with figure(path, 3.9, ncols=len(views)) as (fig, axes):
        _goal_space_views(fig, axes, views, landmarks, goals, pairs, obstacles)
        fig.suptitle(wrapped(title))


def _goal_space_views(fig: Any, axes: Any, views: list[tuple[int, int]], landmarks: np.ndarray, goals: np.ndarray,
                      pairs: list[tuple[int, int]], obstacles: np.ndarray) -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Rectangle

    for ax, (i, j) in zip(axes, views):
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
    # Below the views, not over the points: a legend in an axes hides what it labels at this size.
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, frameon=False)


def plot_learning_curve(history: list[dict], path: Path, title: str, planner_label: str = "L3P planner",
                        x: str = "env_steps", series: tuple[tuple[str, str], ...] | None = None,
                        ylabel: str = "eval success rate") -> None:
    """Evaluation success over ``x`` (env steps online; optimizer steps for a run trained offline),
    or the ``series`` (progress.csv's column, label) given, each within [0, 1]."""
    series = series or (("success_policy", "policy π(s, g)"), ("success_l3p", planner_label))
    with figure(path, 3.6) as (fig, (ax,)):
        for key, label in series:
            rows = [r for r in history if r.get(key) is not None]  # cells not measured are absent
            ax.plot([r[x] for r in rows], [r[key] for r in rows], marker=".", label=wrapped(label, SMALL_PT))
        from matplotlib.ticker import EngFormatter

        ax.xaxis.set_major_formatter(EngFormatter(sep=" "))  # 200 k, 1.2 M: no offset text to find
        ax.set_xlabel(x.replace("_", " "))
        ax.set_ylabel(ylabel)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(wrapped(title))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left")
