"""The ROS 2 bridge: a ROS 2 node on one side, a client of the planner server on the other.

Per robot (a namespace; one process may serve several, see ``BridgeConfig.robots``):

- subscribes to its observation and goal. A goal whose values differ from the current one starts a
  new planner episode (the same goal re-sent does not); each observation is answered by at most
  one action (with ``rate_hz``, at most one per period, on the newest observation);
- publishes the action (``std_msgs/Float64MultiArray``, for ros2_control's
  forward_command_controller), the pursued subgoal (``geometry_msgs/PointStamped``, for RViz) and
  its status (``diagnostic_msgs/DiagnosticStatus``: level, a one-line message naming any problem,
  and key/values: state, episode, step, counter, replanned, subgoal_index, resumes, server, ...).

Safety: an action is published once, for the observation it answers, and only when finite and
within the model's action bounds. No observation for ``observation_timeout_s``, or the server
unreachable (or too slow: ``act_timeout_s``) -> the hold command, published once per hold, and
the reason on the status topic; the episode then goes on (the client library's resume: a new
session with the same goal, one re-plan). A malformed message (wrong length, NaN/Inf, a joint
missing) -> an ERROR status naming the problem, and nothing is published to the robot.
SIGINT/SIGTERM -> every session is ended and the hold published once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import signal
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import PointStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Bool, Float64MultiArray

from l3p.clients.client import (
    InvalidArgument,
    ModelInfo,
    PlannerClient,
    PlannerError,
    RetryPolicy,
    channel_credentials,
    read_token,
)
from l3p.clients.errors import LOST
from l3p.clients.ros2.config import BridgeConfig
from l3p.clients.ros2.convert import (
    BadMessage,
    array_message,
    goal_frame,
    goal_message_type,
    goal_vector,
    observation_message_type,
    observation_vector,
    point_message,
)
from l3p.clients.ros2.recorder import Recorder
from l3p.core.errors import UNAVAILABLE, L3PError

log = logging.getLogger(__name__)

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
RETRY_START_S = 0.5  # between tries to start an episode while the server is unreachable
TIMED_STEPS = 100_000  # per robot, the steps whose latencies the stats keep


class BridgeStartError(L3PError):
    """The bridge cannot start: no server, a model that does not fit the configuration."""

    exit_code = UNAVAILABLE


def topic(namespace: str, name: str) -> str:
    """``name`` under the robot's namespace ("" keeps it relative to the node's own)."""
    if not namespace:
        return name
    return "/" + namespace.strip("/") + "/" + name.lstrip("/")


def qos_profile(config: BridgeConfig) -> QoSProfile:
    reliability = (ReliabilityPolicy.RELIABLE if config.qos.reliability == "reliable"
                   else ReliabilityPolicy.BEST_EFFORT)
    return QoSProfile(depth=config.qos.depth, reliability=reliability)


@dataclasses.dataclass
class Stats:
    """What a robot's loop counted (written with ``--stats``)."""

    episodes: int = 0
    actions: int = 0
    holds: int = 0
    resumes: int = 0
    bad_messages: int = 0
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
                "grpc_step_ms": ms(self.step_latencies_s), "in_bridge_ms": ms(self.in_bridge_s),
                "grpc_step_s": list(self.step_latencies_s)}


