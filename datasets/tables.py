"""Datasets stored as tables of steps: LeRobot v3 (parquet, read with ``pyarrow``) and Minari (HDF5,
read with ``h5py``). Each row is one step: an observation and the action taken at it, as in
`core.dataset`'s layout."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.dataset import DatasetError
from l3p.datasets.mapping import Mapping, Part

ROLES = ("observation", "action", "achieved_goal", "desired_goal")


def _check_values(values: np.ndarray, where: str, first_step: int = 0) -> np.ndarray:
    bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
    if bad.size:
        raise DatasetError(f"{where}: NaN or Inf at step {first_step + int(bad[0])}")
    return values


def _select(values: np.ndarray, part: Part, where: str) -> np.ndarray:
    if not part.indices:
        return values
    if max(part.indices) >= values.shape[1] or min(part.indices) < -values.shape[1]:
        raise DatasetError(f"{where}: has {values.shape[1]} values; indices reach {max(part.indices)}")
    return values[:, list(part.indices)]


# ------------------------------------------------------------------------------------- LeRobot


def _arrow_matrix(column: Any, where: str) -> np.ndarray:
    """A pyarrow column of numbers or of equal-length lists of numbers -> [rows, dim] float64."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        nulls = np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))
        raise DatasetError(f"{where}: empty (null) at step {int(nulls[0])}")
    kind = array.type
    if pa.types.is_fixed_size_list(kind):
        return array.flatten().to_numpy(zero_copy_only=False).astype(np.float64).reshape(len(array), kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        offsets = array.offsets.to_numpy()
        lengths = np.diff(offsets)
        odd = np.flatnonzero(lengths != lengths[0]) if len(lengths) else []
        if len(odd):
            raise DatasetError(f"{where}: step {int(odd[0])} has {int(lengths[odd[0]])} values, step 0 has "
                               f"{int(lengths[0])}")
        flat = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        width = int(lengths[0]) if len(lengths) else 0
        return flat.to_numpy(zero_copy_only=False).astype(np.float64).reshape(len(array), width)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return array.to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 1)
    raise DatasetError(f"{where}: type {kind} is not numbers or lists of numbers")


def read_lerobot(root: Path, m: Mapping) -> tuple[dict[str, np.ndarray | None], dict[str, Any]]:
    """A LeRobot v3 dataset folder (meta/info.json, data/chunk-*/file-*.parquet): episodes from its
    episode column, each row's frame_index checked consecutive."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    info_path = root / "meta" / "info.json"
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError) as err:
        raise DatasetError(f"lerobot {info_path}: not a readable info.json ({err})") from None
    files = sorted((root / "data").rglob("*.parquet"))
    if not files:
        raise DatasetError(f"lerobot {root}: no data/**/*.parquet files")
    parts = {role: getattr(m, role) for role in ROLES}
    columns = list(dict.fromkeys([p.column for ps in parts.values() for p in ps] + [m.episode_column]))
    frame = "frame_index"
    values: dict[str, list[np.ndarray]] = {c: [] for c in columns + [frame]}
    offset = 0
    for f in files:
        try:
            schema = pq.read_schema(f)
            missing = [c for c in columns if c not in schema.names]
            if missing:
                raise DatasetError(f"lerobot {f}: no column {missing[0]!r} (columns: {', '.join(schema.names)})")
            wanted = columns + ([frame] if frame in schema.names else [])
            table = pq.read_table(f, columns=wanted)
        except DatasetError:
            raise
        except (pa.ArrowException, OSError) as err:
            raise DatasetError(f"lerobot {f}: unreadable (truncated or corrupt? "
                               f"{' '.join(str(err).split())[:200]})") from None
        for c in wanted:
            values[c].append(_check_values(_arrow_matrix(table.column(c), f"lerobot {f}: column {c!r}"),
                                           f"lerobot {f}: column {c!r}", offset))
        offset += table.num_rows
    where = f"lerobot {root}"
    for c, mats in values.items():
        for f, mat in zip(files, mats):
            if mat.shape[1] != mats[0].shape[1]:
                raise DatasetError(f"lerobot {f}: column {c!r} has {mat.shape[1]} values per step, {files[0]} has "
                                   f"{mats[0].shape[1]} (mismatched dims)")
    # frame_index is checked where every file has it
    merged = {c: np.concatenate(v) for c, v in values.items() if len(v) == len(files)}
    episode = merged[m.episode_column][:, 0].astype(np.int64)
    change = np.flatnonzero(np.diff(episode) != 0) + 1
    starts = np.r_[0, change]
    ids = episode[starts]
    if len(np.unique(ids)) != len(ids):
        seen: set[int] = set()
        for i, e in zip(starts.tolist(), ids.tolist()):
            if e in seen:
                raise DatasetError(f"{where}: column {m.episode_column!r}: episode {e} continues at step {i} after "
                                   f"another episode (rows out of order)")
            seen.add(e)
    if frame in merged:
        frames = merged[frame][:, 0].astype(np.int64)
        step = np.ones(len(frames), bool)
        step[starts] = False
        bad = np.flatnonzero(step & (np.diff(frames, prepend=0) != 1))
        if bad.size:
            i = int(bad[0])
            raise DatasetError(f"{where}: column {frame!r}: frame {frames[i]} follows frame {frames[i - 1]} at step "
                               f"{i} (not consecutive)")
    lengths = np.diff(np.r_[starts, len(episode)])
    if lengths.min() < 2:
        i = int(starts[np.argmin(lengths)])
        raise DatasetError(f"{where}: column {m.episode_column!r}: episode {episode[i]} at step {i} has one step")
    terminals = np.zeros(len(episode), np.float32)
    terminals[np.r_[starts[1:] - 1, len(episode) - 1]] = 1
    arrays = _assemble(parts, lambda p: merged[p.column], where)
    arrays["terminals"] = terminals
    report = {"steps": int(len(episode)), "episodes": int(len(starts)), "files": len(files),
              "codebase_version": info.get("codebase_version"), "fps": info.get("fps")}
    return arrays, report


def _assemble(parts: dict[str, tuple[Part, ...]], read: Any, where: str) -> dict[str, np.ndarray | None]:
    out: dict[str, np.ndarray | None] = {}
    for role, ps in parts.items():
        mats = [_check_values(_select(read(p), p, f"{where}: {p.what}"), f"{where}: {p.what}") for p in ps]
        out[role] = np.concatenate(mats, axis=1) if mats else None
    return {"observations": out["observation"], "actions": out["action"], "achieved_goals": out["achieved_goal"],
            "desired_goals": out["desired_goal"]}


# -------------------------------------------------------------------------------------- Minari


def minari_env_id(root: Path) -> str:
    """The env id a Minari dataset folder's data/metadata.json names, or ""."""
    try:
        spec = json.loads((root / "data" / "metadata.json").read_text()).get("env_spec") or "{}"
        return (json.loads(spec) if isinstance(spec, str) else spec).get("id", "")
    except (OSError, ValueError, AttributeError):
        return ""


