"""What a robot's loop tells about itself besides its status topic: its counts (``--stats``), its
problems on the console (rate-limited), and whether its action topic carries another type."""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections import deque
from typing import Any

import numpy as np

TIMED_STEPS = 100_000  # per robot, the steps whose latencies the stats keep
LOG_EVERY_S = 10.0  # a problem a robot repeats (its goal re-sent): one console line per this period
# The command.type that publishes a topic's type (the fix a wrong-type line names).
COMMAND_FOR = {"std_msgs/msg/Float64MultiArray": "array", "geometry_msgs/msg/Twist": "twist",
               "trajectory_msgs/msg/JointTrajectory": "joint_trajectory"}
# The status messages that answer an end_episode message (l3p ros2 end waits for one of them).
END_DONE = "ended on request; waiting for a goal"
END_NOTHING = "no episode to end: waiting for a goal"
_NUMBERS = re.compile(r"-?\d[\d.e+-]*")  # a problem's kind: its message with the numbers left out


@dataclasses.dataclass
class Stats:
    """What a robot's loop counted (written with ``--stats``)."""

    episodes: int = 0
    actions: int = 0
    holds: int = 0
    resumes: int = 0
    bad_messages: int = 0
    stale_observations: int = 0  # stamped before the running episode's goal: dropped
    end_requests: int = 0  # messages heard on topics.end_episode: l3p ros2 end tells its answer by it
    # The newest steps' times (bounded: a bridge runs for weeks): the gRPC round trips, and the
    # observation's callback -> the action published.
    step_latencies_s: deque[float] = dataclasses.field(default_factory=lambda: deque(maxlen=TIMED_STEPS))
    in_bridge_s: deque[float] = dataclasses.field(default_factory=lambda: deque(maxlen=TIMED_STEPS))

    def to_dict(self) -> dict[str, Any]:
        def ms(values: deque[float]) -> dict[str, Any]:
            a = np.asarray(values) * 1e3
            return {"p50": float(np.percentile(a, 50)) if a.size else None,
                    "p99": float(np.percentile(a, 99)) if a.size else None, "n": int(a.size)}

        return {"episodes": self.episodes, "actions": self.actions, "holds": self.holds,
                "resumes": self.resumes, "bad_messages": self.bad_messages,
                "stale_observations": self.stale_observations, "end_requests": self.end_requests,
                "grpc_step_ms": ms(self.step_latencies_s), "in_bridge_ms": ms(self.in_bridge_s),
                "grpc_step_s": list(self.step_latencies_s)}


class Console:
    """A robot's problems as console lines: each kind (the message, numbers aside) at most once per
    ``LOG_EVERY_S``, so a robot re-sending a bad goal at 300 Hz gives one line, not 300."""

    def __init__(self, logger: Any, robot: str) -> None:
        self.logger, self.robot = logger, robot
        self._told: dict[str, float] = {}

    def tell(self, error: bool, message: str) -> None:
        kind, now = _NUMBERS.sub("#", message), time.monotonic()
        if now - self._told.get(kind, -math.inf) < LOG_EVERY_S:
            return
        self._told[kind] = now
        # two call sites: rclpy refuses one call site logging at two severities
        if error:
            self.logger.error(f"{self.robot}: {message}")
        else:
            self.logger.warning(f"{self.robot}: {message}")


def wrong_command_type(node: Any, topic: str, command_type: str) -> str:
    """Why the bridge must not publish onto ``topic`` ("" if it may): another type there (a robot's
    Twist subscriber, say) never receives a command, and DDS says nothing."""
    types = next((t for n, t in node.get_topic_names_and_types() if n == topic), [])
    others = [t for t in types if t != command_type]
    if not others:
        return ""
    fix = COMMAND_FOR.get(others[0], "array, twist or joint_trajectory")
    return (f"the action topic {topic} has type {', '.join(others)}; the bridge's command is {command_type}: "
            f"nothing published (set command.type: {fix})")
