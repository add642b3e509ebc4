"""Loads a model bundle (docs/bundle.md) into onnxruntime sessions, refusing anything malformed.

The loader checks, in order: the manifest's fields, each file's sha256, then each graph's
input/output names and widths against the manifest's dims. Every refusal is a `BundleError` whose
message names the file and the problem, so `l3p serve` can print it as one line, and what was
expected, never what the refused graph holds (core/bundle_format.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from l3p.core import PlannerConfig
from l3p.core.bundle_format import (
    DEFAULT_MAX_FILE_BYTES,
    GRAPHS,
    BundleDir,
    BundleError,
    bundle_digest,
    check_pin,
    escaped,
    graph_signatures,
    planner_defaults,
    read_graph,
    read_manifest,
    shape_matches,
    supported_edges,
)

__all__ = ["Bundle", "BundleError", "bundle_digest", "load_bundle", "session_options"]


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
    edges: np.ndarray | None  # [N, N] bool: the landmark edges the data supports (None: every pair)
    planner_defaults: PlannerConfig
    sha256: str  # the bundle's digest: over the whole manifest, file digests included
    actor: ort.InferenceSession
    distance: ort.InferenceSession
    value: ort.InferenceSession

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
    inter-op pool; concurrency comes from batching the steps of many sessions into one call
    (a multi-threaded pool per call gave ~4x worse p99 tails)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: warnings would break one-JSON-line logs
    return options


def load_bundle(bundle: str | Path | BundleDir, sha256: str | None = None, pin_source: str = "--bundle-sha256", *,
                shown: str | None = None, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Bundle:
    """The bundle at ``bundle`` (a directory path, or an open BundleDir: its files are read through
    it, never through a link), checked; with ``sha256``, refused unless its digest is that, before
    any of its graphs is opened (``pin_source`` names the pin in the message). Errors name a path's
    bundle as ``shown`` (default: the path); a graph file over ``max_file_bytes`` is refused unread."""
    if not isinstance(bundle, BundleDir):
        with BundleDir.open(bundle, shown) as opened:
            return load_bundle(opened, sha256, pin_source, max_file_bytes=max_file_bytes)
    manifest = read_manifest(bundle)
    digest = check_pin(bundle.path, manifest, sha256, pin_source, bundle.where)
    dims = manifest["dims"]
    obs_dim, goal_dim, action_dim = dims["obs"], dims["goal"], dims["action"]
    n_landmarks = manifest["n_landmarks"]
    io = graph_signatures(dims)
    sessions = {
        name: _open_graph(
            bundle,
            manifest["files"][name],
            *io[name],
            batch=n_landmarks if name == "landmarks" else None,
            max_bytes=max_file_bytes,
        )
        for name in GRAPHS
    }

    landmarks = sessions["landmarks"].run(["landmarks"], {})[0]
    where = escaped(manifest["files"]["landmarks"]["path"])
    if landmarks.shape != (n_landmarks, goal_dim):
        raise BundleError(f"{where}: landmarks are not of shape [{n_landmarks}, {goal_dim}] "
                          "(n_landmarks, dims.goal in manifest.json)")
    if not np.isfinite(landmarks).all():
        raise BundleError(f"{where}: landmarks contain NaN or Inf")

    return Bundle(
        path=bundle.path,
        manifest=manifest,
        env_id=manifest["env_id"],
        obs_dim=obs_dim,
        goal_dim=goal_dim,
        action_dim=action_dim,
        action_low=np.asarray(manifest["action_low"], dtype=np.float32),
        action_high=np.asarray(manifest["action_high"], dtype=np.float32),
        gamma=float(manifest["gamma"]),
        landmarks=np.ascontiguousarray(landmarks, dtype=np.float32),
        edges=supported_edges(manifest),
        planner_defaults=planner_defaults(manifest),
        sha256=digest,
        actor=sessions["actor"],
        distance=sessions["distance"],
        value=sessions["value"],
    )


def _open_graph(
    bundle: BundleDir,
    entry: dict,
    inputs: list[tuple[str, int]],
    outputs: list[tuple[str, int | None]],
    batch: int | None,
    max_bytes: int,
) -> ort.InferenceSession:
    """Checks the file's digest, opens it, and checks its signature.

    `batch` None means the leading axis must be dynamic (the planner batches N + 1 candidates).
    """
    data = read_graph(bundle, entry, max_bytes)
    where = escaped(entry["path"])
    try:
        session = ort.InferenceSession(data, session_options(), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime raises several private exception types, quoting the graph
        raise BundleError(f"{where}: onnxruntime cannot load it (not an ONNX graph onnxruntime {ort.__version__} "
                          "can run; onnxruntime.InferenceSession on the file says why)") from None

    def check(kind: str, found: list, expected: list[tuple[str, int | None]]) -> None:
        if sorted(arg.name for arg in found) != sorted(name for name, _ in expected):
            raise BundleError(f"{where}: {kind}s are not {[n for n, _ in expected]}")
        by_name = {arg.name: arg for arg in found}
        for name, width in expected:
            arg = by_name[name]
            want = [batch or "B"] + ([] if width is None else [width])
            if arg.type != "tensor(float)" or not shape_matches(arg.shape, want):
                raise BundleError(f"{where}: {kind} '{name}' is not tensor(float) {want} (B: a dynamic batch axis)")

    check("input", session.get_inputs(), inputs)
    check("output", session.get_outputs(), outputs)
    return session
