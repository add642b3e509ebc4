"""The mapping file: which topic or column of a recording is the observation, the action, the
achieved goal and the desired goal (docs/guides/recordings.md). YAML, typed: an unknown key, a
wrong type or a missing part is one `DatasetError` line naming the file and the key.

    format: rosbag2                      # npz | rosbag2 | lerobot | minari
    env_id: PointMaze_Large-v3           # or your robot's own name: no env is made (success_radius: R)
    paths: [recordings/day1]             # for `l3p train --dataset MAPPING.yaml`; relative to this file
    observation:                         # parts, concatenated in order
      - {topic: /arm/joint_states, joints: [j1, j2], fields: [position, velocity]}
    action: [{topic: /arm/forward_command_controller/commands}]
    achieved_goal_indices: [0, 1]        # entries of the observation; or achieved_goal: [parts]
    desired_goal: [{topic: /arm/goal, fields: [point.x, point.y]}]
    alignment: {stamps: receive, max_skew_s: 0.1, max_gap_s: 1.0}
    episodes: {split: topic, topic: /arm/episode_end}   # or goal (the default), or service
"""
from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Any

from l3p.core.commandline import did_you_mean
from l3p.core.dataset import DatasetError

FORMATS = ("npz", "rosbag2", "lerobot", "minari")
STAMPS = ("receive", "header")
SPLITS = ("goal", "topic", "service")
END_TYPES = ("std_msgs/msg/Empty", "std_msgs/msg/Bool")


@dataclasses.dataclass(frozen=True)
class Part:
    """One source of values: a bag's ``topic`` (its message ``fields``, dotted; for
    ``sensor_msgs/JointState`` the ``joints``, by name, in this order), or a ``column`` (a LeRobot
    column, a Minari dataset path such as ``observations/achieved_goal``, an .npz array).
    ``indices`` keep these entries of the values so read. ``type``: the message type to subscribe
    to when recording live (``l3p ros2 record``); a bag names its own."""

    topic: str = ""
    column: str = ""
    type: str = ""
    fields: tuple[str, ...] = ()
    joints: tuple[str, ...] = ()
    indices: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return self.topic or self.column

    @property
    def what(self) -> str:
        return f"topic {self.topic}" if self.topic else f"column {self.column!r}"


@dataclasses.dataclass(frozen=True)
class Alignment:
    """How a bag's topics become steps (docs/guides/recordings.md, "Time alignment").

    One step per action message: it is paired with the newest message of each observation (and
    achieved-goal) topic stamped at or before it, if that one is at most ``max_skew_s`` older; else
    the step is dropped. Of several actions paired with the same observation only the last is kept
    (it is the one the robot was executing when the next observation came). The desired goal is the
    newest goal message before the action, however old. An episode ends where the desired goal
    changes, where a step was dropped, and where actions are more than ``max_gap_s`` apart.
    ``stamps``: ``receive`` (the time the bag logged the message) or ``header`` (``header.stamp``
    for message types that have a header, the receive time for the others, e.g. a command array)."""

    stamps: str = "receive"
    max_skew_s: float = 0.1
    max_gap_s: float = 1.0


@dataclasses.dataclass(frozen=True)
class Episodes:
    """Where a bag's episodes end, besides a dropped step and a pause over ``max_gap_s`` (always).

    ``split``: ``goal``, where a desired-goal message differs from the one before it; ``topic``, at
    each message of ``topic`` (``type`` ``std_msgs/msg/Empty``, or ``std_msgs/msg/Bool`` whose
    ``data`` is true); ``service``, at each call of ``service`` (``std_srvs/srv/Trigger``), which
    ``l3p ros2 record`` offers; a bag it writes holds each call as an ``std_msgs/msg/Empty`` message
    on a topic of the service's name, which is what an import reads. An end splits the steps
    between the last command before it and the first after it."""

    split: str = "goal"
    topic: str = ""
    type: str = "std_msgs/msg/Empty"
    service: str = "/l3p_record/end_episode"

    def end_topic(self) -> tuple[str, str] | None:
        """The topic a bag holds the episode ends on, and its type; None for ``goal``."""
        if self.split == "topic":
            return self.topic, self.type
        if self.split == "service":
            return self.service, "std_msgs/msg/Empty"
        return None


