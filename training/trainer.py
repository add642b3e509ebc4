"""The L3P training loop, top to bottom (CleanRL style).

Each cycle stores one episode from every lockstep env (uniform random during warm-up, then the
actor with exploration noise, or — on a ``plan_eps`` fraction of episodes once landmarks exist —
the Algorithm-1 planner, noise-free; see training/collector.py), asks the collector for the next
cycle's episodes on the current weights, and meanwhile runs ``updates_per_cycle`` optimizer steps
(or ``updates_per_env_step`` per env step it stored) on hindsight-relabelled batches plus
latent-cluster steps and soft-updates the targets. With ``collector="process"`` the collection runs
in a second process, overlapping the updates; with ``"inline"`` it runs first, in this one. Both
give the same run. Every few cycles it evaluates (success with the policy alone and with the
planner), logs a CSV row, redraws the learning curve, and writes a checkpoint that ``--resume``
continues exactly (it holds the collected, not yet stored, episodes of the next cycle). Every
evaluation also keeps the weights it measured as a snapshot (``snapshots/``), because success can
swing between evaluations: ``l3p export`` takes any of them, so the served model is the one
validation chose, not merely the last. ``collectors`` workers (processes, or Ray actors with
``collector="ray"``) share a cycle's envs; the learner runs on ``device`` (training/device.py).
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm import tqdm

from l3p.core import EpisodePlanner, LandmarkGraph
from l3p.core.errors import L3PError
from l3p.core.seeds import TRAINING_EVAL
from l3p.sim import mazes
from l3p.sim.draw import plot_landmarks
from l3p.sim.envs import VecGoalEnv, evaluation_env_id, task_options
from l3p.training.agent import L3PAgent
from l3p.training.collector import (CollectRequest, Episodes, InlineCollector, ProcessCollector, WorkerPool,
                                    planned_actions)
from l3p.training.config import PLACEMENT_KEYS, TrainConfig
from l3p.training.held_out import HELD_OUT_KEYS
from l3p.training.feedback import PROGRESS, CostEstimate, CycleEstimate, IntervalLog, evaluations, plot_run_curve
from l3p.training.replay import EpisodeReplay, RewardFn, within_radius
from l3p.training.run_files import CHECKPOINT, REPLAY, CheckpointError, load_checkpoint, run_provenance, snapshot_path
from l3p.training.tensorboard import ScalarLog



class ConfigError(L3PError, ValueError):
    """A training config the env cannot honour."""


@dataclass
class Progress:
    cycle: int = 0
    env_steps: int = 0
    wall_time_s: float = 0.0
    collector_cpu_s: float = 0.0  # CPU time spent collecting (in the workers, or inline)
    workers_replaced: int = 0     # rollout workers that died and were replaced (Ray)
    update_credit: float = 0.0    # updates_per_env_step: the fraction of an update owed, carried to the next cycle
    history: list[dict] = field(default_factory=list)


def eval_episodes_spec(cfg: TrainConfig, env: VecGoalEnv, episodes: int,
                       seed_base: int = TRAINING_EVAL) -> list[tuple[int, dict | None]]:
    """(env seed, reset options) per evaluation episode: the env's own start/goal draw, or fixed
    far maze pairs (``cfg.eval_pairs == "far"``) from a list seeded by ``seed_base``."""
    seeds = [seed_base + i for i in range(episodes)]
    if cfg.eval_pairs == "tasks":
        return [(s, task_options(env.envs[0], i)) for i, s in enumerate(seeds)]
    if cfg.eval_pairs != "far":
        return [(s, None) for s in seeds]
    pairs = mazes.far_pairs(mazes.maze_map(env.envs[0]), episodes, seed_base, cfg.eval_min_cells)
    return [(s, mazes.reset_options(p)) for s, p in zip(seeds, pairs)]


def evaluate(agent: L3PAgent, env: VecGoalEnv, episodes: int, mode: str, seed_base: int = TRAINING_EVAL) -> float:
    """Success rate over ``episodes`` fixed episodes, acting greedily (``policy``) or through the planner."""
    successes = []
    pcfg = agent.cfg.planner.replace(mode=mode)
    graph = LandmarkGraph(agent.landmarks(), agent.value_fn) if mode != "policy" else None
    plan = eval_episodes_spec(agent.cfg, env, episodes, seed_base)
    for start in range(0, episodes, len(env)):
        chunk = plan[start:start + len(env)]
        chunk += [chunk[-1]] * (len(env) - len(chunk))  # pad the last chunk; padded results are dropped
        seeds = [s for s, _ in chunk]
        obs = env.reset(seeds, [o for _, o in chunk])
        planners = [EpisodePlanner(graph, g, agent.value_fn, pcfg, seed=s)
                    for g, s in zip(obs["desired_goal"], seeds)] if graph else []
        success = np.zeros(len(env), np.float32)
        for _ in range(env.spec.max_steps):
            if planners:
                actions = planned_actions(planners, obs["observation"], agent)
            else:
                actions = agent.act(obs["observation"], obs["desired_goal"])
            obs, success = env.step(actions)
        successes.extend(success[: episodes - start].tolist())
    return float(np.mean(successes))


class Trainer:
    def __init__(self, cfg: TrainConfig, run_dir: Path, command: str = "l3p.training.trainer.Trainer"):
        """``command``: how the run was started (the provenance's first leg), e.g. its command line."""
        self.cfg, self.run_dir, self.command = cfg, Path(run_dir), command
        torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        # The envs that collect; with a collector process they live there and this one only lends
        # its spec and reward function.
        self.env = VecGoalEnv(cfg.env_id, cfg.n_envs if cfg.collector == "inline" else 1, cfg.max_episode_steps)
        # Evaluation runs its own episode length (default the env's full limit), whatever the
        # training length: the maze protocol trains on short episodes and tests on long ones; and
        # on the env's declared evaluation env (Place-Inside-Box: the in-box goal alone).
        self.eval_env = VecGoalEnv(evaluation_env_id(cfg.env_id), min(cfg.eval_episodes, 10), cfg.eval_max_steps)
        self.spec = self.env.spec
        self.agent = L3PAgent(cfg, self.spec)
        self.replay = EpisodeReplay(cfg.buffer_episodes, self.spec.max_steps, self.spec.obs_dim,
                                    self.spec.goal_dim, self.spec.action_dim)
        self._init_run_state(self.env.compute_reward)

    def _init_run_state(self, env_reward: RewardFn) -> None:
        """What the learner is paid (``env_reward``, 0 at the goal and -1 elsewhere, with the run's
        goal_radius) and a fresh run's bookkeeping (after spec and agent exist)."""
        cfg = self.cfg
        self.reward_fn = within_radius(env_reward, cfg.goal_radius)
        if cfg.fall_is_failure and not self.spec.adapter.can_fall:
            raise ConfigError(f"fall_is_failure: {cfg.env_id} declares no torso that can fall "
                              f"(GoalEnvAdapter.torso_quat_index)")
        self.failed_fn = self.spec.adapter.fallen if cfg.fall_is_failure else None
        self.progress = Progress()
        self._collector: InlineCollector | WorkerPool | None = None  # open while training
        self._pending: Episodes | None = None  # collected for the next cycle, not stored yet
        self._scalars: ScalarLog | None = None  # TensorBoard, opened at its first row
        self._interval: IntervalLog | None = None  # open while training (training/feedback.py)
        self._estimate: CostEstimate | None = None  # offline: timed over updates
        self._cycle_estimate: CycleEstimate | None = None  # online: timed over cycles
        self._target = 0  # what this train() call runs to: env steps, or optimizer steps offline

    # ----- collection -----
    def _collect_request(self) -> CollectRequest:
        """The next cycle's collection: warm-up or not, and once landmarks exist the planner's nodes
        (training adds GLS-picked replay goals as temporary landmarks, for exploration)."""
        cfg, agent = self.cfg, self.agent
        warmup = self.replay.episodes_seen < cfg.warmup_episodes
        nodes = None
        if agent.clusters_ready and not warmup:
            goals = self.replay.sample_goals(cfg.gls_sample, self.rng)
            extra = goals[agent.gls_indices(goals, cfg.extra_landmarks, self.rng)] if cfg.extra_landmarks else goals[:0]
            nodes = np.concatenate([agent.landmarks(), extra]).astype(np.float32)
        return CollectRequest(seed=int(self.rng.integers(2**62)), warmup=warmup, nodes=nodes)

    def _next_episodes(self) -> Episodes | None:
        """The submitted collection (waits for it); kept until its cycle stores it."""
        if self._pending is None and self._collector is not None:
            self._pending = self._collector.result()
        return self._pending

    def _store(self, episodes: Episodes) -> None:
        self.replay.add(episodes.obs, episodes.ag, episodes.goal, episodes.action)
        self.agent.o_norm.update(episodes.obs)
        self.agent.g_norm.update(np.concatenate([episodes.ag.reshape(-1, self.spec.goal_dim), episodes.goal]))
        self.progress.collector_cpu_s += episodes.cpu_s
        self.progress.workers_replaced += episodes.workers_replaced

    @contextlib.contextmanager
    def _collecting(self):
        """The collector for one ``train`` call. Something is always submitted or pending, so a
        checkpoint (or the next call) starts its next cycle with episodes collected exactly as an
        uninterrupted run would have."""
        if self.cfg.collector == "process":
            self._collector = ProcessCollector(self.cfg, self.agent)
        elif self.cfg.collector == "ray":
            from l3p.training.ray_collector import RayCollector  # Ray is an optional extra

            self._collector = RayCollector(self.cfg, self.agent)
        else:
            self._collector = InlineCollector(self.cfg, self.env, self.agent)
        finished = False
        try:
            if self._pending is None:
                self._collector.submit(self._collect_request())
            yield
            self._next_episodes()
            finished = True
        finally:
            self._collector.close(wait=finished)
            self._collector = None

    # ----- checkpoints -----
    def save_checkpoint(self) -> None:
        """Atomic: write to temporary names, then rename, so an interrupted save keeps the last good one."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = {**self._exportable_state(optimizers=True),
                 "rng": self.rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                 "pending": None if (pending := self._next_episodes()) is None else pending.state_dict()}
        tmp_ckpt, tmp_replay = self.run_dir / (CHECKPOINT + ".tmp"), self.run_dir / ("replay.tmp.npz")
        torch.save(state, tmp_ckpt)
        np.savez(tmp_replay, **self.replay.state_dict())
        os.replace(tmp_replay, self.run_dir / REPLAY)
        os.replace(tmp_ckpt, self.run_dir / CHECKPOINT)

    def save_snapshot(self) -> Path:
        """The agent as this evaluation measured it, named by env steps (exportable, not resumable)."""
        path = snapshot_path(self.run_dir, self.progress.env_steps)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self._exportable_state(optimizers=False), path.with_suffix(".tmp"))
        os.replace(path.with_suffix(".tmp"), path)
        return path

    def _exportable_state(self, optimizers: bool) -> dict:
        """What `l3p export` reads (`load_checkpoint`): a checkpoint adds what resuming needs."""
        return {"config": self.cfg.to_dict(), "agent": self.agent.state_dict(optimizers=optimizers),
                "progress": vars(self.progress), "command": self.command}

    @classmethod
    def resume(cls, run_dir: Path, total_env_steps: int | None = None,
               placement: dict[str, Any] | None = None) -> "Trainer":
        """Continue exactly where the last checkpoint left off (optionally with a larger budget), on
        the same or another device and workers (``placement``: `PLACEMENT_KEYS` only)."""
        state = load_checkpoint(run_dir)
        placement = placement or {}
        if unknown := sorted(set(placement) - set(PLACEMENT_KEYS)):
            raise CheckpointError(f"a resumed run keeps its config; only {', '.join(PLACEMENT_KEYS)} may change, "
                                  f"not {', '.join(unknown)}")
        cfg = TrainConfig.from_dict(state["config"]).replace(**placement)
        if total_env_steps is not None:
            cfg = cfg.replace(total_env_steps=total_env_steps)
        # Provenance names every leg of the run: the first command, then each continuation.
        resumed = (f"l3p train --resume {run_dir}" + (f" --steps {total_env_steps}" if total_env_steps is not None else "")
                   + "".join(f" --set {k}={json.dumps(v)}" for k, v in placement.items()))
        trainer = cls(cfg, run_dir, command=f"{state['command']} && {resumed}")
        trainer.agent.load_state_dict(state["agent"])
        trainer.rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        known = {f.name for f in dataclasses.fields(Progress)}  # older checkpoints may carry dropped fields
        trainer.progress = Progress(**{k: v for k, v in state["progress"].items() if k in known})
        if state.get("pending") is not None:  # older checkpoints have none: the next cycle collects afresh
            trainer._pending = Episodes.from_state_dict(state["pending"])
        replay_path = Path(run_dir) / REPLAY
        try:
            with np.load(replay_path) as data:
                trainer.replay.load_state_dict({k: data[k] for k in data.files})
        except (OSError, ValueError, KeyError) as exc:
            raise CheckpointError(f"replay {replay_path} is missing or corrupt: {exc}") from None
        return trainer

    # ----- the loop -----
    def train(self, show_progress: bool = True, until_env_steps: int | None = None,
              stop: threading.Event | None = None, on_cycle: Callable[[Progress], None] | None = None) -> Progress:
        """Train to ``total_env_steps`` (or stop early at ``until_env_steps``, evaluating and checkpointing).

        When ``stop`` is set (e.g. by a SIGINT handler) the loop finishes its cycle, writes a
        checkpoint and returns, so the run can be resumed exactly. ``on_cycle`` is called after
        each cycle's updates, before its evaluation (benchmarks time cycles with it)."""
        cfg, agent, p = self.cfg, self.agent, self.progress
        target = cfg.total_env_steps if until_env_steps is None else min(until_env_steps, cfg.total_env_steps)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.json").write_text(self.cfg.dumps())
        # disable=None: a bar only on a terminal, never carriage-return frames in a log or a pipe.
        bar = tqdm(total=target, initial=p.env_steps, unit="step", disable=None if show_progress else True,
                   dynamic_ncols=True, desc=cfg.env_id)
        self._open_feedback(target, cycle_steps=cfg.n_envs * self.spec.max_steps)
        metrics: dict[str, list[float]] = {}
        with self._collecting():
            while p.env_steps < target:
                t0 = time.perf_counter()
                episodes, self._pending = self._next_episodes(), None
                self._store(episodes)
                _add(metrics, {"train_success": episodes.train_success, "planned_fraction": episodes.planned_fraction})
                if self.spec.adapter.can_fall:  # episodes in which the robot fell
                    _add(metrics, {"fell": float(self.spec.adapter.fallen(episodes.obs).any(axis=1).mean())})
                if cfg.max_staleness:
                    _add(metrics, {"staleness": episodes.staleness})
                if not agent.clusters_ready and self.replay.episodes_seen >= cfg.planning_start_episodes:
                    agent.init_clusters(self.replay.sample_goals(cfg.gls_sample, self.rng), self.rng)
                # The next cycle's episodes are collected on these weights while the updates run
                # (in the collector process; inline, right here, first).
                self._collector.submit(self._collect_request())
                # n_envs episodes, or fewer when the learner runs ahead of slow workers (max_staleness)
                steps = len(episodes.goal) * self.spec.max_steps
                if not episodes.warmup:
                    self._learn(self._updates_due(steps), metrics)
                p.cycle += 1
                p.env_steps += steps
                elapsed = time.perf_counter() - t0
                p.wall_time_s += elapsed
                self._cycle_estimate.cycle(elapsed, learned=not episodes.warmup, planning=agent.clusters_ready)
                bar.update(steps)
                if on_cycle is not None:
                    on_cycle(p)

                if self._end_cycle(metrics, p.env_steps >= target, bar, stop):
                    break
        self._close_logs(bar)
        return p

    def _open_feedback(self, target: int, cycle_steps: int = 0) -> None:
        """The lines every log_every_updates updates, and what the rest up to ``target`` will cost:
        offline (``cycle_steps`` 0) optimizer steps timed over updates; online env steps, timed over
        cycles of ``cycle_steps``."""
        cfg, steps, cycle = self.cfg, self.agent.optimizer_steps, self.progress.cycle
        self._target = target
        self._interval = IntervalLog(self.run_dir, cfg.log_every_updates, cfg.env_id, steps)
        if cycle_steps:
            ratio = cfg.updates_per_env_step
            updates = cfg.updates_per_cycle if ratio is None else round(ratio * cycle_steps)
            cycles = -(-(target - self.progress.env_steps) // cycle_steps)
            planning_from = cfg.planning_start_episodes  # within this call, or never
            if planning_from >= self.replay.episodes_seen + cycles * cfg.n_envs:
                planning_from = None
            self._cycle_estimate = CycleEstimate(cfg.env_id, cycle, cycles, cycle_steps, updates,
                                                 cfg.eval_every_cycles, planning_from)
        else:
            last = cycle - (-(target - steps) // cfg.updates_per_cycle)  # the call's last cycle
            self._estimate = CostEstimate(cfg.env_id, steps, target, evaluations(cycle, last, cfg.eval_every_cycles))

    def _scalar_log(self) -> ScalarLog:
        if self._scalars is None:
            self._scalars = ScalarLog(self.run_dir, "env_steps" if self.cfg.dataset is None else "optimizer_steps")
        return self._scalars

    def _close_logs(self, bar: Any) -> None:
        bar.close()
        self._interval = self._estimate = self._cycle_estimate = None
        if self._scalars is not None:
            self._scalars.close()
            self._scalars = None

    def _updates_due(self, env_steps: int) -> int:
        """A cycle's optimizer steps: ``updates_per_cycle``, or ``updates_per_env_step`` times the
        ``env_steps`` it stored, the fraction carried over (so the run's ratio is exact)."""
        ratio = self.cfg.updates_per_env_step
        if ratio is None:
            return self.cfg.updates_per_cycle
        owed = self.progress.update_credit + ratio * env_steps
        due = math.floor(owed + 1e-9)  # 0.05 * 800 must be 40, not 39 and a carried 0.999...
        self.progress.update_credit = max(owed - due, 0.0)
        return due

    def _learn(self, steps: int, metrics: dict[str, list[float]]) -> None:
        """``steps`` optimizer steps on relabelled replay batches (offline: in-sample, with random
        goals), the targets on their schedule; the losses go to ``metrics``."""
        cfg, agent = self.cfg, self.agent
        offline = cfg.dataset is not None
        for _ in range(steps):
            batch = self.replay.sample(cfg.batch_size, self.rng, self.reward_fn, cfg.relabel_p, cfg.future_step,
                                       self.failed_fn, in_sample=offline,
                                       random_goal_p=cfg.random_goal_p if offline else 0.0,
                                       actor_goal_steps=cfg.actor_goal_steps)
            _add(metrics, agent.update(batch, agent.cluster_work(self.replay, self.rng)))
            if self._estimate is not None:
                self._estimate.tick(agent.optimizer_steps)
            if cfg.target_update_every and agent.optimizer_steps % cfg.target_update_every == 0:
                agent.update_targets()
        for row in agent.drain():  # the overlapped landmark-model steps; V etc. are read next
            _add(metrics, row)
        if not cfg.target_update_every:
            agent.update_targets()

    def _end_cycle(self, metrics: dict[str, list[float]], last: bool, bar: Any,
                   stop: threading.Event | None) -> bool:
        """Evaluate and checkpoint when due (and after the ``last`` cycle); True when a stop was asked
        (checkpointed)."""
        cfg, p = self.cfg, self.progress
        if self._interval is not None and self._interval.due(self.agent.optimizer_steps):
            self._interval.write(metrics, {"optimizer_steps": self.agent.optimizer_steps, "env_steps": p.env_steps},
                                 f"{self.progress_text()} of {self._target}", self._scalar_log())
        if p.cycle % cfg.eval_every_cycles == 0 or last:
            row = self._evaluate(metrics)
            metrics.clear()
            if self._interval is not None:
                self._interval.forget()
            bar.set_postfix({k.removeprefix("success_").removeprefix("held_out_"): f"{v:.2f}" for k, v in row.items()
                             if k.startswith("success_") or k in HELD_OUT_KEYS})
        stopping = stop is not None and stop.is_set()
        if p.cycle % cfg.checkpoint_every_cycles == 0 or last or stopping:
            self.save_checkpoint()
        return stopping

    def _evaluate(self, metrics: dict[str, list[float]]) -> dict:
        p, agent = self.progress, self.agent
        t0 = time.perf_counter()
        row = {"cycle": p.cycle, "env_steps": p.env_steps, "episodes": self.replay.episodes_seen,
               "optimizer_steps": agent.optimizer_steps, "wall_time_s": round(p.wall_time_s, 1), **self._measure()}
        row.update({k: float(np.mean(v)) for k, v in metrics.items()})
        if agent.clusters_ready:
            plot_landmarks(agent.landmarks(), self.replay.sample_goals(2000, np.random.default_rng(0)),
                           self.run_dir / "landmarks.png", f"{self.cfg.env_id}: landmarks at {self.progress_text()}",
                           self.drawn_env_id, agent.value_fn, self.cfg.planner.d_max)
        p.wall_time_s += time.perf_counter() - t0
        p.history.append(row)
        self._scalar_log().write(row)
        self.save_snapshot()
        self._write_logs()
        return row

    def _measure(self) -> dict[str, float]:
        """An evaluation's measured cells: success in the env's episodes, with the policy and, once
        planning has started, the planner (before it there is no planner to measure: no cell)."""
        agent, episodes = self.agent, self.cfg.eval_episodes
        row = {"success_policy": evaluate(agent, self.eval_env, episodes, "policy")}
        if agent.clusters_ready:
            row["success_l3p"] = evaluate(agent, self.eval_env, episodes, "l3p")
        return row

    @property
    def drawn_env_id(self) -> str:
        """The env whose walls and obstacles pictures draw ("": none, only the goals)."""
        return self.cfg.env_id

    def progress_text(self) -> str:
        """How far the run is: env steps, or optimizer steps for a run trained offline."""
        if self.cfg.dataset is not None:
            return f"{self.agent.optimizer_steps} optimizer steps"
        return f"{self.progress.env_steps} env steps"

    def _write_logs(self) -> None:
        history = self.progress.history
        keys = list(dict.fromkeys(k for row in history for k in row))
        with open(self.run_dir / PROGRESS, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(history)
        plot_run_curve(history, self.cfg, self.run_dir / "learning_curve.png")

    def provenance(self) -> dict:
        return run_provenance(self.command, self.cfg.to_dict(), vars(self.progress), self.agent.optimizer_steps)


def _add(metrics: dict[str, list[float]], row: dict[str, float]) -> None:
    for k, v in row.items():
        metrics.setdefault(k, []).append(v)
