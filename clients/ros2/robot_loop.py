"""One robot of the bridge: its node's topics, its episode, and the thread that turns observations into
actions (see `l3p.clients.ros2.bridge` for what a robot sees)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import PointStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Empty

from l3p.clients.client import InvalidArgument, ModelInfo, PlannerClient, PlannerError
from l3p.clients.errors import LOST
from l3p.clients.ros2.action_type import FAILED
from l3p.clients.ros2.config import BridgeConfig
from l3p.clients.ros2.convert import (
    HOLD_LABEL,
    BadMessage,
    command_message,
    command_message_type,
    header_stamp,
    observation_message_type,
    observation_vector,
    point_message,
    stamp_ns,
    stamped_action_message,
    type_name,
)
from l3p.clients.ros2.diagnostics import END_DONE, END_NOTHING, Console, Stats, wrong_command_type
from l3p.clients.ros2.goal_action import GoalAction
from l3p.clients.ros2.goal_topic import GoalTopic
from l3p.clients.ros2.recorder import Recorder

log = logging.getLogger(__name__)

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
RETRY_START_S = 0.5  # between tries to start an episode while the server is unreachable


def topic(namespace: str, name: str) -> str:
    """``name`` under the robot's namespace ("" keeps it relative to the node's own)."""
    if not namespace:
        return name
    return "/" + namespace.strip("/") + "/" + name.lstrip("/")


def qos_profile(config: BridgeConfig) -> QoSProfile:
    reliability = (ReliabilityPolicy.RELIABLE if config.qos.reliability == "reliable"
                   else ReliabilityPolicy.BEST_EFFORT)
    return QoSProfile(depth=config.qos.depth, reliability=reliability)


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
        command_type = command_message_type(config.command)
        self.command_type = type_name(command_type)
        self.pub_action = node.create_publisher(command_type, topic(namespace, t.action), qos)
        self.pub_stamped = (node.create_publisher(JointState, topic(namespace, t.action_stamped), qos)
                            if t.action_stamped else None)
        self.pub_subgoal = node.create_publisher(PointStamped, topic(namespace, t.subgoal), qos)
        self.pub_status = node.create_publisher(DiagnosticStatus, topic(namespace, t.status), qos)
        # The goal's subscription first: the executor takes ready messages in subscription order, so
        # a goal and the observation published right after it are taken in that order.
        self.goal_action = (GoalAction(self, topic(namespace, config.goal_action.name))
                            if config.goal_action.enabled else None)  # the action in place of the goal topic
        if self.goal_action is None:
            GoalTopic(self, topic(namespace, t.goal), qos)
        # Depth 1: only the newest observation is ever answered.
        node.create_subscription(observation_message_type(config.observation), topic(namespace, t.observation),
                                 self._on_observation, QoSProfile(depth=1, reliability=qos.reliability))
        if t.success:
            node.create_subscription(Bool, topic(namespace, t.success), self._on_success, qos)
        if t.end_episode:
            node.create_subscription(Empty, topic(namespace, t.end_episode), self._on_end_episode, qos)
        self.console = Console(node.get_logger(), namespace or "robot")
        self._wrong_type = ""  # the action topic has another type than the command's: nothing is published
        self._checked_at = -math.inf  # when the action topic's types were last looked at
        self.stats = Stats()
        self._stop = False
        self._wake = node.create_guard_condition(lambda: None)  # stop() interrupts the spin
        self._obs: np.ndarray | None = None
        self._obs_stamp: Any = None  # the newest observation's header stamp (None: it has no header)
        self._obs_seq = 0
        self._obs_time = -math.inf  # when the newest observation arrived
        self._watch_from = time.monotonic()  # the hold timer runs from the later of this and _obs_time
        self._goal: np.ndarray | None = None  # the goal of the running (or starting) episode
        self._goal_stamp = 0  # its stamp (ns; 0: not stamped): older observations are dropped
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
        stamp = header_stamp(msg)
        ns = stamp_ns(stamp)
        if ns and ns < self._goal_stamp:
            # Made before the goal was given: the state of the previous goal's episode.
            self.stats.stale_observations += 1
            message = f"observation stamped {(self._goal_stamp - ns) / 1e9:.3f} s before the goal: dropped"
            self.publish_status(level=WARN, message=message)
            self._tell(WARN, message)
            return
        self._obs, self._obs_stamp, self._obs_time = vec, stamp, time.monotonic()
        self._obs_seq += 1

    def _set_goal(self, vec: np.ndarray, stamp: int) -> None:
        """A new goal (from the topic or the action): the loop starts its episode next."""
        self._goal, self._goal_stamp, self._new_goal = vec, stamp, True
        self._goal_text = json.dumps(vec.astype(np.float32).tolist())
        if self._obs_seq > self._acted_seq and 0 < stamp_ns(self._obs_stamp) < stamp:
            # Taken before the goal and not answered yet: not for the new goal's episode either.
            self._acted_seq = self._obs_seq
            self.stats.stale_observations += 1

    def _on_success(self, msg: Any) -> None:
        self._success = bool(msg.data)

    def _on_end_episode(self, _msg: Any) -> None:
        """A message on ``topics.end_episode``: the running episode ends, the robot is held, and the
        bridge waits for a goal (the same goal sent again starts a new episode). The status says which,
        with the count of end requests heard (``end_requests``)."""
        self.stats.end_requests += 1
        if self._goal is None:
            self.publish_status(message=END_NOTHING)
            return
        if self.goal_action is not None:  # its result first; the status then says END_DONE
            self.goal_action.finish(FAILED, "ended on the end_episode topic", hold=False)
        self._end_goal("waiting_for_goal", f"episode {self.episode_index} {END_DONE}", OK)

    def _end_goal(self, state: str, message: str, level: int) -> None:
        """The goal is given up (ended on request, or its action ended): its episode ends, the robot is
        held (``state``, ``message`` on the status topic), and the bridge waits for a goal."""
        self._goal, self._new_goal, self._goal_text = None, False, "null"
        self._retry_start_at = math.inf
        self._end_episode()
        self._hold(state, message, level=level)

    def _bad(self, message: str) -> None:
        self.stats.bad_messages += 1
        self.publish_status(level=ERROR, message=message)
        self._tell(ERROR, message)

    def _tell(self, level: int, message: str) -> None:
        self.console.tell(level == ERROR, message)

    def _check_command_topic(self) -> None:
        self._wrong_type = wrong_command_type(self.node, self.pub_action.topic_name, self.command_type)
        if self._wrong_type:
            self._set("wrong_command_type", ERROR, self._wrong_type)
            self._tell(ERROR, self._wrong_type)

    # -- the loop thread

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """From any thread: the loop ends after its current step."""
        self._stop = True
        self._wake.trigger()

    def _wait(self) -> tuple[bool, bool, np.ndarray | None, Any, int, float]:
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
            if self.goal_action is not None:
                wake = min(wake, self.goal_action.deadline)
            if wake <= now:
                break
            self.executor.spin_once(timeout_sec=wake - now)
        new_goal, self._new_goal = self._new_goal, False
        if new_goal:
            self._watch_from = now  # the hold timer restarts with each episode
        return self._stop, new_goal, self._obs, self._obs_stamp, self._obs_seq, self._obs_time

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
            stop, new_goal, obs, stamp, seq, obs_time = self._wait()
            if stop:
                break
            now = time.monotonic()
            if new_goal or (self.episode is None and self._goal is not None and self._retry_start_at <= now):
                self._start_episode(new=new_goal)
            if self.goal_action is not None:
                self.goal_action.check(obs, seq > self._acted_seq, now)
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
                        while (left := next_tick - time.monotonic()) > 0 and not (self._stop or self._new_goal):
                            self.executor.spin_once(timeout_sec=left)
                        if self._new_goal or self.episode is None:
                            continue  # a new goal's episode answers the newest observation; an ended one none
                        obs, stamp, obs_time = self._obs, self._obs_stamp, self._obs_time
                        self._acted_seq = self._obs_seq
                    self._act(obs, stamp, obs_time)
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
        except InvalidArgument as err:
            # The server refused the goal: trying again cannot help; the next goal starts anew.
            self.episode = None
            self._retry_start_at = math.inf
            self.stats.bad_messages += 1
            if self.goal_action is not None:
                self.goal_action.fail(f"the server refused the goal: {err.message}")
            else:
                self._hold("bad_goal", f"the server refused the goal: {err.message}", level=ERROR)
            return
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
        self._check_command_topic()
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

    def _act(self, obs: np.ndarray, stamp: Any, taken_at: float) -> None:
        """Answer ``obs`` (header ``stamp``; its callback ran at ``taken_at``, monotonic) with one
        action, or hold."""
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
        if self._wrong_type:
            self._set("wrong_command_type", ERROR, self._wrong_type)
            self.publish_status(force=True)
            return
        self.pub_action.publish(command_message(action, self.config.command))
        self.stats.in_bridge_s.append(time.monotonic() - taken_at)
        # Built only for a subscriber: most robots read the action topic alone, and a step's time counts.
        if self.pub_stamped is not None and self.pub_stamped.get_subscription_count():
            self.pub_stamped.publish(stamped_action_message(action, stamp))
        self.pub_subgoal.publish(point_message(step.subgoal, self.config.frame_id,
                                               self.node.get_clock().now().to_msg()))
        self._held = False
        self._server_ok = True
        self.stats.actions += 1
        self.stats.step_latencies_s.append(step.latency_s)
        self.stats.resumes += int(step.resumed)
        self._last_step = step
        if self.recorder is not None:
            self.recorder.add(obs, action, self._goal, step, self._success)
        self.step_count += 1
        if self.goal_action is not None:
            self.goal_action.stepped(obs, step)
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
        return command_message(np.clip(values, self.low, self.high), self.config.command, label=HOLD_LABEL)

    def _hold(self, state: str, message: str, level: int = WARN) -> None:
        """Publish the hold command (once until the next action) and say why on the status topic."""
        if not self._held:
            msg = self.hold_message()
            if msg is not None and not self._wrong_type:
                self.pub_action.publish(msg)
            self._held = True
            self.stats.holds += 1
        self._set(state, level, message)
        self.publish_status(force=True)
        if level != OK:
            self._tell(level, message)

    def _set(self, state: str, level: int, message: str) -> None:
        self._state, self._level, self._message = state, level, message

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._checked_at >= self.config.status_period_s:  # the graph, as often as the status
            self._checked_at = now
            self._check_command_topic()
        if now - self._last_status >= self.config.status_period_s:
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
            "stale_observations": self.stats.stale_observations,
            "end_requests": self.stats.end_requests,
            "server": "ok" if self._server_ok else "unavailable",
            "session": getattr(self.episode, "session_id", None) or "",
            "goal": self._goal_text,
            "goal_stamp": self._goal_stamp,
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
        """End the session, publish the hold once, say so (WARN: nothing drives the robot now)."""
        if self.goal_action is not None:
            self.goal_action.shutdown()
        self._end_episode()
        msg = self.hold_message()
        if msg is not None and not self._wrong_type:
            self.pub_action.publish(msg)
        self._held = True
        self._set("stopped", WARN, "bridge stopped; hold published")
        self.publish_status(force=True)