@dataclasses.dataclass(frozen=True)
class Mapping:
    format: str = ""
    env_id: str = ""
    paths: tuple[str, ...] = ()
    observation: tuple[Part, ...] = ()
    action: tuple[Part, ...] = ()
    achieved_goal: tuple[Part, ...] = ()
    achieved_goal_indices: tuple[int, ...] = ()
    desired_goal: tuple[Part, ...] = ()
    episode_column: str = "episode_index"  # LeRobot: the episode of each row
    alignment: Alignment = Alignment()
    episodes: Episodes = Episodes()
    # For training without a simulator (training/held_out.py): false: train from the recording alone
    # even where the project can make env_id; the achieved goal within success_radius of the goal is
    # success (0: none given; the env's own test, or l3p train --set success_radius=R).
    simulator: bool = True
    success_radius: float = 0.0
    source: str = ""  # the file this mapping was read from (for messages and relative paths)

    def where(self) -> str:
        return f"mapping {self.source}" if self.source else "mapping"


# Readable without a mapping file: the names each format's own writer uses.
DEFAULTS: dict[str, dict[str, Any]] = {
    "npz": {},
    "minari": {"observation": [{"column": "observations/observation"}], "action": [{"column": "actions"}],
               "achieved_goal": [{"column": "observations/achieved_goal"}],
               "desired_goal": [{"column": "observations/desired_goal"}]},
    "lerobot": {"observation": [{"column": "observation.state"}], "action": [{"column": "action"}]},
    "rosbag2": {},
}


def _convert(value: Any, hint: Any, key: str, where: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise DatasetError(f"{where}: {key} must be a mapping of {', '.join(_names(hint))}, got {value!r}")
        return _build(hint, value, where, key + ".")
    if origin is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        if not isinstance(value, (list, tuple)):
            value = [value]
        return tuple(_convert(v, item, f"{key}[{i}]", where) for i, v in enumerate(value))
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is str:
        if isinstance(value, str):
            return value
    raise DatasetError(f"{where}: {key} must be {hint.__name__}, got {value!r}")


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name != "source"]


