"""The bridge's configuration: one typed dataclass, read from a YAML file (plain, or a ROS 2
parameters file: ``NODE: {ros__parameters: {...}}``), with ``key=value`` overrides from the command
line. Nested keys (``observation.joints``) are the same names in YAML and in overrides.

No ROS import here: the file is checked before any node starts, so a wrong key is one error line.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from l3p.core.commandline import did_you_mean
from l3p.core.errors import L3PError
from l3p.core.config import parse_variant
from l3p.core.overrides import parse_pair

OBSERVATION_TYPES = ("array", "joint_state", "odometry")
GOAL_TYPES = ("point", "pose", "array")
COMMAND_TYPES = ("array", "twist", "joint_trajectory")
TWIST_FIELDS = ("linear.x", "linear.y", "linear.z", "angular.x", "angular.y", "angular.z")
JOINT_FIELDS = ("position", "velocity", "effort")
ODOMETRY_FIELDS = ("position", "orientation", "linear", "angular")  # x,y,z | x,y,z,w | x,y,z | x,y,z
RELIABILITY = ("reliable", "best_effort")


class BridgeConfigError(L3PError):
    """A configuration the bridge cannot run with; the message names the key."""


@dataclasses.dataclass(frozen=True)
class ObservationSpec:
    """How an observation message becomes the model's observation vector.

    ``array``: ``std_msgs/Float64MultiArray``, the data as is. ``joint_state``:
    ``sensor_msgs/JointState``, for each of ``fields`` the values of ``joints`` in that order (a
    message missing a joint is refused, naming it). ``odometry``: ``nav_msgs/Odometry``, ``fields``
    among position (x,y,z), orientation (x,y,z,w), linear and angular velocity (x,y,z).
    ``indices``: keep these entries of the vector so built (empty: all)."""

    type: str = "array"
    joints: tuple[str, ...] = ()
    fields: tuple[str, ...] = ("position",)
    indices: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class GoalSpec:
    """How a goal message becomes the model's goal: ``point`` (``geometry_msgs/PointStamped``, x,y,z),
    ``pose`` (``geometry_msgs/PoseStamped``, its position x,y,z) or ``array``
    (``std_msgs/Float64MultiArray``); ``indices`` keep these entries (a planar goal: [0, 1])."""

    type: str = "point"
    indices: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class CommandSpec:
    """How an action becomes the command published on ``topics.action``.

    ``array``: ``std_msgs/Float64MultiArray``, the action as is (ros2_control's
    forward_command_controller; a hold is labelled ``hold``). ``twist``: ``geometry_msgs/Twist``
    (a mobile base's ``cmd_vel``), the action's values into ``fields`` in order, the others 0.
    ``joint_trajectory``: ``trajectory_msgs/JointTrajectory`` (joint_trajectory_controller), one
    point: positions = the action for ``joints``, reached ``time_from_start_s`` after it is sent.
    Only ``array`` labels a hold; with the others, the status topic and ``action_stamped`` tell a
    hold from an action."""

    type: str = "array"
    fields: tuple[str, ...] = ("linear.x", "angular.z")
    joints: tuple[str, ...] = ()
    time_from_start_s: float = 0.1


@dataclasses.dataclass(frozen=True)
class GoalActionSpec:
    """Goals as the ROS 2 action ``l3p_interfaces/action/ReachGoal`` (`l3p.clients.ros2.goal_action`) in
    place of the goal topic: a goal, feedback at each re-plan, a result; cancel; a new goal replaces
    the running one. Needs ``achieved_goal_indices`` (whether a goal is reached)."""

    enabled: bool = False  # serve the action; the goal topic is then not read
    name: str = "reach_goal"  # the action's name, relative to each robot's namespace
    tolerance: float = 0.05  # reached: the achieved goal within this distance of the goal (a goal's own wins)


@dataclasses.dataclass(frozen=True)
class Topics:
    """Topic names, relative to each robot's namespace (see ``BridgeConfig.robots``)."""

    observation: str = "observation"
    goal: str = "goal"
    # every action and every hold, of command.type (default: ros2_control's forward_command_controller
    # input, std_msgs/Float64MultiArray, a hold labelled convert.HOLD_LABEL)
    action: str = "forward_command_controller/commands"
    # sensor_msgs/JointState: every action (never a hold), stamped with the observation it answers; "" = none
    action_stamped: str = "action_stamped"
    subgoal: str = "subgoal"
    status: str = "status"
    success: str = ""  # optional std_msgs/Bool the robot reports success on (recorded); "" = none
    end_episode: str = "end_episode"  # std_msgs/Empty: end the running episode (l3p ros2 end NS); "" = none


@dataclasses.dataclass(frozen=True)
class Qos:
    depth: int = 10  # history depth of every topic but the observation (depth 1: only the newest is answered)
    reliability: str = "reliable"  # of every topic the bridge subscribes to or publishes


@dataclasses.dataclass(frozen=True)
class BridgeConfig:
    """Everything the bridge needs; every field has its default here and nowhere else."""

    # -- the planner server (the robot library's PlannerClient)
    server: str = "127.0.0.1:50051"
    model: str = ""  # the served model ("" = the server's default)
    tls_ca: str = ""  # PEM files; a CA turns TLS on
    tls_cert: str = ""
    tls_key: str = ""
    tls_server_name: str = ""
    token_file: str = ""
    planner: str = "l3p"  # a planner variant MODE[@key=value...]
    seed: int = 0  # the robot's k-th episode (0-based) is planned with seed + k
    stream: bool = True  # one Control stream per episode (lower latency) or unary Act calls
    act_timeout_s: float = 0.5  # the longest wait for one action before the robot is held
    # At start, how long to wait for a server not up yet (one started alongside); 0: try once.
    connect_timeout_s: float = 30.0
    # -- the control loop
    rate_hz: float = 0.0  # 0: one action per observation; > 0: at most this rate, on the newest observation
    observation_timeout_s: float = 0.5  # no observation for this long: hold
    hold: str = "zeros"  # the hold command: "zeros", "none" (publish nothing) or "values"
    hold_values: tuple[float, ...] = ()  # hold == "values": the command to publish
    status_period_s: float = 1.0  # status heartbeat between steps
    frame_id: str = "world"  # the goal's frame (a goal stamped in another is refused) and the subgoal's
    # A goal stamped further ahead of the bridge's clock is refused: the robot's clock is off, and every
    # observation it stamps before that goal would be dropped as stale.
    goal_ahead_tolerance_s: float = 1.0
    robots: tuple[str, ...] = ("",)  # one namespace per robot this process serves ("" = the node's own)
    topics: Topics = Topics()
    qos: Qos = Qos()
    observation: ObservationSpec = ObservationSpec()
    goal: GoalSpec = GoalSpec()
    command: CommandSpec = CommandSpec()
    goal_action: GoalActionSpec = GoalActionSpec()
    # -- recording (core/dataset.py's format); "" = off. Several robots: one file each, NAME-<robot>.npz
    record: str = ""
    achieved_goal_indices: tuple[int, ...] = ()  # where the achieved goal sits in the observation

    def __post_init__(self) -> None:
        check(self)

    def mode_and_overrides(self) -> tuple[str, dict[str, Any]]:
        return parse_variant(self.planner)


def check(c: BridgeConfig) -> None:
    def bad(key: str, why: str) -> BridgeConfigError:
        return BridgeConfigError(f"{key}: {why}")

    try:
        parse_variant(c.planner)
    except ValueError as err:
        raise bad("planner", str(err)) from None
    if c.observation.type not in OBSERVATION_TYPES:
        raise bad("observation.type", f"one of {', '.join(OBSERVATION_TYPES)}, got {c.observation.type!r}")
    allowed = {"joint_state": JOINT_FIELDS, "odometry": ODOMETRY_FIELDS}.get(c.observation.type)
    if allowed is not None:
        wrong = [f for f in c.observation.fields if f not in allowed]
        if wrong or not c.observation.fields:
            raise bad("observation.fields", f"for {c.observation.type}: some of {', '.join(allowed)}, got "
                      f"{list(c.observation.fields)}")
    if c.observation.type == "joint_state" and not c.observation.joints:
        raise bad("observation.joints", "joint_state needs the joint names, in observation order")
    if c.goal.type not in GOAL_TYPES:
        raise bad("goal.type", f"one of {', '.join(GOAL_TYPES)}, got {c.goal.type!r}")
    if c.command.type not in COMMAND_TYPES:
        raise bad("command.type", f"one of {', '.join(COMMAND_TYPES)}, got {c.command.type!r}")
    if c.command.type == "twist":
        wrong = [f for f in c.command.fields if f not in TWIST_FIELDS]
        if wrong or not c.command.fields or len(set(c.command.fields)) != len(c.command.fields):
            raise bad("command.fields", f"for twist: distinct ones of {', '.join(TWIST_FIELDS)}, got "
                      f"{list(c.command.fields)}")
    if c.command.type == "joint_trajectory" and not c.command.joints:
        raise bad("command.joints", "joint_trajectory needs the joint names, in action order")
    if not c.command.time_from_start_s > 0:
        raise bad("command.time_from_start_s", f"must be > 0, got {c.command.time_from_start_s}")
    if c.hold not in ("zeros", "none", "values"):
        raise bad("hold", f"zeros, none or values, got {c.hold!r}")
    if c.hold == "values" and not all(math.isfinite(v) for v in c.hold_values):
        raise bad("hold_values", "finite numbers")
    if c.hold == "values" and not c.hold_values:
        raise bad("hold_values", "hold: values needs the command")
    for key in ("act_timeout_s", "observation_timeout_s", "status_period_s"):
        if not getattr(c, key) > 0:
            raise bad(key, f"must be > 0, got {getattr(c, key)}")
    if not c.connect_timeout_s >= 0:
        raise bad("connect_timeout_s", f"must be >= 0, got {c.connect_timeout_s}")
    if c.rate_hz < 0:
        raise bad("rate_hz", f"must be >= 0, got {c.rate_hz}")
    if not c.goal_ahead_tolerance_s >= 0:
        raise bad("goal_ahead_tolerance_s", f"must be >= 0, got {c.goal_ahead_tolerance_s}")
    if c.qos.reliability not in RELIABILITY:
        raise bad("qos.reliability", f"one of {', '.join(RELIABILITY)}, got {c.qos.reliability!r}")
    if c.qos.depth < 1:
        raise bad("qos.depth", f"must be >= 1, got {c.qos.depth}")
    if not c.robots or len(set(c.robots)) != len(c.robots):
        raise bad("robots", f"distinct namespaces, at least one; got {list(c.robots)}")
    if (c.tls_cert == "") != (c.tls_key == ""):
        raise bad("tls_cert", "a client certificate needs its key (tls_key), and a key its certificate")
    if not (math.isfinite(c.goal_action.tolerance) and c.goal_action.tolerance > 0):
        raise bad("goal_action.tolerance", f"must be > 0, got {c.goal_action.tolerance}")
    if c.goal_action.enabled and not c.achieved_goal_indices:
        raise bad("achieved_goal_indices", "the goal action needs where the achieved goal sits in the observation")
    if c.record and not c.achieved_goal_indices:
        raise bad("achieved_goal_indices", "recording needs where the achieved goal sits in the observation")


# --------------------------------------------------------------------------- reading


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _ros_parameters(tree: Any) -> dict[str, Any]:
    """A ROS 2 parameters file's ``ros__parameters`` block (of its first node), or the tree itself."""
    if isinstance(tree, dict) and len(tree) == 1:
        (node,) = tree.values()
        if isinstance(node, dict) and "ros__parameters" in node:
            return node["ros__parameters"]
    return tree


def _coerce(name: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, bool):
            return value
    elif isinstance(default, tuple):
        if isinstance(value, str):
            value = [v for v in value.replace("[", "").replace("]", "").split(",") if v.strip()]
        if isinstance(value, (list, tuple)):
            kind = int if name.endswith("indices") else float if name.endswith("hold_values") else str
            try:
                return tuple(kind(v.strip() if isinstance(v, str) else v) for v in value)
            except (TypeError, ValueError):
                pass
    elif isinstance(default, (int, float, str)) and not isinstance(value, (list, dict, bool)):
        if isinstance(default, int) and isinstance(value, float) and not value.is_integer():
            raise BridgeConfigError(f"{name}: expected an integer, got {value!r}")
        try:
            return type(default)(value)
        except (TypeError, ValueError):
            pass
    raise BridgeConfigError(f"{name}: expected {type(default).__name__}, got {value!r}")


def build(values: dict[str, Any]) -> BridgeConfig:
    """A BridgeConfig from flat dotted names (unknown names refused, naming them)."""
    defaults = BridgeConfig()
    nested: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(BridgeConfig)}
    for name, value in values.items():
        head, dot, tail = name.partition(".")
        if head not in fields:
            raise BridgeConfigError(f"unknown key {name!r}{did_you_mean(head, fields)}; "
                                    f"known: {', '.join(sorted(fields))}")
        default = getattr(defaults, head)
        if dot:
            if not dataclasses.is_dataclass(default) or tail not in {f.name for f in dataclasses.fields(default)}:
                known = ([f"{head}.{f.name}" for f in dataclasses.fields(default)]
                         if dataclasses.is_dataclass(default) else [])
                raise BridgeConfigError(f"unknown key {name!r}{did_you_mean(name, known)}")
            nested.setdefault(head, {})[tail] = _coerce(name, value, getattr(default, tail))
        else:
            if dataclasses.is_dataclass(default):
                raise BridgeConfigError(f"{name}: a mapping of {', '.join(f.name for f in dataclasses.fields(default))}")
            top[name] = _coerce(name, value, default)
    for head, sub in nested.items():
        top[head] = dataclasses.replace(getattr(defaults, head), **sub)
    return BridgeConfig(**top)


def load(path: str | Path | None = None, overrides: list[str] = ()) -> BridgeConfig:
    """The config in ``path`` (YAML) with ``key=value`` overrides applied."""
    values: dict[str, Any] = {}
    if path is not None:
        import yaml  # comes with rclpy; read only here

        try:
            tree = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as err:
            raise BridgeConfigError(f"cannot read {path}: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise BridgeConfigError(f"{path} is not YAML: {err}") from None
        tree = _ros_parameters(tree)
        if not isinstance(tree, dict):
            raise BridgeConfigError(f"{path}: expected a mapping of settings")
        values.update(_flatten(tree))
    for item in overrides:
        try:
            key, value = parse_pair(item, yaml_value, flag="--set")
        except ValueError as err:
            raise BridgeConfigError(str(err)) from None
        values[key] = value
    return build(values)


def yaml_value(key: str, text: str) -> Any:
    """A ``--set KEY=VALUE`` value as the YAML file would give it (ValueError when it is no YAML)."""
    import yaml  # comes with rclpy; read only here

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(f"not YAML: {err}") from None


def as_dict(c: BridgeConfig) -> dict[str, Any]:
    return dataclasses.asdict(c)
