"""OGBench's manipulation tasks as goal envs: ``ogbench/{cube-double,scene,puzzle-3x3,puzzle-4x4}-v0``.

OGBench (Park et al., 2024) puts a UR5e arm with a Robotiq gripper before cubes (``cube-*``), a
scene of a cube, two buttons that lock a drawer and a window (``scene``), or a "Lights Out" board
of buttons (``puzzle-*``). Each OGBench env is wrapped here as a goal env, as the mazes are
(l3p.sim.ogbench_mazes):

- ``observation``: OGBench's own (the arm's 19 values, then the objects'; 5-d actions in [-1, 1]).
- The goal space is the part of the state OGBench's success flag reads, declared once per env
  (`Manipulation.goal`) as where it sits in the observation (``l3p_achieved_goal_indices``): each
  cube's x, y, z (OGBench's (p - (0.425, 0, 0)) x 10), each button's state (0 / 1), the drawer's
  and the window's slide (x 18, x 15). It is OGBench's "oracle goal representation"
  (``compute_oracle_observation``); the actor sees the whole observation.
- ``desired_goal``: that part of OGBench's goal observation (``info["goal"]``, the scene set to
  the task's goal and settled), also returned whole as ``info["goal_observation"]``.
- Success is OGBench's own flag (every cube within 4 cm of its target, every button, the drawer
  and the window as in the goal). As OGBench's evaluation, the episode terminates at the first
  success; stepped on anyway, ``info["success"]`` stays 1. ``compute_reward`` applies the same
  rule in goal space (each part within its `GoalPart.tolerance`), for relabelled goals.
- Starts and goals: OGBench's five evaluation tasks, ``reset(options={"task_id": k})`` (k = 1..5),
  or one of them drawn with the env's seed; episodes last OGBench's evaluation length
  (`Manipulation.max_steps`). OGBench draws a task's small start noise from the env's seeded
  generator, but the few random steps that settle its goal scene from a fresh, unseeded action
  space each time; here that space is one, seeded by ``reset``, so an episode is a function of its seed.
- Frames: OGBench's front camera, at the size ``make_env(render=True, size=...)`` asks for; a video
  marks a goal where `goal_points` puts it (its cubes, the buttons it would toggle).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ARM = 19  # OGBench's arm part of every observation: joints, velocities, effector, gripper
CUBE = 9  # per cube after it: x, y, z, quaternion, cos and sin of its yaw
BUTTON = 4  # per button: its state one-hot (0, 1), its plunger's position and velocity
XYZ_CENTER, XYZ_SCALE = np.array([0.425, 0.0, 0.0]), 10.0  # a position p observed as (p - XYZ_CENTER) x XYZ_SCALE
CUBE_TOLERANCE = 0.04 * XYZ_SCALE  # OGBench's 4 cm
STATE_TOLERANCE = 0.5  # a button's state, 0 or 1, must be the goal's


@dataclass(frozen=True)
class GoalPart:
    """One object's part of the goal: where it sits in the observation, and how near counts as there."""

    kind: str  # cube, button, drawer, window
    number: int  # OGBench's number of that object (cube 0, button 3)
    index: tuple[int, ...]
    tolerance: float  # the part is achieved within this Euclidean distance of the goal's


@dataclass(frozen=True)
class Manipulation:
    """One OGBench manipulation env: its name, evaluation length and goal space."""

    name: str  # OGBench's env, ``{name}-v0``
    max_steps: int
    goal: tuple[GoalPart, ...]

    @property
    def env_id(self) -> str:
        return f"ogbench/{self.name}-v0"

    @property
    def ogbench_id(self) -> str:
        return f"{self.name}-v0"

    @property
    def goal_indices(self) -> tuple[int, ...]:
        return tuple(i for part in self.goal for i in part.index)

    @property
    def goal_slices(self) -> tuple[tuple[GoalPart, slice], ...]:
        """Each part of the goal with where it sits in a goal vector."""
        ends = np.cumsum([len(part.index) for part in self.goal]).tolist()
        return tuple((part, slice(end - len(part.index), end)) for part, end in zip(self.goal, ends))


