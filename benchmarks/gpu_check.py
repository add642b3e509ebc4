"""The GPU check: what a lent GPU machine measures in one short run (benchmarks/gpu_check.sh drives
it; docs/guides/scaling.md says what to carry). Each part is a subcommand that writes its own JSON,
so a run cut short keeps the parts that finished:

- ``table``: the learner's update time (ms per optimizer step), eager and captured, at batch 256 /
  1024 / 4096, with the cluster work on its schedule (the state once landmarks exist) and without
  it, on the env's preset networks and a replay of its warm-up episodes;
- ``offline``: the offline run ``l3p train --dataset FILE --steps N --set device="cuda"`` builds,
  timed per cycle, with the GPU's utilization sampled (nvidia-smi) before and after the clusters
  start (``landmarks_after_updates``), over the whole run and over the cycles with no evaluation
  or checkpoint in them (the learner alone);
- ``push``: FetchPush-v4 from scratch for a few minutes (``--preset-option gpu``, rollout worker
  processes), each evaluation printed as it comes, the first time each success rate is reached;
- ``summary``: the parts' JSON in one file, with the machine, and the tables printed.

    python benchmarks/gpu_check.py table --out table.json
    python benchmarks/gpu_check.py offline --dataset data/pointmaze-large-stitch-v0.npz --out offline.json
    python benchmarks/gpu_check.py push --minutes 5 --out push.json
    python benchmarks/gpu_check.py summary --dir OUT_DIR
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import torch

from l3p.training.arguments import add_train_arguments
from l3p.training.commands import train_config
from l3p.training.config import TrainConfig
from l3p.training.export import code_state
from l3p.training.offline import OfflineTrainer
from l3p.training.trainer import Trainer, evaluate
from curves import THRESHOLDS, first_reach
from train_throughput import update_ms

UTIL_INTERVAL_MS = 500
"""How often nvidia-smi samples the GPU."""
HEARTBEAT_S = 30
"""The push run prints a progress line at least this often."""
BUSY = 90
"""A utilization sample at or above this percentage counts as busy (the target: >= 90 % throughout a run)."""
PARTS = ("table", "offline", "push")


class GpuSampler:
    """nvidia-smi's utilization (%) and memory (MiB) of one GPU every `UTIL_INTERVAL_MS`, stamped
    with epoch seconds, while the context is open; where there is no nvidia-smi, no samples and
    the reason."""

    def __init__(self, gpu: int = 0):
        self.gpu, self.samples, self.reason = gpu, [], None
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> "GpuSampler":
        if shutil.which("nvidia-smi") is None:
            self.reason = "not sampled: no nvidia-smi on this machine"
            return self
        self._proc = subprocess.Popen(["nvidia-smi", "-i", str(self.gpu), "--format=csv,noheader,nounits",
                                       "--query-gpu=timestamp,utilization.gpu,memory.used", "-lms",
                                       str(UTIL_INTERVAL_MS)], stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:  # nvidia-smi's timestamp (local time): its output reaches a pipe in bursts
                stamp, util, memory = (x.strip() for x in line.split(","))
                when = datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((when, float(util), float(memory)))
            except ValueError:
                continue  # a "[N/A]" or a partial line

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            self._reader.join(timeout=10)

    def summary(self, windows: list[tuple[float, float]] | None = None) -> dict:
        """Utilization over the samples inside ``windows`` (all samples without)."""
        if self.reason is not None:
            return {"note": self.reason}
        util = [u for t, u, _ in self.samples if windows is None or any(a <= t <= b for a, b in windows)]
        if not util:
            return {"samples": 0}
        return {"samples": len(util), "mean_pct": round(statistics.fmean(util), 1),
                "p10_pct": round(_quantile(util, 0.1), 1), "median_pct": round(statistics.median(util), 1),
                f"busy_fraction_ge_{BUSY}": round(sum(u >= BUSY for u in util) / len(util), 3),
                "max_memory_mib": max(m for _, _, m in self.samples)}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def command_args(words: list[str]) -> argparse.Namespace:
    """``l3p train`` WORDS parsed by the command's own parser (its config is built as the command builds it)."""
    parser = argparse.ArgumentParser(prog="l3p train")
    add_train_arguments(parser)
    return parser.parse_args(words)


