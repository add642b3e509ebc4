"""A simulated robot on ROS 2: any goal env the runner can make (``l3p.sim.envs.make_env``) as a
ROS 2 node, for trying the bridge without hardware.

It publishes its observation (``std_msgs/Float64MultiArray``), its goal (``PointStamped``, or
``Float64MultiArray`` with ``goal_type array``), its achieved goal (``PointStamped``, for RViz) and
after each step its success (``std_msgs/Bool``); it applies the actions it receives on its command
topic. Episodes are the runner's (``l3p.clients.runner.episode_plan``: env seed ``seed + i``, maze
far pairs), so a run can be compared with ``l3p eval`` on the same seeds.

Each episode starts with the goal handshake a robot owes the bridge: the goal, stamped once and
re-sent as the same message, until the bridge's status shows an episode pursuing it (its
``goal_stamp``; for an unstamped ``array`` goal, its values); only then the first observation, so
no observation of this episode can be answered by the previous one's session.

With ``goal_action`` (a bridge with ``goal_action.enabled``) the goal goes as a ReachGoal action
instead (a real rclpy ActionClient): the first observation follows its acceptance, the goal's step
limit is the env's, and the episode ends with the action's result (the env's last observation is
published for the bridge to decide on); feedback and result are kept per episode. It steps at
``rate_hz`` (no lockstep: the bridge holds, and answers nothing, once a goal has ended).

- ``lockstep``: the env steps only when the answer to its last observation arrives, which makes runs
  comparable step for step with the gRPC runner. What arrived before the observation was published
  answers none of it (a hold the bridge sent while the env stepped) and is dropped; a hold after it
  means the bridge could not act on it, and is applied for that step.
- ``rate_hz``: the env steps every period with the newest command received (like a
  forward_command_controller, it keeps the last one); a period in which no action answered the
  observation is counted as missed.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
import time
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PointStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Bool, Float64MultiArray

from l3p.clients.ros2.action_type import OUTCOMES
from l3p.clients.ros2.config import Topics
from l3p.clients.ros2.convert import array_message, header_stamp, point_message, stamp_ns
from l3p.clients.runner import episode_plan, open_env
from l3p.core.errors import UNAVAILABLE, L3PError
from l3p.sim import mazes
from l3p.sim.envs import goal_adapter
from l3p.sim.render import close_env


class BridgeSilent(L3PError):
    """The bridge never answered (no status for the goal, or no action in lockstep)."""

    exit_code = UNAVAILABLE


@dataclasses.dataclass(frozen=True)
class SimConfig:
    env_id: str
    namespace: str = ""
    episodes: int = 1
    seed: int = 0
    pairs: str = "random"
    min_cells: int = mazes.MIN_FAR_CELLS
    max_steps: int | None = None  # None: the env's own time limit
    lockstep: bool = True
    rate_hz: float = 50.0  # without lockstep
    goal_type: str = "point"  # point | array
    topics: Topics = Topics(success="success")
    achieved_goal_topic: str = "achieved_goal"
    frame_id: str = "world"
    wait_s: float = 30.0  # the longest wait for the bridge (its status, a lockstep action) or the subscribers
    wait_subscribers: int = 0  # subscribers of the observation topic to wait for before the first episode
    log_received: bool = False  # keep every command received, with its time (fault tests)
    start_at: float | None = None  # UNIX time of the first episode (several robots started together)
    goal_action: str = ""  # send each goal as a ReachGoal action of this name (relative); "": on the goal topic


@dataclasses.dataclass
class SimEpisode:
    index: int
    env_seed: int
    success: bool
    final_distance: float
    steps: int
    actions: list[list[float]]
    rtt_s: list[float]  # observation published -> its action received
    missed: int = 0  # rate mode: periods without an answer
    pair: Any = None
    received: list[tuple[float, list[float]]] = dataclasses.field(default_factory=list)
    reached_at: int | None = None  # the first step after which the env said success (success: the last step's word)
    # with goal_action: the result (its outcome's name, message, final distance, steps) and the feedback
    result: dict[str, Any] | None = None
    feedback: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class SimRobot:
    def __init__(self, config: SimConfig) -> None:
        self.c = config
        self.env = open_env(config.env_id, max_steps=config.max_steps)
        self.adapter = goal_adapter(self.env)
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("l3p_sim_robot", namespace=config.namespace or "/")
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        t = config.topics
        self.pub_obs = self.node.create_publisher(Float64MultiArray, t.observation, qos)
        goal_type = Float64MultiArray if config.goal_type == "array" else PointStamped
        self.pub_goal = self.node.create_publisher(goal_type, t.goal, qos)
        self.pub_success = self.node.create_publisher(Bool, t.success or "success", qos)
        self.pub_achieved = self.node.create_publisher(PointStamped, config.achieved_goal_topic, qos)
        self.actions: queue.SimpleQueue[tuple[float, np.ndarray]] = queue.SimpleQueue()
        self.node.create_subscription(Float64MultiArray, t.action, self._on_action, qos)
        self.node.create_subscription(DiagnosticStatus, t.status, self._on_status, qos)
        self._status: dict[str, str] = {}
        self._status_cv = threading.Condition()
        self.action_client = None
        if config.goal_action:
            if config.lockstep:  # once a goal has ended the bridge answers nothing: a lockstep env would wait
                raise ValueError("goal_action steps at rate_hz: lockstep must be off")
            from rclpy.action import ActionClient

            from l3p.clients.ros2.action_type import reach_goal_type

            self.reach_goal = reach_goal_type()
            self.action_client = ActionClient(self.node, self.reach_goal, config.goal_action)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._spin = threading.Thread(target=self.executor.spin, daemon=True)
        self._spin.start()

    def _on_action(self, msg: Float64MultiArray) -> None:
        self.actions.put((time.perf_counter(), np.asarray(msg.data, dtype=np.float64)))

    def _on_status(self, msg: DiagnosticStatus) -> None:
        with self._status_cv:
            self._status = {kv.key: kv.value for kv in msg.values}
            self._status_cv.notify_all()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown()
        close_env(self.env)

    def _goal_message(self, goal: np.ndarray) -> Any:
        if self.c.goal_type == "array":
            return array_message(goal)
        return point_message(goal, self.c.frame_id, self.node.get_clock().now().to_msg())

    def _pursued(self, msg: Any, goal: np.ndarray) -> bool:
        """Whether the bridge's status shows an episode started for the goal ``msg``."""
        if not self._status.get("session"):
            return False
        stamp = stamp_ns(header_stamp(msg))
        if stamp:
            return self._status.get("goal_stamp") == str(stamp)
        goal_text = self._status.get("goal", "null")
        seen = json.loads(goal_text) if goal_text else None
        return seen is not None and np.array_equal(np.float32(seen), goal.astype(np.float32))

    def _wait_for_bridge(self, goal: np.ndarray) -> None:
        """The goal handshake: re-send the same goal message until the bridge pursues it."""
        msg = self._goal_message(goal)
        deadline = time.monotonic() + self.c.wait_s
        with self._status_cv:
            while not self._pursued(msg, goal):
                if time.monotonic() > deadline:
                    raise BridgeSilent(f"the bridge did not start an episode for goal "
                                       f"{goal.astype(np.float32).tolist()} within {self.c.wait_s:g} s "
                                       f"(last status {self._status or 'none'})")
                self.pub_goal.publish(msg)
                self._status_cv.wait(0.2)

    def _send_goal(self, goal: np.ndarray, max_steps: int, ep: SimEpisode) -> Any:
        """The goal as a ReachGoal action, once accepted; the future of its result."""
        if not self.action_client.wait_for_server(timeout_sec=self.c.wait_s):
            raise BridgeSilent(f"no {self.c.goal_action} action server within {self.c.wait_s:g} s")
        msg = self.reach_goal.Goal(goal=goal.tolist(), max_steps=max_steps)
        msg.header.frame_id = self.c.frame_id
        msg.header.stamp = self.node.get_clock().now().to_msg()

        def feedback(m: Any) -> None:
            f = m.feedback
            ep.feedback.append({"steps": f.steps, "subgoal_index": f.subgoal_index,
                                "estimated_steps": f.estimated_steps, "distance": f.distance})

        handle = _wait(self.action_client.send_goal_async(msg, feedback_callback=feedback), self.c.wait_s,
                       "the goal's acceptance")
        if not handle.accepted:
            raise BridgeSilent(f"the bridge rejected goal {goal.astype(np.float32).tolist()} (see its status)")
        return handle.get_result_async()

    def _drain(self) -> list[tuple[float, np.ndarray]]:
        out = []
        while True:
            try:
                out.append(self.actions.get_nowait())
            except queue.Empty:
                return out

    def _publish_obs(self, obs: dict[str, np.ndarray]) -> float:
        self.pub_achieved.publish(point_message(obs["achieved_goal"], self.c.frame_id))
        t0 = time.perf_counter()
        self.pub_obs.publish(array_message(obs["observation"]))
        return t0

    def run_episode(self, index: int, seed: int, pair: Any) -> SimEpisode:
        c, env = self.c, self.env
        obs, info = env.reset(seed=seed, options=mazes.reset_options(pair) if pair else None)
        goal = np.asarray(obs["desired_goal"], dtype=np.float64)
        ep = SimEpisode(index, seed, False, float("nan"), 0, [], [], pair=pair)
        result = None
        if self.action_client is not None:
            result = self._send_goal(goal, self.env.spec.max_episode_steps or 0, ep)
        else:
            self._wait_for_bridge(goal)
        command = np.zeros(env.action_space.shape, dtype=np.float64)
        period = 1.0 / c.rate_hz
        next_tick = time.perf_counter()
        self._drain()
        while True:
            if c.lockstep:
                stale = self._drain()
                if c.log_received:
                    ep.received.extend((t, a.tolist()) for t, a in stale)
            t0 = self._publish_obs(obs)
            if c.lockstep:
                try:
                    t1, command = self.actions.get(timeout=c.wait_s)
                except queue.Empty:
                    raise BridgeSilent(f"no action for step {ep.steps} of episode {index} within "
                                       f"{c.wait_s:g} s") from None
                ep.rtt_s.append(t1 - t0)
                if c.log_received:
                    ep.received.append((t1, command.tolist()))
            else:
                next_tick += period
                time.sleep(max(0.0, next_tick - time.perf_counter()))
                got = self._drain()
                if got:
                    ep.rtt_s.append(got[0][0] - t0)
                    command = got[-1][1]
                    if c.log_received:
                        ep.received.extend((t, a.tolist()) for t, a in got)
                else:
                    ep.missed += 1
            ep.actions.append(command.tolist())
            # The planner's actions are float32 values; applied as float32, as the gRPC runner applies
            # them (an env's own arithmetic on them, e.g. Fetch's scaling, then rounds the same way).
            obs, _, terminated, truncated, info = env.step(command.astype(np.float32))
            ep.steps += 1
            succeeded = bool(self.adapter.success(info))
            if succeeded and ep.reached_at is None:
                ep.reached_at = ep.steps
            self.pub_success.publish(Bool(data=succeeded))
            if result is not None and result.done():
                break
            if terminated or truncated:
                if result is not None:  # the bridge decides on the last observation
                    self._publish_obs(obs)
                    _wait(result, c.wait_s, "the goal's result")
                break
        if result is not None:
            r = result.result().result
            ep.result = {"outcome": OUTCOMES[r.outcome], "message": r.message, "final_distance": r.final_distance,
                         "steps": r.steps}
        ep.success = succeeded
        ep.final_distance = float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]))
        return ep

    def _wait_for_subscribers(self) -> None:
        """Discovery takes a while: a recorder that starts hearing mid-episode misses its beginning."""
        deadline = time.monotonic() + self.c.wait_s
        while (heard := self.pub_obs.get_subscription_count()) < self.c.wait_subscribers:
            if time.monotonic() > deadline:
                raise BridgeSilent(f"{heard} of {self.c.wait_subscribers} subscribers heard {self.pub_obs.topic_name} "
                                   f"within {self.c.wait_s:g} s")
            time.sleep(0.05)

    def run(self) -> list[SimEpisode]:
        plan = episode_plan(self.env, self.c.env_id, self.c.episodes, self.c.seed, self.c.pairs, self.c.min_cells)
        self._wait_for_subscribers()
        if self.c.start_at is not None:
            time.sleep(max(0.0, self.c.start_at - time.time()))
        return [self.run_episode(i, seed, pair) for i, (seed, pair) in enumerate(plan)]


