from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PlannerMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PLANNER_MODE_UNSPECIFIED: _ClassVar[PlannerMode]
    PLANNER_MODE_L3P: _ClassVar[PlannerMode]
    PLANNER_MODE_NAIVE: _ClassVar[PlannerMode]
    PLANNER_MODE_POLICY: _ClassVar[PlannerMode]

class SearchKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_KIND_UNSPECIFIED: _ClassVar[SearchKind]
    SEARCH_KIND_SOFT: _ClassVar[SearchKind]
    SEARCH_KIND_HARD: _ClassVar[SearchKind]
    SEARCH_KIND_EXPECTATION: _ClassVar[SearchKind]
PLANNER_MODE_UNSPECIFIED: PlannerMode
PLANNER_MODE_L3P: PlannerMode
PLANNER_MODE_NAIVE: PlannerMode
PLANNER_MODE_POLICY: PlannerMode
SEARCH_KIND_UNSPECIFIED: SearchKind
SEARCH_KIND_SOFT: SearchKind
SEARCH_KIND_HARD: SearchKind
SEARCH_KIND_EXPECTATION: SearchKind

class GetModelInfoRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class PlannerDefaults(_message.Message):
    __slots__ = ("n_landmarks", "d_max", "temperature", "search", "search_iterations", "local_horizon", "mode", "prune_failed", "require_progress", "local_cut", "follow_edges", "prune_loops", "action_scale", "next_hop", "counter_extra", "sample_subgoal", "adaptive_cut")
    N_LANDMARKS_FIELD_NUMBER: _ClassVar[int]
    D_MAX_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    SEARCH_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_HORIZON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FAILED_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_CUT_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_EDGES_FIELD_NUMBER: _ClassVar[int]
    PRUNE_LOOPS_FIELD_NUMBER: _ClassVar[int]
    ACTION_SCALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOP_FIELD_NUMBER: _ClassVar[int]
    COUNTER_EXTRA_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SUBGOAL_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_CUT_FIELD_NUMBER: _ClassVar[int]
    n_landmarks: int
    d_max: float
    temperature: float
    search: SearchKind
    search_iterations: int
    local_horizon: float
    mode: PlannerMode
    prune_failed: bool
    require_progress: bool
    local_cut: float
    follow_edges: bool
    prune_loops: bool
    action_scale: float
    next_hop: bool
    counter_extra: int
    sample_subgoal: bool
    adaptive_cut: bool
    def __init__(self, n_landmarks: _Optional[int] = ..., d_max: _Optional[float] = ..., temperature: _Optional[float] = ..., search: _Optional[_Union[SearchKind, str]] = ..., search_iterations: _Optional[int] = ..., local_horizon: _Optional[float] = ..., mode: _Optional[_Union[PlannerMode, str]] = ..., prune_failed: _Optional[bool] = ..., require_progress: _Optional[bool] = ..., local_cut: _Optional[float] = ..., follow_edges: _Optional[bool] = ..., prune_loops: _Optional[bool] = ..., action_scale: _Optional[float] = ..., next_hop: _Optional[bool] = ..., counter_extra: _Optional[int] = ..., sample_subgoal: _Optional[bool] = ..., adaptive_cut: _Optional[bool] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("env_id", "obs_dim", "goal_dim", "action_dim", "action_low", "action_high", "n_landmarks", "format_version", "bundle_sha256", "gamma", "defaults", "provenance_json", "model", "version", "memory_bytes", "landmarks", "signed_by")
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    OBS_DIM_FIELD_NUMBER: _ClassVar[int]
    GOAL_DIM_FIELD_NUMBER: _ClassVar[int]
    ACTION_DIM_FIELD_NUMBER: _ClassVar[int]
    ACTION_LOW_FIELD_NUMBER: _ClassVar[int]
    ACTION_HIGH_FIELD_NUMBER: _ClassVar[int]
    N_LANDMARKS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    LANDMARKS_FIELD_NUMBER: _ClassVar[int]
    SIGNED_BY_FIELD_NUMBER: _ClassVar[int]
    env_id: str
    obs_dim: int
    goal_dim: int
    action_dim: int
    action_low: _containers.RepeatedScalarFieldContainer[float]
    action_high: _containers.RepeatedScalarFieldContainer[float]
    n_landmarks: int
    format_version: int
    bundle_sha256: str
    gamma: float
    defaults: PlannerDefaults
    provenance_json: str
    model: str
    version: str
    memory_bytes: int
    landmarks: _containers.RepeatedScalarFieldContainer[float]
    signed_by: str
    def __init__(self, env_id: _Optional[str] = ..., obs_dim: _Optional[int] = ..., goal_dim: _Optional[int] = ..., action_dim: _Optional[int] = ..., action_low: _Optional[_Iterable[float]] = ..., action_high: _Optional[_Iterable[float]] = ..., n_landmarks: _Optional[int] = ..., format_version: _Optional[int] = ..., bundle_sha256: _Optional[str] = ..., gamma: _Optional[float] = ..., defaults: _Optional[_Union[PlannerDefaults, _Mapping]] = ..., provenance_json: _Optional[str] = ..., model: _Optional[str] = ..., version: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., landmarks: _Optional[_Iterable[float]] = ..., signed_by: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelStatus(_message.Message):
    __slots__ = ("info", "live_sessions", "draining_versions", "last_error", "loaded")
    INFO_FIELD_NUMBER: _ClassVar[int]
    LIVE_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LOADED_FIELD_NUMBER: _ClassVar[int]
    info: ModelInfo
    live_sessions: int
    draining_versions: _containers.RepeatedScalarFieldContainer[str]
    last_error: str
    loaded: bool
    def __init__(self, info: _Optional[_Union[ModelInfo, _Mapping]] = ..., live_sessions: _Optional[int] = ..., draining_versions: _Optional[_Iterable[str]] = ..., last_error: _Optional[str] = ..., loaded: _Optional[bool] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("default_model", "models")
    DEFAULT_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    default_model: str
    models: _containers.RepeatedCompositeFieldContainer[ModelStatus]
    def __init__(self, default_model: _Optional[str] = ..., models: _Optional[_Iterable[_Union[ModelStatus, _Mapping]]] = ...) -> None: ...

class ReloadModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelLoad(_message.Message):
    __slots__ = ("model", "version", "loaded", "error")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LOADED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    model: str
    version: str
    loaded: bool
    error: str
    def __init__(self, model: _Optional[str] = ..., version: _Optional[str] = ..., loaded: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class ReloadModelsResponse(_message.Message):
    __slots__ = ("loads",)
    LOADS_FIELD_NUMBER: _ClassVar[int]
    loads: _containers.RepeatedCompositeFieldContainer[ModelLoad]
    def __init__(self, loads: _Optional[_Iterable[_Union[ModelLoad, _Mapping]]] = ...) -> None: ...

class EpisodeOptions(_message.Message):
    __slots__ = ("mode", "d_max", "temperature", "search", "seed", "local_horizon", "sample_subgoal", "prune_failed", "require_progress", "local_cut", "follow_edges", "prune_loops", "action_scale", "next_hop")
    MODE_FIELD_NUMBER: _ClassVar[int]
    D_MAX_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    LOCAL_HORIZON_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SUBGOAL_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FAILED_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_CUT_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_EDGES_FIELD_NUMBER: _ClassVar[int]
    PRUNE_LOOPS_FIELD_NUMBER: _ClassVar[int]
    ACTION_SCALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOP_FIELD_NUMBER: _ClassVar[int]
    mode: PlannerMode
    d_max: float
    temperature: float
    search: SearchKind
    seed: int
    local_horizon: float
    sample_subgoal: bool
    prune_failed: bool
    require_progress: bool
    local_cut: float
    follow_edges: bool
    prune_loops: bool
    action_scale: float
    next_hop: bool
    def __init__(self, mode: _Optional[_Union[PlannerMode, str]] = ..., d_max: _Optional[float] = ..., temperature: _Optional[float] = ..., search: _Optional[_Union[SearchKind, str]] = ..., seed: _Optional[int] = ..., local_horizon: _Optional[float] = ..., sample_subgoal: _Optional[bool] = ..., prune_failed: _Optional[bool] = ..., require_progress: _Optional[bool] = ..., local_cut: _Optional[float] = ..., follow_edges: _Optional[bool] = ..., prune_loops: _Optional[bool] = ..., action_scale: _Optional[float] = ..., next_hop: _Optional[bool] = ...) -> None: ...

class StartEpisodeRequest(_message.Message):
    __slots__ = ("goal", "options", "model")
    GOAL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    goal: _containers.RepeatedScalarFieldContainer[float]
    options: EpisodeOptions
    model: str
    def __init__(self, goal: _Optional[_Iterable[float]] = ..., options: _Optional[_Union[EpisodeOptions, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class StartEpisodeResponse(_message.Message):
    __slots__ = ("session_id", "n_landmarks", "landmark_to_goal", "model", "version")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    N_LANDMARKS_FIELD_NUMBER: _ClassVar[int]
    LANDMARK_TO_GOAL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    n_landmarks: int
    landmark_to_goal: _containers.RepeatedScalarFieldContainer[float]
    model: str
    version: str
    def __init__(self, session_id: _Optional[str] = ..., n_landmarks: _Optional[int] = ..., landmark_to_goal: _Optional[_Iterable[float]] = ..., model: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class ActRequest(_message.Message):
    __slots__ = ("session_id", "observation")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    observation: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, session_id: _Optional[str] = ..., observation: _Optional[_Iterable[float]] = ...) -> None: ...

class ActResponse(_message.Message):
    __slots__ = ("action", "subgoal", "subgoal_index", "replanned", "counter", "step", "estimated_distance")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SUBGOAL_FIELD_NUMBER: _ClassVar[int]
    SUBGOAL_INDEX_FIELD_NUMBER: _ClassVar[int]
    REPLANNED_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_DISTANCE_FIELD_NUMBER: _ClassVar[int]
    action: _containers.RepeatedScalarFieldContainer[float]
    subgoal: _containers.RepeatedScalarFieldContainer[float]
    subgoal_index: int
    replanned: bool
    counter: int
    step: int
    estimated_distance: float
    def __init__(self, action: _Optional[_Iterable[float]] = ..., subgoal: _Optional[_Iterable[float]] = ..., subgoal_index: _Optional[int] = ..., replanned: _Optional[bool] = ..., counter: _Optional[int] = ..., step: _Optional[int] = ..., estimated_distance: _Optional[float] = ...) -> None: ...

class EndEpisodeRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class EndEpisodeResponse(_message.Message):
    __slots__ = ("steps", "replans")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    REPLANS_FIELD_NUMBER: _ClassVar[int]
    steps: int
    replans: int
    def __init__(self, steps: _Optional[int] = ..., replans: _Optional[int] = ...) -> None: ...

class ControlRequest(_message.Message):
    __slots__ = ("start", "observation")
    START_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    start: StartEpisodeRequest
    observation: ActRequest
    def __init__(self, start: _Optional[_Union[StartEpisodeRequest, _Mapping]] = ..., observation: _Optional[_Union[ActRequest, _Mapping]] = ...) -> None: ...

class ControlResponse(_message.Message):
    __slots__ = ("started", "action")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    started: StartEpisodeResponse
    action: ActResponse
    def __init__(self, started: _Optional[_Union[StartEpisodeResponse, _Mapping]] = ..., action: _Optional[_Union[ActResponse, _Mapping]] = ...) -> None: ...
