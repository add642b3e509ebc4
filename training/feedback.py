"""What a training run says while it runs, on a terminal or not: every ``log_every_updates``
optimizer steps one text line on stderr, the same numbers as a row of ``RUN_DIR/losses.jsonl``, and
the mean losses as TensorBoard scalars (``train/loss_critic``, ...); and what the rest will cost:
an offline run timed over its first few hundred updates, an online run over its first few cycles
that learn (collection and updates together). Reporting only: nothing here touches the learner, its
random state or its checkpoints.
"""
from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

LOSSES = "losses.jsonl"
PROGRESS = "progress.csv"  # one row per in-training evaluation
# The estimate times updates ESTIMATE_FROM..ESTIMATE_AT of a train() call: the first ones pay
# one-off costs (allocations, the first clusters), which the rest of the run does not.
ESTIMATE_FROM, ESTIMATE_AT = 50, 300
# Online: the first cycle that learns is skipped for the same reason, the next ESTIMATE_CYCLES timed.
ESTIMATE_CYCLES = 3


def say(line: str) -> None:
    """A line on stderr that leaves a progress bar, if one is drawn, below it."""
    tqdm.write(line, file=sys.stderr)


class IntervalLog:
    """Every ``every`` optimizer steps (checked after each cycle): the mean of each metric since the
    last line. ``every`` 0: never."""

    def __init__(self, run_dir: Path, every: int, label: str, optimizer_steps: int):
        self._path = Path(run_dir) / LOSSES
        self._every, self._label = every, label
        self._last_steps, self._last_time = optimizer_steps, time.perf_counter()
        self._seen: dict[str, int] = {}  # how much of each metric's list earlier lines averaged

    def forget(self) -> None:
        """The metric lists were emptied (at an evaluation): start counting from their start."""
        self._seen = {}

    def due(self, optimizer_steps: int) -> bool:
        return self._every > 0 and optimizer_steps // self._every > self._last_steps // self._every

    def write(self, metrics: dict[str, list[float]], where: dict[str, Any], progress: str,
              scalars: Any) -> dict[str, float]:
        """The line, the row and the scalars; ``where``: the step counters (optimizer_steps,
        env_steps); ``progress``: how far the run is, as text. Returns the means."""
        means = {}
        for key, values in metrics.items():
            fresh = values[self._seen.get(key, 0):]
            if fresh:
                means[key] = sum(fresh) / len(fresh)
            self._seen[key] = len(values)
        now, steps = time.perf_counter(), where["optimizer_steps"]
        rate = (steps - self._last_steps) / max(now - self._last_time, 1e-9)
        self._last_steps, self._last_time = steps, now
        losses = "  ".join(f"{key.removeprefix('loss_')} {value:.4g}" for key, value in means.items()
                           if key.startswith("loss_"))
        say(f"{self._label}: {progress}  {losses}  ({rate:.1f} updates/s)")
        with self._path.open("a") as f:
            f.write(json.dumps({**where, **{k: round(v, 6) for k, v in means.items()}}) + "\n")
        scalars.write({**where, **{f"train/{key}": value for key, value in means.items()}})
        return means


class CostEstimate:
    """Times updates ESTIMATE_FROM..ESTIMATE_AT of this call and says, once, what the remaining
    updates will take at that rate, and how many evaluations come on top."""

    def __init__(self, label: str, start: int, target: int, evaluations: int):
        self._label, self._start, self._target, self._evaluations = label, start, target, evaluations
        self._t0: float | None = None
        self.done = target - start < ESTIMATE_AT  # too short a run to be worth one

    def tick(self, optimizer_steps: int) -> None:
        if self.done:
            return
        if optimizer_steps == self._start + ESTIMATE_FROM:
            self._t0 = time.perf_counter()
        elif optimizer_steps == self._start + ESTIMATE_AT and self._t0 is not None:
            self.done = True
            per_update = (time.perf_counter() - self._t0) / (ESTIMATE_AT - ESTIMATE_FROM)
            left = self._target - optimizer_steps
            say(f"{self._label}: cost estimate: {left:,} more updates at {per_update * 1e3:.1f} ms each on this "
                f"machine = {duration(left * per_update)}, {_evaluations(self._evaluations)}")