def read_minari(root: Path, m: Mapping) -> tuple[dict[str, np.ndarray | None], dict[str, Any]]:
    """A Minari dataset (its folder, or data/main_data.hdf5): groups ``episode_<id>``, each with
    T actions and T + 1 observations; step t is observation t and action t (the last observation,
    which no action follows, is left out)."""
    import h5py

    path = root if root.is_file() else root / "data" / "main_data.hdf5"
    parts = {role: getattr(m, role) for role in ROLES}
    chunks: dict[str, list[np.ndarray]] = {role: [] for role in ROLES}
    terminals = []
    try:
        f = h5py.File(path, "r")
    except OSError as err:
        raise DatasetError(f"minari {path}: unreadable (truncated or corrupt? "
                           f"{' '.join(str(err).split())[:200]})") from None
    with f:
        names = sorted((k for k in f if k.startswith("episode_")), key=lambda k: int(k.split("_")[1]))
        if not names:
            raise DatasetError(f"minari {path}: no episode_* groups")
        step = 0
        for name in names:
            group = f[name]
            n = None
            for role in ROLES:
                mats = []
                for p in parts[role]:
                    where = f"minari {path}: {name}: {p.what}"
                    if p.column not in group:
                        raise DatasetError(f"{where}: missing (has {', '.join(_datasets(group))})")
                    try:
                        data = np.asarray(group[p.column][()], np.float64)
                    except (OSError, KeyError, TypeError) as err:
                        raise DatasetError(f"{where}: unreadable (truncated? {err})") from None
                    data = data.reshape(len(data), -1)
                    n = len(group[parts['action'][0].column]) if n is None else n
                    if len(data) not in (n, n + 1):
                        raise DatasetError(f"{where}: {len(data)} rows for {n} actions (expected {n} or {n + 1})")
                    mats.append(_check_values(_select(data[:n], p, where), where, step))
                if mats:
                    chunks[role].append(np.concatenate(mats, axis=1))
            if n is None or n < 2:
                raise DatasetError(f"minari {path}: {name}: {parts['action'][0].what}: an episode of {n or 0} step(s) "
                                   f"at step {step}")
            terminals.append(np.eye(1, n, n - 1, dtype=np.float32)[0])
            step += n
    dims = {role: {c.shape[1] for c in chunks[role]} for role in ROLES}
    for role, d in dims.items():
        if len(d) > 1:
            raise DatasetError(f"minari {path}: {role} has {sorted(d)} columns in different episodes")
    merged = {role: np.concatenate(chunks[role]) if chunks[role] else None for role in ROLES}
    arrays = {"observations": merged["observation"], "actions": merged["action"],
              "achieved_goals": merged["achieved_goal"], "desired_goals": merged["desired_goal"],
              "terminals": np.concatenate(terminals)}
    return arrays, {"steps": int(len(arrays["terminals"])), "episodes": len(names)}


def _datasets(group: Any) -> list[str]:
    import h5py

    found: list[str] = []
    group.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset) else None)
    return found
