"""How many values each role of a mapping gives, where the mapping alone says (fields, joints, indices,
a point's x/y/z), and what does not fit: among the roles (the achieved goal against the desired goal)
and, given them, the model's or env's dims. Checked before anything is recorded (``l3p ros2 record``
at start, ``l3p dataset check``) and at import: a wrong size is one line naming the fix, not a
recording that fails hours later."""
from __future__ import annotations

from typing import Any

from l3p.datasets.mapping import Mapping, Part
from l3p.datasets.messages import DEFAULT_FIELDS

ARRAY_TYPE = "std_msgs/msg/Float64MultiArray"
POINT_TYPE = "geometry_msgs/msg/PointStamped"
_VECTOR_FIELDS = {"data", "position", "velocity", "effort"}  # as long as the message makes them


def part_size(part: Part, kind: str) -> int | None:
    """The values ``part`` gives, or None where only its messages say (an array's data)."""
    if part.indices:
        return len(part.indices)
    if part.column:
        return None
    fields = part.fields or DEFAULT_FIELDS.get(kind, ())
    if part.joints:
        return len(part.joints) * len(fields)
    if not fields or any(f.split(".")[-1] in _VECTOR_FIELDS for f in fields):
        return None
    return len(fields)


def role_sizes(m: Mapping) -> dict[str, int | None]:
    """observation, action, achieved_goal, desired_goal: each the sum of its parts (None: unknown)."""
    def total(parts: tuple[Part, ...], default: str) -> int | None:
        sizes = [part_size(p, p.type or default) for p in parts]
        return None if not parts or None in sizes else sum(sizes)  # type: ignore[arg-type]

    out = {"observation": total(m.observation, ARRAY_TYPE), "action": total(m.action, ARRAY_TYPE),
           "desired_goal": total(m.desired_goal, POINT_TYPE)}
    out["achieved_goal"] = len(m.achieved_goal_indices) if m.achieved_goal_indices else total(m.achieved_goal,
                                                                                               ARRAY_TYPE)
    return out


def _goal_fix(m: Mapping, want: int) -> str:
    part = m.desired_goal[0]
    kind = part.type or (POINT_TYPE if part.topic else "")
    fields = part.fields or DEFAULT_FIELDS.get(kind, ())
    if len(m.desired_goal) == 1 and len(fields) > want and not part.indices and not part.joints:
        return f"give desired_goal[0] fields: [{', '.join(fields[:want])}]"
    return f"make desired_goal give {want} values (fields or indices)"


def size_problems(m: Mapping, dims: dict[str, int] | None = None, against: str = "") -> list[str]:
    """What does not fit, one line each naming the fix; ``dims`` (obs, goal, action) from ``against``
    (a model bundle, an env)."""
    sizes = role_sizes(m)
    problems = []
    achieved, desired = sizes["achieved_goal"], sizes["desired_goal"]
    if achieved is not None and desired is not None and achieved != desired:
        what = (f"achieved_goal_indices {list(m.achieved_goal_indices)} pick {achieved}" if m.achieved_goal_indices
                else f"achieved_goal gives {achieved}")
        problems.append(f"desired_goal gives {desired} values, {what}: {_goal_fix(m, achieved)}")
    if dims:
        for role, key in (("observation", "obs"), ("action", "action"), ("desired_goal", "goal"),
                          ("achieved_goal", "goal")):
            if sizes[role] is not None and sizes[role] != dims[key]:
                fix = f": {_goal_fix(m, dims[key])}" if role == "desired_goal" and m.desired_goal else ""
                problems.append(f"{role} gives {sizes[role]} values, {against} has {key} {dims[key]}{fix}")
        if m.achieved_goal_indices and max(m.achieved_goal_indices) >= dims["obs"]:
            problems.append(f"achieved_goal_indices reach {max(m.achieved_goal_indices)}, {against}'s observation "
                            f"has {dims['obs']} values")
    return problems


def shape_problems(arrays: dict[str, Any], dims: dict[str, int], against: str) -> list[str]:
    """The read arrays' widths (observations, actions, goals) against ``dims``."""
    out = []
    for name, key in (("observations", "obs"), ("actions", "action"), ("achieved_goals", "goal"),
                      ("desired_goals", "goal")):
        array = arrays.get(name)
        if array is not None and array.shape[1] != dims[key]:
            out.append(f"{name} have {array.shape[1]} values, {against} has {key} {dims[key]}")
    return out


def describe(m: Mapping) -> str:
    sizes = role_sizes(m)
    return ", ".join(f"{role} {n if n is not None else '? (from the messages)'}" for role, n in sizes.items())