class RobotLoop:
    """One robot: its node, its episode, and the thread that turns observations into actions.

    The thread spins the robot's own executor and answers an observation right after its callback
    has stored it: no hand-over between threads on the way from observation to action, and one
    robot's slow step never delays another's callbacks."""

    def __init__(self, node: Any, namespace: str, config: BridgeConfig, client: PlannerClient,
                 info: ModelInfo, recorder: Recorder | None) -> None:
        self.node, self.ns, self.config, self.client, self.info = node, namespace, config, client, info
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(node)
        self.recorder = recorder
        self.mode, self.overrides = config.mode_and_overrides()
        self.low, self.high = info.action_low.astype(np.float64), info.action_high.astype(np.float64)
        qos = qos_profile(config)
        t = config.topics
        self.pub_action = node.create_publisher(Float64MultiArray, topic(namespace, t.action), qos)
        self.pub_subgoal = node.create_publisher(PointStamped, topic(namespace, t.subgoal), qos)
        self.pub_status = node.create_publisher(DiagnosticStatus, topic(namespace, t.status), qos)
        # Depth 1: only the newest observation is ever answered.
        node.create_subscription(observation_message_type(config.observation), topic(namespace, t.observation),
                                 self._on_observation, QoSProfile(depth=1, reliability=qos.reliability))
        node.create_subscription(goal_message_type(config.goal), topic(namespace, t.goal), self._on_goal, qos)
        if t.success:
            node.create_subscription(Bool, topic(namespace, t.success), self._on_success, qos)
        self.stats = Stats()
        self._stop = False
        self._wake = node.create_guard_condition(lambda: None)  # stop() interrupts the spin
        self._obs: np.ndarray | None = None
        self._obs_seq = 0
        self._obs_time = -math.inf  # when the newest observation arrived
        self._watch_from = time.monotonic()  # the hold timer runs from the later of this and _obs_time
        self._goal: np.ndarray | None = None  # the goal of the running (or starting) episode
        self._goal_frame = config.frame_id
        self._goal_text = "null"  # the goal as the status shows it
        self._new_goal = False
        self._success = False
        # Owned by the loop thread:
        self.episode: Any = None
        self.episode_index = -1
        self.step_count = 0
        self._acted_seq = 0
        self._held = False  # the hold was published and no action since
        self._state, self._level, self._message = "waiting_for_goal", OK, "waiting for a goal"
        self._server_ok = True
        self._last_status = 0.0
        self._last_step: Any = None
        self._retry_start_at = math.inf  # when to try again to start the episode (server unreachable)
        self.thread = threading.Thread(target=self._run, name=f"l3p-robot{namespace or ''}", daemon=True)

    # -- callbacks (run by the loop thread inside its spin): store, never block

    def _on_observation(self, msg: Any) -> None:
        try:
            vec = observation_vector(msg, self.config.observation, self.info.obs_dim)
        except BadMessage as err:
            self._bad(f"bad observation: {err}")
            return
        self._obs, self._obs_time = vec, time.monotonic()
        self._obs_seq += 1

    def _on_goal(self, msg: Any) -> None:
        try:
            vec = goal_vector(msg, self.config.goal, self.info.goal_dim)
        except BadMessage as err:
            self._bad(f"bad goal: {err}")
            return
        if self._goal is not None and np.array_equal(vec.astype(np.float32), self._goal.astype(np.float32)):
            return  # the same goal re-sent: the episode goes on
        self._goal, self._new_goal = vec, True
        self._goal_frame = goal_frame(msg, self.config.frame_id)
        self._goal_text = json.dumps(vec.astype(np.float32).tolist())

    def _on_success(self, msg: Any) -> None:
        self._success = bool(msg.data)

    def _bad(self, message: str) -> None:
        self.stats.bad_messages += 1
        self.publish_status(level=ERROR, message=message)

    # -- the loop thread

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """From any thread: the loop ends after its current step."""
        self._stop = True
        self._wake.trigger()

    def _wait(self) -> tuple[bool, bool, np.ndarray | None, int, float]:
        """Spin (run the callbacks) until there is something to do: stop, a new goal, a new
        observation to answer, the hold deadline, a start to retry, or the status heartbeat."""
        c = self.config
        while True:
            now = time.monotonic()
            if self._stop or self._new_goal or (self.episode is not None and self._obs_seq > self._acted_seq):
                break
            wake = self._last_status + c.status_period_s
            if self.episode is not None and not self._held:
                wake = min(wake, max(self._obs_time, self._watch_from) + c.observation_timeout_s)
            if self.episode is None and self._goal is not None:
                wake = min(wake, self._retry_start_at)
            if wake <= now:
                break
            self.executor.spin_once(timeout_sec=wake - now)
        new_goal, self._new_goal = self._new_goal, False
        if new_goal:
            self._watch_from = now  # the hold timer restarts with each episode
        return self._stop, new_goal, self._obs, self._obs_seq, self._obs_time

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:  # a bug, not a bad message: the robot is held, the others go on
            log.exception("%s: the robot's loop failed", self.ns or "robot")
        finally:
            self._shutdown()

    def _loop(self) -> None:
        c = self.config
        period = 1.0 / c.rate_hz if c.rate_hz > 0 else 0.0
        next_tick = 0.0
        while True:
            stop, new_goal, obs, seq, obs_time = self._wait()
            if stop:
                break
            now = time.monotonic()
            if new_goal or (self.episode is None and self._goal is not None and self._retry_start_at <= now):
                self._start_episode(new=new_goal)
            if self.episode is None:
                self._heartbeat()
                continue
            if seq > self._acted_seq:
                self._acted_seq = seq
                if now - obs_time > c.observation_timeout_s:
                    self._hold("observation_timeout", f"the newest observation is {now - obs_time:.2f} s old")
                else:
                    if period and now < next_tick:
                        # The rate: act next tick, on the newest observation by then.
                        while (left := next_tick - time.monotonic()) > 0 and not self._stop:
                            self.executor.spin_once(timeout_sec=left)
                        obs, obs_time, self._acted_seq = self._obs, self._obs_time, self._obs_seq
                    self._act(obs, obs_time)
                    next_tick = max(next_tick + period, time.monotonic()) if period else 0.0
            elif now - max(obs_time, self._watch_from) >= c.observation_timeout_s and not self._held:
                self._hold("observation_timeout", f"no observation for {c.observation_timeout_s:g} s")
            self._heartbeat()

    def _open_episode(self) -> Any:
        assert self._goal is not None
        opener = self.client.stream_episode if self.config.stream else self.client.episode
        episode = opener(self._goal, mode=self.mode, seed=self.config.seed + self.episode_index,
                         resume=True, **self.overrides)
        return episode.start()

    def _start_episode(self, new: bool) -> None:
        """(Re)start the episode of the current goal; a new goal first ends the running one."""
        if new:
            self._end_episode()
            self.episode_index += 1
            self.step_count = 0
            self._success = False
            self.stats.episodes += 1
        try:
            self.episode = self._open_episode()
        except PlannerError as err:
            self.episode = None
            self._retry_start_at = time.monotonic() + RETRY_START_S
            self._server_ok = False
            self._hold("server_unavailable", f"cannot start the episode: {err}")
            return
        self._retry_start_at = math.inf
        if not new:
            self.stats.resumes += 1
        self._server_ok = True
        self._set("ready", OK, "episode started; waiting for an observation")
        self.publish_status(force=True)

    def _end_episode(self) -> None:
        if self.episode is not None:
            try:
                self.episode.end()
            except PlannerError as err:
                log.warning("%s: could not end the session (%s); its TTL frees it", self.ns or "robot", err)
            self.episode = None
        if self.recorder is not None:
            self.recorder.end_episode()

    def _act(self, obs: np.ndarray, taken_at: float) -> None:
        """Answer ``obs`` (its callback ran at ``taken_at``, monotonic) with one action, or hold."""
        try:
            step = self.episode.act(obs, timeout=self.config.act_timeout_s)
        except InvalidArgument as err:
            self.stats.bad_messages += 1
            self._hold("bad_observation", f"the server refused the observation: {err.message}", level=ERROR)
            return
        except PlannerError as err:
            self._server_ok = False
            if err.code not in LOST and self.config.stream:
                # A stream that failed otherwise (a deadline) cannot carry on: the same episode
                # (goal, seed) starts again on the next try.
                self._end_stream()
            self._hold("server_unavailable", f"no action: {err}")
            return
        action = np.asarray(step.action, dtype=np.float64)
        if action.shape != self.low.shape or not np.all(np.isfinite(action)):
            self._hold("bad_action", f"the server answered an unusable action {action.tolist()}", level=ERROR)
            return
        action = np.clip(action, self.low, self.high)
        self.pub_action.publish(array_message(action))
        self.stats.in_bridge_s.append(time.monotonic() - taken_at)
        self.pub_subgoal.publish(point_message(step.subgoal, self._goal_frame, self.node.get_clock().now().to_msg()))
        self._held = False
        self._server_ok = True
        self.stats.actions += 1
        self.stats.step_latencies_s.append(step.latency_s)
        self.stats.resumes += int(step.resumed)
        self._last_step = step
        if self.recorder is not None:
            self.recorder.add(obs, action, self._goal, step, self._success)
        self.step_count += 1
        self._set("acting", OK, "resumed after the server was lost" if step.resumed else "acting")
        self.publish_status(force=True)

    def _end_stream(self) -> None:
        try:
            self.episode.end()
        except PlannerError:
            pass
        self.episode = None
        self._retry_start_at = time.monotonic()

    def hold_message(self) -> Any:
        if self.config.hold == "none":
            return None
        values = (np.zeros(self.info.action_dim) if self.config.hold == "zeros"
                  else np.asarray(self.config.hold_values, dtype=np.float64))
        return array_message(np.clip(values, self.low, self.high))

    def _hold(self, state: str, message: str, level: int = WARN) -> None:
        """Publish the hold command (once until the next action) and say why on the status topic."""
        if not self._held:
            msg = self.hold_message()
            if msg is not None:
                self.pub_action.publish(msg)
            self._held = True
            self.stats.holds += 1
        self._set(state, level, message)
        self.publish_status(force=True)

    def _set(self, state: str, level: int, message: str) -> None:
        self._state, self._level, self._message = state, level, message

    def _heartbeat(self) -> None:
        if time.monotonic() - self._last_status >= self.config.status_period_s:
            self.publish_status()

    def publish_status(self, *, force: bool = True, level: int | None = None, message: str | None = None) -> None:
        step = self._last_step
        values = {
            "state": self._state,
            "episode": self.episode_index,
            "step": self.step_count,
            "counter": step.counter if step else -1,
            "replanned": bool(step.replanned) if step else False,
            "subgoal_index": step.subgoal_index if step else -1,
            "resumes": self.stats.resumes,
            "holds": self.stats.holds,
            "bad_messages": self.stats.bad_messages,
            "server": "ok" if self._server_ok else "unavailable",
            "session": getattr(self.episode, "session_id", None) or "",
            "goal": self._goal_text,
            "latency_ms": f"{step.latency_s * 1e3:.3f}" if step else "",
        }
        msg = DiagnosticStatus()
        msg.level = self._level if level is None else level
        msg.name = f"l3p_bridge{self.ns}"
        msg.hardware_id = self.ns or self.node.get_namespace()
        msg.message = self._message if message is None else message
        msg.values = [KeyValue(key=k, value=str(v).lower() if isinstance(v, bool) else str(v))
                      for k, v in values.items()]
        self.pub_status.publish(msg)
        self._last_status = time.monotonic()

    def _shutdown(self) -> None:
        """End the session, publish the hold once, say so."""
        self._end_episode()
        msg = self.hold_message()
        if msg is not None:
            self.pub_action.publish(msg)
        self._held = True
        self._set("stopped", OK, "bridge stopped; hold published")
        self.publish_status(force=True)


# --------------------------------------------------------------------------- the process


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


