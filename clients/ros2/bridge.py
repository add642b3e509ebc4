"""The ROS 2 bridge: a ROS 2 node on one side, a client of the planner server on the other.

Per robot (a namespace; one process may serve several, see ``BridgeConfig.robots``; each robot is
a `l3p.clients.ros2.robot_loop.RobotLoop`):

- subscribes to its observation and goal. A goal whose values differ from the current one, or the
  same values with a newer stamp, starts a new planner episode; the same goal re-sent (same stamp,
  or unstamped) does not. An observation stamped before the running episode's goal is dropped (it
  was made for the previous goal). Each observation is answered by at most one action (with
  ``rate_hz``, at most one per period, on the newest observation);
- publishes the action (``std_msgs/Float64MultiArray``, for ros2_control's
  forward_command_controller; a hold is labelled ``hold``), the action again as a
  ``sensor_msgs/JointState`` stamped with the observation it answers (never a hold), the pursued
  subgoal (``geometry_msgs/PointStamped``, for RViz) and its status
  (``diagnostic_msgs/DiagnosticStatus``: level, a one-line message naming any problem, and
  key/values: state, episode, goal, goal_stamp, session, step, counter, replanned, ...).

Safety: an action is published once, for the observation it answers, and only when finite and
within the model's action bounds. No observation for ``observation_timeout_s``, or the server
unreachable (or too slow: ``act_timeout_s``) -> the hold command, published once per hold, and
the reason on the status topic; the episode then goes on (the client library's resume: a new
session with the same goal, one re-plan). A malformed message (wrong length, NaN/Inf, beyond
float32, a joint missing, a goal in another frame) -> an ERROR status naming the problem, and
nothing is published to the robot; the episode goes on. SIGINT/SIGTERM -> every session is ended,
the hold published once, and the status ``stopped`` (WARN).
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
    try:
        info = client.model_info(timeout=10.0)
    except PlannerError as err:
        client.close()
        raise BridgeStartError(f"cannot reach the planner server at {config.server}: {err}") from None
    return client, info


def check_model(config: BridgeConfig, info: ModelInfo) -> None:
    problems = []
    if config.observation.type == "joint_state" and not config.observation.indices:
        n = len(config.observation.joints) * len(config.observation.fields)
        if n != info.obs_dim:
            problems.append(f"observation: {len(config.observation.joints)} joints x "
                            f"{len(config.observation.fields)} fields = {n} values, the model wants {info.obs_dim}")
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


