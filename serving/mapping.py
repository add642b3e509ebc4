"""Proto messages <-> the planner core: the model info of a bundle, an episode's config from its
options, a step's answer. Enum names come from `l3p.protos.mapping`, option names from
`PlannerConfig` (core/config.py), so a new option or mode is declared there once."""

from __future__ import annotations

import json

import numpy as np

from l3p.core import EPISODE_OPTIONS, PlannerConfig, StepResult
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos.mapping import MODE_ENUM, MODE_NAME, SEARCH_ENUM, SEARCH_NAME
from l3p.serving.bundle import Bundle
from l3p.serving.errors import InvalidRequestError

# StartEpisodeResponse.landmark_to_goal for a landmark the goal cannot be reached from
# (documented in the .proto; a float field has no portable infinity for every client).
UNREACHABLE = -1.0

_ENUM = {"mode": MODE_ENUM, "search": SEARCH_ENUM}  # option -> {name: wire value}
_NAME = {"mode": MODE_NAME, "search": SEARCH_NAME}  # option -> {wire value: name}
_OPTION_FIELDS = pb.EpisodeOptions.DESCRIPTOR.fields_by_name
# The options a request may set beside its seed, mode first (its error is reported first).
REQUEST_OPTIONS = ("mode", *EPISODE_OPTIONS)


def model_info(bundle: Bundle) -> pb.ModelInfo:
    """GetModelInfo's answer: the bundle's dims, digest, provenance and every served default."""
    served = bundle.planner_defaults
    defaults = {}
    for field in pb.PlannerDefaults.DESCRIPTOR.fields:  # every default the proto carries
        name = field.name
        if name == "n_landmarks":
            defaults[name] = bundle.n_landmarks
        elif name in _ENUM:
            defaults[name] = _ENUM[name][getattr(served, name)]
        else:
            defaults[name] = getattr(served, name)
    return pb.ModelInfo(
        env_id=bundle.env_id,
        obs_dim=bundle.obs_dim,
        goal_dim=bundle.goal_dim,
        action_dim=bundle.action_dim,
        action_low=bundle.action_low,
        action_high=bundle.action_high,
        n_landmarks=bundle.n_landmarks,
        format_version=bundle.manifest["format_version"],
        bundle_sha256=bundle.sha256,
        gamma=bundle.gamma,
        defaults=pb.PlannerDefaults(**defaults),
        provenance_json=json.dumps(bundle.manifest.get("provenance", {})),
        landmarks=bundle.landmarks.reshape(-1).tolist(),
    )


def episode_config(options: pb.EpisodeOptions, defaults: PlannerConfig) -> tuple[PlannerConfig, int | None]:
    """The episode's planner config and seed: the bundle's defaults with the options that are
    set; InvalidRequestError names an unknown enum value or an option out of range."""
    if not options.ListFields():  # nothing set: the bundle's defaults, validated at load
        return defaults, None
    overrides = {}
    for name in REQUEST_OPTIONS:
        if name in _NAME:
            value = getattr(options, name)
            if value in _NAME[name]:
                overrides[name] = _NAME[name][value]
            elif value != 0:  # 0 = unspecified: the bundle's default
                enum = _OPTION_FIELDS[name].enum_type
                expected = ", ".join(enum.values_by_number[v].name for v in _NAME[name])
                raise InvalidRequestError(
                    f"options.{name} is {value}, not a known {enum.name}; "
                    f"expected one of {expected} (or unset for the bundle's default)"
                )
        elif options.HasField(name):
            overrides[name] = getattr(options, name)
    try:
        config = defaults.for_episode(**overrides)
    except ValueError as exc:
        raise InvalidRequestError(f"options.{exc}") from None
    return config, (options.seed if options.HasField("seed") else None)


def start_response(session_id: str, n_landmarks: int, landmark_to_goal: np.ndarray) -> pb.StartEpisodeResponse:
    return pb.StartEpisodeResponse(
        session_id=session_id,
        n_landmarks=n_landmarks,
        landmark_to_goal=np.where(np.isfinite(landmark_to_goal), landmark_to_goal, UNREACHABLE).tolist(),
    )


def act_response(result: StepResult, step: int, bundle: Bundle) -> pb.ActResponse:
    return pb.ActResponse(
        # Within the bundle's bounds: the actor's tanh output scaled in float32 can overshoot
        # by an ulp (-1.0000001 seen for a +-1 box).
        action=np.clip(result.action, bundle.action_low, bundle.action_high).tolist(),
        subgoal=result.subgoal.tolist(),  # lists convert to repeated fields 2x faster
        subgoal_index=result.subgoal_index,
        replanned=result.replanned,
        counter=result.counter,
        step=step,
        estimated_distance=result.estimated_distance,
    )
