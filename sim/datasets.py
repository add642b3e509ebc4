"""Regenerate OGBench's point-maze datasets under OGBench's documented protocol (not its files).

OGBench's pointmaze datasets come from an oracle, no learned expert: each step the action is the
unit vector toward the oracle's subgoal (the next cell on a BFS shortest path to the goal's cell,
`OGBenchPointMaze.oracle_subgoal`) plus Gaussian noise, clipped to [-1, 1]. Two kinds:

- ``navigate``: start in any free cell, goal in a random "vertex" cell (any free cell but the
  straight corridor cells); on reaching it a new vertex-cell goal is drawn, all episode long.
  1,000 episodes of 1,001 steps (giant: 500 of 2,001).
- ``stitch``: start in any free cell, goal a cell exactly 4 cells away by BFS (the start cell when
  none is), then stay. 5,000 episodes of 201 steps: short pieces that must be joined to reach far goals.

Noise 0.5 for both. Written here from that description; a dataset is a pure function of its name,
seed and sizes, and its metadata records them with the protocol (core/dataset.py).

``l3p dataset pointmaze-large-stitch-v0 --out data/pointmaze-large-stitch-v0.npz``
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from l3p.core.dataset import save_dataset
from l3p.core.errors import L3PError
from l3p.sim import mazes
from l3p.sim.ogbench_mazes import MAZES, env_id

KINDS = ("navigate", "stitch")
STITCH_CELLS = 4
NAME = re.compile(rf"^pointmaze-({'|'.join(MAZES)})-({'|'.join(KINDS)})-v0$")


@dataclass(frozen=True)
class DatasetSpec:
    """One OGBench point-maze dataset: which maze and kind, and OGBench's sizes for it."""

    name: str
    maze: str
    kind: str
    episodes: int
    steps: int  # per episode (observations = actions = steps; steps - 1 transitions)
    noise: float = 0.5

    @property
    def env_id(self) -> str:
        return env_id(self.maze)


def dataset_spec(name: str, episodes: int | None = None, steps: int | None = None) -> DatasetSpec:
    """OGBench's sizes for ``name`` (e.g. ``pointmaze-giant-stitch-v0``), optionally made smaller."""
    match = NAME.match(name)
    if match is None:
        raise L3PError(f"unknown dataset {name!r}: pointmaze-{{{','.join(MAZES)}}}-{{{','.join(KINDS)}}}-v0")
    maze, kind = match.groups()
    if kind == "stitch":
        size = (5000, 201)
    else:
        size = (500, 2001) if maze == "giant" else (1000, 1001)
    spec = DatasetSpec(name, maze, kind, episodes or size[0], steps or size[1])
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


def generate(spec: DatasetSpec, seed: int, progress: bool = False) -> dict[str, np.ndarray]:
    """The dataset's arrays, episode after episode (see the module docstring)."""
    from l3p.sim.envs import make_env  # gymnasium and ogbench: only when generating

    rng = np.random.default_rng(seed)
    env = make_env(spec.env_id, max_episode_steps=spec.steps)
    maze = env.unwrapped
    layout = np.asarray(maze.inner.maze_map)  # OGBench's own (i, j) cells
    cells, vertices = mazes.free_cells(layout), vertex_cells(layout)
    n = spec.episodes * spec.steps
    obs = np.zeros((n, 2), np.float32)
    goals = np.zeros((n, 2), np.float32)
    actions = np.zeros((n, 2), np.float32)
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
            action = np.clip(maze.oracle_direction() + rng.normal(0.0, spec.noise, 2), -1.0, 1.0)
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
    return {"observations": obs, "actions": actions, "terminals": terminals, "achieved_goals": obs.copy(),
            "desired_goals": goals}


def write(spec: DatasetSpec, seed: int, out: Path, progress: bool = False) -> str:
    """Generate and save; returns the digest."""
    arrays = generate(spec, seed, progress)
    made_by = {"generator": "l3p.sim.datasets", "protocol": "OGBench pointmaze oracle (regenerated, not the "
               "official files)", "dataset": spec.name, "seed": seed, **asdict(spec),
               "command": f"l3p dataset {spec.name} --seed {seed} --episodes {spec.episodes} --steps {spec.steps}"}
    return save_dataset(out, env_id=spec.env_id, made_by=made_by, **arrays)


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="pointmaze-{medium,large,giant}-{navigate,stitch}-v0")
    parser.add_argument("--out", type=Path, default=None, help="the .npz to write (default data/NAME.npz)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    parser.add_argument("--episodes", type=int, default=None, help="fewer episodes than OGBench's (tests, trials)")
    parser.add_argument("--steps", type=int, default=None, help="steps per episode (default OGBench's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")


def run_dataset(args: argparse.Namespace) -> int:
    spec = dataset_spec(args.name, args.episodes, args.steps)
    out = args.out or Path("data") / f"{spec.name}.npz"
    t0 = time.time()
    digest = write(spec, args.seed, out, progress=not args.no_progress)
    print(f"wrote {out}: {spec.episodes} episodes x {spec.steps} steps of {spec.env_id}, seed {args.seed}, "
          f"sha256 {digest} ({time.time() - t0:.0f} s)")
    return 0
