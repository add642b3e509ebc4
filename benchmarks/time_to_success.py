"""Time to success: train a preset from scratch; env steps and wall time to first reach each rate.

One invocation measures, on this machine:
1. throughput, interleaved: rounds of a few cycles of the previous trainer's settings (one process,
   one learner thread), of the collector process alone, and of the new trainer (collector process
   and overlapped updates: two learner threads), alternating so machine noise hits all three: env
   steps/s, optimizer steps/s, CPU utilisation of each process;
   With --device / --collectors / --collector (a GPU learner, N rollout workers) a fourth setting,
   "scaled", joins the rounds;
2. a training run of the preset from scratch (the new trainer, or the scaled one), evaluated every
   --eval-every cycles on the same fixed episodes (policy alone and with the planner): env steps
   and wall time to first reach 0.5 / 0.8 / 0.9 / 0.95;
3. with --baseline-minutes, then the two-core trainer (collector process, overlapped updates) from
   scratch on the same config, so the scaled run's times stand beside it from the same invocation;
4. beside them, the previous trainer's curve (benchmarks/reference/, by env steps).

    python benchmarks/time_to_success.py --env FetchPush-v4 --minutes 45 --out tts_push.json
    python benchmarks/time_to_success.py --env FetchPush-v4 --device cuda --collectors 12 --minutes 10 \
        --baseline-minutes 45 --out tts_push_gpu.json
    python benchmarks/time_to_success.py --from-run runs/push   # the table for a run trained elsewhere
    python benchmarks/time_to_success.py --quick                # FetchReach, tiny (the test suite's)
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from l3p.core.overrides import parse_overrides
from l3p.training.config import TrainConfig
from l3p.training.presets import preset
from l3p.training.trainer import Trainer
from curves import MODES, THRESHOLDS, as_rate, first_reach, read_curve
from train_throughput import STARTUP_CYCLES

# The previous trainer's curves: the progress.csv of the bundle it shipped (FetchPush-v4: 960 k env
# steps, 132 min, one process and one learner thread, planning on half the episodes after 2 000).
REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
# Throughput settings, previous trainer first: (label, TrainConfig overrides).
SETTINGS = {
    "previous": ("one process, one learner thread", dict(collector="inline", overlap_updates=False)),
    "process": ("collector process, one learner thread", dict(collector="process", overlap_updates=False)),
    "new": ("collector process, overlapped updates", dict(collector="process", overlap_updates=True)),
}

# --quick: FetchReach with small networks and short schedules, a few minutes of CPU at most.
QUICK = dict(total_env_steps=2_000, hidden=64, layers=2, ae_hidden=32, n_landmarks=10, gls_sample=200,
             cluster_batch=40, extra_landmarks=5, planning_start_episodes=10, buffer_episodes=200, search="hard")


def scaled_setting(device: str, collector: str, collectors: int) -> dict | None:
    """The setting under test, or None when it is the two-core trainer's ("new")."""
    overrides = {"collector": collector, "collectors": collectors, "overlap_updates": True, "device": device}
    if overrides == {**SETTINGS["new"][1], "collectors": 1, "device": "cpu"}:
        return None
    label = f"{collectors} {collector} worker(s), learner on {device}"
    return {"scaled": (label, overrides)}


