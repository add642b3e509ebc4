"""One dataset source: a recording in any supported format, read through its mapping into the
project's dataset (`core.dataset.Dataset`), checked as `core.dataset` checks a file.

- ``read(mapping, paths)``: the steps of every path, in order, and a report (steps, what was dropped);
- ``open_dataset(path)``: what ``l3p train --dataset`` reads: an .npz exactly as
  `core.dataset.load_dataset` reads it, or a mapping file (.yaml) whose ``paths`` are read in place;
- ``import_to(out, mapping, paths)``: the converter: writes one .npz (a temporary file, then a rename).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.dataset import (FORMAT, FORMAT_VERSION, Dataset, DatasetError, arrays_digest, load_dataset, save_dataset,
                              validate)
from l3p.core.names import install_hint
from l3p.datasets.mapping import Mapping, load_mapping, resolved_paths
from l3p.datasets.sizes import shape_problems, size_problems

MAPPING_SUFFIXES = (".yaml", ".yml")
ROWS = ("observations", "actions", "terminals", "achieved_goals", "desired_goals")


def _reader(fmt: str) -> Any:
    # Imported on use: each brings its own library (rosbags, pyarrow, h5py).
    if fmt == "rosbag2":
        from l3p.datasets.rosbag2 import read_rosbag

        return read_rosbag
    if fmt == "lerobot":
        from l3p.datasets.tables import read_lerobot

        return read_lerobot
    from l3p.datasets.tables import read_minari

    return read_minari


def _read_npz(paths: list[Path]) -> tuple[list[dict[str, np.ndarray | None]], list[dict[str, Any]], str]:
    loaded = [load_dataset(p) for p in paths]
    env_ids = {d.env_id for d in loaded}
    if len(env_ids) > 1:
        raise DatasetError(f"npz {paths[0]} ...: recorded on several envs ({', '.join(sorted(env_ids))})")
    common = set.intersection(*(set(d.extras) for d in loaded))
    arrays = [{**{k: v for k, v in d.arrays().items() if k in ROWS}, **{k: d.extras[k] for k in common}}
              for d in loaded]
    reports = [{"steps": int(len(d.terminals)), "episodes": len(d.episode_bounds())} for d in loaded]
    return arrays, reports, env_ids.pop()


def read(mapping: Mapping, paths: list[Path]) -> tuple[Dataset, dict[str, Any]]:
    """Every path's steps, back to back, as one checked Dataset; and the report."""
    if not paths:
        raise DatasetError(f"{mapping.where()}: no recording to read")
    env_id = mapping.env_id
    if mapping.format == "npz":
        parts, reports, recorded = _read_npz(paths)
        if env_id and env_id != recorded:
            raise DatasetError(f"npz {paths[0]}: recorded on {recorded}, the mapping says {env_id}")
        env_id = recorded
    else:
        reader = _reader(mapping.format)
        parts, reports = [], []
        for path in paths:
            arrays, report = reader(Path(path), mapping)
            if mapping.achieved_goal_indices:
                idx = list(mapping.achieved_goal_indices)
                width = arrays["observations"].shape[1]
                if max(idx) >= width or min(idx) < -width:
                    raise DatasetError(f"{mapping.where()}: achieved_goal_indices reach {max(idx)}, the observation "
                                       f"of {mapping.format} {path} has {width} values")
                arrays["achieved_goals"] = arrays["observations"][:, idx]
            parts.append(arrays)
            reports.append({"path": str(path), **report})
    for name in parts[0]:
        if parts[0][name] is None:
            continue
        for path, p in zip(paths, parts):
            if p[name] is None or np.shape(p[name])[1:] != np.shape(parts[0][name])[1:]:
                raise DatasetError(f"{mapping.format} {path}: {name} has shape {np.shape(p[name])[1:]}, "
                                   f"{paths[0]} has {np.shape(parts[0][name])[1:]} (mismatched dims)")
    merged = {name: np.concatenate([p[name] for p in parts]) for name in parts[0] if parts[0][name] is not None}
    made_by = {"importer": "l3p dataset import", "format": mapping.format,
               "sources": [_describe(Path(p)) for p in paths], "mapping": _mapping_record(mapping)}
    dataset = Dataset(
        observations=merged.pop("observations").astype(np.float32), actions=merged.pop("actions").astype(np.float32),
        terminals=merged.pop("terminals").astype(np.float32),
        achieved_goals=merged.pop("achieved_goals").astype(np.float32),
        metadata={"format": FORMAT, "format_version": FORMAT_VERSION, "env_id": env_id, "made_by": made_by},
        desired_goals=(merged.pop("desired_goals").astype(np.float32) if "desired_goals" in merged else None),
        extras=merged)
    validate(dataset, f"{mapping.format} {paths[0]}" + (f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""))
    # as save_dataset records them: the .npz written from these arrays carries the same digest
    dataset.metadata.update(steps=int(len(dataset.terminals)), episodes=len(dataset.episode_bounds()),
                            sha256=arrays_digest(dataset.arrays()))
    dropped: dict[str, int] = {}
    for r in reports:
        for why, n in r.get("dropped", {}).items():
            dropped[why] = dropped.get(why, 0) + n
    report = {"format": mapping.format, "env_id": env_id, "steps": int(len(dataset.terminals)),
              "episodes": len(dataset.episode_bounds()), "dropped": dropped, "files": reports}
    return dataset, report


def _describe(path: Path) -> dict[str, Any]:
    """A recording's name and size (its digest costs a second read of big files: the .npz written
    from it carries the digest of the arrays)."""
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size
    return {"path": str(path), "bytes": int(size)}


def _mapping_record(mapping: Mapping) -> dict[str, Any]:
    record = dataclasses.asdict(mapping)
    record.pop("paths")
    record["sha256"] = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return record


def open_dataset(path: str | os.PathLike[str], *, check_digest: bool = True) -> Dataset:
    """What ``l3p train --dataset PATH`` trains on: an .npz file (read by `load_dataset`), or a mapping
    file's recordings, read in place."""
    path = Path(path)
    if path.suffix not in MAPPING_SUFFIXES:
        return load_dataset(path, check_digest=check_digest)
    try:
        mapping = load_mapping(path)
        return read(mapping, resolved_paths(mapping))[0]
    except ImportError as exc:  # a format's reader (rosbags, pyarrow, h5py) or yaml
        raise DatasetError(f"reading {path} needs the 'datasets' extra (missing module {exc.name!r}): "
                           f"{install_hint('datasets')}") from None


def import_to(out: str | os.PathLike[str], mapping: Mapping, paths: list[Path], dims: dict[str, int] | None = None,
              against: str = "") -> tuple[str, dict[str, Any]]:
    """Convert to one .npz at ``out`` (nothing is written there unless every check passed, ``dims``'
    of ``against`` included); its digest and the report."""
    if dims and (problems := size_problems(mapping, dims, against)):
        raise DatasetError(f"{mapping.where()} does not fit {against}: " + "; ".join(problems))
    dataset, report = read(mapping, [Path(p) for p in paths])
    if dims and (problems := shape_problems(dataset.arrays(), dims, against)):
        raise DatasetError(f"{mapping.format} {paths[0]} does not fit {against}: " + "; ".join(problems))
    digest = save_dataset(out, observations=dataset.observations, actions=dataset.actions,
                          terminals=dataset.terminals, achieved_goals=dataset.achieved_goals, env_id=dataset.env_id,
                          made_by={**dataset.metadata["made_by"],
                                   "report": {k: report[k] for k in ("steps", "dropped")}},
                          desired_goals=dataset.desired_goals, **dataset.extras)
    return digest, report
