"""Offline L3P: the same learner, fed from a recorded dataset instead of collectors.

The dataset (core/dataset.py) becomes the replay: its episodes, cut into equal windows, are
relabelled with hindsight goals from their own future, the trajectory's end, or (for the critic) an
achieved goal anywhere in the data. Each optimizer step is the online one with two offline losses
(training/losses.py): the distance critic regresses an upper expectile of r + γ·Q(s', a', g) with
a' the recorded next action (it never evaluates an action the data did not take), and the actor
maximizes Q while staying near the recorded action (TD3+BC). V, the reachability autoencoder and
the latent clusters learn exactly as online; clusters start after ``landmarks_after_updates``
steps, once the latent space has taken shape. Evaluation runs episodes in the env (the dataset's
env id) as the online trainer's does, or, for a robot without a simulator, measures a held-out
split of the recording (training/held_out.py: no env is made); checkpoints hold no replay (the dataset is it: resuming
reloads the file and checks its digest). The exported bundle is the online one: the server
cannot tell how a model was trained.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from l3p.core.dataset import Dataset, DatasetError
from l3p.datasets.source import open_dataset
from l3p.sim.envs import VecGoalEnv, evaluation_env_id
from l3p.training.agent import L3PAgent
from l3p.training import held_out
from l3p.training.config import TrainConfig
from l3p.training.feedback import say
from l3p.training.replay import EpisodeReplay
from l3p.training.run_files import CHECKPOINT, CheckpointError, load_checkpoint, run_provenance, snapshot_path
from l3p.training.trainer import ConfigError, Progress, Trainer


def episode_windows(dataset: Dataset, length: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(obs [E, L, o], achieved goals [E, L, g], actions [E, L, a]): every episode cut into windows
    of L steps (the replay stores equal-length episodes). ``length`` None: L is the shortest episode's
    length, windows end to end (a longer episode's remainder past its last whole window is left out);
    otherwise L = ``length``, each window starting at the last one's final step and the last window
    ending at the episode's (overlapping its predecessor where needed), so that every transition of
    an episode of >= L steps is in a window, and a shorter episode is left out (`short_episodes`)."""
    bounds = dataset.episode_bounds()
    if length is None:
        length = int(min(last - first + 1 for first, last in bounds))
        starts = [first + k * length for first, last in bounds for k in range((last - first + 1) // length)]
    else:
        starts = []
        for first, last in bounds:
            if last - first + 1 < length:
                continue
            here = list(range(first, last - length + 2, length - 1))
            starts += here if here[-1] + length - 1 == last else [*here, last - length + 1]
    index = np.asarray(starts)[:, None] + np.arange(length)[None, :]
    return dataset.observations[index], dataset.achieved_goals[index], dataset.actions[index]


def short_episodes(dataset: Dataset, length: int | None) -> dict[str, int]:
    """The episodes (and their steps) shorter than ``length``, which `episode_windows` leaves out."""
    lengths = dataset.episode_lengths()
    short = lengths < (length or 0)
    return {"episodes": int(short.sum()), "steps": int(lengths[short].sum())}


def check_dataset(dataset: Dataset, cfg: TrainConfig, spec) -> None:
    """The dataset fits the env it claims and the run's env: one `DatasetError` line otherwise."""
    where = cfg.dataset
    if dataset.env_id != cfg.env_id:
        raise DatasetError(f"dataset {where} was recorded on {dataset.env_id}, the run trains {cfg.env_id}")
    for name, array, dim in (("observations", dataset.observations, spec.obs_dim),
                             ("achieved_goals", dataset.achieved_goals, spec.goal_dim),
                             ("actions", dataset.actions, spec.action_dim)):
        if array.shape[1] != dim:
            raise DatasetError(f"dataset {where}: {name} have {array.shape[1]} columns, {cfg.env_id} has {dim}")
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    outside = np.flatnonzero(((dataset.actions < low - 1e-6) | (dataset.actions > high + 1e-6)).any(axis=1))
    if len(outside):
        raise DatasetError(f"dataset {where}: actions outside {cfg.env_id}'s bounds [{low.tolist()}, "
                           f"{high.tolist()}] at step {int(outside[0])} ({len(outside)} steps)")
    if dataset.desired_goals is not None:
        far = np.abs(dataset.desired_goals).max()
        if far > 1e3 * max(1.0, float(np.abs(dataset.achieved_goals).max())):
            raise DatasetError(f"dataset {where}: desired_goals reach {far:.3g}, far outside the achieved goals' range")


class OfflineTrainer(Trainer):
    """`Trainer` with the dataset as its replay and no collection (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, command: str = "l3p.training.offline.OfflineTrainer"):
        if cfg.dataset is None:
            raise ConfigError("offline training needs a dataset (TrainConfig.dataset)")
        self.cfg, self.run_dir, self.command = cfg, Path(run_dir), command
        torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.dataset = open_dataset(cfg.dataset)
        self.cfg, without_env = held_out.resolve(cfg, self.dataset)
        cfg = self.cfg
        if without_env is None:  # episodes in the dataset's env, as online
            self.eval_env = VecGoalEnv(evaluation_env_id(cfg.env_id), min(cfg.eval_episodes, 10), cfg.eval_max_steps)
            self.spec = self.eval_env.spec
            check_dataset(self.dataset, cfg, self.spec)
            learned, env_reward = self.dataset, self.eval_env.compute_reward  # the env's own reward function
            self.held_out = None
        else:
            learned, held = held_out.split(self.dataset, cfg.held_out_fraction, cfg.seed)
            self.spec = held_out.dataset_spec(self.dataset, cfg.env_id, cfg.offline_window_steps or 0)
            env_reward = held_out.radius_reward(cfg.success_radius)
            self.held_out = held_out.HeldOut(held, learned, min(cfg.future_step, int(cfg.clip_return)),
                                             self.spec.action_max, cfg.seed)
            say(f"{cfg.env_id}: training from the recording alone, {without_env}: success within "
                f"{cfg.success_radius:g} of the goal (success_radius), {self.held_out.episodes} of "
                f"{len(self.dataset.episode_bounds())} episodes held out (held_out_fraction) and measured at "
                f"every evaluation")
        self.learned = learned
        self.agent = L3PAgent(cfg, self.spec)
        short = short_episodes(learned, cfg.offline_window_steps)
        episodes = len(learned.episode_bounds())
        if short["episodes"] == episodes:
            raise DatasetError(f"dataset {cfg.dataset}: no episode has offline_window_steps "
                               f"({cfg.offline_window_steps}) steps")
        obs, ag, action = episode_windows(learned, cfg.offline_window_steps)
        self.replay = EpisodeReplay(len(obs), obs.shape[1] - 1, self.spec.obs_dim, self.spec.goal_dim,
                                    self.spec.action_dim)
        if self.replay.horizon < 2:
            raise DatasetError(f"dataset {cfg.dataset}: episodes of {obs.shape[1]} steps are too short (>= 3)")
        say(f"{cfg.env_id}: learning from {len(obs)} windows of {obs.shape[1]} steps (offline_window_steps) "
            f"cut from {episodes - short['episodes']} of {episodes} episodes; "
            + (f"{short['episodes']} episodes ({short['steps']} steps) shorter than the window are left out"
               if short["episodes"] else "none is left out"))
        # The trajectory's goal is where it ended; the last action has no next state and is dropped.
        self.replay.add(obs, ag, ag[:, -1], action[:, :-1])
        self.agent.o_norm.update(obs.reshape(-1, self.spec.obs_dim))
        self.agent.g_norm.update(ag.reshape(-1, self.spec.goal_dim))
        self._init_run_state(env_reward)

    def dataset_record(self) -> dict:
        meta = self.dataset.metadata
        return {"path": self.cfg.dataset, "sha256": meta["sha256"], "made_by": meta.get("made_by"),
                "steps": int(len(self.dataset.terminals)), "episodes": len(self.dataset.episode_bounds()),
                "replay_windows": int(self.replay.size), "window_steps": int(self.replay.horizon + 1),
                "short_episodes_left_out": short_episodes(self.learned, self.cfg.offline_window_steps),
                **({} if self.held_out is None else {"held_out": self.held_out.record()})}

    # ----- evaluation without an env: the held-out split -----
    def _measure(self) -> dict[str, float]:
        if self.held_out is None:
            return super()._measure()
        agent = self.agent
        row = self.held_out.measure(agent, agent.landmarks() if agent.clusters_ready else None)
        say(f"{self.cfg.env_id}: {self.progress_text()}: {held_out.describe(row)}")
        return row

    @property
    def drawn_env_id(self) -> str:
        return "" if self.held_out is not None else self.cfg.env_id

    # ----- the loop -----
    def train(self, show_progress: bool = True, until_updates: int | None = None,
              stop: threading.Event | None = None, on_cycle: Callable[[Progress], None] | None = None) -> Progress:
        """Train to ``offline_updates`` optimizer steps (or stop early at ``until_updates``), in cycles
        of ``updates_per_cycle``, evaluating and checkpointing as the online loop does."""
        cfg, agent, p = self.cfg, self.agent, self.progress
        target = cfg.offline_updates if until_updates is None else min(until_updates, cfg.offline_updates)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.json").write_text(cfg.dumps())
        bar = tqdm(total=target, initial=agent.optimizer_steps, unit="update", dynamic_ncols=True,
                   disable=None if show_progress else True, desc=f"{cfg.env_id} (offline)")
        self._open_feedback(target)
        metrics: dict[str, list[float]] = {}
        while agent.optimizer_steps < target:
            t0 = time.perf_counter()
            if not agent.clusters_ready and agent.optimizer_steps >= cfg.landmarks_after_updates:
                agent.init_clusters(self.replay.sample_goals(cfg.gls_sample, self.rng), self.rng)
            steps = min(cfg.updates_per_cycle, target - agent.optimizer_steps)
            self._learn(steps, metrics)
            p.cycle += 1
            p.wall_time_s += time.perf_counter() - t0
            bar.update(steps)
            if on_cycle is not None:
                on_cycle(p)
            if self._end_cycle(metrics, agent.optimizer_steps >= target, bar, stop):
                break
        self._close_logs(bar)
        return p

    # ----- checkpoints: no replay (the dataset is it) -----
    def save_checkpoint(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = {**self._exportable_state(optimizers=True), "rng": self.rng.bit_generator.state,
                 "torch_rng": torch.get_rng_state(), "dataset_sha256": self.dataset.metadata["sha256"]}
        tmp = self.run_dir / (CHECKPOINT + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.run_dir / CHECKPOINT)

    def save_snapshot(self) -> Path:
        """Named by optimizer steps (an offline run takes no env step)."""
        path = snapshot_path(self.run_dir, self.agent.optimizer_steps)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self._exportable_state(optimizers=False), path.with_suffix(".tmp"))
        os.replace(path.with_suffix(".tmp"), path)
        return path

    def _exportable_state(self, optimizers: bool) -> dict:
        without_env = {} if self.held_out is None else {"spec": held_out.spec_record(self.spec)}
        return {**super()._exportable_state(optimizers), "dataset": self.dataset_record(), **without_env}

    @classmethod
    def resume(cls, run_dir: Path, offline_updates: int | None = None, placement: dict | None = None) -> "OfflineTrainer":
        """Continue from the last checkpoint (optionally to a larger budget), on the same dataset."""
        state = load_checkpoint(run_dir)
        cfg = TrainConfig.from_dict(state["config"]).replace(**(placement or {}))
        if offline_updates is not None:
            cfg = cfg.replace(offline_updates=offline_updates)
        resumed = f"l3p train --resume {run_dir}" + (f" --steps {offline_updates}" if offline_updates else "")
        trainer = cls(cfg, run_dir, command=f"{state['command']} && {resumed}")
        if trainer.dataset.metadata["sha256"] != state.get("dataset_sha256"):
            raise CheckpointError(f"the dataset {cfg.dataset} changed since the run started (sha256 "
                                  f"{trainer.dataset.metadata['sha256'][:12]}, the run's {str(state.get('dataset_sha256'))[:12]})")
        trainer.agent.load_state_dict(state["agent"])
        trainer.rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        trainer.progress = Progress(**{k: v for k, v in state["progress"].items() if k in Progress.__dataclass_fields__})
        return trainer

    def provenance(self) -> dict:
        return {**run_provenance(self.command, self.cfg.to_dict(), vars(self.progress), self.agent.optimizer_steps),
                "dataset": self.dataset_record()}