def throughput(cfg: TrainConfig, rounds: int, cycles: int, tmp: Path, settings: dict = SETTINGS) -> dict:
    """Env and optimizer steps/s and CPU utilisation of each setting, measured in alternation.

    Each segment runs STARTUP_CYCLES + cycles cycles and times the last ``cycles``: the first ones
    absorb the workers' start-up. Planning starts right after the warm-up, so planned episodes
    are part of the measured collection."""
    base = cfg.replace(total_env_steps=10**12, eval_every_cycles=10**9, checkpoint_every_cycles=10**9,
                       planning_start_episodes=cfg.warmup_episodes, eval_episodes=1)
    trainers = {name: Trainer(base.replace(**overrides), tmp / name) for name, (_, overrides) in settings.items()}
    steps_per_cycle = cfg.n_envs * trainers["previous"].spec.max_steps
    warm = -(-cfg.warmup_episodes // cfg.n_envs) + 1  # warm-up cycles, then one that starts planning
    for trainer in trainers.values():
        trainer.train(show_progress=False, until_env_steps=warm * steps_per_cycle)
    totals = {c: dict(wall=0.0, learner_cpu=0.0, collector_cpu=0.0, env_steps=0, optimizer_steps=0)
              for c in settings}
    for _ in range(rounds):
        for c, trainer in trainers.items():
            marks = []

            def mark(p, trainer=trainer, marks=marks):
                marks.append((time.perf_counter(), time.process_time(), p.collector_cpu_s, p.env_steps,
                              trainer.agent.optimizer_steps))

            trainer.train(show_progress=False, on_cycle=mark,
                          until_env_steps=trainer.progress.env_steps + (STARTUP_CYCLES + cycles) * steps_per_cycle)
            (w0, l0, c0, e0, o0), (w1, l1, c1, e1, o1) = marks[STARTUP_CYCLES - 1], marks[-1]
            t = totals[c]
            t["wall"] += w1 - w0
            t["learner_cpu"] += l1 - l0
            t["collector_cpu"] += c1 - c0
            t["env_steps"] += e1 - e0
            t["optimizer_steps"] += o1 - o0
    out = {}
    for c, t in totals.items():
        # Inline, collection is part of the learner process's CPU time; otherwise it is the workers'.
        separate = settings[c][1]["collector"] != "inline"
        total_cpu_s = t["learner_cpu"] + (t["collector_cpu"] if separate else 0)
        out[c] = {"env_steps_per_s": round(t["env_steps"] / t["wall"], 1),
                  "optimizer_steps_per_s": round(t["optimizer_steps"] / t["wall"], 2),
                  "learner_process_cpu": round(t["learner_cpu"] / t["wall"], 3),
                  "collector_process_cpu": round(t["collector_cpu"] / t["wall"], 3) if separate else None,
                  "total_cpu": round(total_cpu_s / t["wall"], 3),
                  "collection_cpu": round(t["collector_cpu"] / t["wall"], 3),
                  "measured_cycles": t["env_steps"] // steps_per_cycle,
                  # The same CPU work per env step with every core busy all the time: the bound no
                  # overlap can pass, only less work per env step (or more cores).
                  "all_cores_ceiling_env_steps_per_s": round(t["env_steps"] / total_cpu_s * os.cpu_count(), 1)}
    previous = out["previous"]["env_steps_per_s"]
    for c in settings:
        out[c]["env_steps_over_previous"] = round(out[c]["env_steps_per_s"] / previous, 2)
        out[c]["ceiling_over_previous"] = round(out[c]["all_cores_ceiling_env_steps_per_s"] / previous, 2)
    return out


def time_to_success(cfg: TrainConfig, run_dir: Path, minutes: float | None, show_progress: bool,
                    command: str) -> dict:
    """Train ``cfg`` (its own collector, workers and device) from scratch until every threshold is
    reached, or the time or step budget is spent."""
    trainer = Trainer(cfg, run_dir, command=command)
    stop = threading.Event()
    start, cpu0 = time.perf_counter(), time.process_time()
    stopped_by = ["step budget"]

    def watch(p):  # the last evaluation reached every threshold in both modes, or time is up
        if p.history and all(as_rate(p.history[-1].get(f"success_{m}")) >= max(THRESHOLDS) for m in MODES):
            stopped_by[0] = "all thresholds reached"
        elif minutes is not None and time.perf_counter() - start > minutes * 60:
            stopped_by[0] = "time budget"
        else:
            return
        stop.set()

    trainer.train(show_progress=show_progress, stop=stop, on_cycle=watch)
    wall = time.perf_counter() - start
    p = trainer.progress
    return {"rows": p.history, "env_steps": p.env_steps, "wall_s": round(wall, 1), "stopped_by": stopped_by[0],
            "learner_process_cpu": round((time.process_time() - cpu0) / wall, 3),
            "collector_process_cpu": round(p.collector_cpu_s / wall, 3)}


def print_tables(result: dict) -> None:
    tp = result.get("throughput")
    if tp:
        print(f"\nThroughput, {result['env']} (same invocation, {tp['rounds']} rounds x {tp['cycles']} cycles "
              f"per setting, alternating)")
        print(f"{'setting':<40}{'env steps/s':>12}{'x previous':>11}{'opt steps/s':>12}{'learner CPU':>12}"
              f"{'collector CPU':>14}{'total CPU':>10}{'all-cores ceiling':>19}")
        for c, (label, _) in result["settings"].items():
            r = tp[c]
            col = "in learner" if r["collector_process_cpu"] is None else f"{r['collector_process_cpu']:.0%}"
            ceiling = f"{r['all_cores_ceiling_env_steps_per_s']} ({r['ceiling_over_previous']}x)"
            print(f"{label:<40}{r['env_steps_per_s']:>12}{r['env_steps_over_previous']:>11}"
                  f"{r['optimizer_steps_per_s']:>12}{r['learner_process_cpu']:>12.0%}{col:>14}{r['total_cpu']:>10.0%}"
                  f"{ceiling:>19}")
        print(f"all-cores ceiling: the env steps/s of the same CPU work per env step with all {tp['cpus']} "
              "cores busy all the time")
    print(f"\nTime to success, {result['env']} (eval: {result['eval_episodes']} fixed episodes per point)")
    ref = result.get("reference")
    base = result.get("two_core")
    header = f"{'rate':<6}{'mode':<8}{result['run_label'] + ': env steps':>16}{'wall min':>10}"
    if base:
        header += f"{'two-core: env steps':>21}{'wall min':>10}"
    if ref:
        header += f"{'previous: env steps':>21}{'wall min':>10}"
    print(header)
    new = result["new"]["first_reach"]
    for mode in MODES:
        for thr in THRESHOLDS:
            line = f"{thr:<6}{mode:<8}" + _cells(new[mode][str(thr)], 16)
            if base:
                line += _cells(base["first_reach"][mode][str(thr)], 21)
            if ref:
                line += _cells(ref["first_reach"][mode][str(thr)], 21)
            print(line)
    if ref:
        print(f"previous: {ref['source']} ({ref['note']})")
    if base:
        print(f"two-core: {base['env_steps']} env steps in {base['wall_s'] / 60:.1f} min, stopped by {base['stopped_by']}")
    n = result["new"]
    print(f"{result['run_label']} run: {n['env_steps']} env steps in {n['wall_s'] / 60:.1f} min, stopped by {n['stopped_by']}"
          + (f"; CPU: learner {n['learner_process_cpu']:.0%}, collector {n['collector_process_cpu']:.0%}"
             if n.get("learner_process_cpu") is not None else ""))


def _cells(hit: dict | None, width: int) -> str:
    if hit is None:
        return f"{'not reached':>{width}}{'':>10}"
    return f"{hit['env_steps']:>{width}}{hit['wall_s'] / 60:>10.1f}"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="FetchPush-v4")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a preset field")
    ap.add_argument("--minutes", type=float, help="wall-time budget of the training run")
    ap.add_argument("--steps", type=int, help="env-step budget of the training run (default: the preset's)")
    ap.add_argument("--eval-every", type=int, default=25, help="cycles between evaluations")
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="throughput: alternating rounds")
    ap.add_argument("--cycles", type=int, default=3, help="throughput: timed cycles per setting and round")
    ap.add_argument("--reference-csv", type=Path, help="the previous trainer's progress.csv (default: "
                    "benchmarks/reference/ENV_previous_trainer_progress.csv when it exists)")
    ap.add_argument("--run-dir", type=Path, help="keep the training run here (resumable with l3p train --resume)")
    ap.add_argument("--from-run", type=Path, help="no training: the table for this finished run's progress.csv "
                    "(its env and settings from its config.json)")
    ap.add_argument("--device", default="cpu", help="the learner's device (cpu, cuda, auto)")
    ap.add_argument("--collector", choices=("process", "ray"), default="process", help="where the workers run")
    ap.add_argument("--collectors", type=int, default=1, help="rollout workers")
    ap.add_argument("--baseline-minutes", type=float, help="after the run, train the two-core trainer from "
                    "scratch for at most this long, for its times beside the run's")
    ap.add_argument("--quick", action="store_true", help="FetchReach with tiny networks and budgets (tests)")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)

    if args.quick:
        args.env, args.eval_every, args.eval_episodes, args.rounds, args.cycles = "FetchReach-v4", 5, 10, 1, 2
    if args.from_run:  # the run's own settings (env, episodes per evaluation), not this command's
        cfg = TrainConfig.from_dict(json.loads((args.from_run / "config.json").read_text()))
    else:
        cfg = preset(args.env).replace(**(QUICK if args.quick else {}))
        cfg = TrainConfig.from_dict({**cfg.to_dict(), **parse_overrides(args.set, "--set"),
                                     "eval_every_cycles": args.eval_every, "eval_episodes": args.eval_episodes,
                                     **({"total_env_steps": args.steps} if args.steps else {})})
    torch.set_num_threads(cfg.torch_threads)
    scaled = None if args.from_run else scaled_setting(args.device, args.collector, args.collectors)
    settings = {**SETTINGS, **(scaled or {})}
    result = {"env": cfg.env_id, "settings": settings, "run_label": "scaled" if scaled else "new",
              "eval_episodes": cfg.eval_episodes, "thresholds": list(THRESHOLDS),
              "machine": {"cpus": os.cpu_count(), "load_avg_1min_at_start": round(os.getloadavg()[0], 2)},
              "config": cfg.to_dict()}

    with tempfile.TemporaryDirectory() as tmp:
        if args.from_run:
            rows = read_curve(args.from_run / "progress.csv")
            result["new"] = {"source": str(args.from_run), "env_steps": rows[-1]["env_steps"] if rows else 0,
                             "wall_s": rows[-1]["wall_time_s"] if rows else 0.0, "stopped_by": "its own budget"}
        else:
            result["throughput"] = {"rounds": args.rounds, "cycles": args.cycles, "cpus": os.cpu_count(),
                                    **throughput(cfg, args.rounds, args.cycles, Path(tmp) / "throughput", settings)}
            run_dir = args.run_dir or Path(tmp) / "run"
            # Provenance names this benchmark (resumable with l3p train --resume RUN_DIR).
            command = shlex.join(["python", "benchmarks/time_to_success.py", *(sys.argv[1:] if argv is None else argv)])
            run_cfg = cfg.replace(**settings[result["run_label"]][1])
            result["new"] = time_to_success(run_cfg, run_dir, args.minutes, show_progress=not args.quick,
                                            command=command)
            rows = result["new"].pop("rows")
            if args.baseline_minutes:
                two_core = time_to_success(cfg.replace(**SETTINGS["new"][1]), Path(tmp) / "two_core",
                                          args.baseline_minutes, show_progress=not args.quick, command=command)
                two_core["first_reach"] = first_reach(two_core.pop("rows"))
                result["two_core"] = two_core
        result["new"]["first_reach"] = first_reach(rows)
        result["curve"] = [{k: r.get(k) for k in ("env_steps", "wall_time_s", "success_policy", "success_l3p")}
                           for r in rows]

    ref_csv = args.reference_csv or REFERENCE_DIR / f"{cfg.env_id}_previous_trainer_progress.csv"
    if ref_csv.is_file():
        ref_rows = read_curve(ref_csv)
        result["reference"] = {"source": str(ref_csv), "first_reach": first_reach(ref_rows),
                               "note": "the previous trainer's in-training evaluation, its own episode count"}
    result["machine"]["load_avg_1min_at_end"] = round(os.getloadavg()[0], 2)
    print_tables(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
