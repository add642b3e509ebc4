"""Loads a model bundle (docs/bundle.md) into onnxruntime sessions, refusing anything malformed.

The loader checks, in order: the manifest's fields, each file's sha256, then each graph's
input/output names and widths against the manifest's dims. Every refusal is a `BundleError` whose
message names the file and the problem, so `l3p serve` can print it as one line.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort

from serving.planner import LandmarkGraph, PlannerConfig

FORMAT = "l3p-bundle"
FORMAT_VERSION = 1
GRAPHS = ("actor", "distance", "value", "landmarks")


class BundleError(Exception):
    """The bundle cannot be served; the message says which file and why."""


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: dict
    env_id: str
    obs_dim: int
    goal_dim: int
    action_dim: int
    action_low: np.ndarray  # [action_dim]
    action_high: np.ndarray  # [action_dim]
    gamma: float
    landmarks: np.ndarray  # [N, goal_dim] float32, decoded once at load
    planner_defaults: PlannerConfig
    sha256: str  # digest over the manifest's per-file digests (see bundle_digest)
    actor: ort.InferenceSession
    distance: ort.InferenceSession
    value: ort.InferenceSession
    # Per-bundle work, done once here: V over landmark pairs and its solution for the default
    # planner settings (an episode start then costs N value calls, see planner.LandmarkGraph).
    landmark_graph: LandmarkGraph = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        graph = LandmarkGraph(self.landmarks, self.value_fn)
        graph.prepare(self.planner_defaults)
        object.__setattr__(self, "landmark_graph", graph)

    @property
    def n_landmarks(self) -> int:
        return len(self.landmarks)

    # The three callables of docs/planner_api.md. Each is exactly one InferenceSession.run,
    # which onnxruntime documents as safe to call from many threads at once.

    def distance_fn(self, obs: np.ndarray, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        distance, action = self.distance.run(
            ["distance", "action"], {"obs": _f32(obs), "goal": _f32(goals)}
        )
        return distance, action

    def policy_fn(self, obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
        return self.actor.run(["action"], {"obs": _f32(obs), "goal": _f32(goals)})[0]

    def value_fn(self, goal_a: np.ndarray, goal_b: np.ndarray) -> np.ndarray:
        return self.value.run(["value"], {"goal_a": _f32(goal_a), "goal_b": _f32(goal_b)})[0]


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def session_options() -> ort.SessionOptions:
    """Latency over throughput: the graphs are small MLPs, so one thread per call and no
    inter-op pool; concurrency comes from serving many sessions on gRPC's worker threads
    (a multi-threaded pool per call gave ~4x worse p99 tails, see SERVING_LESSONS.md)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: warnings would break one-JSON-line logs
    return options


