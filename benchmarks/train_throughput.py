"""Training throughput on this machine: env steps/s and optimizer steps/s per number of rollout
workers, the learner's update time per device, peak memory.

Measured in one invocation, the worker settings in alternating rounds (so machine noise hits all of
them), side by side with references: the bare env (random actions, no learning) and the optimizer
step alone on each device, so the table shows where training time goes. With --run-dir it also
reports success per env step and per wall-minute from a finished run's progress.csv.

    python benchmarks/train_throughput.py --env FetchPush-v4 --collectors 1 2 --out bench_train.json
    python benchmarks/train_throughput.py --env FetchPush-v4 --device cuda --collectors 1 4 12
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from l3p.sim.envs import VecGoalEnv
from l3p.training.agent import L3PAgent
from l3p.training.config import COLLECTORS
from l3p.training.presets import preset
from l3p.training.device import GRAPH_WARMUP_STEPS
from l3p.training.trainer import Trainer

STARTUP_CYCLES = 3
"""Cycles not timed after each train() call: it starts its workers afresh (a spawned worker imports
torch and MuJoCo, seconds of CPU), and on a busy machine that start-up spills over the first cycles."""


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


def update_ms(trainer: Trainer, device: str, batch_size: int, steps: int, cuda_graph: bool = True,
              clusters: bool = True, status: dict | None = None) -> float:
    """Milliseconds per optimizer step (every network; with ``clusters``, the cluster work on its
    schedule once the trainer's clusters exist) of a learner on ``device`` with the trainer's
    weights, on batches from its replay; after warm-up steps (which on CUDA include each part's
    graph capture, unless ``cuda_graph`` is off). ``status``: filled with the parts' capture status."""
    cfg = trainer.cfg.replace(device=device, cuda_graph=cuda_graph)
    agent = L3PAgent(cfg, trainer.spec)
    agent.load_state_dict(trainer.agent.state_dict())
    rng = np.random.default_rng(0)

    def batch():
        return trainer.replay.sample(batch_size, rng, trainer.env.compute_reward, cfg.relabel_p, cfg.future_step)

    def work():
        return agent.cluster_work(trainer.replay, rng) if clusters else None

    # Each cluster part warms up and is captured on its own schedule (every cluster_every or
    # cluster_refresh_every steps): enough steps for the slower one to be replaying.
    for _ in range((GRAPH_WARMUP_STEPS + 2) * max(cfg.cluster_every, cfg.cluster_refresh_every)):
        agent.update(batch(), work())
    agent.drain()
    batches = [batch() for _ in range(steps)]  # sampled beforehand: the learner's time alone
    _sync(agent.device)
    t0 = time.perf_counter()
    for b in batches:
        agent.update(b, work())  # the cluster work is drawn per step: its schedule reads the step count
    agent.drain()  # overlapped (CPU) or queued (GPU) steps count too
    _sync(agent.device)
    elapsed = time.perf_counter() - t0
    if status is not None:
        status.update(agent.capture_status())
    return elapsed / steps * 1e3


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
    ap.add_argument("--cycles", type=int, default=3, help="timed training cycles per setting and round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over the settings, alternating")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--collector", choices=COLLECTORS, default="process",
                    help="where the workers run (the trainer's default: local processes)")
    ap.add_argument("--collectors", type=int, nargs="+", default=[1, 2], metavar="N",
                    help="numbers of rollout workers to compare (1: today's collector process)")
    ap.add_argument("--device", default="cpu", help="the training runs' learner device")
    ap.add_argument("--devices", nargs="+", help="devices whose optimizer step is timed alone "
                    "(default: cpu, and cuda when there is one)")
    ap.add_argument("--run-dir", type=Path, help="also summarize this finished run's progress.csv")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    devices = args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    base = preset(args.env)
    probe = VecGoalEnv(args.env, 1, base.max_episode_steps)  # the training episode length
    steps_per_cycle = base.n_envs * probe.spec.max_steps
    probe.close()
    warm_cycles = -(-base.warmup_episodes // base.n_envs) + 1  # warm-up, then one cycle that starts planning
    cfg = base.replace(total_env_steps=10**12, torch_threads=args.threads, device=args.device,
                       eval_every_cycles=10**9, checkpoint_every_cycles=10**9,
                       planning_start_episodes=base.warmup_episodes)
    settings = {n: cfg.replace(collector=args.collector, collectors=n)
                for n in args.collectors}
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {n: Trainer(c, Path(tmp) / str(n)) for n, c in settings.items()}
        totals = {n: {"wall": 0.0, "env_steps": 0, "optimizer_steps": 0} for n in settings}
        for n, trainer in trainers.items():  # fills the replay, starts the workers and planning
            trainer.train(show_progress=False, until_env_steps=warm_cycles * steps_per_cycle)
        for _ in range(args.rounds):
            for n, trainer in trainers.items():
                marks = []

                def mark(p, trainer=trainer, marks=marks):
                    marks.append((time.perf_counter(), p.env_steps, trainer.agent.optimizer_steps))

                trainer.train(show_progress=False, on_cycle=mark, until_env_steps=trainer.progress.env_steps
                              + (STARTUP_CYCLES + args.cycles) * steps_per_cycle)
                (w0, e0, o0), (w1, e1, o1) = marks[STARTUP_CYCLES - 1], marks[-1]
                totals[n]["wall"] += w1 - w0
                totals[n]["env_steps"] += e1 - e0
                totals[n]["optimizer_steps"] += o1 - o0
        learner = trainers[args.collectors[0]]
        update = {d: {str(b): round(update_ms(learner, d, b, 20), 2) for b in sorted({256, cfg.batch_size})}
                  for d in devices}
    env_rate = bare_env_rate(args.env, base.n_envs, 200)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    rows = {str(n): {"env_steps_per_s": round(t["env_steps"] / t["wall"], 1),
                     "optimizer_steps_per_s": round(t["optimizer_steps"] / t["wall"], 2)} for n, t in totals.items()}
    first = rows[str(args.collectors[0])]["env_steps_per_s"]
    for r in rows.values():
        r["env_steps_over_first"] = round(r["env_steps_per_s"] / first, 2)
    result = {"env": args.env, "threads": args.threads, "collector": args.collector, "device": args.device,
              "cpus": os.cpu_count(), "n_envs": cfg.n_envs, "batch_size": cfg.batch_size,
              "updates_per_cycle": cfg.updates_per_cycle, "rounds": args.rounds, "cycles": args.cycles,
              "workers": rows, "update_ms": update, "bare_env_steps_per_s": round(env_rate, 1),
              "peak_rss_mb": round(peak_mb, 1)}
    print(f"\nTraining throughput, {args.env}, {os.cpu_count()} cpus, learner on {args.device} with "
          f"{args.threads} torch thread(s), {cfg.n_envs} envs per cycle, {cfg.updates_per_cycle} updates of "
          f"{cfg.batch_size} per cycle ({args.rounds} rounds x {args.cycles} cycles per setting, alternating)")
    print(f"{'rollout workers (' + args.collector + ')':<34}{'env steps/s':>12}{'x first':>9}{'opt steps/s':>13}")
    for n, r in rows.items():
        print(f"{n:<34}{r['env_steps_per_s']:>12}{r['env_steps_over_first']:>9}{r['optimizer_steps_per_s']:>13}")
    print(f"{'reference: bare env steps/s (' + str(cfg.n_envs) + ' envs, no learning)':<46}{env_rate:>10.1f}")
    print(f"\n{'learner update alone (ms per optimizer step)':<46}" + "".join(f"{'batch ' + b:>12}" for b in
                                                                         next(iter(update.values()))))
    for d, ms in update.items():
        print(f"{d:<46}" + "".join(f"{v:>12.2f}" for v in ms.values()))
    print(f"{'peak RSS (MB)':<46}{peak_mb:>10.1f}")
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
