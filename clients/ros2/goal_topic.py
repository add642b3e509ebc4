"""A robot's goals from its goal topic (the default; ``goal_action.enabled`` serves the ReachGoal action
instead, `l3p.clients.ros2.goal_action`): see `l3p.clients.ros2.bridge` for the rules. Its callback
runs in the robot's loop thread, as the robot's part that reads the topic."""

from __future__ import annotations

from typing import Any

import numpy as np

from l3p.clients.ros2.convert import (
    BadMessage,
    check_goal_frame,
    goal_ahead_problem,
    goal_message_type,
    goal_vector,
    header_stamp,
    stamp_ns,
)


class GoalTopic:
    def __init__(self, robot: Any, name: str, qos: Any) -> None:
        self.robot = robot  # the RobotLoop whose goals these are (not imported: it imports this module)
        robot.node.create_subscription(goal_message_type(robot.config.goal), name, self._on_goal, qos)

    def _on_goal(self, msg: Any) -> None:
        robot, c = self.robot, self.robot.config
        try:
            vec = goal_vector(msg, c.goal, robot.info.goal_dim)
            check_goal_frame(msg, c.frame_id)
        except BadMessage as err:
            robot._bad(f"bad goal: {err}")
            return
        stamp = stamp_ns(header_stamp(msg))
        problem = goal_ahead_problem(stamp, robot.node.get_clock().now().nanoseconds, c.goal_ahead_tolerance_s)
        if problem:  # its episode would drop every observation stamped before it: the episode goes on
            robot._bad(problem)
            return
        if (robot._goal is not None and stamp in (0, robot._goal_stamp)
                and np.array_equal(vec.astype(np.float32), robot._goal.astype(np.float32))):
            return  # the same goal re-sent (the same stamp, or unstamped): the episode goes on
        robot._set_goal(vec, stamp)
