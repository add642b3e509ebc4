"""A robot's goals as a ROS 2 action (``goal_action.enabled``): ``l3p_interfaces/action/ReachGoal``
(`l3p.clients.ros2.action_type`) on ``<namespace>/<goal_action.name>``, in place of the goal topic.

- A goal (the model's goal_dim values, its header, a tolerance, a time and a step limit) is checked
  as a goal on the topic is (length, NaN/Inf, float32, frame, stamp ahead): a bad one is rejected,
  with an ERROR status naming the problem. An accepted goal starts a planner episode at once.
- Feedback at each re-plan: the subgoal, its landmark index, the planner's estimate of the steps to
  it, the actions so far, the achieved goal's distance to the goal.
- The result: REACHED when an observation's achieved goal (``achieved_goal_indices``) is within the
  tolerance (the goal's own, or ``goal_action.tolerance``); TIMED_OUT past ``timeout_s`` or at the
  observation after ``max_steps`` actions; CANCELED on a cancel request; PREEMPTED (status ABORTED)
  when a new goal is accepted; FAILED (ABORTED) when the server refuses the goal or the bridge stops.
  Each with the final distance and the actions published for the goal.
- Every end but a preemption ends the episode and publishes the hold at once, before the cancel (or
  the result) is answered: no goal, no action. A new goal replaces the running one inside the call
  that accepts it: no action for the old goal is published once the new one is accepted.
- The planner server lost during a goal: the robot is held and the goal goes on when the server is
  back (one re-plan, as on the topic); its time and step limits still count.

Everything here runs in the robot's loop thread (its executor spins the action server), as the
robot's part that serves the action; it reads and drives the loop's state.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.action import ActionServer, CancelResponse, GoalResponse

from l3p.clients.ros2.action_type import CANCELED, FAILED, OUTCOMES, PREEMPTED, REACHED, TIMED_OUT, reach_goal_type
from l3p.clients.ros2.convert import BadMessage, check_goal_frame, goal_ahead_problem, goal_values, stamp_ns

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
LEVELS = {REACHED: OK, TIMED_OUT: WARN, CANCELED: OK, FAILED: ERROR}
RESULT_SPIN_S = 0.2  # on shutdown: how long the loop still spins so that a running goal's result goes out


@dataclasses.dataclass
class Running:
    """The goal being pursued."""

    handle: Any  # rclpy's ServerGoalHandle
    goal: np.ndarray
    tolerance: float
    deadline: float  # monotonic; inf: no time limit
    max_steps: int  # 0: no limit


class _Server(ActionServer):
    """rclpy's ActionServer, except that an accepted goal's execution (rclpy's task that sends its result)
    is scheduled when the goal ends, with the result at hand: a task left pending for the goal's whole
    run would be resumed first by every ``spin_once`` whose timeout differs from the last call's, as the
    robot loop's do, and the loop's callbacks would never run."""

    def notify_execute(self, goal_handle: Any, execute_callback: Any) -> None:
        if execute_callback is not None:  # None: the goal starts (``handle.execute()``), nothing to send yet
            super().notify_execute(goal_handle, execute_callback)


class GoalAction:
    def __init__(self, robot: Any, name: str) -> None:
        self.robot = robot  # the RobotLoop whose goals these are (not imported: it imports this module)
        self.type = reach_goal_type()
        self.running: Running | None = None
        self._results: dict[bytes, Any] = {}  # per ended goal: its result, until sent
        self._achieved = list(robot.config.achieved_goal_indices)
        self._last_obs: np.ndarray | None = None
        self.server = _Server(robot.node, self.type, name, execute_callback=self._execute,
                              goal_callback=self._check_goal, handle_accepted_callback=self._accepted,
                              cancel_callback=self._cancel)

    @property
    def deadline(self) -> float:
        return self.running.deadline if self.running is not None else math.inf

    # -- the action server's callbacks

    def _check_goal(self, goal: Any) -> GoalResponse:
        try:
            goal_values(goal.goal, self.robot.info.goal_dim)
            check_goal_frame(goal, self.robot.config.frame_id)
            problem = goal_ahead_problem(stamp_ns(goal.header.stamp), self.robot.node.get_clock().now().nanoseconds,
                                         self.robot.config.goal_ahead_tolerance_s)
        except BadMessage as err:
            problem = f"bad goal: {err}"
        limits = (goal.tolerance, goal.timeout_s)
        if not problem and not all(math.isfinite(v) and v >= 0 for v in limits):
            problem = f"bad goal: tolerance and timeout_s must be finite and >= 0, got {limits}"
        if problem:
            self.robot._bad(problem)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _accepted(self, handle: Any) -> None:
        """The new goal replaces the running one here, in the call that accepted it."""
        self.finish(PREEMPTED, "replaced by a new goal", hold=False)
        goal = handle.request
        vec = goal_values(goal.goal, self.robot.info.goal_dim)
        self.running = Running(handle, vec, goal.tolerance or self.robot.config.goal_action.tolerance,
                               time.monotonic() + goal.timeout_s if goal.timeout_s else math.inf, goal.max_steps)
        self.robot._set_goal(vec, stamp_ns(goal.header.stamp))
        handle.execute()

    def _execute(self, handle: Any) -> Any:
        """An ended goal's terminal state and result (rclpy's execution task sends it)."""
        result = self._results.pop(bytes(handle.goal_id.uuid))
        {REACHED: handle.succeed, CANCELED: handle.canceled}.get(result.outcome, handle.abort)()
        return result

    def _cancel(self, handle: Any) -> CancelResponse:
        if self.running is None or self.running.handle is not handle:
            return CancelResponse.REJECT  # ended already
        self.finish(CANCELED, "cancel requested")
        return CancelResponse.ACCEPT

    # -- the loop's calls

    def check(self, obs: np.ndarray | None, fresh: bool, now: float) -> None:
        """Before acting: a fresh observation at the goal, the steps or the time used up end the goal."""
        r = self.running
        if r is None:
            return
        if obs is not None:
            self._last_obs = obs
        if fresh and self.distance(obs) <= r.tolerance:
            self.finish(REACHED, f"reached within {r.tolerance:g}")
        elif fresh and r.max_steps and self.robot.step_count >= r.max_steps:
            self.finish(TIMED_OUT, f"not reached in {r.max_steps} steps")
        elif now >= r.deadline:
            self.finish(TIMED_OUT, f"not reached in {r.handle.request.timeout_s:g} s")

    def stepped(self, obs: np.ndarray, step: Any) -> None:
        """After an action: the feedback, at each re-plan (the first step re-plans)."""
        if self.running is None or not (step.replanned or self.robot.step_count == 1):
            return
        self.running.handle.publish_feedback(self.type.Feedback(
            subgoal=np.asarray(step.subgoal, np.float64).tolist(), subgoal_index=step.subgoal_index,
            estimated_steps=float(step.estimated_distance), steps=self.robot.step_count,
            distance=self.distance(obs)))

    def fail(self, message: str) -> None:
        self.finish(FAILED, message)

    def shutdown(self) -> None:
        """The bridge stops: a running goal fails, and its result goes out before the node does."""
        if self.running is None:
            return
        self.finish(FAILED, "the bridge stopped", hold=False)
        end = time.monotonic() + RESULT_SPIN_S
        while (left := end - time.monotonic()) > 0:
            self.robot.executor.spin_once(timeout_sec=left)

    def finish(self, outcome: int, message: str, *, hold: bool = True) -> None:
        """The running goal ends with ``outcome``; with ``hold``, so does its episode, and the robot is held."""
        r = self.running
        if r is None:
            return
        result = self.type.Result(outcome=outcome, message=message, steps=self.robot.step_count,
                                  final_distance=self.distance(self._last_obs))
        self.running = None
        self._results[bytes(r.handle.goal_id.uuid)] = result
        self.server.notify_execute(r.handle, self._execute)
        if hold:
            self.robot._end_goal(OUTCOMES[outcome], f"goal {OUTCOMES[outcome].replace('_', ' ')}: {message}",
                                 LEVELS[outcome])

    def distance(self, obs: np.ndarray | None) -> float:
        """From the achieved goal in ``obs`` to the running goal (NaN: no observation)."""
        if obs is None or self.running is None:
            return math.nan
        return float(np.linalg.norm(obs[self._achieved] - self.running.goal))
