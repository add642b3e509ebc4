"""The dataset contract (core/dataset.py): a written file reads back exactly, and every kind of bad
file is refused in one line that names the problem."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from l3p.core.dataset import DatasetError, arrays_digest, load_dataset, save_dataset

ROOT = Path(__file__).resolve().parents[1]


def episodes(n: int = 3, length: int = 5, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    steps = n * length
    obs = rng.standard_normal((steps, 2)).astype(np.float32)
    terminals = np.zeros(steps, np.float32)
    terminals[length - 1::length] = 1
    return {"observations": obs, "actions": rng.uniform(-1, 1, (steps, 2)).astype(np.float32),
            "terminals": terminals, "achieved_goals": obs.copy(), "desired_goals": np.zeros((steps, 2), np.float32)}


def write(path: Path, **arrays) -> Path:
    save_dataset(path, env_id="ogbench/pointmaze-large-v0", made_by={"generator": "test"}, **arrays)
    return path


def test_a_dataset_reads_back_exactly(tmp_path):
    arrays = episodes()
    digest = save_dataset(tmp_path / "d.npz", env_id="ogbench/pointmaze-large-v0", made_by={"generator": "test"},
                          success=np.arange(15) % 5 == 4, **arrays)
    d = load_dataset(tmp_path / "d.npz")
    for name, array in arrays.items():
        np.testing.assert_array_equal(getattr(d, name), array)
    np.testing.assert_array_equal(d.extras["success"], np.arange(15) % 5 == 4)
    assert d.env_id == "ogbench/pointmaze-large-v0" and d.metadata["sha256"] == digest == arrays_digest(d.arrays())
    assert d.metadata["steps"] == 15 and d.metadata["episodes"] == 3 and d.metadata["made_by"] == {"generator": "test"}
    assert d.episode_bounds() == [(0, 4), (5, 9), (10, 14)] and d.episode_lengths().tolist() == [5, 5, 5]
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically, nothing left beside it


def raw(path: Path, meta: dict | None = None, **arrays) -> Path:
    """A file written around the writer's checks (what a broken recorder or a hand edit leaves)."""
    data = {**episodes(), **arrays}
    data = {k: v for k, v in data.items() if v is not None}
    meta = meta or {"format": "l3p-dataset", "format_version": 1, "env_id": "ogbench/pointmaze-large-v0",
                    "sha256": arrays_digest(data)}
    np.savez(path, **data, metadata=np.array(json.dumps(meta)))
    return path


@pytest.mark.parametrize("change, message", [
    (dict(actions=None), r"has no actions \(keys: achieved_goals, desired_goals, metadata, observations, terminals\)"),
    (dict(observations=np.zeros((14, 2), np.float32)), r"observations has shape \(14, 2\), expected 15 rows"),
    (dict(achieved_goals=np.zeros(15, np.float32)), r"achieved_goals must be 2-d \[steps, dim\], got shape \(15,\)"),
    (dict(actions=np.where(np.arange(30).reshape(15, 2) == 17, np.nan, 0).astype(np.float32)),
     r"actions has NaN or Inf at step 8 \(1 steps in all\)"),
    (dict(terminals=np.r_[np.zeros(14), 1, ][:15] * 0), r"the last step must end an episode"),
    (dict(terminals=np.r_[1, np.zeros(13), 1].astype(np.float32)), r"an episode of 1 step has no transition"),
    (dict(terminals=np.r_[np.zeros(14), 2].astype(np.float32)), r"terminals must be 0 or 1"),
    (dict(desired_goals=np.zeros((15, 3), np.float32)), r"desired_goals has 3 columns, achieved_goals 2"),
])
def test_bad_arrays_are_one_line_errors(tmp_path, change, message):
    path = raw(tmp_path / "bad.npz", **change)
    with pytest.raises(DatasetError, match=message):
        load_dataset(path)


def test_bad_files_and_metadata_are_one_line_errors(tmp_path):
    with pytest.raises(DatasetError, match="no dataset file at"):
        load_dataset(tmp_path / "missing.npz")
    (tmp_path / "garbage.npz").write_bytes(b"not a zip file")
    with pytest.raises(DatasetError, match=r"is not a readable \.npz file"):
        load_dataset(tmp_path / "garbage.npz")
    with pytest.raises(DatasetError, match="metadata must be a 'l3p-dataset' object with an env_id"):
        load_dataset(raw(tmp_path / "m.npz", meta={"env_id": "x"}))
    with pytest.raises(DatasetError, match="format_version 9, this reader knows 1"):
        load_dataset(raw(tmp_path / "v.npz", meta={"format": "l3p-dataset", "format_version": 9, "env_id": "x"}))
    # One value changed after writing: the digest in the metadata no longer matches.
    path = write(tmp_path / "d.npz", **episodes())
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["actions"][3, 0] = 0.5
    np.savez(tmp_path / "tampered.npz", **arrays)
    with pytest.raises(DatasetError, match="do not match the sha256 in its metadata"):
        load_dataset(tmp_path / "tampered.npz")
    # The writer refuses what the reader would.
    with pytest.raises(DatasetError, match="NaN or Inf"):
        write(tmp_path / "n.npz", **{**episodes(), "observations": np.full((15, 2), np.inf, np.float32)})


def test_training_on_a_bad_dataset_is_a_one_line_error(tmp_path):
    bad = raw(tmp_path / "bad.npz", actions=np.full((15, 2), 3.0, np.float32))  # outside the env's [-1, 1]
    proc = subprocess.run([sys.executable, "-m", "l3p", "train", "--dataset", str(bad), "--out", str(tmp_path / "r"),
                           "--no-progress"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.startswith("l3p train: error: dataset ") and "actions outside ogbench/pointmaze-large-v0's " \
        "bounds [[-1.0, -1.0], [1.0, 1.0]] at step 0 (15 steps)" in proc.stderr, proc.stderr
    wrong_dims = raw(tmp_path / "dims.npz", observations=np.zeros((15, 4), np.float32))
    proc = subprocess.run([sys.executable, "-m", "l3p", "train", "--dataset", str(wrong_dims), "--out",
                           str(tmp_path / "r"), "--no-progress"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 2 and "observations have 4 columns, ogbench/pointmaze-large-v0 has 2" in proc.stderr
