"""One ``make_env`` for every goal env, its spec and adapter, and n copies stepped in lockstep.

Which envs: any gymnasium goal env, named by
- a registered id: ``FetchPush-v4``, ``PointMaze_Large-v3`` (gymnasium-robotics registers its
  envs on first use), or gymnasium's ``module:EnvId`` (importing ``module`` registers ``EnvId``);
- ``package.module:EnvClass``, a ``gymnasium.Env`` subclass: made as ``gym.make`` makes a
  registered env (env checker, order enforcing, time limit), with the time limit from the caller
  or the class attribute ``max_episode_steps``. The module must be importable (installed, or on
  ``PYTHONPATH``); the id string is the env id a bundle records, so ``l3p run`` rebuilds it.

What makes a goal env (checked by ``make_env``; otherwise a one-line ``UnknownEnvError`` naming
what is missing): Dict observations with 1-d Box ``observation``, ``achieved_goal`` and
``desired_goal``; 1-d Box actions with finite bounds; ``compute_reward(achieved_goal,
desired_goal, info)`` vectorized over a leading axis (called with ``info=None``); a finite time
limit (episodes end by truncation, so n envs are stepped in lockstep and each is stored whole).

How L3P reads an env is declared per env class, never guessed from its name (``GoalEnvAdapter``):
- success: ``info[success_key]`` after a step; default ``"is_success"`` (the GoalEnv convention);
- reward: ``compute_reward(...) + reward_offset`` must be 0 at the goal and -1 elsewhere (the
  distance critic counts steps); default offset 0;
- position: an env whose ``observation`` leaves out where the robot is (the ant maze drops the
  torso's x, y) declares ``prepend_achieved_goal``, and ``make_env`` puts ``achieved_goal`` in
  front of ``observation``: a goal-conditioned policy cannot head for a goal it cannot locate.
  Served bundles then take that longer observation (a robot sends its position first).
- motors: ``actuator_gear`` sets the MuJoCo motors' gear (their torque at action ±1), for a robot
  whose stock motors are stronger than the task's (gymnasium's ant flips over; see ``ADAPTERS``);
- falls: a robot that can fall over and not get up (the ant) names where its torso's orientation
  quaternion (w, x, y, z) sits in the observation L3P sees, ``torso_quat_index``; it has fallen
  when its torso's up axis points below the horizontal (``GoalEnvAdapter.fallen``). Training can
  make a fall a failure (``TrainConfig.fall_is_failure``) and ``l3p eval`` counts falls;
- goal space: an env whose goal is a part of its ``observation`` (OGBench's manipulation tasks: the
  objects' part) names where, ``achieved_goal_indices``; a dataset generator reads each step's
  achieved goal from there;
- construction: ``env_kwargs`` are passed to the env's constructor (``gym.make``), e.g. the ant's
  control rate and what its observation includes (see ``ADAPTERS``).
- evaluation: a task whose test protocol differs from its training distribution (Place-Inside-Box
  trains on mixed goals, is evaluated on the in-box goal alone) names its test env id in
  ``eval_env_id``; the trainer's evaluation, ``l3p eval`` and ``l3p run`` use it (``evaluation_env_id``).
A user env declares its own with class attributes ``l3p_success_key`` / ``l3p_reward_offset`` /
``l3p_prepend_achieved_goal`` / ``l3p_eval_env_id`` / ``l3p_actuator_gear`` / ``l3p_torso_quat_index`` /
``l3p_achieved_goal_indices`` / ``l3p_env_kwargs`` (plain Python, no import of l3p); gymnasium-robotics'
families are declared in ``ADAPTERS``;
anything else gets the default; a class's own attributes win over what it inherits, field by field. ``make_env`` probes ``compute_reward`` at the goal and far from
it and refuses an env whose offset reward is not 0 / -1 there, saying what to declare.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from l3p.core.errors import L3PError
from l3p.sim.render import close_env, ensure_offscreen_gl, frame_whole_maze, inner_sim

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


class UnknownEnvError(L3PError, ValueError):
    """An env id that cannot be made, or whose env is not a goal env L3P can use."""


@dataclass(frozen=True)
class GoalEnvAdapter:
    """How L3P reads one goal env: its success flag, the offset that makes its reward -1 / 0, and
    whether its observation needs the achieved goal in front (see the module docstring)."""

    success_key: str = "is_success"
    reward_offset: float = 0.0
    prepend_achieved_goal: bool = False
    eval_env_id: str | None = None  # the env evaluation runs on; None = the same env
    actuator_gear: float | None = None  # the motors' torque at action ±1; None = the env's own
    env_kwargs: tuple[tuple[str, Any], ...] = ()  # (name, value) pairs for the env's constructor
    torso_quat_index: int | None = None  # observation index of the torso's (w, x, y, z); None: cannot fall
    achieved_goal_indices: tuple[int, ...] = ()  # where the achieved goal sits in the observation; (): not in it

    @property
    def can_fall(self) -> bool:
        return self.torso_quat_index is not None

    def uprightness(self, obs: np.ndarray) -> np.ndarray:
        """[...] over observations [..., obs_dim]: the z component of the torso's up axis, 1 - 2(x^2 + y^2)
        of its unit quaternion (1 upright, below 0 on its back). All 1 for a robot that declares no torso."""
        obs = np.asarray(obs)
        if not self.can_fall:
            return np.ones(obs.shape[:-1])
        i = self.torso_quat_index
        return 1.0 - 2.0 * (obs[..., i + 1] ** 2 + obs[..., i + 2] ** 2)

    def fallen(self, obs: np.ndarray) -> np.ndarray:
        """[...] bool over observations [..., obs_dim]: the torso's up axis points below the horizontal.
        All False for a robot that declares no torso."""
        return self.uprightness(obs) < 0.0

    def success(self, info: Mapping[str, Any]) -> bool:
        try:
            return bool(info[self.success_key])
        except KeyError:
            raise UnknownEnvError(f"the env's step info has no {self.success_key!r} (keys: {', '.join(info) or 'none'}); "
                                  f"declare the success key as the env class attribute l3p_success_key") from None


_ANT_MAZE = GoalEnvAdapter(
    "success", -1.0, prepend_achieved_goal=True, actuator_gear=20.0,
    env_kwargs=(("frame_skip", 10), ("include_cfrc_ext_in_observation", False)),
    torso_quat_index=3,  # x, y (prepended), then qpos[2:]: z, then the torso's quaternion
)

# Declared per env class, "module:QualName", matched along the env's class hierarchy.
ADAPTERS: dict[str, GoalEnvAdapter] = {
    # Fetch (every gymnasium-robotics robot env): info["is_success"], reward -1 / 0.
    "gymnasium_robotics.envs.robot_env:BaseRobotEnv": GoalEnvAdapter("is_success", 0.0),
    # AntMaze_*: as the mazes below; the ant's observation has no torso x, y. The ant is made like
    # HIRO's, which the paper's maze descends from: it acts every 0.1 s (timestep 0.02 x 5;
    # gymnasium's 0.01 x 5 acts every 0.05 s, so the paper's 500 test steps would be 25 s of
    # walking, too short for the U's ~24 m at the speed a policy learned here walked) and observes
    # joints and velocities only, without gymnasium's 78 contact forces: frame_skip 10, no contact
    # forces. Its motors are weaker than gymnasium's gear 150, which turned it on its back in 7 of
    # 10 200-step episodes of uniform random actions, and than HIRO's torque 30, which still let
    # trained policies throw it over (14 of 20 far-pair episodes at 240 k env steps) and turned it
    # over in 23 of 120 200-step episodes of full-torque random actions held 0.2-0.5 s; gear 20: 4
    # of 120, moving it 0.8-1.4 m per 20 s (gear 30: 1.2-1.7 m; gear 15: 0 of 120).
    "gymnasium_robotics.envs.maze.ant_maze_v5:AntMazeEnv": _ANT_MAZE,
    "gymnasium_robotics.envs.maze.ant_maze_v4:AntMazeEnv": _ANT_MAZE,
    # PointMaze_* (x, y first in its observation): info["success"], sparse reward 1 at the goal, 0 elsewhere.
    "gymnasium_robotics.envs.maze.maze_v4:MazeEnv": GoalEnvAdapter("success", -1.0),
    "gymnasium_robotics.envs.maze.maze:MazeEnv": GoalEnvAdapter("success", -1.0),
}


def goal_adapter(env: gym.Env) -> GoalEnvAdapter:
    """The env's declared adapter: ``ADAPTERS`` along its class hierarchy (else the default), with
    any field the class declares itself (``l3p_<field>``) taking precedence."""
    return class_adapter(type(env.unwrapped))


def class_adapter(cls: type) -> GoalEnvAdapter:
    """`goal_adapter` for an env class, before any env is made."""
    adapter = next((ADAPTERS[key] for key in (f"{base.__module__}:{base.__qualname__}" for base in cls.__mro__)
                    if key in ADAPTERS), GoalEnvAdapter())
    own = {f.name: getattr(cls, f"l3p_{f.name}") for f in dataclasses.fields(GoalEnvAdapter)
           if hasattr(cls, f"l3p_{f.name}")}
    if isinstance(own.get("env_kwargs"), Mapping):
        own["env_kwargs"] = tuple(own["env_kwargs"].items())
    return dataclasses.replace(adapter, **own) if own else adapter


@dataclass(frozen=True)
class EnvSpec:
    env_id: str
    obs_dim: int
    goal_dim: int
    action_dim: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    max_steps: int
    adapter: GoalEnvAdapter = field(default_factory=GoalEnvAdapter)

    @property
    def action_max(self) -> float:
        return float(max(abs(x) for x in self.action_high))


@functools.cache
def _register_known_envs() -> None:
    """gymnasium-robotics' envs and our scenes built on them (l3p.sim.box), registered once on first
    use (importing each registers its envs)."""
    import farama_notifications

    # gymnasium-robotics prints a notice about Adroit envs (unrelated to ours) on import.
    farama_notifications.notifications.pop("gymnasium_robotics", None)
    try:
        import gymnasium_robotics
    except ImportError:  # a user's own env needs no gymnasium-robotics
        return
    gym.register_envs(gymnasium_robotics)
    importlib.import_module("l3p.sim.box")
    importlib.import_module("l3p.sim.ogbench_mazes")
    importlib.import_module("l3p.sim.ogbench_manip")


def _target(env_id: str, max_episode_steps: int | None) -> str | gym.envs.registration.EnvSpec:
    """What ``gym.make`` makes for ``env_id``: the id itself, or a spec for ``module:EnvClass``."""
    if ":" not in env_id:
        return env_id
    module, _, name = env_id.partition(":")
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise UnknownEnvError(f"cannot import {module!r} for env {env_id!r}: {exc} "
                              f"(is it installed, or on PYTHONPATH?)") from None
    cls = getattr(loaded, name, None)
    if cls is None:  # gymnasium's own "module:EnvId": importing the module registered EnvId
        return env_id
    if not (isinstance(cls, type) and issubclass(cls, gym.Env)):
        raise UnknownEnvError(f"env {env_id!r}: {name} is not a gymnasium.Env subclass")
    steps = max_episode_steps or getattr(cls, "max_episode_steps", None)
    return gym.envs.registration.EnvSpec(id=env_id, entry_point=env_id, max_episode_steps=steps)


def _entry_class(target: str | gym.envs.registration.EnvSpec) -> type | None:
    """The env class ``gym.make`` constructs for ``target``, where its spec names one."""
    try:
        spec = target if isinstance(target, gym.envs.registration.EnvSpec) else gym.spec(target)
    except (gym.error.Error, ValueError, ImportError):
        return None
    entry = spec.entry_point
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        try:
            entry = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return None
    return entry if isinstance(entry, type) else None


def _make(target: Any, max_episode_steps: int | None, render: bool, size: int) -> gym.Env:
    cls = _entry_class(target)
    kwargs = dict(class_adapter(cls).env_kwargs) if cls is not None else {}
    if not render:
        return gym.make(target, max_episode_steps=max_episode_steps, **kwargs)
    try:
        return gym.make(target, max_episode_steps=max_episode_steps, render_mode="rgb_array", width=size, height=size,
                        **kwargs)
    except TypeError as exc:  # an env that renders at its own size
        if "width" not in str(exc):
            raise
        return gym.make(target, max_episode_steps=max_episode_steps, render_mode="rgb_array", **kwargs)


def make_env(env_id: str, *, render: bool = False, size: int = 480, max_episode_steps: int | None = None) -> gym.Env:
    """The goal env ``env_id`` (see the module docstring), checked, with its own time limit or
    ``max_episode_steps`` (the maze protocol trains on episodes shorter than the env's limit).
    ``render``: frames of ``size`` x ``size`` pixels from ``env.render()`` (offscreen GL)."""
    _register_known_envs()
    if render:
        ensure_offscreen_gl()
    target = _target(env_id, max_episode_steps)
    try:
        env = _make(target, max_episode_steps, render, size)
    except gym.error.Error as exc:  # NameNotFound, VersionNotFound, DeprecatedEnv, ...
        raise UnknownEnvError(f"unknown env id {env_id!r}: {exc}") from None
    except Exception as exc:  # the env's constructor, or gymnasium's env checker refusing it
        raise UnknownEnvError(f"cannot make env {env_id!r}: {type(exc).__name__}: {exc}") from exc
    _remove_maze_xml(env)
    try:
        _check_goal_env(env, env_id)
    except BaseException:
        close_env(env)
        raise
    adapter = goal_adapter(env)
    if adapter.actuator_gear is not None:
        inner_sim(env).model.actuator_gear[:, 0] = adapter.actuator_gear
    if adapter.prepend_achieved_goal:
        env = AchievedGoalFirst(env)
    if render and hasattr(env.unwrapped, "maze"):
        frame_whole_maze(env)
    return env


def _remove_maze_xml(env: gym.Env) -> None:
    """gymnasium-robotics' mazes write their MJCF to a file in the temp dir and never delete it
    (one per env made: thousands over a training run or a test suite); the model is compiled
    by now, so the file is not needed."""
    path = getattr(env.unwrapped, "tmp_xml_file_path", None)
    if path is not None:
        with contextlib.suppress(OSError):
            os.remove(path)


class AchievedGoalFirst(gym.ObservationWrapper):
    """``observation`` with ``achieved_goal`` in front, for envs that leave the robot's position out."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        obs, goal = env.observation_space["observation"], env.observation_space["achieved_goal"]
        self._dtype = np.result_type(goal.dtype, obs.dtype)
        low, high = (np.concatenate([g, o]).astype(self._dtype) for g, o in ((goal.low, obs.low), (goal.high, obs.high)))
        self.observation_space = spaces.Dict({**env.observation_space.spaces,
                                              "observation": spaces.Box(low, high, dtype=self._dtype)})

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        first = np.concatenate([observation["achieved_goal"], observation["observation"]]).astype(self._dtype, copy=False)
        return {**observation, "observation": first}


def _check_goal_env(env: gym.Env, env_id: str) -> None:
    problems = []
    space = env.observation_space
    if not isinstance(space, spaces.Dict):
        problems.append(f"observations are a {type(space).__name__}, not a Dict of {', '.join(GOAL_KEYS)}")
    else:
        missing = [k for k in GOAL_KEYS if k not in space.spaces]
        if missing:
            problems.append(f"the observation Dict has no {', '.join(missing)}")
        not_vectors = [k for k in GOAL_KEYS if k in space.spaces
                       and not (isinstance(space[k], spaces.Box) and len(space[k].shape) == 1)]
        if not_vectors:
            problems.append(f"{', '.join(not_vectors)} must be 1-d Box spaces")
        elif not missing and space["achieved_goal"].shape != space["desired_goal"].shape:
            problems.append("achieved_goal and desired_goal differ in shape")
    act = env.action_space
    if not (isinstance(act, spaces.Box) and len(act.shape) == 1):
        problems.append(f"actions are a {type(act).__name__}, not a 1-d Box")
    elif not (np.all(np.isfinite(act.low)) and np.all(np.isfinite(act.high))):
        problems.append("the action Box needs finite bounds")
    if not callable(getattr(env.unwrapped, "compute_reward", None)):
        problems.append("it has no compute_reward(achieved_goal, desired_goal, info)")
    if env.spec is None or env.spec.max_episode_steps is None:
        problems.append("it has no time limit (register it with max_episode_steps, set the class attribute "
                        "max_episode_steps, or pass max_episode_steps)")
    if problems:
        raise UnknownEnvError(f"{env_id!r} is not a goal env L3P can use: {'; '.join(problems)}")
    _check_reward(env, env_id)


def _check_reward(env: gym.Env, env_id: str) -> None:
    """The offset reward is 0 at the goal and -1 far from it, as the distance critic needs."""
    adapter = goal_adapter(env)
    goal = np.zeros((2, env.observation_space["desired_goal"].shape[0]), np.float32)
    achieved = goal.copy()
    achieved[1] += 1e3
    try:
        reward = np.asarray(env.unwrapped.compute_reward(achieved, goal, None), np.float64).reshape(-1)
    except Exception as exc:
        raise UnknownEnvError(f"{env_id!r}: compute_reward(achieved [2, goal_dim], desired [2, goal_dim], None) "
                              f"failed: {type(exc).__name__}: {exc}") from None
    reward = reward + adapter.reward_offset
    if reward.tolist() != [0.0, -1.0]:
        raise UnknownEnvError(f"{env_id!r}: compute_reward + offset {adapter.reward_offset:g} is {reward.tolist()} "
                              f"at the goal and far from it; L3P needs [0.0, -1.0] (sparse reward; for a 1/0 "
                              f"reward declare the class attribute l3p_reward_offset = -1.0)")


def evaluation_env_id(env_id: str) -> str:
    """The env id that evaluates a model trained on ``env_id``: its declared ``eval_env_id``, else itself."""
    env = make_env(env_id)
    try:
        return goal_adapter(env).eval_env_id or env_id
    finally:
        close_env(env)


def evaluation_tasks(env: gym.Env) -> int:
    """How many fixed evaluation tasks the env declares (``num_tasks``; reset with
    ``options={"task_id": k}``, k = 1..num_tasks, as OGBench's envs)."""
    n = getattr(env.unwrapped, "num_tasks", None)
    if not n:
        raise UnknownEnvError(f"{env.spec.id if env.spec else type(env.unwrapped).__name__} has no evaluation tasks "
                              f"(num_tasks); use random or far start/goal pairs")
    return int(n)


def task_options(env: gym.Env, episode: int) -> dict[str, int]:
    """Reset options for episode ``episode`` of an env with fixed evaluation tasks: task
    ``episode mod num_tasks + 1``."""
    return {"task_id": episode % evaluation_tasks(env) + 1}


def env_spec(env: gym.Env) -> EnvSpec:
    space = env.observation_space
    act = env.action_space
    return EnvSpec(
        env_id=env.spec.id,
        obs_dim=int(space["observation"].shape[0]),
        goal_dim=int(space["desired_goal"].shape[0]),
        action_dim=int(act.shape[0]),
        action_low=tuple(float(x) for x in act.low),
        action_high=tuple(float(x) for x in act.high),
        max_steps=int(env.spec.max_episode_steps),
        adapter=goal_adapter(env),
    )


def rendering_unavailable(env_id: str = "FetchPush-v4", size: int = 64) -> str | None:
    """``None`` if an offscreen frame of ``env_id`` can be rendered here, else why not (for skips)."""
    try:
        env = make_env(env_id, render=True, size=size)
        try:
            env.reset(seed=0)
            frame = env.render()
        finally:
            close_env(env)
        if frame is None or frame.shape != (size, size, 3):
            return f"render returned {None if frame is None else frame.shape}"
        return None
    except Exception as err:  # any GL/driver failure means "cannot render here"
        return f"{type(err).__name__}: {err} (MUJOCO_GL={os.environ.get('MUJOCO_GL')})"


class VecGoalEnv:
    """n copies of one goal env stepped in lockstep, reset with explicit per-env seeds."""

    def __init__(self, env_id: str, n: int, max_episode_steps: int | None = None):
        self.envs = [make_env(env_id, max_episode_steps=max_episode_steps) for _ in range(n)]
        self.spec = env_spec(self.envs[0])
        self._unwrapped = self.envs[0].unwrapped

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, seeds: list[int], options: list[dict | None] | None = None) -> dict[str, np.ndarray]:
        """Reset env i with ``seeds[i]`` (and ``options[i]``, e.g. a maze's pinned start/goal cells)."""
        options = options or [None] * len(self.envs)
        return _stack([env.reset(seed=int(s), options=o)[0] for env, s, o in zip(self.envs, seeds, options)])

    def step(self, actions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Observations and the envs' own success flags (read through the declared adapter)."""
        obs, success = [], []
        for env, a in zip(self.envs, actions):
            o, _, _, _, info = env.step(a)
            obs.append(o)
            success.append(float(self.spec.adapter.success(info)))
        return _stack(obs), np.asarray(success, dtype=np.float32)

    def compute_reward(self, achieved: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The env's own reward plus its declared offset (vectorized): -1 until within threshold, 0 after."""
        reward = self._unwrapped.compute_reward(achieved, goal, None)
        return np.asarray(reward, dtype=np.float32) + self.spec.adapter.reward_offset

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _stack(obs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([o[k] for o in obs]).astype(np.float32) for k in GOAL_KEYS}
