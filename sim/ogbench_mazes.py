"""OGBench's mazes as goal envs: ``ogbench/{point,ant}maze-{medium,large,giant}-v0``.

OGBench (Park et al., 2024) is the shared benchmark of offline goal-conditioned RL; its maze envs
are plain gymnasium envs whose goal comes in ``info["goal"]``. Here each is wrapped as a goal env
the trainer, the runner, the evaluator, ``l3p run --video`` and ``l3p plot`` handle like any other:

- ``observation``: OGBench's own observation: for the point its x, y (OGBench moves it by 0.2 x
  action per step, actions in [-1, 1]^2); for the ant its 29-d state (x, y first, then the rest of
  qpos and qvel; 8 joint actions in [-1, 1]). ``achieved_goal`` = the robot's x, y in OGBench's
  coordinates, ``desired_goal`` = the goal's x, y; 1,000 steps, OGBench's evaluation length.
- Success is OGBench's own flag (within 1 m of the goal for the point, 0.5 m for the ant). As
  OGBench's evaluation, the episode terminates at the first success (``terminated``); stepped on
  anyway (envs stepped in lockstep do), ``info["success"]`` stays 1, so the episode counts as
  OGBench counts it.
- Starts and goals: ``reset(options={"task_id": k})`` for OGBench's five evaluation tasks
  (k = 1..5: fixed start and goal cells), ``{"reset_cell": ..., "goal_cell": ...}`` for cells of
  the layout this env exposes (the far-pair protocol of l3p.sim.mazes), ``{"task_info": (start,
  goal)}`` for OGBench's own (i, j) cells (the dataset generator), or no options: one of the five
  tasks drawn with the env's seed. Both positions get OGBench's uniform noise of a quarter cell
  around the cell centre, drawn from this env's seeded generator (OGBench draws it from numpy's
  global one), so an episode is a pure function of its seed.
- Geometry for l3p.sim.mazes (pictures, far pairs): ``maze.maze_map`` is OGBench's layout with its
  rows reversed (so row 0 is the top of a picture, as in gymnasium-robotics' mazes),
  ``maze.maze_size_scaling`` the 4 m cell and ``maze.origin`` the shift from that convention's
  centred coordinates to OGBench's.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from l3p.sim import mazes

MAZES = ("medium", "large", "giant")
ROBOTS = ("point", "ant")
MAX_STEPS = 1000


def env_id(maze: str, robot: str = "point") -> str:
    return f"ogbench/{robot}maze-{maze}-v0"


@dataclass(frozen=True)
class MazeGeometry:
    """What l3p.sim.mazes reads: the layout (rows top to bottom), cell size, and the origin shift."""

    maze_map: list[list[int]]
    maze_size_scaling: float
    origin: tuple[float, float]


class OGBenchMaze(gym.Env):
    """One OGBench maze (point or ant) as a goal env (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    l3p_success_key = "success"
    max_episode_steps = MAX_STEPS

    def __init__(self, maze: str = "large", robot: str = "point", render_mode: str | None = None, width: int = 480,
                 height: int = 480):
        from ogbench.locomaze.maze import make_maze_env  # ogbench registers its envs on import: only when made

        if maze not in MAZES or robot not in ROBOTS:
            raise ValueError(f"maze must be one of {', '.join(MAZES)} and robot one of {', '.join(ROBOTS)}, "
                             f"got {maze!r}, {robot!r}")
        self.maze_type, self.robot = maze, robot
        self.render_mode = render_mode
        self.inner = make_maze_env(robot, "maze", maze_type=maze, terminate_at_goal=False,
                                   render_mode="rgb_array", width=width, height=height)
        with contextlib.suppress(OSError, AttributeError):  # OGBench leaves its generated MJCF in the temp dir
            os.remove(self.inner.fullpath)
        self._goal_tol = float(self.inner._goal_tol)
        layout = np.asarray(self.inner.maze_map, dtype=np.int64)
        rows, cols = layout.shape
        unit = float(self.inner._maze_unit)
        x0, y0 = self.inner.ij_to_xy((0, 0))
        # OGBench cell (i, j) is at (x0 + j unit, y0 + i unit); the mazes convention puts row r = rows-1-i at
        # y = ((rows-1)/2 - r) unit: the same point up to this shift.
        self.maze = MazeGeometry(layout[::-1].tolist(), unit, (x0 + (cols - 1) / 2 * unit, y0 + (rows - 1) / 2 * unit))
        box = spaces.Box(-np.inf, np.inf, (2,), np.float64)
        state = spaces.Box(-np.inf, np.inf, self.inner.observation_space.shape, np.float64)
        self.observation_space = spaces.Dict({"observation": state, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Box(-1.0, 1.0, self.inner.action_space.shape, np.float32)
        self.goal = np.zeros(2)
        self.num_tasks = len(self.inner.task_infos)
        self.task_id: int | None = None
        self._reached = False
        self._bfs: dict[tuple[int, int], np.ndarray] = {}

    # ----- OGBench's tasks and cells -----
    def task_cells(self, task_id: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """OGBench's (start, goal) cells of evaluation task ``task_id`` (1..5), in OGBench's (i, j)."""
        if not 1 <= task_id <= len(self.inner.task_infos):
            raise ValueError(f"task_id must be 1..{len(self.inner.task_infos)}, got {task_id!r}")
        info = self.inner.task_infos[task_id - 1]
        return tuple(info["init_ij"]), tuple(info["goal_ij"])

    def _from_layout_cell(self, cell: Any) -> tuple[int, int]:
        """A cell of the exposed layout (rows reversed) as OGBench's (i, j)."""
        r, c = (int(v) for v in np.asarray(cell).reshape(2))
        return len(self.maze.maze_map) - 1 - r, c

    def _noisy(self, ij: tuple[int, int]) -> np.ndarray:
        """OGBench's start/goal noise: uniform within a quarter cell of the centre, per axis."""
        quarter = self.maze.maze_size_scaling / 4
        return np.asarray(self.inner.ij_to_xy(ij), np.float64) + self.np_random.uniform(-quarter, quarter, 2)

    # ----- gymnasium -----
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            self.task_id = int(options["task_id"])
            start, goal = self.task_cells(self.task_id)
        elif "task_info" in options:  # OGBench (i, j) cells: (start, goal)
            self.task_id = None
            start, goal = (tuple(int(v) for v in cell) for cell in options["task_info"])
        elif "reset_cell" in options or "goal_cell" in options:
            self.task_id = None
            start, goal = (self._from_layout_cell(options[k]) for k in ("reset_cell", "goal_cell"))
        else:
            self.task_id = int(self.np_random.integers(1, self.num_tasks + 1))
            start, goal = self.task_cells(self.task_id)
        inner_seed = int(self.np_random.integers(2**31))
        self.inner.action_space.seed(inner_seed)  # OGBench's few random settling steps in its reset
        self.inner.reset(seed=inner_seed, options={"task_info": {"init_ij": start, "goal_ij": goal}})
        self.goal = self._noisy(goal)
        self.inner.set_goal(goal_xy=self.goal)
        self.inner.set_xy(self._noisy(start))
        self._reached = False
        return self._obs(), {"success": 0.0, "task_id": self.task_id}

    def step(self, action):
        action = np.clip(np.asarray(action, np.float64), -1.0, 1.0)  # as OGBench's evaluation clips
        _, _, _, _, info = self.inner.step(action)
        self._reached = self._reached or bool(info["success"])
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None))
        info = {"success": float(self._reached), "success_now": float(info["success"])}
        return obs, reward, self._reached, False, info

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        """0 within OGBench's goal tolerance, -1 elsewhere (vectorized over a leading axis)."""
        d = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(d > self._goal_tol).astype(np.float64)

    def render(self):
        return self.inner.render()

    def close(self) -> None:
        self.inner.close()

    def _obs(self) -> dict[str, np.ndarray]:
        xy = np.asarray(self.inner.get_xy(), np.float64)
        return {"observation": np.asarray(self.inner.get_ob(), np.float64), "achieved_goal": xy,
                "desired_goal": self.goal.copy()}

    # ----- the dataset generator's oracle -----
    def oracle_subgoal(self) -> np.ndarray:
        """OGBench's oracle subgoal: the centre of the neighbouring cell (up, left, down, right: the
        first strictly nearer) on a BFS shortest path to the goal's cell; the point's own cell centre
        when none is nearer (in the goal's cell). BFS maps are kept per goal cell."""
        xy = np.asarray(self.inner.get_xy(), np.float64)
        layout = np.asarray(self.inner.maze_map)
        goal_ij = self.inner.xy_to_ij(self.goal)
        dist = self._bfs.get(goal_ij)
        if dist is None:
            dist = self._bfs[goal_ij] = mazes.bfs_cells(layout, goal_ij).astype(np.float64)
            dist[dist < 0] = np.inf
        i, j = best = self.inner.xy_to_ij(xy)
        for di, dj in ((-1, 0), (0, -1), (1, 0), (0, 1)):
            n = (i + di, j + dj)
            if 0 <= n[0] < layout.shape[0] and 0 <= n[1] < layout.shape[1] and layout[n] == 0 \
                    and dist[n] < dist[best]:
                best = n
        return np.asarray(self.inner.ij_to_xy(best), np.float64)

    def oracle_direction(self) -> np.ndarray:
        """Unit vector from the robot toward `oracle_subgoal` (what the datasets' oracle steers by)."""
        d = self.oracle_subgoal() - np.asarray(self.inner.get_xy(), np.float64)
        return d / (np.linalg.norm(d) + 1e-6)

    def set_goal_cell(self, ij: tuple[int, int]) -> None:
        """Pursue a new goal cell from here (the navigate datasets' next goal); OGBench's noise applies."""
        self.goal = self._noisy(ij)
        self.inner.set_goal(goal_xy=self.goal)
        self._reached = False


class OGBenchAntMaze(OGBenchMaze):
    """The ant's maze: its 29-d observation is x, y, z, then the torso's quaternion (w, x, y, z), so it
    declares where an ant on its back shows (`l3p.sim.envs.GoalEnvAdapter.fallen`): ``l3p eval`` counts
    falls and training can make one a failure."""

    l3p_torso_quat_index = 3


def register() -> None:
    for robot in ROBOTS:
        entry = "OGBenchAntMaze" if robot == "ant" else "OGBenchMaze"
        for maze in MAZES:
            if env_id(maze, robot) not in gym.registry:
                gym.register(env_id(maze, robot), entry_point=f"{__name__}:{entry}", max_episode_steps=MAX_STEPS,
                             kwargs={"maze": maze, "robot": robot})


register()
