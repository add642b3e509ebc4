"""A training run's learning curve, as its progress.csv records it: the in-training evaluations
(policy alone and with the planner, on the same fixed episodes every time), shared by the
benchmarks that read runs."""
from __future__ import annotations

import csv
import math
from pathlib import Path

MODES = ("policy", "l3p")
THRESHOLDS = (0.5, 0.8, 0.9, 0.95)


def first_reach(rows: list[dict], thresholds: tuple[float, ...] = THRESHOLDS) -> dict:
    """{mode: {threshold: {env_steps, wall_s} or None}}: the first evaluation at or above it."""
    out = {}
    for mode in MODES:
        out[mode] = {}
        for thr in thresholds:
            hit = next((r for r in rows if as_rate(r.get(f"success_{mode}")) >= thr), None)
            out[mode][str(thr)] = None if hit is None else {"env_steps": int(hit["env_steps"]),
                                                            "wall_s": float(hit["wall_time_s"])}
    return out


def as_rate(x) -> float:
    """A success cell as a number; unmeasured cells (missing, empty, nan) never reach a threshold."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return -math.inf
    return -math.inf if math.isnan(v) else v


def read_curve(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{"env_steps": int(r["env_steps"]), "wall_time_s": float(r["wall_time_s"]),
                 **{f"success_{m}": float(r[f"success_{m}"]) if as_rate(r.get(f"success_{m}")) > -math.inf else None
                    for m in MODES}} for r in csv.DictReader(f)]
