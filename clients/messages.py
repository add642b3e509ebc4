"""Plain values <-> the planner's messages: episode options in, steps, model info and episode
summaries out; and the retry policy of the calls that may be repeated. Names and ranges come from
`l3p.core.config`, enums from `l3p.protos.mapping`."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import numpy as np

from l3p.core.config import EPISODE_OPTIONS, OPTIONS, PlannerConfig
from l3p.core.names import is_int
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos.mapping import MODE_ENUM, MODE_NAME, SEARCH_ENUM, SEARCH_NAME

_ENUMS: dict[str, dict[str, int]] = {"mode": MODE_ENUM, "search": SEARCH_ENUM}
_ENUM_NAMES: dict[str, dict[int, str]] = {"mode": MODE_NAME, "search": SEARCH_NAME}
_SEED_END = 2**64  # EpisodeOptions.seed is a uint64


def as_floats(x: Any, what: str) -> list[float]:
    """A flat list of floats for a repeated-float field (values are checked by the server)."""
    if x is None:  # np.asarray(None) is a NaN scalar: the server would count "1 values"
        raise ValueError(f"{what} is None: give a vector of floats")
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim > 1 and arr.size != arr.shape[-1]:
        raise ValueError(f"{what} must be one vector, got shape {arr.shape}")
    return arr.ravel().tolist()


def _wire(name: str, value: Any) -> Any:
    """A checked option's value as the wire wants it."""
    kind = OPTIONS[name].kind
    if kind == "choice":
        return _ENUMS[name][value]
    return {"bool": bool, "int": int}.get(kind, float)(value)


def episode_options(mode: str | None = None, *, seed: int | None = None, **overrides: Any) -> pb.EpisodeOptions:
    """``EpisodeOptions`` from plain values; ``None`` (or not given) means the bundle's default.

    ``overrides``: any per-episode option of `l3p.core.config.EPISODE_OPTIONS` (its ``OPTIONS``
    give each one's meaning and range).
    A value out of its range, or one that would do nothing beside the others given, raises
    ValueError naming the options, as the server would.
    """
    unknown = sorted(set(overrides) - set(EPISODE_OPTIONS))
    if unknown:
        raise TypeError(f"unknown episode option {', '.join(unknown)}; expected mode, seed or one of "
                        f"{', '.join(EPISODE_OPTIONS)}")
    given = {name: value for name, value in {"mode": mode, **overrides}.items() if value is not None}
    # The server's own check over the table's defaults (the bundle's, which only the server knows,
    # may refuse more: an option of another mode than the bundle's, or one a bundle's option silences).
    PlannerConfig().for_episode(**given)
    opts = pb.EpisodeOptions()
    # proto3 `optional` fields: only set what was given, so the server sees "unset".
    for name, value in given.items():
        setattr(opts, name, _wire(name, value))
    if seed is not None:
        if not (is_int(seed) and 0 <= seed < _SEED_END):
            raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        opts.seed = int(seed)
    return opts


@dataclasses.dataclass(frozen=True)
class Step:
    """One planner step: the action to apply and why it was chosen."""

    action: np.ndarray  # [action_dim] float32, within the model's action bounds
    subgoal: np.ndarray  # [goal_dim] the goal pursued this step (a landmark or the final goal)
    subgoal_index: int  # landmark index, or -1 for the final goal
    replanned: bool  # this step ran the graph search
    counter: int  # steps left before the next re-plan
    step: int  # 0-based step index within the episode (server's count)
    estimated_distance: float = 0.0  # D(obs, subgoal) in steps when re-planned, else 0
    latency_s: float = 0.0  # round trip measured by this client
    resumed: bool = False  # answered by a new session after the episode's server was lost

    @classmethod
    def from_proto(cls, r: pb.ActResponse, latency_s: float = 0.0) -> Step:
        return cls(
            action=np.array(r.action, dtype=np.float32),
            subgoal=np.array(r.subgoal, dtype=np.float32),
            subgoal_index=int(r.subgoal_index),
            replanned=bool(r.replanned),
            counter=int(r.counter),
            step=int(r.step),
            estimated_distance=float(r.estimated_distance),
            latency_s=latency_s,
        )


@dataclasses.dataclass(frozen=True)
class EpisodeSummary:
    steps: int
    replans: int


def planner_defaults(d: pb.PlannerDefaults) -> dict[str, Any]:
    """Every field of the served defaults by its proto name, enums as names."""
    defaults: dict[str, Any] = {}
    for field in d.DESCRIPTOR.fields:
        value = getattr(d, field.name)
        if field.enum_type is not None:
            names = _ENUM_NAMES.get(field.name)
            value = names.get(value, "unspecified") if names else field.enum_type.values_by_number[value].name
        defaults[field.name] = value
    return defaults


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the server is serving (``GetModelInfo``), with enums as names."""

    env_id: str
    obs_dim: int
    goal_dim: int
    action_dim: int
    action_low: np.ndarray
    action_high: np.ndarray
    n_landmarks: int
    format_version: int
    bundle_sha256: str
    gamma: float
    defaults: dict[str, Any]
    provenance: dict[str, Any]
    model: str = ""  # the model's name on the server ("" from a server older than repositories)
    version: str = ""  # its current version ("" for an unversioned bundle)
    memory_bytes: int = 0  # resident memory the server grew by loading it
    landmarks: np.ndarray | None = None  # [n_landmarks, goal_dim]: the graph's nodes (None from an older server)

    @classmethod
    def from_proto(cls, m: pb.ModelInfo) -> ModelInfo:
        try:
            provenance = json.loads(m.provenance_json) if m.provenance_json else {}
        except json.JSONDecodeError:  # informative only; never fail a client over it
            provenance = {"raw": m.provenance_json}
        return cls(
            env_id=m.env_id,
            obs_dim=m.obs_dim,
            goal_dim=m.goal_dim,
            action_dim=m.action_dim,
            action_low=np.array(m.action_low, dtype=np.float32),
            action_high=np.array(m.action_high, dtype=np.float32),
            n_landmarks=m.n_landmarks,
            format_version=m.format_version,
            bundle_sha256=m.bundle_sha256,
            gamma=m.gamma,
            defaults=planner_defaults(m.defaults),
            provenance=provenance,
            model=m.model,
            version=m.version,
            memory_bytes=m.memory_bytes,
            landmarks=(np.array(m.landmarks, dtype=np.float32).reshape(m.n_landmarks, m.goal_dim)
                       if m.landmarks and m.goal_dim and len(m.landmarks) == m.n_landmarks * m.goal_dim else None),
        )


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for UNAVAILABLE (or CANCELLED) on idempotent calls.

    The wait before retry k (k = 1, 2, ...) is drawn uniformly from [cap/2, cap] with
    cap = min(max_backoff_s, initial_backoff_s * multiplier**(k-1)): half fixed so a restart
    gets time, half random so many robots reconnecting at once spread out. The defaults wait
    about 6-12 s in total, enough for a server restart.
    """

    max_attempts: int = 8  # total tries, the first included; 1 = no retry
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 3.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be >= 0 and multiplier >= 1")

    def backoff_s(self, retry: int, rng: random.Random) -> float:
        cap = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (retry - 1))
        return rng.uniform(cap / 2, cap)


NO_RETRY = RetryPolicy(max_attempts=1)
