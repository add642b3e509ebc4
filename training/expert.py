"""``l3p expert``: OGBench's direction-following ant expert, retrained by its recipe.

OGBench's antmaze datasets were made by a SAC agent trained 400,000 steps on ``online-ant-v0``
wrapped by ``GymXYWrapper(env, resample_interval=100)``: the ant's state without its x-y, plus a
unit direction z drawn anew every 100 steps; reward = the step's x-y displacement · z. Its weights
are a download, so this command trains one with Stable-Baselines3's SAC and OGBench's settings
(``impls/agents/sac.py``: 256 x 256 actor and critics, Adam 1e-4, batch 256, γ 0.99, τ 0.005,
target entropy -0.5 |A|, one update per env step after 10,000 random steps).

The run directory holds ``config.json``; ``checkpoint/`` (model, optimizers, replay buffer, RNG
states, step count: ``--resume`` continues from it); ``progress.csv`` (steps/s and the mean
displacement · z per step over each window); ``policy.npz`` (the deterministic actor as numpy,
l3p.core.mlp_policy: what the dataset generator and ``--evaluate`` run, without torch) and
``provenance.json`` (command, seed, code version, the policy's sha256) beside it. SAC's policy
swings from checkpoint to checkpoint, so each checkpoint's policy is also driven by the oracle on
validation episodes of ``--eval-maze`` (``selection.csv``), and the best so far is kept as
``best_policy.npz`` (``best_policy.json``: its steps and validation success); ``--evaluate --best``
measures it on the held-out episodes.

``l3p expert --out runs/ant-expert-s0``; ``l3p expert --out runs/ant-expert-s0 --resume``
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import pickle
import platform
import random
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.commandline import option
from l3p.core.errors import INTERRUPTED, L3PError
from l3p.core.mlp_policy import MLPPolicy, save_mlp_policy
from l3p.core.seeds import VALIDATION
from l3p.training.expert_eval import (BEST, BEST_INFO, ENV_ID, POLICY, make_direction_env, oracle_driven,
                                      run_expert_eval)

CHECKPOINT = "checkpoint"
PROGRESS = "progress.csv"
PROVENANCE = "provenance.json"
SELECTION = "selection.csv"
CONFIG = "config.json"
RUN = "the run"
SAC = "SAC (OGBench's impls/agents/sac.py settings)"
EVALUATION = "evaluation (--evaluate: l3p.training.expert_eval)"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(_positive_int(t) for t in text.split(",") if t.strip())
    if not sizes:
        raise ValueError(f"give layer sizes such as 256,256; got {text!r}")
    return sizes


@dataclass(frozen=True)
class ExpertConfig:
    """One expert run: where it goes, how long, and every SAC setting."""

    out: Path = option(Path("runs/ant-expert"), "run directory (config, checkpoint, progress.csv, policy.npz, "
                                                "provenance.json)", metavar="DIR", group=RUN)
    steps: int = option(400_000, "total env steps (with --resume: the run's new total)", parse=_positive_int,
                        metavar="N", group=RUN)
    seed: int = option(0, "seeds torch, numpy (the directions z), the env and the random warm-up", group=RUN)
    resume: bool = option(False, "continue the run in --out from its checkpoint: weights, optimizers, replay "
                                 "buffer, RNG states and step count (the env starts a new episode)", group=RUN)
    force: bool = option(False, "start over even if --out holds a run", group=RUN)
    checkpoint_every: int = option(25_000, "env steps between checkpoints (and policy.npz, provenance.json)",
                                   parse=_positive_int, metavar="N", group=RUN)
    log_every: int = option(5_000, "env steps between progress lines", parse=_positive_int, metavar="N", group=RUN)
    select_episodes_per_task: int = option(20, "at each checkpoint, oracle-driven validation episodes per task of "
                                               "--eval-maze's antmaze; the best policy so far is kept as "
                                               "best_policy.npz (0: no selection)", parse=_non_negative_int,
                                           metavar="N", group=RUN)
    # One thread: the machine's other core trains something else, and SAC's 256-wide layers gain
    # little from a second one.
    torch_threads: int = option(1, "torch intra-op threads", parse=_positive_int, metavar="N", group=RUN)

    resample_interval: int = option(100, "env steps between new directions z (GymXYWrapper)", parse=_positive_int,
                                    metavar="N", group=SAC)
    learning_rate: float = option(1e-4, "Adam step size of actor, critics and temperature", group=SAC)
    batch_size: int = option(256, "transitions per update", parse=_positive_int, metavar="N", group=SAC)
    hidden_sizes: tuple[int, ...] = option((256, 256), "hidden layers of the actor and of each critic",
                                           parse=_sizes, comma_separated=True, metavar="N,N", group=SAC)
    gamma: float = option(0.99, "discount", group=SAC)
    tau: float = option(0.005, "Polyak rate of the target critics", group=SAC)
    target_entropy_scale: float = option(0.5, "target entropy = -scale x action dims (the temperature is "
                                              "tuned toward it)", group=SAC)
    learning_starts: int = option(10_000, "uniform random steps before the first update", metavar="N", group=SAC)
    # None: every transition of the run is kept, as OGBench's 1e6 buffer keeps all of a 400k run.
    buffer_size: int | None = option(None, "replay capacity (default: the run's steps)", parse=_positive_int,
                                     metavar="N", group=SAC)

    evaluate: bool = option(False, "measure the policy.npz in --out instead of training: displacement · z per "
                                   "step, and the oracle-driven expert's success on an antmaze's five tasks "
                                   "(written to --out/expert_eval.json)", group=EVALUATION)
    eval_direction_episodes: int = option(10, "episodes of direction following (0: skip)", parse=_non_negative_int,
                                          metavar="N", group=EVALUATION)
    eval_maze: str = option("large", "the antmaze whose five evaluation tasks the oracle-driven expert runs "
                                     "(and the checkpoints are selected on)",
                            choices=("medium", "large", "giant"), group=EVALUATION)
    eval_episodes_per_task: int = option(50, "oracle-driven episodes per task, OGBench's 50 (0: skip)",
                                         parse=_non_negative_int, metavar="N", group=EVALUATION)
    eval_noise: float = option(0.0, "Gaussian action noise of the oracle-driven expert (the datasets' is 0.2)",
                               group=EVALUATION)
    eval_best: bool = option(False, "with --evaluate: measure best_policy.npz (the validation pick) instead of "
                                    "policy.npz", flag="--best", group=EVALUATION)

    def __post_init__(self) -> None:
        if not 0 < self.gamma < 1 or not 0 < self.tau <= 1 or self.learning_rate <= 0:
            raise ValueError("need 0 < gamma < 1, 0 < tau <= 1 and learning_rate > 0")

    def learning(self) -> dict[str, Any]:
        """The settings that define what is learned: a resumed run must keep them."""
        run_only = {"out", "steps", "resume", "force", "checkpoint_every", "log_every", "torch_threads", "evaluate",
                    "select_episodes_per_task"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in run_only and not f.name.startswith("eval_")}

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}


class ExpertError(L3PError):
    """The expert run cannot start or resume as asked."""


def export_policy(model, metadata: dict[str, Any]) -> MLPPolicy:
    """The SAC actor's deterministic action, tanh(mu(latent_pi(obs))), as a numpy MLP."""
    import torch

    layers = [m for m in model.actor.latent_pi if isinstance(m, torch.nn.Linear)] + [model.actor.mu]
    low, high = model.action_space.low, model.action_space.high
    if not (np.all(low == -1) and np.all(high == 1)):  # SB3 rescales from [-1, 1]; the numpy policy does not
        raise ExpertError(f"the expert's action space must be [-1, 1], got [{low}, {high}]")
    return MLPPolicy([layer.weight.detach().cpu().numpy() for layer in layers],
                     [layer.bias.detach().cpu().numpy() for layer in layers], metadata)


