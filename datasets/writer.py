"""Recording to the dataset format as it happens: bounded memory, rotated files, crash-safe.

Steps are added one at a time; at each episode end the episode joins the current file, which is
rewritten whole (a temporary file, then a rename: `core.dataset.save_dataset`), so a recorder killed
at any moment leaves every finished episode in a readable, checked file. A file takes episodes until
it holds ``rotate_steps`` steps; then the next file starts (``NAME.npz``, ``NAME_0001.npz``, ...).
While it grows a file is written uncompressed (a rewrite costs a copy, not a compression); a full
file, and the last one at ``close``, is written once more compressed.
A file already there is never written over: a recorder restarted with the same name continues the
series. Memory holds the current file's steps and the running episode, nothing older, and an episode that
never ends is cut at ``max_episode_steps`` (a long recording with one goal stays bounded).
Numpy only: the ROS 2 recorders (no torch, no simulator) use it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.dataset import save_dataset


class EpisodeWriter:
    def __init__(self, path: str | os.PathLike[str], env_id: str, made_by: dict[str, Any], *,
                 rotate_steps: int = 20_000, max_episode_steps: int = 10_000) -> None:
        if rotate_steps < 2 or max_episode_steps < 2:
            raise ValueError("rotate_steps and max_episode_steps must be >= 2")
        self.path = Path(path)
        self.env_id = env_id
        self.made_by = made_by
        self.rotate_steps = rotate_steps
        self.max_episode_steps = max_episode_steps
        self.running: dict[str, list[Any]] = {}
        self.episodes: list[dict[str, np.ndarray]] = []  # of the current file
        # Never over a file already there: a recorder restarted after a crash continues the series.
        self.file_index = 0
        while self.file_path(self.file_index).exists():
            self.file_index += 1
        self.files: list[Path] = []  # every file written so far
        self.counts = {"episodes": 0, "steps": 0, "short_episodes_left_out": 0, "episodes_cut": 0}
        self.digest: str | None = None

    def file_path(self, index: int) -> Path:
        if index == 0:
            return self.path
        # "_" sorts after ".": NAME.npz, NAME_0001.npz, ... list in recording order
        return self.path.with_name(f"{self.path.stem}_{index:04d}{self.path.suffix or '.npz'}")

    def running_steps(self) -> int:
        return len(next(iter(self.running.values()), []))

    def add(self, **row: Any) -> None:
        """One step: observations, actions, achieved_goals (and desired_goals, extras) of this step."""
        if self.running and set(row) != set(self.running):
            raise ValueError(f"a step with {sorted(row)}, the episode's steps have {sorted(self.running)}")
        for key, value in row.items():
            self.running.setdefault(key, []).append(np.array(value))
        if self.running_steps() >= self.max_episode_steps:
            self.counts["episodes_cut"] += 1
            self.end_episode()

    def end_episode(self) -> str | None:
        """The running episode joins the current file, which is rewritten; an episode of fewer than 2
        steps has no transition and is left out. The file's digest, or None if nothing was written."""
        steps = self.running_steps()
        running, self.running = self.running, {}
        if steps < 2:
            self.counts["short_episodes_left_out"] += int(steps == 1)
            return None
        self.episodes.append({k: np.stack(v) for k, v in running.items()})
        self.counts["episodes"] += 1
        self.counts["steps"] += steps
        full = sum(len(e["actions"]) for e in self.episodes) >= self.rotate_steps
        digest = self._write(compress=full)
        if full:
            self.episodes = []
            self.file_index += 1
        return digest

    def _write(self, compress: bool) -> str:
        arrays = {k: np.concatenate([e[k] for e in self.episodes]) for k in self.episodes[0]}
        arrays["terminals"] = np.concatenate([np.eye(1, len(e["actions"]), len(e["actions"]) - 1, dtype=np.float32)[0]
                                              for e in self.episodes])
        path = self.file_path(self.file_index)
        self.digest = save_dataset(path, env_id=self.env_id,
                                   made_by={**self.made_by, "file": self.file_index, "episodes": len(self.episodes)},
                                   compress=compress, **arrays)
        if path not in self.files:
            self.files.append(path)
        return self.digest

    def close(self) -> str | None:
        """Ends the running episode (kept if it has a transition) and writes the last file compressed;
        the last digest written."""
        self.end_episode()
        if self.episodes:
            self._write(compress=True)
        return self.digest