def cubes(n: int) -> tuple[GoalPart, ...]:
    return tuple(GoalPart("cube", k, tuple(range(ARM + CUBE * k, ARM + CUBE * k + 3)), CUBE_TOLERANCE)
                 for k in range(n))


def buttons(n: int, first: int = ARM) -> tuple[GoalPart, ...]:
    """Buttons from observation index ``first``: a button's state is its one-hot's second entry."""
    return tuple(GoalPart("button", k, (first + BUTTON * k + 1,), STATE_TOLERANCE) for k in range(n))


_SCENE_DRAWER = ARM + CUBE + 2 * BUTTON  # the drawer's slide x 18, its velocity, the window's slide x 15, its velocity
SCENE_GOAL = (*cubes(1), *buttons(2, ARM + CUBE), GoalPart("drawer", 0, (_SCENE_DRAWER,), 0.04 * 18),
              GoalPart("window", 0, (_SCENE_DRAWER + 2,), 0.04 * 15))


@functools.cache
def _seeded_actions(base: type) -> type:
    """OGBench's env class with one action space per env, which ``reset`` seeds (see the module docstring)."""

    class Seeded(base):
        @property
        def action_space(self) -> spaces.Box:
            if "_l3p_actions" not in self.__dict__:
                self.__dict__["_l3p_actions"] = spaces.Box(-1.0, 1.0, (5,), np.float32)
            return self.__dict__["_l3p_actions"]

    Seeded.__name__ = Seeded.__qualname__ = base.__name__
    return Seeded


