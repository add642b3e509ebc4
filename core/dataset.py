"""The dataset format (docs/dataset.md): recorded episodes that offline training reads.

One ``.npz`` file in OGBench's layout, per step, episodes back to back:

- ``observations`` [N, obs_dim], ``actions`` [N, action_dim] (float32);
- ``terminals`` [N]: 1 at the last step of each episode, else 0. An episode of L steps holds L
  observations and L actions; its L - 1 transitions are (o_t, a_t, o_t+1), and the last action has
  no next observation (as OGBench's files);
- ``achieved_goals`` [N, goal_dim]: what the goal env reports as achieved at each observation;
- optional ``desired_goals`` [N, goal_dim]: the goal being pursued when the step was recorded;
- optional per-step extras (any other 1-d or 2-d array of N rows: ``success``, a planner's state);
- ``metadata``: a JSON object (a 0-d string array) with ``format`` / ``format_version``, ``env_id``,
  ``made_by`` (a generator and its protocol and seed, or the robot and bridge that recorded it),
  and ``sha256``: the digest of the arrays above (`arrays_digest`), checked on load.

numpy and the standard library only: the ROS 2 bridge's recorder (no torch) and the trainer share it.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.errors import L3PError

FORMAT = "l3p-dataset"
FORMAT_VERSION = 1
REQUIRED = ("observations", "actions", "terminals", "achieved_goals")
OPTIONAL_GOALS = "desired_goals"
METADATA = "metadata"


class DatasetError(L3PError):
    """A dataset file that cannot be trained on; the message names the file and the problem."""


@dataclass
class Dataset:
    """A loaded dataset: the arrays, episode boundaries, and what the file says about itself."""

    observations: np.ndarray
    actions: np.ndarray
    terminals: np.ndarray
    achieved_goals: np.ndarray
    metadata: dict[str, Any]
    desired_goals: np.ndarray | None = None
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def env_id(self) -> str:
        return self.metadata["env_id"]

    def episode_bounds(self) -> list[tuple[int, int]]:
        """(first, last) step index of each episode, in file order."""
        ends = np.flatnonzero(self.terminals > 0.5)
        starts = np.concatenate([[0], ends[:-1] + 1])
        return list(zip(starts.tolist(), ends.tolist()))

    def episode_lengths(self) -> np.ndarray:
        return np.array([last - first + 1 for first, last in self.episode_bounds()], np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"observations": self.observations, "actions": self.actions, "terminals": self.terminals,
               "achieved_goals": self.achieved_goals}
        if self.desired_goals is not None:
            out[OPTIONAL_GOALS] = self.desired_goals
        return {**out, **self.extras}


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the arrays in name order: name, dtype, shape and bytes of each."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_dataset(path: str | os.PathLike[str], *, observations: np.ndarray, actions: np.ndarray,
                 terminals: np.ndarray, achieved_goals: np.ndarray, env_id: str, made_by: dict[str, Any],
                 desired_goals: np.ndarray | None = None, compress: bool = True, **extras: np.ndarray) -> str:
    """Write a checked dataset (atomically: a temporary file, then a rename); returns its digest.
    ``compress=False``: faster to write, for a file a recorder rewrites while it grows."""
    dataset = Dataset(np.asarray(observations, np.float32), np.asarray(actions, np.float32),
                      np.asarray(terminals, np.float32), np.asarray(achieved_goals, np.float32),
                      {"format": FORMAT, "format_version": FORMAT_VERSION, "env_id": env_id, "made_by": made_by},
                      None if desired_goals is None else np.asarray(desired_goals, np.float32),
                      {k: np.asarray(v) for k, v in extras.items()})
    validate(dataset, str(path))
    arrays = dataset.arrays()
    digest = arrays_digest(arrays)
    meta = {**dataset.metadata, "steps": int(len(dataset.terminals)),
            "episodes": int(len(dataset.episode_bounds())), "sha256": digest}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    (np.savez_compressed if compress else np.savez)(tmp, **arrays, **{METADATA: np.array(json.dumps(meta, sort_keys=True))})
    os.replace(tmp, path)
    return digest


def load_dataset(path: str | os.PathLike[str], *, check_digest: bool = True) -> Dataset:
    """Read and check a dataset file; any problem is one `DatasetError` line naming it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"no dataset file at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            files = {k: data[k] for k in data.files}
    except Exception as exc:  # zipfile, pickle refusal, truncated data: all "unreadable"
        raise DatasetError(f"dataset {path} is not a readable .npz file ({type(exc).__name__}: {exc})") from None
    missing = [k for k in (*REQUIRED, METADATA) if k not in files]
    if missing:
        raise DatasetError(f"dataset {path} has no {', '.join(missing)} (keys: {', '.join(sorted(files)) or 'none'})")
    try:
        meta = json.loads(str(files.pop(METADATA)))
    except (ValueError, TypeError) as exc:
        raise DatasetError(f"dataset {path}: metadata is not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("env_id"), str):
        raise DatasetError(f"dataset {path}: metadata must be a {FORMAT!r} object with an env_id")
    if meta.get("format_version") != FORMAT_VERSION:
        raise DatasetError(f"dataset {path}: format_version {meta.get('format_version')!r}, this reader knows "
                           f"{FORMAT_VERSION}")
    dataset = Dataset(
        observations=files.pop("observations"), actions=files.pop("actions"), terminals=files.pop("terminals"),
        achieved_goals=files.pop("achieved_goals"), metadata=meta, desired_goals=files.pop(OPTIONAL_GOALS, None),
        extras=files)
    validate(dataset, str(path))
    if check_digest and meta.get("sha256") != arrays_digest(dataset.arrays()):
        raise DatasetError(f"dataset {path}: its arrays do not match the sha256 in its metadata (changed or corrupt)")
    for name in ("observations", "actions", "achieved_goals", OPTIONAL_GOALS):
        array = getattr(dataset, name)
        if array is not None and array.dtype != np.float32:
            setattr(dataset, name, array.astype(np.float32))
    dataset.terminals = dataset.terminals.astype(np.float32)
    return dataset


def validate(dataset: Dataset, where: str) -> None:
    """Shapes, finiteness and episode structure; raises `DatasetError` naming the first problem."""
    n = len(dataset.terminals) if np.ndim(dataset.terminals) == 1 else -1
    if n < 2:
        raise DatasetError(f"dataset {where}: terminals must be a 1-d array of at least 2 steps, "
                           f"got shape {np.shape(dataset.terminals)}")
    for name, array in dataset.arrays().items():
        if name == "terminals":
            continue
        array = np.asarray(array)
        if array.ndim not in (1, 2) or array.shape[0] != n:
            raise DatasetError(f"dataset {where}: {name} has shape {array.shape}, expected {n} rows "
                               f"(one per step, like terminals)")
        if name in (*REQUIRED, OPTIONAL_GOALS) and array.ndim != 2:
            raise DatasetError(f"dataset {where}: {name} must be 2-d [steps, dim], got shape {array.shape}")
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            rows = np.flatnonzero(~np.isfinite(array).reshape(n, -1).all(axis=1))
            raise DatasetError(f"dataset {where}: {name} has NaN or Inf at step {int(rows[0])} "
                               f"({len(rows)} steps in all)")
    if not np.isin(dataset.terminals, (0, 1)).all():
        raise DatasetError(f"dataset {where}: terminals must be 0 or 1")
    if dataset.terminals[-1] != 1:
        raise DatasetError(f"dataset {where}: the last step must end an episode (terminals[-1] == 1)")
    if dataset.desired_goals is not None and dataset.desired_goals.shape[1] != dataset.achieved_goals.shape[1]:
        raise DatasetError(f"dataset {where}: desired_goals has {dataset.desired_goals.shape[1]} columns, "
                           f"achieved_goals {dataset.achieved_goals.shape[1]}")
    lengths = np.diff(np.concatenate([[-1], np.flatnonzero(dataset.terminals > 0.5)]))
    if lengths.min() < 2:
        raise DatasetError(f"dataset {where}: an episode of {int(lengths.min())} step has no transition "
                           f"(every episode needs >= 2 steps)")
