"""What a training run keeps on disk (run directory layout, checkpoints, snapshots) and what a bundle
records about the run it came from."""
from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from l3p.core.errors import L3PError
from l3p.core.seeds import TRAINING_EVAL
from l3p.sim.envs import evaluation_env_id
from l3p.training.held_out import HELD_OUT_KEYS

CHECKPOINT = "checkpoint.pt"
REPLAY = "replay.npz"
SNAPSHOTS = "snapshots"  # one file per evaluation: the agent it measured, not a resumable checkpoint


class CheckpointError(L3PError):
    """A checkpoint that is missing, unreadable or from another config."""


def run_provenance(command: str, config: dict, progress: dict, optimizer_steps: int) -> dict:
    """What a bundle records about the run it came from (live trainer or checkpoint alike)."""
    last = progress["history"][-1] if progress["history"] else {}
    if config.get("offline_eval") == "held_out":  # no env: the recording's held-out split (training/held_out.py)
        measured = {"held_out": {key: last[key] for key in HELD_OUT_KEYS if key in last}}
    else:  # only measured cells: a run that ended before planning started has no l3p entry
        measured = {"success": {
            **{mode: last[f"success_{mode}"] for mode in ("policy", "l3p") if f"success_{mode}" in last},
            "eval_env_id": evaluation_env_id(config["env_id"]), "eval_episodes": config["eval_episodes"],
            "eval_seed_base": TRAINING_EVAL, "eval_pairs": config.get("eval_pairs", "random"),
            **({"eval_min_cells": config.get("eval_min_cells")} if config.get("eval_pairs") == "far" else {}),
            "eval_max_steps": config.get("eval_max_steps")}}
    return {"command": command, "config": config, "env_steps": progress["env_steps"],
            "episodes": last.get("episodes"), "optimizer_steps": optimizer_steps,
            "wall_time_s": round(progress["wall_time_s"], 1), "seed": config["seed"], **measured,
            "machine": f"{platform.machine()} {os.cpu_count()} cpu, torch {torch.__version__}, "
                       f"{config['torch_threads']} thread(s)"}


def snapshot_path(run_dir: Path, env_steps: int) -> Path:
    return Path(run_dir) / SNAPSHOTS / f"{env_steps:010d}.pt"


def load_checkpoint(path: Path) -> dict:
    """A run directory's checkpoint, or a checkpoint or snapshot file named directly."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for truncated/garbage files
        raise CheckpointError(f"checkpoint {path} is unreadable (corrupt or truncated): {type(exc).__name__}") from None
    if not isinstance(state, dict) or not {"config", "agent", "progress"} <= set(state):
        raise CheckpointError(f"checkpoint {path} is not an l3p training checkpoint")
    return state
