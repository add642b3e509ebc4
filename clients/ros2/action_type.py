"""The bridge's ROS 2 action type, ``l3p_interfaces/action/ReachGoal`` (clients/ros2/interfaces/l3p_interfaces),
and the names of its outcomes.

A ROS 2 interface type is C code that a rosidl build generates and compiles, and a pip install cannot
run one, so the type comes one of two ways:

- an ``l3p_interfaces`` built with colcon under a system ROS 2 and sourced: found first, as any ROS
  package;
- with the ``[ros2]`` wheels, the build shipped in clients/ros2/interfaces/built/
  (scripts/build_ros2_interfaces.py made it with the wheels' own rosidl generators), used only when
  the running wheels are the versions it was built against (its BUILT.json).
"""

from __future__ import annotations

import json
import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from l3p.core.errors import L3PError

BUILT = Path(__file__).resolve().parent / "interfaces" / "built"
# ReachGoal.Result.outcome's values, in order (REACHED=0 ... FAILED=4): the status topic's state when
# a goal ends.
OUTCOMES = ("reached", "timed_out", "canceled", "preempted", "failed")
REACHED, TIMED_OUT, CANCELED, PREEMPTED, FAILED = range(len(OUTCOMES))


def _shipped_build_mismatch() -> str:
    """Why the shipped build cannot load in this Python and ROS 2, or ""."""
    built = json.loads((BUILT / "BUILT.json").read_text())
    wrong = []
    for wheel, built_with in built["wheels"].items():
        try:
            have = version(wheel)
        except PackageNotFoundError:
            have = "none"
        if have != built_with:
            wrong.append(f"{wheel} {have} (built with {built_with})")
    if sysconfig.get_config_var("EXT_SUFFIX") != built["python"]:
        wrong.append(f"Python {sysconfig.get_config_var('EXT_SUFFIX')} (built for {built['python']})")
    return ", ".join(wrong)


def reach_goal_type() -> Any:
    """The ``ReachGoal`` action type; L3PError naming the fix when neither way has it."""
    try:
        from l3p_interfaces.action import ReachGoal
    except ImportError:
        mismatch = _shipped_build_mismatch()
        if mismatch:
            raise L3PError(f"the ReachGoal action type is not built for this ROS 2 ({mismatch}): build "
                           f"{BUILT.parent / 'l3p_interfaces'} with colcon and source its install, or with the "
                           "[ros2] wheels run scripts/build_ros2_interfaces.py") from None
        sys.path.append(str(BUILT))
        from l3p_interfaces.action import ReachGoal
    return ReachGoal