def command_line(cfg: ExpertConfig) -> str:
    """``l3p expert`` with the options that differ from the defaults."""
    defaults = ExpertConfig()
    words = ["l3p", "expert"]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value == getattr(defaults, f.name) and f.name != "out":
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag)
        else:
            words += [flag, ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]
    return " ".join(words)


class ExpertRun:
    """A SAC run in its directory: build or resume, learn with progress and checkpoints, save."""

    def __init__(self, cfg: ExpertConfig):
        import torch
        from stable_baselines3 import SAC as SACAlgorithm
        from stable_baselines3.common.logger import Logger

        from l3p.training.export import code_state

        torch.set_num_threads(cfg.torch_threads)
        self.code = code_state()  # the code that started this process
        self.cfg, self.out = cfg, Path(cfg.out)
        self.env = make_direction_env(cfg.resample_interval)
        ckpt = self.out / CHECKPOINT
        if cfg.resume:
            state = self._read_state(ckpt)
            self.model = SACAlgorithm.load(ckpt / state["model"], env=self.env, device="cpu")
            self.model.load_replay_buffer(ckpt / state["replay"])
            with open(ckpt / state["rng"], "rb") as f:
                _set_rng(pickle.load(f))
            self.model._last_obs = None  # a new episode: the env's state was not saved
            self.wall_s = float(state["wall_s"])
            self.command = state["command"] + f" ; {command_line(cfg)}"
        else:
            if (ckpt / "state.json").exists() and not cfg.force:
                raise ExpertError(f"{self.out} already holds a run; add --resume to continue it or --force "
                                  "to start over")
            if self.out.exists() and cfg.force:
                shutil.rmtree(self.out)
            self.out.mkdir(parents=True, exist_ok=True)
            self.model = SACAlgorithm(
                "MlpPolicy", self.env, learning_rate=cfg.learning_rate, buffer_size=cfg.buffer_size or cfg.steps,
                learning_starts=cfg.learning_starts, batch_size=cfg.batch_size, tau=cfg.tau, gamma=cfg.gamma,
                train_freq=1, gradient_steps=1, ent_coef="auto",
                target_entropy=-cfg.target_entropy_scale * self.env.action_space.shape[0],
                policy_kwargs={"net_arch": list(cfg.hidden_sizes)}, seed=cfg.seed, device="cpu", verbose=0)
            self.wall_s = 0.0
            self.command = command_line(cfg)
        # Losses are read from it; it writes nothing (SB3's configure() would make a folder in /tmp).
        self.model.set_logger(Logger(folder=None, output_formats=[]))
        (self.out / CONFIG).write_text(json.dumps(self.cfg.to_json(), indent=2) + "\n")

    def _read_state(self, ckpt: Path) -> dict[str, Any]:
        try:
            state = json.loads((ckpt / "state.json").read_text())
        except (OSError, ValueError) as exc:
            raise ExpertError(f"no checkpoint to resume in {self.out} ({exc})") from None
        saved = json.loads((self.out / CONFIG).read_text())
        given, defaults = self.cfg.to_json(), ExpertConfig().to_json()
        # A learning setting given on the command line (not its default) must be the run's own.
        changed = [k for k in self.cfg.learning() if given[k] not in (saved[k], defaults[k])]
        if changed:
            raise ExpertError("a resumed run keeps its learning settings; these differ from the run's config.json: "
                              + ", ".join(f"{k} (run {saved[k]!r}, given {given[k]!r})" for k in changed))
        self.cfg = dataclasses.replace(self.cfg, **{k: tuple(v) if isinstance(v, list) else v
                                                    for k, v in saved.items() if k in self.cfg.learning()})
        return state

    @property
    def steps(self) -> int:
        return int(self.model.num_timesteps)

    def learn(self, stop=None) -> None:
        """Learn up to ``cfg.steps`` env steps, with progress rows and checkpoints; a set ``stop``
        event ends it at the next step (with a checkpoint)."""
        from stable_baselines3.common.callbacks import BaseCallback

        run = self

        class Progress(BaseCallback):
            def _on_training_start(self) -> None:
                run._window_start()

            def _on_step(self) -> bool:
                run._reward_sum += float(self.locals["rewards"][0])
                run._episodes += int(self.locals["dones"][0])
                if self.num_timesteps % run.cfg.log_every == 0:
                    run._log()
                return not (stop is not None and stop.is_set())

            def _on_rollout_end(self) -> None:
                # Here (one env step per rollout) the step's transition is stored, its update not yet done.
                if self.num_timesteps % run.cfg.checkpoint_every == 0:
                    policy = run.checkpoint()
                    if self.num_timesteps < run.cfg.steps:  # the last is selected after its update
                        run.select(policy)

        remaining = self.cfg.steps - self.steps
        if remaining > 0:
            self.model.learn(total_timesteps=remaining, callback=Progress(), log_interval=None,
                             reset_num_timesteps=False, progress_bar=False)
        policy = self.checkpoint()
        if self.steps >= self.cfg.steps:  # the last policy is a candidate too; one stopped early is not
            self.select(policy)

    def _window_start(self) -> None:
        self._t0, self._s0 = time.perf_counter(), self.steps
        self._reward_sum, self._episodes = 0.0, 0

    def _log(self) -> None:
        now = time.perf_counter()
        n = self.steps - self._s0
        rate = n / max(now - self._t0, 1e-9)
        self.wall_s += now - self._t0
        values = self.model.logger.name_to_value
        row = {"steps": self.steps, "wall_s": round(self.wall_s, 1), "steps_per_s": round(rate, 2),
               "displacement_z_per_step": round(self._reward_sum / max(n, 1), 5), "episodes_ended": self._episodes,
               **{k: round(float(values[f"train/{k}"]), 5) if f"train/{k}" in values else ""
                  for k in ("ent_coef", "actor_loss", "critic_loss")}}
        _append_row(self.out / PROGRESS, row)
        eta = (self.cfg.steps - self.steps) / max(rate, 1e-9)
        print(f"{self.steps}/{self.cfg.steps} steps  {rate:.1f} steps/s  displacement·z/step "
              f"{row['displacement_z_per_step']:.4f}  ent_coef {row['ent_coef']}  eta {eta / 3600:.2f} h",
              flush=True)
        self._window_start()

    def checkpoint(self) -> MLPPolicy:
        """Model, replay buffer and RNG states under names tagged by the step count, then state.json
        (written last and atomically: a run stopped mid-checkpoint resumes from the previous one)."""
        ckpt = self.out / CHECKPOINT
        ckpt.mkdir(parents=True, exist_ok=True)
        tag = f"{self.steps:09d}"
        names = {"model": f"model_{tag}.zip", "replay": f"replay_{tag}.pkl", "rng": f"rng_{tag}.pkl"}
        self.model.save(ckpt / names["model"])
        self.model.save_replay_buffer(ckpt / names["replay"])
        with open(ckpt / names["rng"], "wb") as f:
            pickle.dump(_get_rng(), f)
        policy = self.save_policy()
        state = {**names, "steps": self.steps, "wall_s": round(self.wall_s, 1), "command": self.command,
                 "policy_sha256": policy.digest}
        tmp = ckpt / "state.json.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, ckpt / "state.json")
        for old in ckpt.iterdir():
            if old.name not in (*names.values(), "state.json"):
                old.unlink()
        return policy

    def select(self, policy: MLPPolicy) -> None:
        """Drive the policy just saved as policy.npz by the oracle on validation episodes; a row of
        selection.csv, and best_policy.npz (+ .json) if it does at least as well as the best so far
        (ties: the later)."""
        if not self.cfg.select_episodes_per_task:
            return
        result = oracle_driven(policy, self.cfg.eval_maze, self.cfg.select_episodes_per_task, VALIDATION)
        row = {"steps": self.steps, "success": round(result["success"], 4), "policy_sha256": policy.digest}
        _append_row(self.out / SELECTION, row)
        best_json = self.out / BEST_INFO
        best = json.loads(best_json.read_text()) if best_json.exists() else None
        kept = best is None or result["success"] >= best["success"]
        if kept:
            shutil.copyfile(self.out / POLICY, self.out / f"{BEST}.tmp")
            os.replace(self.out / f"{BEST}.tmp", self.out / BEST)
            info = {"steps": self.steps, "policy_sha256": policy.digest, "success": result["success"],
                    "success_per_task": result["success_per_task"], "env_id": result["env_id"],
                    "episodes_per_task": self.cfg.select_episodes_per_task, "seed_base": VALIDATION}
            best_json.write_text(json.dumps(info, indent=2) + "\n")
        print(f"validation at {self.steps} steps: oracle-driven {100 * result['success']:.1f}% on {result['env_id']}"
              + (" (best so far: kept as best_policy.npz)" if kept else
                 f" (best {100 * best['success']:.1f}% at {best['steps']} steps)"), flush=True)

    def provenance(self, digest: str) -> dict[str, Any]:
        import stable_baselines3
        import torch

        return {"command": self.command, "seed": self.cfg.seed, **self.code,
                "env": f"{ENV_ID} + ogbench GymXYWrapper(resample_interval={self.cfg.resample_interval})",
                "algorithm": f"stable-baselines3 {stable_baselines3.__version__} SAC", "env_steps": self.steps,
                "wall_time_s": round(self.wall_s, 1), "policy_sha256": digest, "config": self.cfg.learning(),
                "machine": f"{platform.machine()} {os.cpu_count()} cpu, torch {torch.__version__}, "
                           f"{self.cfg.torch_threads} thread(s)"}

    def save_policy(self) -> MLPPolicy:
        """policy.npz and provenance.json for the weights as they are now; returns the policy."""
        policy = export_policy(self.model, {"env": ENV_ID, "env_steps": self.steps, "seed": self.cfg.seed,
                                            "input": "ant state without x-y (27) + unit direction (2)"})
        digest = save_mlp_policy(self.out / POLICY, policy)
        (self.out / PROVENANCE).write_text(json.dumps(self.provenance(digest), indent=2, default=str) + "\n")
        return policy


def _append_row(path: Path, row: dict[str, Any]) -> None:
    """One row of a CSV file, with the header if the file is new."""
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def _get_rng() -> dict[str, Any]:
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _set_rng(state: dict[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def run_expert(cfg: ExpertConfig) -> int:
    if cfg.evaluate:
        return run_expert_eval(cfg)
    run = ExpertRun(cfg)
    print(f"{'resuming' if cfg.resume else 'starting'} {cfg.out} at {run.steps}/{cfg.steps} steps "
          f"(torch threads {cfg.torch_threads})", flush=True)
    stop = threading.Event()

    def on_signal(signum, frame):  # stop at the next step, with a checkpoint
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run.learn(stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if run.steps < cfg.steps:
        print(f"stopped at {run.steps} steps; checkpoint saved. continue: l3p expert --out {cfg.out} --resume",
              file=sys.stderr)
        return INTERRUPTED
    print(f"done: {run.steps} steps, policy {cfg.out / POLICY} "
          f"(sha256 {json.loads((Path(cfg.out) / PROVENANCE).read_text())['policy_sha256']})")
    return 0