def _build(cls: type, values: dict[str, Any], where: str, prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    known = _names(cls)
    out = {}
    for key, value in values.items():
        if key not in known:
            raise DatasetError(f"{where}: unknown key {prefix + str(key)!r}{did_you_mean(str(key), known)}; "
                               f"known: {', '.join(known)}")
        out[key] = _convert(value, hints[key], prefix + key, where)
    return cls(**out)


def mapping_from_dict(values: dict[str, Any], source: str = "", format: str = "") -> Mapping:
    """A checked Mapping from a parsed YAML tree; ``format`` (a command's FORMAT) must agree with the file's."""
    where = f"mapping {source}" if source else "mapping"
    if not isinstance(values, dict):
        raise DatasetError(f"{where}: expected a mapping of keys ({', '.join(_names(Mapping))})")
    fmt = format or values.get("format", "")
    if values.get("format") not in (None, "", fmt):
        raise DatasetError(f"{where}: format {values['format']!r}, but the command reads {fmt!r}")
    if fmt not in FORMATS:
        raise DatasetError(f"{where}: format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    mapping = _build(Mapping, {**DEFAULTS[fmt], **values, "format": fmt}, where)
    mapping = dataclasses.replace(mapping, source=source)
    check(mapping)
    return mapping


def load_mapping(path: str | Path | None, format: str = "", **overrides: Any) -> Mapping:
    """The mapping in ``path`` (YAML), or the format's defaults without one; ``overrides`` (env_id, ...) win."""
    values: dict[str, Any] = {}
    if path is not None:
        import yaml  # the [datasets] and [ros2] extras bring it

        try:
            values = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as err:
            raise DatasetError(f"mapping {path}: cannot read it ({err.strerror})") from None
        except yaml.YAMLError as err:
            raise DatasetError(f"mapping {path} is not YAML: {' '.join(str(err).split())}") from None
    if not isinstance(values, dict):
        raise DatasetError(f"mapping {path}: expected a mapping of keys ({', '.join(_names(Mapping))})")
    values.update({k: v for k, v in overrides.items() if v not in (None, "", ())})
    return mapping_from_dict(values, str(path) if path is not None else "", format)


def check(m: Mapping) -> None:
    where = m.where()
    if m.success_radius < 0:
        raise DatasetError(f"{where}: success_radius must be > 0 (or left out), got {m.success_radius:g}")
    if m.format == "npz":
        return
    if not m.env_id:
        raise DatasetError(f"{where}: env_id is missing (the goal env the recording is of; or --env-id)")
    for key in ("observation", "action"):
        if not getattr(m, key):
            raise DatasetError(f"{where}: {key} is missing (one or more parts: topic or column)")
    if bool(m.achieved_goal) == bool(m.achieved_goal_indices):
        raise DatasetError(f"{where}: give achieved_goal (parts) or achieved_goal_indices (entries of the "
                           f"observation), one of them")
    need = "topic" if m.format == "rosbag2" else "column"
    for key in ("observation", "action", "achieved_goal", "desired_goal"):
        for i, part in enumerate(getattr(m, key)):
            if bool(part.topic) == bool(part.column) or not getattr(part, need):
                raise DatasetError(f"{where}: {key}[{i}] needs a {need} ({m.format} reads {need}s), and only that")
            if part.column and (part.fields or part.joints):
                raise DatasetError(f"{where}: {key}[{i}]: fields and joints are for topics, not columns")
    if m.alignment.stamps not in STAMPS:
        raise DatasetError(f"{where}: alignment.stamps must be one of {', '.join(STAMPS)}, got {m.alignment.stamps!r}")
    for key in ("max_skew_s", "max_gap_s"):
        if not getattr(m.alignment, key) > 0:
            raise DatasetError(f"{where}: alignment.{key} must be > 0, got {getattr(m.alignment, key)}")
    e = m.episodes
    if e.split not in SPLITS:
        raise DatasetError(f"{where}: episodes.split must be one of {', '.join(SPLITS)}, got {e.split!r}")
    if e.split != "goal" and m.format != "rosbag2":
        raise DatasetError(f"{where}: episodes.split: {e.split} is for bags ({m.format} has its own episodes)")
    if e.split == "topic" and not e.topic.startswith("/"):
        raise DatasetError(f"{where}: episodes.split: topic needs episodes.topic, a full name (/robot/episode_end)")
    if e.type not in END_TYPES:
        raise DatasetError(f"{where}: episodes.type must be one of {', '.join(END_TYPES)}, got {e.type!r}")
    if e.split == "service" and not e.service.startswith("/"):
        raise DatasetError(f"{where}: episodes.service must be a full name (/l3p_record/end_episode), "
                           f"got {e.service!r}")
    ends = e.end_topic()
    if ends and ends[0] in {p.topic for key in ("observation", "action", "achieved_goal", "desired_goal")
                            for p in getattr(m, key)}:
        raise DatasetError(f"{where}: episodes: {ends[0]} is also an observation, action or goal topic")


def resolved_paths(m: Mapping) -> list[Path]:
    """The mapping's ``paths``, relative to the mapping file; ``*`` patterns expanded, in name order."""
    base = Path(m.source).parent if m.source else Path(".")
    out: list[Path] = []
    for raw in m.paths:
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        if any(c in raw for c in "*?["):
            matches = sorted(path.parent.glob(path.name))
            if not matches:
                raise DatasetError(f"{m.where()}: paths: nothing matches {raw!r}")
            out.extend(matches)
        else:
            out.append(path)
    if not out:
        raise DatasetError(f"{m.where()}: paths is empty (the recordings to read)")
    return out