def _wait(future: Any, timeout_s: float, what: str) -> Any:
    """The result of an rclpy future that the node's executor thread completes."""
    deadline = time.monotonic() + timeout_s
    while not future.done():
        if time.monotonic() > deadline:
            raise BridgeSilent(f"no answer for {what} within {timeout_s:g} s")
        time.sleep(0.002)
    return future.result()


def summary(episodes: list[SimEpisode], config: SimConfig) -> dict[str, Any]:
    rtt = np.array([t for e in episodes for t in e.rtt_s]) * 1e3
    return {
        "env_id": config.env_id,
        "namespace": config.namespace,
        "lockstep": config.lockstep,
        "rate_hz": None if config.lockstep else config.rate_hz,
        "successes": int(sum(e.success for e in episodes)),
        "reached": int(sum(e.reached_at is not None for e in episodes)),
        "episodes": [dataclasses.asdict(e) for e in episodes],
        "rtt_ms": {"p50": float(np.percentile(rtt, 50)) if rtt.size else None,
                   "p99": float(np.percentile(rtt, 99)) if rtt.size else None, "n": int(rtt.size)},
        "missed": int(sum(e.missed for e in episodes)),
        "reached_by_action": int(sum(bool(e.result) and e.result["outcome"] == "reached" for e in episodes)),
    }
