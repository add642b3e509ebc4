"""The ROS 2 bridge: a ROS 2 node on one side, a client of the planner server on the other.

Per robot (a namespace; one process may serve several, see ``BridgeConfig.robots``; each robot is
a `l3p.clients.ros2.robot_loop.RobotLoop`):

- subscribes to its observation and goal. A goal whose values or stamp differ from the current
  one's starts a new planner episode; the same goal re-sent (the same values and stamp, or the same
  values unstamped) does not. A goal stamped more than ``goal_ahead_tolerance_s`` ahead of the
  bridge's clock is refused (its episode would drop every observation stamped before it). An
  observation stamped before the running episode's goal is dropped (it was made for the previous
  goal). Each observation is answered by at most one action (with ``rate_hz``, at most one per
  period, on the newest observation). With ``goal_action.enabled`` the goals come as the ReachGoal
  action instead (`l3p.clients.ros2.goal_action`: feedback, result, cancel, preemption);
- publishes the action as its ``command.type`` says (``std_msgs/Float64MultiArray``, for ros2_control's
  forward_command_controller, a hold labelled ``hold``; ``geometry_msgs/Twist``;
  ``trajectory_msgs/JointTrajectory``), never onto a topic that carries another type (an ERROR
  status and a console line name the fix), the action again as a
  ``sensor_msgs/JointState`` stamped with the observation it answers (never a hold), the pursued
  subgoal (``geometry_msgs/PointStamped``, for RViz) and its status
  (``diagnostic_msgs/DiagnosticStatus``: level, a one-line message naming any problem, and
  key/values: state, episode, goal, goal_stamp, session, step, counter, replanned, ...).

Safety: an action is published once, for the observation it answers, and only when finite and
within the model's action bounds. No observation for ``observation_timeout_s``, or the server
unreachable (or too slow: ``act_timeout_s``) -> the hold command, published once per hold, and
the reason on the status topic; the episode then goes on (the client library's resume: a new
session with the same goal, one re-plan). A malformed message (wrong length, NaN/Inf, beyond
float32, a joint missing, a goal in another frame or stamped ahead of the bridge's clock) -> an
ERROR status naming the problem, and nothing is published to the robot; the episode goes on. Every
problem (a bad message, a hold and its reason) is also a console line, each kind at most once per
robot every ``diagnostics.LOG_EVERY_S``. A message on ``topics.end_episode`` (``std_msgs/Empty``,
``l3p ros2 end NS``) ends the running episode: the robot is held until the next goal.
SIGINT/SIGTERM -> every session is ended, the hold published once, and the status ``stopped`` (WARN).
At start the bridge waits up to ``connect_timeout_s`` for a server not up yet (one console line).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from rclpy.signals import SignalHandlerOptions

from l3p.clients.client import (
    ModelInfo,
    PlannerClient,
    PlannerError,
    RetryPolicy,
    Unavailable,
    channel_credentials,
    read_token,
)
from l3p.clients.ros2.config import BridgeConfig
from l3p.clients.ros2.recorder import Recorder
from l3p.clients.ros2.robot_loop import RobotLoop
from l3p.core.errors import UNAVAILABLE, L3PError


class BridgeStartError(L3PError):
    """The bridge cannot start: no server, a model that does not fit the configuration."""

    exit_code = UNAVAILABLE


def connect(config: BridgeConfig) -> tuple[PlannerClient, ModelInfo]:
    try:
        tls = config.tls_ca or config.tls_cert
        credentials = (channel_credentials(config.tls_ca or None, config.tls_cert or None, config.tls_key or None)
                       if tls else None)
        token = read_token(config.token_file) if config.token_file else None
    except (OSError, ValueError) as err:
        raise L3PError(f"TLS or token file: {err}") from None
    # No retries inside a step: the loop holds the robot and tries again itself, never blocks.
    client = PlannerClient(config.server, timeout_s=config.act_timeout_s, credentials=credentials, token=token,
                           tls_server_name=config.tls_server_name or None, model=config.model or None,
                           retry=RetryPolicy(max_attempts=1))
    deadline, waiting = time.monotonic() + config.connect_timeout_s, False
    while True:
        try:
            return client, client.model_info(timeout=10.0)
        except PlannerError as err:
            # Only a server not up yet is worth waiting for (started alongside the bridge); a refusal,
            # a wrong model or a TLS mismatch would answer the same again.
            left = deadline - time.monotonic()
            if not isinstance(err, Unavailable) or client.tls_mismatch or left <= 0:
                client.close()
                gave_up = waiting and left <= 0 and isinstance(err, Unavailable)
                waited = f" (waited {config.connect_timeout_s:g} s: connect_timeout_s)" if gave_up else ""
                raise BridgeStartError(f"cannot reach the planner server at {config.server}: {err}{waited}") from None
            if not waiting:
                print(f"l3p ros2 bridge: waiting up to {config.connect_timeout_s:g} s (connect_timeout_s) for the "
                      f"planner server at {config.server}: {err}", flush=True)
                waiting = True
            time.sleep(min(0.5, left))


def check_model(config: BridgeConfig, info: ModelInfo) -> None:
    problems = []
    if config.observation.type == "joint_state" and not config.observation.indices:
        n = len(config.observation.joints) * len(config.observation.fields)
        if n != info.obs_dim:
            problems.append(f"observation: {len(config.observation.joints)} joints x "
                            f"{len(config.observation.fields)} fields = {n} values, the model wants {info.obs_dim}")
    if config.observation.type == "odometry" and not config.observation.indices:
        n = sum(4 if f == "orientation" else 3 for f in config.observation.fields)
        if n != info.obs_dim:
            problems.append(f"observation: odometry fields {list(config.observation.fields)} give {n} values, the "
                            f"model wants {info.obs_dim} (set observation.indices)")
    if config.goal.type in ("point", "pose") and not config.goal_action.enabled:  # the action: the goal's values
        n = len(config.goal.indices) or 3
        if n != info.goal_dim:
            fix = f"goal.indices: {list(range(info.goal_dim))}" if info.goal_dim < 3 else "goal.type: array"
            problems.append(f"goal: a {config.goal.type} gives {n} values (x, y, z), the model's goal has "
                            f"{info.goal_dim}: set {fix}")
    command = config.command
    n = {"twist": len(command.fields), "joint_trajectory": len(command.joints)}.get(command.type, info.action_dim)
    if n != info.action_dim:
        names = "fields" if command.type == "twist" else "joints"
        problems.append(f"command.{names}: {n} for the model's {info.action_dim} action values")
    if config.hold == "values" and len(config.hold_values) != info.action_dim:
        problems.append(f"hold_values has {len(config.hold_values)} values, the model's action {info.action_dim}")
    if any(i >= info.obs_dim for i in config.achieved_goal_indices) or (
            config.achieved_goal_indices and len(config.achieved_goal_indices) != info.goal_dim):
        problems.append(f"achieved_goal_indices must pick {info.goal_dim} of the {info.obs_dim} observation values")
    if problems:
        raise L3PError(f"the configuration does not fit the served model {info.model or info.env_id}: "
                       + "; ".join(problems))


class Bridge:
    """One node and one `RobotLoop` per robot; ``run`` waits until SIGINT/SIGTERM (or ``stop``)."""

    def __init__(self, config: BridgeConfig, *, node_name: str = "l3p_bridge", args: list[str] | None = None) -> None:
        self.config = config
        self.client, self.info = connect(config)
        try:
            check_model(config, self.info)
        except BaseException:
            self.client.close()
            raise
        self._stopping = threading.Event()
        # Only ROS's own arguments, never this process's command line.
        rclpy.init(args=[node_name, *(["--ros-args", *args] if args else [])],
                   signal_handler_options=SignalHandlerOptions.NO)
        self.robots = []
        for ns in config.robots:
            recorder = None
            if config.record:
                recorder = Recorder(_record_path(config.record, ns, len(config.robots)), self.info, config, ns)
            name = node_name if len(config.robots) == 1 else f"{node_name}_{ns.strip('/').replace('/', '_')}"
            self.robots.append(RobotLoop(rclpy.create_node(name), ns, config, self.client, self.info, recorder))

    def stop(self, *_: Any) -> None:
        self._stopping.set()

    def run(self) -> None:
        for robot in self.robots:
            robot.start()
        try:
            while not self._stopping.wait(0.5):
                pass
        finally:
            for robot in self.robots:
                robot.stop()
            for robot in self.robots:
                robot.thread.join(timeout=5.0)
            time.sleep(0.05)  # the last status and holds go out before the nodes do
            for robot in self.robots:
                if robot.recorder is not None:
                    robot.recorder.save()
                robot.node.destroy_node()
            rclpy.try_shutdown()
            self.client.close()

    def stats(self) -> dict[str, Any]:
        return {robot.ns or "/": robot.stats.to_dict() for robot in self.robots}


def _record_path(path: str, namespace: str, robots: int) -> Path:
    p = Path(path)
    if robots == 1:
        return p
    name = namespace.strip("/").replace("/", "_") or "robot"
    return p.with_name(f"{p.stem}-{name}{p.suffix or '.npz'}")


def run_bridge(config: BridgeConfig, stats_path: str | None = None, ros_args: list[str] | None = None) -> int:
    bridge = Bridge(config, args=ros_args)
    signal.signal(signal.SIGINT, bridge.stop)
    signal.signal(signal.SIGTERM, bridge.stop)
    print(f"l3p ros2 bridge: {len(bridge.robots)} robot(s) {', '.join(r or '/' for r in config.robots)} -> "
          f"{config.server} model {bridge.info.model or bridge.info.env_id}; READY", flush=True)
    bridge.run()
    if stats_path:
        Path(stats_path).write_text(json.dumps(bridge.stats()) + "\n")
    return 0


