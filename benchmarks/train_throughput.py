"""Training throughput on this machine: env steps/s, optimizer steps/s, peak memory.

Measured in one run, side by side with references: the bare env (random actions, no learning) and
the optimizer step alone, so the table shows where training time goes. With --run-dir it also
reports success per env step and per wall-minute from a finished run's progress.csv.

    python benchmarks/train_throughput.py --env FetchPush-v4 --cycles 6 --out bench_train.json
"""
from __future__ import annotations

import argparse
import csv
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from l3p.sim.envs import VecGoalEnv
from l3p.training.config import preset
from l3p.training.trainer import Trainer


def bare_env_rate(env_id: str, n_envs: int, steps: int) -> float:
    env = VecGoalEnv(env_id, n_envs)
    rng = np.random.default_rng(0)
    env.reset(list(range(n_envs)))
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(rng.uniform(-1, 1, (n_envs, env.spec.action_dim)).astype(np.float32))
    rate = steps * n_envs / (time.perf_counter() - t0)
    env.close()
    return rate


def optimizer_rate(trainer: Trainer, batch_size: int, steps: int) -> float:
    cfg = trainer.cfg
    trainer.agent.update(trainer.replay.sample(batch_size, trainer.rng, trainer.env.compute_reward))
    trainer.agent.drain()
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.agent.update(trainer.replay.sample(batch_size, trainer.rng, trainer.env.compute_reward,
                                                   cfg.relabel_p, cfg.future_step))
    trainer.agent.drain()  # overlapped updates: the landmark-model halves count too
    return steps / (time.perf_counter() - t0)


def run_summary(run_dir: Path) -> list[dict]:
    rows = list(csv.DictReader(open(run_dir / "progress.csv")))
    out = []
    for r in rows:
        steps, wall = int(r["env_steps"]), float(r["wall_time_s"])
        out.append({"env_steps": steps, "wall_min": round(wall / 60, 1), "success_policy": float(r["success_policy"]),
                    "success_l3p": float(r["success_l3p"]), "steps_per_s": round(steps / max(wall, 1e-9), 1)})
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="FetchPush-v4")
    ap.add_argument("--cycles", type=int, default=6, help="training cycles after warm-up")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--collector", choices=["process", "inline"], default="process",
                    help="collect in a second process (the trainer's default) or in the learner's")
    ap.add_argument("--run-dir", type=Path, help="also summarize this finished run's progress.csv")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    base = preset(args.env)
    probe = VecGoalEnv(args.env, 1, base.max_episode_steps)  # the training episode length
    steps_per_cycle = base.n_envs * probe.spec.max_steps
    probe.close()
    warm_cycles = -(-base.warmup_episodes // base.n_envs)
    cfg = base.replace(total_env_steps=(warm_cycles + args.cycles) * steps_per_cycle, torch_threads=args.threads,
                       collector=args.collector,
                       eval_every_cycles=10**9, checkpoint_every_cycles=10**9, planning_start_episodes=base.warmup_episodes)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        trainer.train(show_progress=False, until_env_steps=warm_cycles * steps_per_cycle)  # fills the replay, no updates
        steps0, opt0, t0 = trainer.progress.env_steps, trainer.agent.optimizer_steps, time.perf_counter()
        trainer.train(show_progress=False)
        dt = time.perf_counter() - t0
        train_env_rate = (trainer.progress.env_steps - steps0) / dt
        train_opt_rate = (trainer.agent.optimizer_steps - opt0) / dt
        iso = {b: optimizer_rate(trainer, b, 20) for b in (256, cfg.batch_size)}
    env_rate = bare_env_rate(args.env, base.n_envs, 200)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    result = {"env": args.env, "threads": args.threads, "collector": args.collector, "n_envs": cfg.n_envs, "batch_size": cfg.batch_size,
              "updates_per_cycle": cfg.updates_per_cycle, "train_env_steps_per_s": round(train_env_rate, 1),
              "train_optimizer_steps_per_s": round(train_opt_rate, 2), "bare_env_steps_per_s": round(env_rate, 1),
              "isolated_optimizer_steps_per_s": {str(b): round(r, 2) for b, r in iso.items()},
              "peak_rss_mb": round(peak_mb, 1)}
    print(f"\nTraining throughput, {args.env}, {args.threads} torch thread(s), {cfg.n_envs} lockstep envs, "
          f"collector {args.collector}")
    print(f"{'measure':<46}{'value':>12}")
    print(f"{'training run: env steps/s':<46}{train_env_rate:>12.1f}")
    print(f"{'training run: optimizer steps/s':<46}{train_opt_rate:>12.2f}")
    print(f"{'reference: bare env steps/s (no learning)':<46}{env_rate:>12.1f}")
    for b, r in iso.items():
        print(f"{f'reference: optimizer steps/s alone, batch {b}':<46}{r:>12.2f}")
    print(f"{'share of bare env speed kept':<46}{train_env_rate / env_rate:>11.1%}")
    print(f"{'peak RSS (MB)':<46}{peak_mb:>12.1f}")
    if args.run_dir:
        result["run"] = run_summary(args.run_dir)
        print(f"\nRun {args.run_dir}: success per env step and per wall-minute")
        print(f"{'env steps':>10}{'wall min':>10}{'policy':>8}{'l3p':>8}{'steps/s':>9}")
        for r in result["run"]:
            print(f"{r['env_steps']:>10}{r['wall_min']:>10}{r['success_policy']:>8.2f}{r['success_l3p']:>8.2f}{r['steps_per_s']:>9}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
