"""ROS 2 messages -> vectors, for a bag's messages (rosbags) and live ones (rclpy) alike: both
have the message's fields as attributes, so one function reads either."""
from __future__ import annotations

from typing import Any

import numpy as np

from l3p.datasets.mapping import Part

# Message types whose values are unambiguous; any other type needs the part's ``fields``.
DEFAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "std_msgs/msg/Float64MultiArray": ("data",),
    "std_msgs/msg/Float32MultiArray": ("data",),
    "std_msgs/msg/Float64": ("data",),
    "std_msgs/msg/Float32": ("data",),
    "sensor_msgs/msg/JointState": ("position",),
    "geometry_msgs/msg/PointStamped": ("point.x", "point.y", "point.z"),
    "geometry_msgs/msg/Point": ("x", "y", "z"),
    "geometry_msgs/msg/PoseStamped": ("pose.position.x", "pose.position.y", "pose.position.z"),
}


class BadMessage(ValueError):
    """A message whose values cannot be read as the part says (the caller adds file, topic, step)."""


def part_fields(part: Part, msgtype: str) -> tuple[str, ...]:
    if part.fields:
        return part.fields
    if msgtype in DEFAULT_FIELDS:
        return DEFAULT_FIELDS[msgtype]
    raise BadMessage(f"{msgtype} has no default fields: name them (fields: [a.b, ...])")


def _resolve(msg: Any, path: str) -> Any:
    value = msg
    for name in path.split("."):
        try:
            value = getattr(value, name)
        except AttributeError:
            raise BadMessage(f"has no field {path!r}") from None
    return value


def message_vector(msg: Any, part: Part, fields: tuple[str, ...]) -> np.ndarray:
    """The part's values from ``msg`` (float64): each field's values (a number or a sequence), or for
    ``joints`` each field's values of those joints, by name; then ``indices``."""
    if part.joints:
        names = list(msg.name)
        index = {name: i for i, name in enumerate(names)}
        missing = [j for j in part.joints if j not in index]
        if missing:
            raise BadMessage(f"has no joint(s) {', '.join(map(repr, missing))} "
                             f"(has {', '.join(map(repr, names)) or 'none'})")
        rows = [index[j] for j in part.joints]
        parts = []
        for f in fields:
            values = np.asarray(_resolve(msg, f), dtype=np.float64)
            if len(values) != len(names):
                raise BadMessage(f"has {len(names)} joint names but {len(values)} {f} values")
            parts.append(values[rows])
        vec = np.concatenate(parts)
    else:
        vec = np.concatenate([np.atleast_1d(np.asarray(_resolve(msg, f), dtype=np.float64)) for f in fields])
    if part.indices:
        if max(part.indices) >= len(vec) or min(part.indices) < -len(vec):
            raise BadMessage(f"has {len(vec)} values; indices reach {max(part.indices)}")
        vec = vec[list(part.indices)]
    return vec


def header_stamp_ns(msg: Any) -> int:
    header = getattr(msg, "header", None)
    if header is None:
        raise BadMessage("has no header (use alignment.stamps: receive)")
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def ends_episode(msg: Any) -> bool:
    """Whether a message of an end topic ends an episode: any ``std_msgs/Empty``, a ``std_msgs/Bool`` if true."""
    return bool(getattr(msg, "data", True))
