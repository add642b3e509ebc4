"""In-process episodes for the experiments beside this file: a bundle loaded as the server loads it (its
ONNX networks, its landmark graph built once), the planner of `l3p.core` stepped in the bundle's env, and
a trace of every step for the scripts to measure from. Public API only: a rule the planner has no option
for is not an experiment here.

    model = load("models/antmaze-large-navigate")
    env = model.env()
    for seed, start in model.episodes(env, 10):
        episode = planner_episode(model, env, seed, start, model.config(action_scale=0.8))
        episode.success, len(episode.steps), [step.plan.counter for step in episode.replans]

`actor_episode` drives the actor alone toward goals the script picks (no planner), from wherever the
script put the env.
"""
from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from l3p.clients.protocol import episode_plan, open_env, reset_options
from l3p.core import EpisodePlanner, LandmarkGraph, PlannerConfig, StepResult
from l3p.core.seeds import VALIDATION
from l3p.serving.bundle import Bundle, load_bundle
from l3p.serving.engine import solved_graph
from l3p.sim.envs import goal_adapter
from l3p.sim.mazes import MIN_FAR_CELLS

MAX_STEPS = 1000  # OGBench's evaluation length, and the far pairs'


@dataclass
class Model:
    """A bundle in-process: its networks and (on first use) its landmark graph."""

    bundle: Bundle
    edges: np.ndarray | None = None  # the graph's edges in place of the bundle's (None: the bundle's)

    @functools.cached_property
    def graph(self) -> LandmarkGraph:
        if self.edges is None:
            return solved_graph(self.bundle)  # as the server builds it
        return LandmarkGraph(self.bundle.landmarks, self.bundle.value_fn, edges=self.edges)

    def config(self, **overrides: Any) -> PlannerConfig:
        """The bundle's planner defaults with ``overrides``; a None value keeps the default."""
        return self.bundle.planner_defaults.replace(**{k: v for k, v in overrides.items() if v is not None})

    def env(self, max_steps: int = MAX_STEPS) -> Any:
        return open_env(self.bundle.env_id, max_steps=max_steps)

    def episodes(self, env: Any, n: int, seed: int = VALIDATION, pairs: str = "tasks",
                 min_cells: int = MIN_FAR_CELLS) -> list[tuple[int, Any]]:
        """(env seed, start) of episodes ``seed + i``: OGBench's tasks in turn, or far pairs, as ``l3p eval``."""
        return episode_plan(env, self.bundle.env_id, n, seed, pairs, min_cells)

    def distance(self, obs: np.ndarray, goal: np.ndarray) -> float:
        """D(obs, goal) in steps, one pair."""
        return float(np.asarray(self.bundle.distance_fn(obs[None], goal[None])[0]).reshape(-1)[0])

    def act(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The actor's action toward ``goal``, one observation."""
        return self.bundle.policy_fn(obs[None], goal[None])[0]


def load(path: str | Path, edges: np.ndarray | None = None) -> Model:
    return Model(load_bundle(path), edges)


def episode_parser(episodes: bool = True, overrides: bool = False) -> argparse.ArgumentParser:
    """The arguments of a script that runs episodes: BUNDLE [EPISODES] [KEY=VALUE ...] and --max-steps (a
    tiny run's length)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle")
    if episodes:
        parser.add_argument("episodes", type=int)
    if overrides:
        parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="planner options, e.g. local_cut=1.0")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help=f"steps per episode (default {MAX_STEPS})")
    return parser


@dataclass
class Step:
    obs: np.ndarray  # the observation acted on
    achieved: np.ndarray  # the achieved goal then
    goal: np.ndarray  # what the actor pursued: the planner's subgoal, or the script's goal
    action: np.ndarray  # what the env was sent
    plan: StepResult | None  # the planner's answer (None: the actor alone)
    pruned: int  # landmarks pruned from the episode's graph after the step
    next_obs: np.ndarray
    next_achieved: np.ndarray
    success: bool  # the env's success flag after the step


@dataclass
class Episode:
    goal: np.ndarray  # the episode's goal
    steps: list[Step]
    success: bool  # the env's flag at the last step
    fallen: bool  # the robot ended on its back (never, for one that declares no torso)

    @property
    def replans(self) -> list[Step]:
        return [step for step in self.steps if step.plan is not None and step.plan.replanned]

    @property
    def final_distance(self) -> float:
        return float(np.linalg.norm(self.steps[-1].next_achieved - self.goal)) if self.steps else np.nan


# act(obs, plan) -> the action to send in place of the planner's (an expert, a reflex)
Act = Callable[[np.ndarray, StepResult], np.ndarray]


def planner_episode(model: Model, env: Any, seed: int, start: Any = None, config: PlannerConfig | None = None, *,
                    act: Act | None = None, max_steps: int = MAX_STEPS, stop_on_success: bool = True,
                    stop_on_fall: bool = False) -> Episode:
    """One episode of the planner (``config``, default the bundle's) from ``env.reset(seed, start)``, as a
    served episode runs (the planner seeded with the env seed); it ends at the env's time limit or after
    ``max_steps``, at success, or (``stop_on_fall``) once the robot is on its back."""
    obs, _ = env.reset(seed=seed, options=reset_options(start))
    bundle = model.bundle
    planner = EpisodePlanner(model.graph, obs["desired_goal"], bundle.value_fn, config or model.config(), seed=seed)

    def choose(obs: dict):
        plan = planner.step(obs["observation"], bundle.distance_fn, bundle.policy_fn)
        action = plan.action if act is None else act(obs["observation"], plan)
        return plan.subgoal, action, plan, planner.pruned

    return _drive(env, obs, choose, max_steps, stop_on_success, stop_on_fall)


def actor_episode(model: Model, env: Any, obs: dict, goal_of: Callable[[dict], np.ndarray], *,
                  max_steps: int = MAX_STEPS, stop_on_success: bool = True, stop_on_fall: bool = False,
                  until: Callable[[Step], bool] | None = None) -> Episode:
    """The actor alone from the env as the script left it (``obs``: its observation), each step toward
    ``goal_of(obs)``; it ends as `planner_episode` does, or once ``until(step)`` holds."""

    def choose(obs: dict):
        goal = np.asarray(goal_of(obs))
        return goal, model.act(obs["observation"], goal), None, 0

    return _drive(env, obs, choose, max_steps, stop_on_success, stop_on_fall, until)


def _drive(env, obs, choose, max_steps, stop_on_success, stop_on_fall, until=None) -> Episode:
    adapter = goal_adapter(env)
    steps, success = [], False
    for _ in range(max_steps):
        goal, action, plan, pruned = choose(obs)
        after, _, _, truncated, info = env.step(action)
        success = adapter.success(info)
        step = Step(np.array(obs["observation"]), np.array(obs["achieved_goal"]), np.array(goal), np.array(action),
                    plan, pruned, np.array(after["observation"]), np.array(after["achieved_goal"]), success)
        steps.append(step)
        obs = after
        if (truncated or (stop_on_success and success) or (stop_on_fall and adapter.fallen(obs["observation"]))
                or (until is not None and until(step))):
            break
    return Episode(np.array(obs["desired_goal"]), steps, success, bool(adapter.fallen(obs["observation"])))
