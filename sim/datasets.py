"""``l3p dataset NAME``: regenerate an OGBench dataset under OGBench's protocol (not its files): the
point- and ant-maze ones here, the manipulation "play" ones in l3p.sim.play_datasets (`run_dataset`).

In a maze, each step the robot is steered toward the oracle's subgoal (the next cell on a BFS
shortest path to the goal's cell, `OGBenchMaze.oracle_subgoal`), plus Gaussian noise, clipped to
[-1, 1]:

- point (no learned expert): the action is the unit direction to the subgoal; noise 0.5.
- ant: the action is a direction-following expert's deterministic action on (the ant's 29-d
  observation less its x-y, the unit direction to the subgoal), as ``generate_locomaze.py``; noise
  0.2. The expert is an ``l3p expert`` run's ``policy.npz`` (numpy, l3p.core.mlp_policy), or any
  callable in tests; its sha256 goes into the dataset's metadata.

Two kinds:

- ``navigate``: start in any free cell, goal in a random "vertex" cell (any free cell but the
  straight corridor cells); on reaching it a new vertex-cell goal is drawn, all episode long.
  1,000 episodes of 1,001 steps (giant: 500 of 2,001).
- ``stitch``: start in any free cell, goal a cell exactly 4 cells away by BFS (the start cell when
  none is), then stay. 5,000 episodes of 201 steps: short pieces that must be joined to reach far goals.

Written here from that description; a dataset is a pure function of its name, seed, sizes (and
expert), and its metadata records them with the protocol (core/dataset.py). The observation is
OGBench's (the point's x-y; the ant's 29-d state), the achieved goal the robot's x-y.

``l3p dataset pointmaze-large-stitch-v0 --out data/pointmaze-large-stitch-v0.npz``
``l3p dataset antmaze-large-navigate-v0 --expert experts/ant-s0/policy.npz``
``l3p dataset cube-double-play-v0 --workers 2`` (also writes data/cube-double-play-v0-val.npz)
"""
from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from typing import Any
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from l3p.core.dataset import save_dataset
from l3p.core.errors import L3PError
from l3p.core.mlp_policy import load_mlp_policy
from l3p.sim import mazes, play_datasets
from l3p.sim.ogbench_mazes import MAZES, ROBOTS, env_id

KINDS = ("navigate", "stitch")
STITCH_CELLS = 4
NOISE = {"point": 0.5, "ant": 0.2}  # OGBench's action noise per robot
NAME = re.compile(rf"^({'|'.join(ROBOTS)})maze-({'|'.join(MAZES)})-({'|'.join(KINDS)})-v0$")
NAMES = f"{{{','.join(ROBOTS)}}}maze-{{{','.join(MAZES)}}}-{{{','.join(KINDS)}}}-v0"
Expert = Callable[[np.ndarray], np.ndarray]
"""A direction-following policy: (observation less x-y, unit direction) -> action in [-1, 1]."""


@dataclass(frozen=True)
class DatasetSpec:
    """One OGBench maze dataset: which robot, maze and kind, and OGBench's sizes and noise for it."""

    name: str
    maze: str
    kind: str
    episodes: int
    steps: int  # per episode (observations = actions = steps; steps - 1 transitions)
    noise: float = 0.5
    robot: str = "point"

    @property
    def env_id(self) -> str:
        return env_id(self.maze, self.robot)


def dataset_spec(name: str, episodes: int | None = None, steps: int | None = None) -> DatasetSpec:
    """OGBench's sizes for ``name`` (e.g. ``pointmaze-giant-stitch-v0``), optionally made smaller."""
    match = NAME.match(name)
    if match is None:
        raise L3PError(f"unknown dataset {name!r}: {NAMES} or {play_datasets.NAMES}")
    robot, maze, kind = match.groups()
    if kind == "stitch":
        size = (5000, 201)
    else:
        size = (500, 2001) if maze == "giant" else (1000, 1001)
    spec = DatasetSpec(name, maze, kind, episodes or size[0], steps or size[1], NOISE[robot], robot)
    if spec.episodes < 1 or spec.steps < 2:
        raise L3PError(f"a dataset needs >= 1 episode of >= 2 steps, got {spec.episodes} x {spec.steps}")
    return spec


def vertex_cells(layout: np.ndarray) -> list[tuple[int, int]]:
    """Free cells that are not straight corridor cells (walls on both sides, open both ways)."""
    out = []
    for i, j in mazes.free_cells(layout):
        vertical = layout[i - 1, j] == 0 and layout[i + 1, j] == 0 and layout[i, j - 1] == 1 and layout[i, j + 1] == 1
        horizontal = layout[i, j - 1] == 0 and layout[i, j + 1] == 0 and layout[i - 1, j] == 1 and layout[i + 1, j] == 1
        if not (vertical or horizontal):
            out.append((i, j))
    return out


