"""What a training run says while it runs, on a terminal or not: every ``log_every_updates``
optimizer steps one text line on stderr, the same numbers as a row of ``RUN_DIR/losses.jsonl``, and
the mean losses as TensorBoard scalars (``train/loss_critic``, ...); and, for an offline run, what
the rest will cost, timed over its first few hundred updates. Reporting only: nothing here touches
the learner, its random state or its checkpoints.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

LOSSES = "losses.jsonl"
# The estimate times updates ESTIMATE_FROM..ESTIMATE_AT of a train() call: the first ones pay
# one-off costs (allocations, the first clusters), which the rest of the run does not.
ESTIMATE_FROM, ESTIMATE_AT = 50, 300


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
                f"machine = {duration(left * per_update)}, plus {self._evaluations} evaluation"
                f"{'s' if self._evaluations != 1 else ''} (episodes in the env; progress.csv's wall_time_s "
                f"shows what they take)")


def duration(seconds: float) -> str:
    """``1 h 05 min``, ``12 min``, ``40 s``."""
    minutes = round(seconds / 60)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
