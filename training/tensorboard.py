"""Training curves as TensorBoard event files, beside ``progress.csv``: ``RUN_DIR/tensorboard/``
(``tensorboard --logdir runs``). Optional: written when the ``tensorboard`` package is installed
(``pip install -e '.[tensorboard]'`` in a checkout), skipped otherwise; progress.csv is always written."""
from __future__ import annotations

import importlib.util
import math
import numbers
from pathlib import Path
from typing import Any

FOLDER = "tensorboard"
STEP = "env_steps"  # the x axis, as in progress.csv and learning_curve.png (offline: optimizer steps)


def available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


class ScalarLog:
    """One scalar per numeric column of each evaluation row, at that row's ``step`` column."""

    def __init__(self, run_dir: Path, step: str = STEP):
        self._step = step
        self._writer: Any = None
        if available():
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(Path(run_dir) / FOLDER))

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def write(self, row: dict[str, Any]) -> None:
        if self._writer is None:
            return
        step = int(row[self._step])
        for key, value in row.items():
            if key == self._step or not isinstance(value, numbers.Real) or isinstance(value, bool):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(key, float(value), global_step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