def generate(spec: DatasetSpec, seed: int, progress: bool = False,
             expert: Expert | None = None) -> dict[str, np.ndarray]:
    """The dataset's arrays, episode after episode (see the module docstring); the ant needs ``expert``."""
    from l3p.sim.envs import make_env  # gymnasium and ogbench: only when generating

    if (spec.robot == "ant") != (expert is not None):
        raise L3PError(f"{spec.name}: " + ("the ant needs an expert (--expert POLICY.npz, from l3p expert)"
                                           if expert is None else "the point is steered by the oracle, no expert"))
    rng = np.random.default_rng(seed)
    env = make_env(spec.env_id, max_episode_steps=spec.steps)
    maze = env.unwrapped
    layout = np.asarray(maze.inner.maze_map)  # OGBench's own (i, j) cells
    cells, vertices = mazes.free_cells(layout), vertex_cells(layout)
    n = spec.episodes * spec.steps
    obs = np.zeros((n, *env.observation_space["observation"].shape), np.float32)
    goals = np.zeros((n, 2), np.float32)
    actions = np.zeros((n, *env.action_space.shape), np.float32)
    terminals = np.zeros(n, np.float32)
    k = 0
    t0 = time.time()
    for episode in range(spec.episodes):
        start = cells[rng.integers(len(cells))]
        if spec.kind == "stitch":
            dist = mazes.bfs_cells(layout, start)
            near = [c for c in cells if dist[c] == STITCH_CELLS]
            goal = near[rng.integers(len(near))] if near else start
        else:
            goal = vertices[rng.integers(len(vertices))]
        o, _ = env.reset(seed=int(rng.integers(2**31)), options={"task_info": (start, goal)})
        for _ in range(spec.steps):
            action = np.clip(steer(maze, o["observation"], expert) + rng.normal(0.0, spec.noise, actions.shape[1]),
                             -1.0, 1.0)
            obs[k], goals[k], actions[k] = o["observation"], o["desired_goal"], action
            o, _, _, _, info = env.step(action)
            if spec.kind == "navigate" and info["success_now"]:
                maze.set_goal_cell(vertices[rng.integers(len(vertices))])
            k += 1
        terminals[k - 1] = 1.0
        if progress and (episode + 1) % max(1, spec.episodes // 20) == 0:
            print(f"{spec.name}: {episode + 1}/{spec.episodes} episodes, {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    env.close()
    return {"observations": obs, "actions": actions, "terminals": terminals, "achieved_goals": obs[:, :2].copy(),
            "desired_goals": goals}


def steer(maze, observation: np.ndarray, expert: Expert | None) -> np.ndarray:
    """The noiseless action toward the oracle's subgoal: its direction (point), or the expert's
    action on the observation less x-y and that direction (ant)."""
    direction = maze.oracle_direction()
    if expert is None:
        return direction
    return follow(expert, observation, direction)


def follow(expert: Expert, observation: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The ant expert's action toward a unit ``direction``: its input is the observation less x-y,
    then the direction (OGBench's GymXYWrapper)."""
    return np.asarray(expert(np.concatenate([observation[2:], direction])), np.float64)


def write(spec: DatasetSpec, seed: int, out: Path, progress: bool = False, expert: Expert | None = None,
          expert_path: Path | None = None) -> str:
    """Generate and save; returns the digest."""
    arrays = generate(spec, seed, progress, expert)
    made_by = {"generator": "l3p.sim.datasets", "protocol": f"OGBench {spec.robot}maze "
               f"{'oracle' if expert is None else 'oracle-directed expert'} (regenerated, not the official files)",
               "dataset": spec.name, "seed": seed, **asdict(spec),
               "command": f"l3p dataset {spec.name} --seed {seed} --episodes {spec.episodes} --steps {spec.steps}"}
    if expert is not None:
        made_by["expert"] = {"sha256": getattr(expert, "digest", None), "path": expert_path and str(expert_path),
                             **{k: v for k, v in getattr(expert, "metadata", {}).items() if k != "sha256"}}
        made_by["command"] += f" --expert {expert_path}"
    return save_dataset(out, env_id=spec.env_id, made_by=made_by, **arrays)


def run_dataset(options: Any) -> int:
    """``l3p dataset NAME``, with the options `l3p.dataset_command.GeneratorOptions` declares."""
    if play_datasets.NAME.match(options.name):
        return _run_play(options)
    if options.workers is not None or options.val_episodes is not None:
        raise L3PError(f"{options.name}: --workers and --val-episodes are for the play datasets "
                       f"({play_datasets.NAMES}); a maze dataset is one generator's stream")
    spec = dataset_spec(options.name, options.episodes, options.steps)
    out = options.out or Path("data") / f"{spec.name}.npz"
    t0 = time.time()
    expert = load_mlp_policy(options.expert) if options.expert is not None else None
    digest = write(spec, options.seed, out, progress=options.progress, expert=expert, expert_path=options.expert)
    print(f"wrote {out}: {spec.episodes} episodes x {spec.steps} steps of {spec.env_id}, seed {options.seed}, "
          f"sha256 {digest} ({time.time() - t0:.0f} s)")
    return 0


def _run_play(options: Any) -> int:
    if options.expert is not None:
        raise L3PError(f"{options.name}: the play datasets are made by OGBench's scripted oracles, no --expert")
    spec = play_datasets.play_spec(options.name, options.episodes, options.steps, options.val_episodes)
    out = options.out or Path("data") / f"{spec.name}.npz"
    t0 = time.time()
    train, val = play_datasets.write(spec, options.seed, out, options.workers, options.progress)
    print(f"wrote {out} and {play_datasets.val_path(out)}: {spec.episodes} + {spec.val_episodes} episodes x "
          f"{spec.steps} steps of {spec.env_id}, seed {options.seed}, sha256 {train} / {val} "
          f"({time.time() - t0:.0f} s)")
    return 0