def _sets(pairs: list[str]) -> list[str]:
    return [w for pair in pairs for w in ("--set", pair)]


def _write(path: Path, result: dict) -> None:
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}", flush=True)


# ----------------------------------------------------------------------------------------- table

def run_table(args: argparse.Namespace) -> dict:
    """Update times on a replay filled by the env's warm-up episodes, clusters initialized."""
    base = command_args(["--env", args.env, *_sets(args.set)])
    # The replay is filled on the CPU, inline; the learners timed are built from its weights.
    cfg = train_config(base).replace(device="cpu", collector="inline", collectors=1, total_env_steps=10**12,
                                     eval_every_cycles=10**9, checkpoint_every_cycles=10**9)
    cfg = cfg.replace(planning_start_episodes=cfg.warmup_episodes)
    modes = {"eager": True, "captured": args.device.startswith("cuda")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        per_cycle = cfg.n_envs * trainer.spec.max_steps
        trainer.train(show_progress=False, until_env_steps=(-(-cfg.warmup_episodes // cfg.n_envs) + 1) * per_cycle)
        if not trainer.agent.clusters_ready:
            raise RuntimeError("the clusters did not start after the warm-up cycles")
        for batch in args.batches:
            for mode, possible in modes.items():
                row = {"batch": batch, "mode": mode}
                if not possible:
                    rows.append({**row, "note": f"needs CUDA (device {args.device})"})
                    continue
                status: dict = {}
                for clusters in (True, False):
                    key = "ms_with_cluster_work" if clusters else "ms_without_cluster_work"
                    row[key] = round(update_ms(trainer, args.device, batch, args.steps, cuda_graph=mode == "captured",
                                               clusters=clusters, status=status if clusters else None), 3)
                rows.append({**row, "parts": status})
                print(f"batch {batch:>5} {mode:<9} {row['ms_with_cluster_work']:>8.3f} ms/update with cluster work, "
                      f"{row['ms_without_cluster_work']:>8.3f} without ({status})", flush=True)
    return {"env": args.env, "device": args.device, "steps_timed": args.steps, "cluster_every": cfg.cluster_every,
            "cluster_refresh_every": cfg.cluster_refresh_every, "hidden": cfg.hidden, "layers": cfg.layers,
            "rows": rows}


# --------------------------------------------------------------------------------------- offline

def cycle_marks(trainer: Trainer) -> tuple[list[dict], Callable]:
    """(marks, on_cycle): one mark per cycle, after its updates: time, optimizer steps, clusters on."""
    marks: list[dict] = []

    def mark(progress) -> None:
        marks.append({"t": time.time(), "cycle": progress.cycle, "optimizer_steps": trainer.agent.optimizer_steps,
                      "env_steps": progress.env_steps, "clusters": trainer.agent.clusters_ready})

    return marks, mark


def learner_windows(marks: list[dict], start: float, cfg: TrainConfig,
                    clusters: bool | None = None) -> list[tuple[float, float]]:
    """The spans of the cycles with nothing but updates in them: no evaluation or checkpoint at the
    end of the cycle before (those run between one cycle's mark and the next cycle's start)."""
    windows, previous = [], {"t": start, "cycle": 0}
    for m in marks:
        busy = previous["cycle"] and (previous["cycle"] % cfg.eval_every_cycles == 0
                                      or previous["cycle"] % cfg.checkpoint_every_cycles == 0)
        if not busy and (clusters is None or m["clusters"] == clusters):
            windows.append((previous["t"], m["t"]))
        previous = m
    return windows


def run_offline(args: argparse.Namespace) -> dict:
    words = ["--dataset", str(args.dataset), "--steps", str(args.steps), "--seed", str(args.seed), "--no-progress",
             "--out", str(args.run_dir), *_sets([f'device="{args.device}"', *args.set])]
    cfg = train_config(command_args(words))
    trainer = OfflineTrainer(cfg, args.run_dir, "l3p train " + " ".join(words))
    marks, mark = cycle_marks(trainer)
    with GpuSampler() as gpu:
        start = time.time()
        trainer.train(show_progress=False, on_cycle=mark)
        wall = time.time() - start
    # The clusters start at the beginning of the first cycle whose mark finds them.
    clusters_at = next((before["optimizer_steps"] for before, m in zip([{"optimizer_steps": 0}, *marks], marks)
                        if m["clusters"]), None)
    phases = {"before_clusters": False, "after_clusters": True}
    spans = {name: learner_windows(marks, start, cfg, flag) for name, flag in phases.items()}
    per_update_ms = {name: round(1e3 * sum(b - a for a, b in w) / max(1, len(w) * cfg.updates_per_cycle), 3)
                     for name, w in spans.items()}
    last = trainer.progress.history[-1] if trainer.progress.history else {}
    result = {
        "command": trainer.command, "dataset": trainer.dataset_record(),
        "optimizer_steps": trainer.agent.optimizer_steps, "wall_s": round(wall, 1), "optimizer_steps_per_s": round(trainer.agent.optimizer_steps / wall, 1),
        "device": cfg.device, "batch_size": cfg.batch_size, "cuda_graph": cfg.cuda_graph,
        "clusters_from_step": clusters_at, "evaluations": len(trainer.progress.history),
        "learner_ms_per_update": per_update_ms, "capture": trainer.agent.capture_status(),
        "gpu_utilization": {"whole_run": gpu.summary([(start, start + wall)]),
                            **{f"{name}_learner_cycles": gpu.summary(w) for name, w in spans.items()}},
        "success": {k: v for k, v in last.items() if k.startswith("success_")},
    }
    print(f"offline: {result['optimizer_steps']} optimizer steps in {result['wall_s']} s "
          f"({result['optimizer_steps_per_s']}/s); learner ms/update {per_update_ms}; "
          f"GPU {result['gpu_utilization']}", flush=True)
    return result


# ------------------------------------------------------------------------------------------ push

def run_push(args: argparse.Namespace) -> dict:
    words = ["--env", args.env, "--preset-option", "gpu", "--no-progress", "--out", str(args.run_dir),
             *_sets([f"collectors={args.collectors}", *args.set])]
    cfg = train_config(command_args(words))
    trainer = Trainer(cfg, args.run_dir, "l3p train " + " ".join(words))
    stop = threading.Event()
    shown = {"rows": 0, "at": time.time()}

    def show(progress) -> None:
        """Each evaluation as it comes; between them, a line every HEARTBEAT_S."""
        for row in progress.history[shown["rows"]:]:
            print(f"push: {row['env_steps']} env steps, {row['optimizer_steps']} optimizer steps, "
                  f"{row['wall_time_s']:.0f} s: policy {row['success_policy']:.2f}, "
                  f"l3p {row.get('success_l3p', float('nan')):.2f}", flush=True)
            shown["at"] = time.time()
        shown["rows"] = len(progress.history)
        if time.time() - shown["at"] > HEARTBEAT_S:
            print(f"push: {progress.env_steps} env steps, {trainer.agent.optimizer_steps} optimizer steps, "
                  f"{time.time() - start:.0f} s", flush=True)
            shown["at"] = time.time()

    timer = threading.Timer(args.minutes * 60, stop.set)
    with GpuSampler() as gpu:
        start = time.time()
        timer.start()
        trainer.train(show_progress=False, stop=stop, on_cycle=show)
        timer.cancel()
        wall = time.time() - start
    show(trainer.progress)
    final = evaluate(trainer.agent, trainer.eval_env, cfg.eval_episodes, "policy")
    rows = [{k: row.get(k) for k in ("env_steps", "optimizer_steps", "wall_time_s", "success_policy", "success_l3p")}
            for row in trainer.progress.history]
    p = trainer.progress
    result = {
        "command": trainer.command, "minutes_asked": args.minutes, "wall_s": round(wall, 1),
        "env_steps": p.env_steps, "optimizer_steps": trainer.agent.optimizer_steps,
        "env_steps_per_s": round(p.env_steps / wall, 1),
        "optimizer_steps_per_s": round(trainer.agent.optimizer_steps / wall, 1),
        "device": cfg.device, "batch_size": cfg.batch_size, "n_envs": cfg.n_envs, "collectors": cfg.collectors,
        "updates_per_cycle": cfg.updates_per_cycle, "updates_per_env_step": cfg.updates_per_env_step,
        "capture": trainer.agent.capture_status(), "evaluations": rows, "first_reach": first_reach(rows, THRESHOLDS),
        "final_success_policy": final, "final_eval_episodes": cfg.eval_episodes,
        "gpu_utilization": gpu.summary([(start, start + wall)]),
    }
    print(f"push: {p.env_steps} env steps, {trainer.agent.optimizer_steps} optimizer steps in {wall:.0f} s; "
          f"policy success at the end {final:.2f} ({cfg.eval_episodes} episodes)", flush=True)
    return result


# --------------------------------------------------------------------------------------- summary

def machine() -> dict:
    gpu = None
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False)
        gpu = out.stdout.strip() or out.stderr.strip()
    return {"gpu": gpu, "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "l3p": code_state()["code_version"]}


def run_summary(args: argparse.Namespace) -> dict:
    result = {"machine": machine()}
    for part in PARTS:
        path = args.dir / f"{part}.json"
        result[part] = json.loads(path.read_text()) if path.is_file() else {"note": "not run (or cut short)"}
    table = result["table"]
    if "rows" in table:
        print(f"\nUpdate time, {table['env']} on {table['device']} (ms per optimizer step; cluster work: a GLS refresh "
              f"every {table['cluster_refresh_every']}, an ELBO step every {table['cluster_every']})")
        print(f"{'batch':>6} {'mode':<9} {'with cluster work':>18} {'without':>9}  parts")
        for r in table["rows"]:
            if "note" in r:
                print(f"{r['batch']:>6} {r['mode']:<9} {r['note']}")
            else:
                print(f"{r['batch']:>6} {r['mode']:<9} {r['ms_with_cluster_work']:>18.3f} "
                      f"{r['ms_without_cluster_work']:>9.3f}  {r['parts']}")
    for part in ("offline", "push"):
        if "wall_s" in result[part]:
            r = result[part]
            print(f"\n{part}: {r['optimizer_steps']} optimizer steps in {r['wall_s']} s; GPU utilization "
                  f"{json.dumps(r['gpu_utilization'])}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    table = sub.add_parser("table", help="the update-time table")
    table.add_argument("--env", default="FetchPush-v4")
    table.add_argument("--device", default="cuda")
    table.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    table.add_argument("--steps", type=int, default=200, help="timed optimizer steps per cell")
    offline = sub.add_parser("offline", help="an offline run, timed, GPU utilization sampled")
    offline.add_argument("--dataset", type=Path, required=True)
    offline.add_argument("--steps", type=int, default=50_000, help="optimizer steps")
    offline.add_argument("--seed", type=int, default=3)
    offline.add_argument("--device", default="cuda")
    offline.add_argument("--run-dir", type=Path, default=Path("runs/gpu-check-offline"))
    push = sub.add_parser("push", help="FetchPush-v4 from scratch for a few minutes")
    push.add_argument("--env", default="FetchPush-v4")
    push.add_argument("--minutes", type=float, default=5.0)
    push.add_argument("--collectors", type=int, default=12, help="rollout worker processes")
    push.add_argument("--run-dir", type=Path, default=Path("runs/gpu-check-push"))
    for p in (table, offline, push):
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="a training config override, as l3p train --set (repeatable)")
        p.add_argument("--out", type=Path, required=True, help="the part's JSON")
    summary = sub.add_parser("summary", help="the parts' JSON in one file, the tables printed")
    summary.add_argument("--dir", type=Path, required=True, help="where the parts wrote their JSON")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # the parts' own torch work on the host; each trainer sets its torch_threads
    if args.part == "summary":
        _write(args.dir / "gpu_check.json", run_summary(args))
        return 0
    result = {"table": run_table, "offline": run_offline, "push": run_push}[args.part](args)
    _write(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
