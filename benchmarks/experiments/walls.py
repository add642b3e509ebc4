"""A diagnostic with the maze's walls, which no served planner knows: each point's distance to the
nearest wall cell (the measurement scripts beside it import it)."""
import numpy as np

from l3p.sim import mazes


def wall_boxes(env) -> tuple[np.ndarray, np.ndarray]:
    """Every wall cell's lower-left and upper-right corners, [W, 2] each."""
    walls = np.array(mazes.wall_rectangles(mazes.maze_map(env), mazes.maze_scaling(env), mazes.maze_origin(env)))
    return walls[:, :2], walls[:, :2] + walls[:, 2:]


def distance_to_walls(points: np.ndarray, env) -> np.ndarray:
    """Each point's distance to the nearest wall cell."""
    low, high = wall_boxes(env)
    p = np.asarray(points)[:, None, :]
    out = np.maximum(np.maximum(low[None] - p, p - high[None]), 0.0)
    return np.sqrt((out ** 2).sum(-1)).min(axis=1)
