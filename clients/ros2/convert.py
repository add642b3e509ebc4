"""ROS 2 messages <-> the planner's vectors. A message that cannot become a valid vector raises
`BadMessage` naming the problem (the bridge reports it on its status topic and acts on nothing).

The planner takes float32 values: a value a float32 cannot hold (beyond +-3.4e38) is refused here,
where the robot's message is still known, rather than turned into Inf on the wire."""

from __future__ import annotations

from typing import Any

import numpy as np
from geometry_msgs.msg import PointStamped, PoseStamped, Twist
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from l3p.clients.ros2.config import CommandSpec, GoalSpec, ObservationSpec


FLOAT32_MAX = float(np.finfo(np.float32).max)
# The label of a hold's one dimension on the action topic: a robot tells a hold from an action by it
# (forward_command_controller reads only the data).
HOLD_LABEL = "hold"


class BadMessage(ValueError):
    """A message the bridge refuses: wrong length, NaN/Inf, beyond float32, missing joints, wrong frame."""


def observation_message_type(spec: ObservationSpec) -> type:
    if spec.type == "joint_state":
        from sensor_msgs.msg import JointState

        return JointState
    if spec.type == "odometry":
        from nav_msgs.msg import Odometry

        return Odometry
    return Float64MultiArray


def goal_message_type(spec: GoalSpec) -> type:
    return {"point": PointStamped, "pose": PoseStamped, "array": Float64MultiArray}[spec.type]


def command_message_type(spec: CommandSpec) -> type:
    if spec.type == "twist":
        return Twist
    if spec.type == "joint_trajectory":
        from trajectory_msgs.msg import JointTrajectory  # in the ros2 extra; only this type needs it

        return JointTrajectory
    return Float64MultiArray


def type_name(cls: type) -> str:
    """A message class's ROS name, as the graph lists it: ``geometry_msgs/msg/Twist``."""
    return f"{cls.__module__.split('.')[0]}/msg/{cls.__name__}"


def command_message(values: Any, spec: CommandSpec, label: str = "") -> Any:
    """The command for the action ``values``, of the spec's type (``label``: an array's, for a hold)."""
    if spec.type == "array":
        return array_message(values, label)
    data = np.asarray(values, dtype=np.float64).ravel().tolist()
    if spec.type == "twist":
        msg = Twist()
        for name, value in zip(spec.fields, data):
            part, _, axis = name.partition(".")
            setattr(getattr(msg, part), axis, value)
        return msg
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    whole, frac = divmod(spec.time_from_start_s, 1.0)
    point = JointTrajectoryPoint(positions=data)
    point.time_from_start.sec, point.time_from_start.nanosec = int(whole), int(round(frac * 1e9))
    return JointTrajectory(joint_names=list(spec.joints), points=[point])


def _select(vec: np.ndarray, indices: tuple[int, ...], what: str) -> np.ndarray:
    if not indices:
        return vec
    if max(indices) >= len(vec) or min(indices) < -len(vec):
        raise BadMessage(f"{what} has {len(vec)} values; the configured indices reach {max(indices)}")
    return vec[list(indices)]


def _checked(vec: np.ndarray, dim: int, what: str) -> np.ndarray:
    if vec.shape != (dim,):
        raise BadMessage(f"{what} has {vec.size} values, the model wants {dim}")
    fits = np.abs(vec) <= FLOAT32_MAX  # False for NaN and Inf too: one pass for every valid message
    if not fits.all():
        i = int(np.flatnonzero(~fits)[0])
        if not np.isfinite(vec[i]):
            raise BadMessage(f"{what} has NaN or Inf at index {i}")
        raise BadMessage(f"{what} has {vec[i]:g} at index {i}, beyond float32 (the planner's values are "
                         f"float32, |x| <= {FLOAT32_MAX:.4g})")
    return vec


