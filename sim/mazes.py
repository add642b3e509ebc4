"""Maze geometry for the long-horizon tests: free cells, BFS path lengths, far start/goal pairs.

numpy only (no simulator), so the trainer, the runner and the plots share one copy. A maze map is
the gymnasium-robotics layout: rows of 0 (free) and 1 (wall), cell (r, c) centred at
x = (c - (cols - 1) / 2) * scaling, y = ((rows - 1) / 2 - r) * scaling.

Far pairs follow the paper's maze protocol: evaluation starts and goals whose shortest path
through the maze is at least ``min_cells`` cells, pinned per episode with
``env.reset(options={"reset_cell": start, "goal_cell": goal})``. The list is a pure function of
(maze, n, seed, min_cells), so every planner mode is measured on the same pairs.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

Cell = tuple[int, int]
MIN_FAR_CELLS = 10


def is_maze(env_id: str) -> bool:
    """gymnasium-robotics' ``PointMaze_*`` / ``AntMaze_*`` and OGBench's ``ogbench/pointmaze-*``."""
    return "maze" in env_id.lower()


def maze_map(env: Any) -> np.ndarray:
    """The 0/1 layout of a gymnasium-robotics maze env (wrapped or not), as an int array."""
    return np.asarray(env.unwrapped.maze.maze_map, dtype=np.int64)


def maze_scaling(env: Any) -> float:
    return float(env.unwrapped.maze.maze_size_scaling)


def maze_origin(env: Any) -> tuple[float, float]:
    """Where the centred layout's (0, 0) lies in the env's coordinates (OGBench's mazes are shifted)."""
    x, y = getattr(env.unwrapped.maze, "origin", (0.0, 0.0))
    return float(x), float(y)


def free_cells(layout: np.ndarray) -> list[Cell]:
    return [(int(r), int(c)) for r, c in zip(*np.nonzero(np.asarray(layout) == 0))]


def bfs_cells(layout: np.ndarray, start: Cell) -> np.ndarray:
    """Path length in cells (4-connected moves) from ``start`` to every cell; -1 = unreachable or wall."""
    layout = np.asarray(layout)
    dist = np.full(layout.shape, -1, np.int64)
    if layout[start] != 0:
        raise ValueError(f"start cell {start} is a wall")
    dist[start] = 0
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < layout.shape[0] and 0 <= nc < layout.shape[1] and layout[nr, nc] == 0 \
                    and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def far_pairs(layout: np.ndarray, n: int, seed: int, min_cells: int = MIN_FAR_CELLS) -> list[tuple[Cell, Cell]]:
    """``n`` (start, goal) cell pairs at least ``min_cells`` apart by BFS, drawn with replacement
    from all such ordered pairs by ``np.random.default_rng(seed)`` (deterministic per seed; an
    evaluation passes its seed base from ``l3p.core.seeds``)."""
    cells = free_cells(layout)
    candidates = []
    for s in cells:
        dist = bfs_cells(layout, s)
        candidates.extend((s, g) for g in cells if dist[g] >= min_cells)
    if not candidates:
        raise ValueError(f"no cell pairs are >= {min_cells} cells apart in this maze")
    picks = np.random.default_rng(seed).integers(0, len(candidates), n)
    return [candidates[i] for i in picks]


def reset_options(pair: tuple[Cell, Cell]) -> dict[str, np.ndarray]:
    start, goal = pair
    return {"reset_cell": np.array(start), "goal_cell": np.array(goal)}


def cell_center(layout: np.ndarray, cell: Cell, scaling: float = 1.0,
                origin: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    rows, cols = np.asarray(layout).shape
    r, c = cell
    return np.array([(c - (cols - 1) / 2) * scaling + origin[0], ((rows - 1) / 2 - r) * scaling + origin[1]])


def extent(layout: np.ndarray, scaling: float = 1.0,
           origin: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float, float, float]:
    """(x_min, x_max, y_min, y_max) of the whole map, outer walls included."""
    rows, cols = np.asarray(layout).shape
    x, y = origin
    return (x - cols / 2 * scaling, x + cols / 2 * scaling, y - rows / 2 * scaling, y + rows / 2 * scaling)


def wall_rectangles(layout: np.ndarray, scaling: float = 1.0,
                    origin: tuple[float, float] = (0.0, 0.0)) -> list[tuple[float, float, float]]:
    """(x_left, y_bottom, size) of every wall cell, for drawing."""
    out = []
    for r, c in zip(*np.nonzero(np.asarray(layout) == 1)):
        x, y = cell_center(layout, (int(r), int(c)), scaling, origin)
        out.append((float(x - scaling / 2), float(y - scaling / 2), scaling))
    return out