def bundle_digest(files: dict) -> str:
    """sha256 over "<name> <sha256>\\n" for each manifest file entry, sorted by name."""
    text = "".join(f"{name} {files[name]['sha256']}\n" for name in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def load_bundle(path: str | Path) -> Bundle:
    path = Path(path)
    if not path.is_dir():
        raise BundleError(f"bundle {path}: not a directory")
    manifest = _read_manifest(path)
    dims = manifest["dims"]
    obs_dim, goal_dim, action_dim = dims["obs"], dims["goal"], dims["action"]
    n_landmarks = manifest["n_landmarks"]
    # (input name, width) and (output name, width or None for a [B] vector) per graph.
    io = {
        "actor": ([("obs", obs_dim), ("goal", goal_dim)], [("action", action_dim)]),
        "distance": (
            [("obs", obs_dim), ("goal", goal_dim)],
            [("distance", None), ("action", action_dim)],
        ),
        "value": ([("goal_a", goal_dim), ("goal_b", goal_dim)], [("value", None)]),
        "landmarks": ([], [("landmarks", goal_dim)]),
    }
    sessions = {
        name: _open_graph(
            path,
            manifest["files"][name],
            *io[name],
            batch=n_landmarks if name == "landmarks" else None,
        )
        for name in GRAPHS
    }

    landmarks = sessions["landmarks"].run(["landmarks"], {})[0]
    where = manifest["files"]["landmarks"]["path"]
    if landmarks.shape != (n_landmarks, goal_dim):
        raise BundleError(
            f"{where}: landmarks have shape {list(landmarks.shape)}, "
            f"expected [{n_landmarks}, {goal_dim}] (n_landmarks, dims.goal in manifest.json)"
        )
    if not np.isfinite(landmarks).all():
        raise BundleError(f"{where}: landmarks contain NaN or Inf")

    return Bundle(
        path=path,
        manifest=manifest,
        env_id=manifest["env_id"],
        obs_dim=obs_dim,
        goal_dim=goal_dim,
        action_dim=action_dim,
        action_low=np.asarray(manifest["action_low"], dtype=np.float32),
        action_high=np.asarray(manifest["action_high"], dtype=np.float32),
        gamma=float(manifest["gamma"]),
        landmarks=np.ascontiguousarray(landmarks, dtype=np.float32),
        planner_defaults=_planner_defaults(manifest["planner"]),
        sha256=bundle_digest(manifest["files"]),
        actor=sessions["actor"],
        distance=sessions["distance"],
        value=sessions["value"],
    )


def _read_manifest(path: Path) -> dict:
    file = path / "manifest.json"
    try:
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise BundleError(f"bundle {path}: manifest.json is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{file}: not readable JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{file}: expected a JSON object")

    def bad(field: str, expected: str) -> BundleError:
        value = manifest
        for key in field.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return BundleError(f"{file}: '{field}' is {value!r}, expected {expected}")

    if manifest.get("format") != FORMAT:
        raise bad("format", repr(FORMAT))
    if manifest.get("format_version") != FORMAT_VERSION:
        raise bad("format_version", f"{FORMAT_VERSION} (the version this server reads)")
    if not isinstance(manifest.get("env_id"), str) or not manifest["env_id"]:
        raise bad("env_id", "a non-empty string")
    if not isinstance(manifest.get("dims"), dict):
        raise bad("dims", 'an object {"obs", "goal", "action"}')
    for key in ("obs", "goal", "action"):
        if not _is_positive_int(manifest["dims"].get(key)):
            raise bad(f"dims.{key}", "a positive integer")
    for key in ("action_low", "action_high"):
        bounds = manifest.get(key)
        if (
            not isinstance(bounds, list)
            or len(bounds) != manifest["dims"]["action"]
            or not all(_is_finite_number(b) for b in bounds)
        ):
            raise bad(key, f"a list of {manifest['dims']['action']} finite numbers (dims.action)")
    if not _is_finite_number(manifest.get("gamma")) or not 0 < manifest["gamma"] < 1:
        raise bad("gamma", "a number in (0, 1)")
    if not _is_positive_int(manifest.get("n_landmarks")):
        raise bad("n_landmarks", "a positive integer")
    if not isinstance(manifest.get("planner"), dict):
        raise bad("planner", "an object of planner defaults")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise bad("files", f"an object with entries {', '.join(GRAPHS)}")
    for name in GRAPHS:
        entry = files.get(name)
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
        ):
            raise bad(f"files.{name}", '{"path": ..., "sha256": ...}')
    return manifest


def _planner_defaults(planner: dict) -> PlannerConfig:
    try:
        config = PlannerConfig(**planner)
        config.validate()
    except (TypeError, ValueError) as exc:
        raise BundleError(f"manifest.json: 'planner' is invalid: {exc}") from None
    return config


def _open_graph(
    root: Path,
    entry: dict,
    inputs: list[tuple[str, int]],
    outputs: list[tuple[str, int | None]],
    batch: int | None,
) -> ort.InferenceSession:
    """Checks the file's digest, opens it, and checks its signature.

    `batch` None means the leading axis must be dynamic (the planner batches N + 1 candidates).
    """
    file = (root / entry["path"]).resolve()
    if root.resolve() not in file.parents:
        raise BundleError(f"manifest.json: file path {entry['path']!r} leaves the bundle directory")
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise BundleError(f"bundle {root}: {entry['path']} is missing") from None
    except OSError as exc:
        raise BundleError(f"bundle {root}: cannot read {entry['path']} ({exc.strerror})") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise BundleError(
            f"{entry['path']}: sha256 {digest} does not match manifest.json ({entry['sha256']})"
        )
    try:
        session = ort.InferenceSession(data, session_options(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises several private exception types
        raise BundleError(f"{entry['path']}: onnxruntime cannot load it ({exc})") from None

    def check(kind: str, found: list, expected: list[tuple[str, int | None]]) -> None:
        names = sorted(arg.name for arg in found)
        if names != sorted(name for name, _ in expected):
            raise BundleError(
                f"{entry['path']}: {kind}s are {names}, expected {[n for n, _ in expected]}"
            )
        by_name = {arg.name: arg for arg in found}
        for name, width in expected:
            arg = by_name[name]
            want = [batch or "B"] + ([] if width is None else [width])
            if arg.type != "tensor(float)" or not _shape_matches(arg.shape, want):
                raise BundleError(
                    f"{entry['path']}: {kind} '{name}' is {arg.type} {arg.shape}, "
                    f"expected tensor(float) {want} (B: a dynamic batch axis)"
                )

    check("input", session.get_inputs(), inputs)
    check("output", session.get_outputs(), outputs)
    return session


def _shape_matches(shape: list, want: list) -> bool:
    """ONNX shapes hold ints, symbolic names (str) or None (unknown); 'B' wants a symbolic axis."""
    if len(shape) != len(want):
        return False
    for have, need in zip(shape, want):
        if need == "B":
            if isinstance(have, int):  # a fixed batch size cannot take N + 1 candidates
                return False
        elif isinstance(have, int) and have != need:
            return False
    return True


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