class CycleEstimate:
    """Online: times this call's cycles that learn (collection and updates), the first one skipped,
    and says, once, what the remaining cycles will take at that rate. ``cycles``: the call's cycles,
    of ``cycle_steps`` env steps and ``updates`` optimizer steps each, from cycle ``first`` on;
    evaluations every ``eval_every`` cycles and after the last; ``planning_from``: the episode count
    at which planning starts, if it does during this call (planned cycles cost more)."""

    def __init__(self, label: str, first: int, cycles: int, cycle_steps: int, updates: int, eval_every: int,
                 planning_from: int | None):
        self._label, self._first, self._cycles, self._cycle_steps = label, first, cycles, cycle_steps
        self._updates, self._eval_every, self._planning_from = updates, eval_every, planning_from
        self._seen, self._learning, self._timed = 0, 0, []
        self.done = False

    def cycle(self, seconds: float, learned: bool, planning: bool) -> None:
        """After each cycle: its wall time, whether it learned (not warm-up) and whether it planned."""
        self._seen += 1
        if self.done or not learned:
            return
        self._learning += 1
        if self._learning > 1:
            self._timed.append(seconds)
        left = self._cycles - self._seen
        if len(self._timed) < ESTIMATE_CYCLES or left <= 0:
            self.done = left <= 0
            return
        self.done = True
        per_cycle = sum(self._timed) / len(self._timed)
        evals = evaluations(self._first + self._seen, self._first + self._cycles, self._eval_every)
        later = ""
        if self._planning_from is not None and not planning:
            later = (f"; measured before planning starts (episode {self._planning_from:,}): planned episodes and "
                     "landmark updates make later cycles slower")
        say(f"{self._label}: cost estimate: {left * self._cycle_steps:,} more env steps = {left:,} cycles "
            f"({self._cycle_steps:,} env steps + {self._updates:,} updates each) at {per_cycle:.2f} s each on this "
            f"machine = {duration(left * per_cycle)}, {_evaluations(evals)}{later}")


def evaluations(cycle: int, last: int, every: int) -> int:
    """How many evaluations cycles cycle+1..last end with: every ``every`` cycles, and the last."""
    return last // every - cycle // every + bool(last % every)


def _evaluations(count: int) -> str:
    return (f"plus {count} evaluation{'s' if count != 1 else ''} (progress.csv's wall_time_s shows what "
            "they take)")


def duration(seconds: float) -> str:
    """``1 h 05 min``, ``12 min``, ``40 s``."""
    minutes = round(seconds / 60)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def plot_run_curve(history: list[dict], cfg: Any, path: Path) -> None:
    """learning_curve.png: a run's evaluations (``history``, progress.csv's rows) under its
    TrainConfig ``cfg``: env steps online, optimizer steps offline; the planner at training settings."""
    from l3p.sim.draw import plot_learning_curve

    planner = cfg.planner
    # Without an env (training/held_out.py) the held-out measures that lie in [0, 1].
    held_out = (("held_out_distance_rank", "rank correlation of D with the recorded steps"),
                ("held_out_action_error", "actor's error on recorded actions (of the bound)"),
                ("graph_joined", "landmarks the data joins")) if cfg.offline_eval == "held_out" else None
    plot_learning_curve(history, path, cfg.env_id,
                        f"L3P planner, training settings (d_max {planner.d_max:g}, "
                        f"local horizon {planner.local_horizon:g})",
                        x="env_steps" if cfg.dataset is None else "optimizer_steps", series=held_out,
                        ylabel="held-out measure" if held_out else "eval success rate")


def read_progress(path: Path) -> list[dict]:
    """progress.csv's rows as the trainer kept them: numbers, and no key for a cell left empty."""
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