class OGBenchManipulation(gym.Env):
    """One OGBench manipulation env as a goal env (see the module docstring); one subclass per env."""

    manipulation: Manipulation
    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}  # OGBench acts every 0.05 s
    l3p_success_key = "success"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.max_episode_steps = cls.manipulation.max_steps
        cls.l3p_achieved_goal_indices = cls.manipulation.goal_indices

    def __init__(self, render_mode: str | None = None, width: int = 480, height: int = 480):
        import ogbench.manipspace  # noqa: F401  registers OGBench's envs: only when one is made

        self.render_mode = render_mode
        spec = gym.spec(self.manipulation.ogbench_id)
        base = gym.envs.registration.load_env_creator(spec.entry_point)
        self.inner = _seeded_actions(base)(**spec.kwargs, terminate_at_goal=False, width=width, height=height)
        self._goal_index = np.asarray(self.manipulation.goal_indices)
        self.inner.reset(seed=0, options={"task_id": 1})  # builds the model, to read the observation's size
        state = spaces.Box(-np.inf, np.inf, (self.inner.compute_observation().shape[0],), np.float64)
        goal = spaces.Box(-np.inf, np.inf, (len(self._goal_index),), np.float64)
        self.observation_space = spaces.Dict({"observation": state, "achieved_goal": goal, "desired_goal": goal})
        self.action_space = spaces.Box(-1.0, 1.0, (5,), np.float32)
        self.num_tasks = len(self.inner.task_infos)
        self.task_id: int | None = None
        self.goal = np.zeros(len(self._goal_index))
        self._reached = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        task = int(options["task_id"]) if "task_id" in options else int(self.np_random.integers(1, self.num_tasks + 1))
        if not 1 <= task <= self.num_tasks:
            raise ValueError(f"task_id must be 1..{self.num_tasks}, got {task!r}")
        self.task_id = task
        inner_seed = int(self.np_random.integers(2**31))
        self.inner.action_space.seed(inner_seed)  # the random steps that settle the goal scene
        ob, info = self.inner.reset(seed=inner_seed, options={"task_id": task})
        self.goal = np.asarray(info["goal"], np.float64)[self._goal_index]
        self._reached = False
        return self._obs(ob), {"success": 0.0, "task_id": task, "goal_observation": np.asarray(info["goal"])}

    def step(self, action):
        action = np.clip(np.asarray(action, np.float64), -1.0, 1.0)  # as OGBench's evaluation clips
        ob, _, _, _, info = self.inner.step(action)
        self._reached = self._reached or bool(info["success"])
        obs = self._obs(ob)
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None))
        info = {"success": float(self._reached), "success_now": float(info["success"])}
        return obs, reward, self._reached, False, info

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        """0 where every part of the goal is within its tolerance, -1 elsewhere (vectorized over leading axes)."""
        achieved, desired = np.asarray(achieved_goal, np.float64), np.asarray(desired_goal, np.float64)
        there = np.ones(np.broadcast_shapes(achieved.shape, desired.shape)[:-1], bool)
        for part, at in self.manipulation.goal_slices:
            there &= np.linalg.norm(achieved[..., at] - desired[..., at], axis=-1) <= part.tolerance
        return np.where(there, 0.0, -1.0)

    def render(self, markers: list[tuple[np.ndarray, float, np.ndarray]] = ()) -> np.ndarray:
        """OGBench's front camera; ``markers``: spheres (position, radius, rgba) drawn into the scene."""
        import mujoco

        def draw(scene) -> None:
            for pos, radius, rgba in markers[:scene.maxgeom - scene.ngeom]:
                mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE, np.full(3, radius),
                                    np.asarray(pos, np.float64), np.eye(3).reshape(-1), np.asarray(rgba, np.float32))
                scene.ngeom += 1

        return self.inner.render(scene_callback=draw if len(markers) else None)

    def goal_points(self, goal: np.ndarray) -> np.ndarray:
        """[k, 3] scene positions that show ``goal`` in a frame: each cube where the goal puts it, and
        the top of each button whose state the goal changes (the ones to press)."""
        goal, now = np.asarray(goal, np.float64), self._obs(self.inner.compute_observation())["achieved_goal"]
        points = []
        for part, at in self.manipulation.goal_slices:
            if part.kind == "cube":
                points.append(goal[at] / XYZ_SCALE + XYZ_CENTER)
            elif part.kind == "button" and abs(goal[at][0] - now[at][0]) > STATE_TOLERANCE:
                points.append(self.inner._data.site_xpos[self.inner._button_site_ids[part.number]])
        return np.asarray(points, np.float64).reshape(-1, 3)

    def close(self) -> None:
        self.inner.close()

    def _obs(self, ob: np.ndarray) -> dict[str, np.ndarray]:
        ob = np.asarray(ob, np.float64)
        return {"observation": ob, "achieved_goal": ob[self._goal_index], "desired_goal": self.goal.copy()}


class CubeDouble(OGBenchManipulation):
    """Two cubes to move, swap or stack."""

    manipulation = Manipulation("cube-double", 500, cubes(2))


class Scene(OGBenchManipulation):
    """A cube, two lock buttons, a drawer and a window."""

    manipulation = Manipulation("scene", 750, SCENE_GOAL)


class Puzzle3x3(OGBenchManipulation):
    """Lights Out on 3 x 3 buttons: pressing one toggles it and its neighbours."""

    manipulation = Manipulation("puzzle-3x3", 500, buttons(9))


class Puzzle4x4(OGBenchManipulation):
    """Lights Out on 4 x 4 buttons."""

    manipulation = Manipulation("puzzle-4x4", 500, buttons(16))


ENVS: tuple[type[OGBenchManipulation], ...] = (CubeDouble, Scene, Puzzle3x3, Puzzle4x4)
BY_NAME = {cls.manipulation.name: cls for cls in ENVS}


def register() -> None:
    for cls in ENVS:
        if cls.manipulation.env_id not in gym.registry:
            gym.register(cls.manipulation.env_id, entry_point=f"{__name__}:{cls.__name__}",
                         max_episode_steps=cls.manipulation.max_steps)


register()
