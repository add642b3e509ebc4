"""Regenerate OGBench's manipulation "play" datasets under OGBench's protocol (not its files).

``{cube-double,scene,puzzle-3x3,puzzle-4x4}-play-v0``: 1,000 training and 100 validation episodes
of 1,001 steps, made as OGBench's ``data_gen_scripts/generate_manipspace.py`` makes them (read
for this; the script is not in the ``ogbench`` wheel, its oracles are):

- The env is OGBench's ``{env}-v0`` for data collection (``mode="data_collection"``, no
  termination): each reset scatters the objects and sets one sub-task (a cube's target, a button,
  the drawer or the window), the ``privileged/target_task`` of its info.
- The oracle is that sub-task's PlanOracle (``ogbench.manipspace.oracles.plan``): keyframes with
  random heights and timing, interpolated, plus Gaussian noise [0.05, 0.05, 0.05, 0.3, 1] x 0.1
  smoothed over time (``gaussian_filter1d``, sigma 0.5); the action is the normalised step toward
  the plan, clipped to [-1, 1]. The puzzle's ButtonPlanOracle keeps the gripper closed.
- When the oracle's plan is done, ``set_new_target(p_stack)`` sets the next sub-task (p_stack,
  the chance a cube's target is on another cube, is drawn per episode: U(0, 0.25) for two cubes;
  OGBench's 0.5 elsewhere, which only cubes read).
- Each step keeps the observation before the action, the action, and the simulator's ``qpos`` /
  ``qvel`` (and ``button_states``) at that observation. A scene episode whose cube leaves the
  table's visible part (y >= 0.29, or y <= -0.3 outside the drawer) is run again from where the
  generators are.

Determinism and splitting: episode i is a pure function of the seed and i (numpy's global
generator, which OGBench's oracles draw from, and the env's are seeded from ``SeedSequence([seed,
i])``), so any number of worker processes makes the same file. Episodes are made in chunks of
`CHUNK` saved in the output's work folder (``NAME.work/`` beside it); the same command run again
continues from the chunks there, and the folder is removed once both files are written.

Files: ``NAME.npz`` (training) and ``NAME-val.npz`` (validation), each in OGBench's layout
(``observations``, ``actions``, ``terminals``, ``qpos``, ``qvel``, ``button_states``) and the
project's dataset format (core/dataset.py: ``achieved_goals``, the goal space the env declares,
and the metadata with the provenance and the command), so that both
``ogbench.make_env_and_datasets(name, dataset_path=...)`` and ``l3p train --dataset`` read them.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from l3p.core.dataset import save_dataset
from l3p.core.errors import L3PError
from l3p.sim.envs import class_adapter
from l3p.sim.ogbench_manip import BY_NAME

CHUNK = 10  # episodes per saved chunk: about a minute's work, the most a crash loses
NOISE, NOISE_SMOOTHING = 0.1, 0.5  # OGBench's PlanOracle noise and its smoothing (play datasets)
P_STACK = 0.5  # OGBench's stacking chance where no per-episode range is drawn (read by cubes only)
P_STACK_RANGE = {"cube-double": (0.0, 0.25)}  # drawn per episode, as OGBench's script
CUBE_QPOS = slice(14, 17)  # the scene's cube x, y, z in qpos (after the arm's 6 and the gripper's 8 joints)
NAME = re.compile(rf"^({'|'.join(BY_NAME)})-play-v0$")
NAMES = f"{{{','.join(BY_NAME)}}}-play-v0"
ROWS = ("observations", "actions", "qpos", "qvel", "button_states")


@dataclass(frozen=True)
class PlaySpec:
    """One OGBench play dataset: its env and OGBench's sizes (or smaller ones, for tests and trials)."""

    name: str
    manipulation: str  # the env's name in l3p.sim.ogbench_manip (``cube-double``)
    episodes: int
    steps: int
    val_episodes: int

    @property
    def env_id(self) -> str:
        return BY_NAME[self.manipulation].manipulation.env_id

    @property
    def total(self) -> int:
        return self.episodes + self.val_episodes

    @property
    def chunks(self) -> int:
        return -(-self.total // CHUNK)


def play_spec(name: str, episodes: int | None = None, steps: int | None = None,
              val_episodes: int | None = None) -> PlaySpec:
    """OGBench's sizes for ``name`` (1,000 + 100 episodes of 1,001 steps), optionally smaller; the
    validation episodes default to a tenth of the training ones (at least one), as OGBench's."""
    match = NAME.match(name)
    if match is None:
        raise L3PError(f"unknown dataset {name!r}: {NAMES}")
    episodes = episodes or 1000
    spec = PlaySpec(name, match.group(1), episodes, steps or 1001,
                    max(1, episodes // 10) if val_episodes is None else val_episodes)
    if spec.episodes < 1 or spec.val_episodes < 1 or spec.steps < 2:
        raise L3PError(f"a play dataset needs >= 1 training and >= 1 validation episode of >= 2 steps, got "
                       f"{spec.episodes} + {spec.val_episodes} x {spec.steps}")
    return spec


class Collector:
    """OGBench's data-collection env and its oracles, in one process; `episode` makes episode i."""

    def __init__(self, spec: PlaySpec):
        import gymnasium as gym
        import ogbench.manipspace  # noqa: F401  registers OGBench's envs
        from ogbench.manipspace.oracles.plan.button_plan import ButtonPlanOracle
        from ogbench.manipspace.oracles.plan.cube_plan import CubePlanOracle
        from ogbench.manipspace.oracles.plan.drawer_plan import DrawerPlanOracle
        from ogbench.manipspace.oracles.plan.window_plan import WindowPlanOracle

        self.spec = spec
        self.env = gym.make(BY_NAME[spec.manipulation].manipulation.ogbench_id, terminate_at_goal=False,
                            mode="data_collection", max_episode_steps=spec.steps)
        noise = {"noise": NOISE, "noise_smoothing": NOISE_SMOOTHING}
        family = spec.manipulation.split("-")[0]
        if family == "puzzle":
            self.oracles = {"button": ButtonPlanOracle(env=self.env, gripper_always_closed=True, **noise)}
        else:
            self.oracles = {"cube": CubePlanOracle(env=self.env, **noise)}
        if family == "scene":
            self.oracles.update(button=ButtonPlanOracle(env=self.env, **noise),
                                drawer=DrawerPlanOracle(env=self.env, **noise),
                                window=WindowPlanOracle(env=self.env, **noise))
        self.checks_health = family == "scene"
        self.has_buttons = hasattr(self.env.unwrapped, "_cur_button_states")

    def episode(self, seed: int, index: int) -> tuple[dict[str, np.ndarray], int]:
        """Episode ``index``'s arrays, and how many unhealthy tries were run again before it."""
        env_seed, global_seed = np.random.SeedSequence([seed, index]).generate_state(2)
        np.random.seed(global_seed)  # OGBench's oracles and p_stack draw from numpy's global generator
        retries, reset_seed = 0, int(env_seed)
        while True:
            ob, info = self.env.reset(seed=reset_seed)
            reset_seed = None  # a retry continues the env's generator, as OGBench's script does
            low_high = P_STACK_RANGE.get(self.spec.manipulation)
            p_stack = np.random.uniform(*low_high) if low_high else P_STACK
            agent = self.oracles[info["privileged/target_task"]]
            agent.reset(ob, info)
            rows: dict[str, list[np.ndarray]] = {k: [] for k in ROWS if k != "button_states" or self.has_buttons}
            done = False
            while not done:
                action = np.clip(np.asarray(agent.select_action(ob, info)), -1, 1)
                next_ob, _, terminated, truncated, info = self.env.step(action)
                done = terminated or truncated
                if agent.done:
                    agent_ob, agent_info = self.env.unwrapped.set_new_target(p_stack=p_stack)
                    agent = self.oracles[agent_info["privileged/target_task"]]
                    agent.reset(agent_ob, agent_info)
                rows["observations"].append(ob)
                rows["actions"].append(action)
                rows["qpos"].append(info["prev_qpos"])  # the state at ob, before the action
                rows["qvel"].append(info["prev_qvel"])
                if self.has_buttons:
                    rows["button_states"].append(info["prev_button_states"])
                ob = next_ob
            arrays = {k: np.asarray(v, np.int64 if k == "button_states" else np.float32) for k, v in rows.items()}
            if not self.checks_health or healthy(arrays["qpos"]):
                return arrays, retries
            retries += 1

    def close(self) -> None:
        self.env.close()


def healthy(qpos: np.ndarray) -> bool:
    """OGBench's scene check: the cube stays where a camera sees it, unless it is in the drawer."""
    xyz = qpos[:, CUBE_QPOS]
    return not ((xyz[:, 1] >= 0.29).any() or ((xyz[:, 1] <= -0.3) & ((xyz[:, 2] < 0.06) | (xyz[:, 2] > 0.08))).any())


def make_chunk(spec: PlaySpec, seed: int, chunk: int, collector: Collector) -> dict[str, np.ndarray]:
    """Episodes ``chunk * CHUNK`` on, back to back, and each one's unhealthy retries."""
    episodes = [collector.episode(seed, i) for i in range(chunk * CHUNK, min((chunk + 1) * CHUNK, spec.total))]
    out = {k: np.concatenate([arrays[k] for arrays, _ in episodes]) for k in episodes[0][0]}
    return {**out, "retries": np.asarray([r for _, r in episodes], np.int64)}


# ----- the work folder: chunks, made by worker processes, resumed by the same command -----
_collector: Collector | None = None


def _start_worker(spec: PlaySpec, one_thread: bool = True) -> None:
    global _collector
    if one_thread:  # a worker process: one core each, the envs' linear algebra is tiny
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    _collector = Collector(spec)


def _work(job: tuple[PlaySpec, int, int, Path]) -> int:
    """Make and save one chunk (in a worker, or in this process); its env steps."""
    spec, seed, chunk, folder = job
    _save(folder, chunk, make_chunk(spec, seed, chunk, _collector))
    return min(CHUNK, spec.total - chunk * CHUNK) * spec.steps


def _chunk_path(folder: Path, chunk: int) -> Path:
    return folder / f"chunk-{chunk:05d}.npz"


def _save(folder: Path, chunk: int, arrays: dict[str, np.ndarray]) -> None:
    tmp = folder / f"chunk-{chunk:05d}.tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, _chunk_path(folder, chunk))  # a chunk exists whole or not at all


def work_folder(out: Path) -> Path:
    return out.with_name(out.stem + ".work")


def _open_work(spec: PlaySpec, seed: int, folder: Path) -> list[int]:
    """The chunks still to make; the folder must hold this run's chunks (its job.json) or none."""
    job = {"dataset": spec.name, "seed": seed, "episodes": spec.episodes, "val_episodes": spec.val_episodes,
           "steps": spec.steps, "chunk_episodes": CHUNK, "ogbench": metadata.version("ogbench")}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "job.json"
    if path.exists() and json.loads(path.read_text()) != job:
        raise L3PError(f"{folder} holds chunks of another run ({path.read_text().strip()}); remove it to start "
                       f"afresh, or choose another --out")
    path.write_text(json.dumps(job, sort_keys=True) + "\n")
    return [k for k in range(spec.chunks) if not _chunk_path(folder, k).exists()]


def make_chunks(spec: PlaySpec, seed: int, folder: Path, workers: int, progress: bool = False) -> None:
    """Every chunk not yet in ``folder``, over ``workers`` processes (1: in this one)."""
    todo = _open_work(spec, seed, folder)
    done, n = spec.chunks - len(todo), spec.chunks
    say = (lambda text: print(f"{spec.name}: {text}", file=sys.stderr, flush=True)) if progress else (lambda _: None)
    say(f"{n} chunks of {CHUNK} episodes x {spec.steps} steps in {folder}, {done} done already; "
        f"{min(workers, len(todo))} worker(s)")
    if not todo:
        return
    jobs = [(spec, seed, k, folder) for k in todo]
    pool = None
    if workers == 1:
        _start_worker(spec, one_thread=False)
        results = map(_work, jobs)
    else:
        pool = multiprocessing.get_context("spawn").Pool(min(workers, len(todo)), _start_worker, (spec,))
        results = pool.imap_unordered(_work, jobs)
    t0, steps = time.time(), 0
    try:
        for chunk_steps in results:
            done, steps = done + 1, steps + chunk_steps
            rate = steps / max(time.time() - t0, 1e-9)
            say(f"{done}/{n} chunks, {rate:.0f} env steps/s, {time.time() - t0:.0f} s, "
                f"ETA {(n - done) * CHUNK * spec.steps / rate:.0f} s")
    finally:
        if pool is None:
            _collector.close()
        else:
            pool.terminate()


def read_chunks(spec: PlaySpec, folder: Path) -> dict[str, np.ndarray]:
    """Every chunk's arrays, back to back in episode order."""
    parts = []
    for k in range(spec.chunks):
        with np.load(_chunk_path(folder, k)) as data:
            parts.append({name: data[name] for name in data.files})
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def val_path(out: Path) -> Path:
    """OGBench's name for the validation file beside ``out``."""
    return out.with_name(out.name.replace(".npz", "-val.npz"))


def write(spec: PlaySpec, seed: int, out: Path, workers: int | None = None, progress: bool = False) -> tuple[str, str]:
    """Generate (or continue) and save the training and validation files; their digests."""
    if out.suffix != ".npz":
        raise L3PError(f"--out {out}: a play dataset is a .npz file (its validation file is NAME-val.npz beside it)")
    folder = work_folder(out)
    make_chunks(spec, seed, folder, workers or os.cpu_count() or 1, progress)
    arrays = read_chunks(spec, folder)
    retries = arrays.pop("retries")
    split = spec.episodes * spec.steps
    goal_indices = list(class_adapter(BY_NAME[spec.manipulation]).achieved_goal_indices)  # the env's declaration
    made_by = {"generator": "l3p.sim.play_datasets", "dataset": spec.name, "seed": seed, **asdict(spec),
               "protocol": f"OGBench play: PlanOracle per sub-task, noise {NOISE} smoothed (sigma {NOISE_SMOOTHING}), "
                           "set_new_target on each finished sub-task (regenerated, not the official files)",
               "achieved_goal_indices": goal_indices,
               "command": f"l3p dataset {spec.name} --seed {seed} --episodes {spec.episodes} --steps {spec.steps} "
                          f"--val-episodes {spec.val_episodes}",
               "versions": {k: metadata.version(k) for k in ("ogbench", "mujoco")}}
    digests = []
    for path, split_name, rows, tries in (
            (out, "train", {k: v[:split] for k, v in arrays.items()}, retries[:spec.episodes]),
            (val_path(out), "val", {k: v[split:] for k, v in arrays.items()}, retries[spec.episodes:])):
        terminals = np.zeros(len(rows["observations"]), np.float32)
        terminals[spec.steps - 1::spec.steps] = 1.0  # every episode runs OGBench's whole length
        digests.append(save_dataset(path, env_id=spec.env_id, terminals=terminals,
                                    achieved_goals=rows["observations"][:, goal_indices],
                                    made_by={**made_by, "split": split_name, "unhealthy_retries": int(tries.sum())},
                                    **rows))
    shutil.rmtree(folder)
    return digests[0], digests[1]