def observation_vector(msg: Any, spec: ObservationSpec, dim: int) -> np.ndarray:
    """The model's observation from ``msg`` (float64, checked for length and finiteness)."""
    if spec.type == "joint_state":
        index = {name: i for i, name in enumerate(msg.name)}
        missing = [j for j in spec.joints if j not in index]
        if missing:
            raise BadMessage(f"joint state lacks joint(s) {', '.join(map(repr, missing))} "
                             f"(has {', '.join(map(repr, msg.name)) or 'none'})")
        parts = []
        for f in spec.fields:
            values = getattr(msg, f)
            if len(values) != len(msg.name):
                raise BadMessage(f"joint state has {len(msg.name)} names but {len(values)} {f} values")
            parts.append([values[index[j]] for j in spec.joints])
        vec = np.array(parts, dtype=np.float64).ravel()
    elif spec.type == "odometry":
        pose, twist = msg.pose.pose, msg.twist.twist
        source = {
            "position": (pose.position.x, pose.position.y, pose.position.z),
            "orientation": (pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w),
            "linear": (twist.linear.x, twist.linear.y, twist.linear.z),
            "angular": (twist.angular.x, twist.angular.y, twist.angular.z),
        }
        vec = np.array([v for f in spec.fields for v in source[f]], dtype=np.float64)
    else:
        vec = np.asarray(msg.data, dtype=np.float64)
    return _checked(_select(vec, spec.indices, "observation"), dim, "observation")


def goal_vector(msg: Any, spec: GoalSpec, dim: int) -> np.ndarray:
    """The model's goal from ``msg`` (float64, checked)."""
    if spec.type == "point":
        p = msg.point
        vec = np.array([p.x, p.y, p.z], dtype=np.float64)
    elif spec.type == "pose":
        p = msg.pose.position
        vec = np.array([p.x, p.y, p.z], dtype=np.float64)
    else:
        vec = np.asarray(msg.data, dtype=np.float64)
    return _checked(_select(vec, spec.indices, "goal"), dim, "goal")


def goal_values(values: Any, dim: int) -> np.ndarray:
    """A goal given as its values (a ReachGoal action's goal), checked as a goal message is."""
    return _checked(np.asarray(values, dtype=np.float64), dim, "goal")


def check_goal_frame(msg: Any, frame_id: str) -> None:
    """A goal stamped in another frame than the bridge's ``frame_id`` is refused (no frame: the bridge's)."""
    header = getattr(msg, "header", None)
    frame = header.frame_id.lstrip("/") if header is not None else ""
    if frame and frame != frame_id.lstrip("/"):
        raise BadMessage(f"goal is in frame {header.frame_id!r}; the bridge's frame_id is {frame_id!r}")


def header_stamp(msg: Any) -> Any:
    """The message's ``header.stamp``, or None for a message without a header (``Float64MultiArray``)."""
    header = getattr(msg, "header", None)
    return header.stamp if header is not None else None


def stamp_ns(stamp: Any) -> int:
    """A ``builtin_interfaces/Time`` in nanoseconds; 0 for None or a zero stamp (not stamped)."""
    return 0 if stamp is None else stamp.sec * 1_000_000_000 + stamp.nanosec


def seconds(ns: int) -> str:
    """A stamp in nanoseconds as seconds, to the nanosecond (``1712345678.000000042``)."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def goal_ahead_problem(stamp: int, now: int, tolerance_s: float) -> str:
    """Why a goal stamped ``stamp`` is refused at ``now`` (ns, the bridge's clock), or "": every
    observation stamped before it would be dropped as stale."""
    if stamp - now <= tolerance_s * 1e9:
        return ""
    return (f"bad goal: stamped {(stamp - now) / 1e9:.3f} s ahead of the bridge's clock (goal {seconds(stamp)}, "
            f"bridge {seconds(now)}), more than goal_ahead_tolerance_s {tolerance_s:g}: refused; is the robot's "
            "clock synchronized with the bridge's?")


def array_message(values: Any, label: str = "") -> Float64MultiArray:
    """A ``Float64MultiArray`` holding ``values`` (one dimension, as forward_command_controller wants)."""
    data = np.asarray(values, dtype=np.float64).ravel()
    msg = Float64MultiArray()
    if label:
        msg.layout.dim = [MultiArrayDimension(label=label, size=data.size, stride=data.size)]
    msg.data = data.tolist()
    return msg


def stamped_action_message(values: Any, stamp: Any) -> JointState:
    """The action as a ``JointState`` stamped with the observation it answers (``position``: the values)."""
    msg = JointState()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.position = np.asarray(values, dtype=np.float64).ravel().tolist()
    return msg


def point_message(values: Any, frame_id: str, stamp: Any = None) -> PointStamped:
    """A ``PointStamped`` at the first three entries of ``values`` (a shorter vector padded with 0)."""
    v = np.zeros(3)
    x = np.asarray(values, dtype=np.float64).ravel()[:3]
    v[: x.size] = x
    msg = PointStamped()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    msg.point.x, msg.point.y, msg.point.z = float(v[0]), float(v[1]), float(v[2])
    return msg
