"""``l3p ros2 record``: record a robot that something else drives (teleoperation, a scripted routine,
an earlier policy), with no planner in the loop, into the project's dataset format.

The topics and how their messages become vectors come from a mapping file (`l3p.datasets.mapping`,
format rosbag2): the same file imports a ``ros2 bag record`` of the same topics, and each part may
name its message ``type`` (default ``std_msgs/msg/Float64MultiArray``; ``geometry_msgs/msg/PointStamped``
for a desired goal). Steps follow the bag import's time alignment, on receive times
(`l3p.datasets.align.LiveAligner`): one step per command, paired with the newest observation within
``max_skew_s``; an episode ends where the goal changes, a step was dropped, or commands pause for
``max_gap_s``. Streamed to disk by `l3p.datasets.writer.EpisodeWriter`: bounded memory, rotated
files, every finished episode readable after a kill.
"""
from __future__ import annotations

import heapq
import importlib
import json
import resource
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.errors import L3PError
from l3p.datasets.align import LiveAligner
from l3p.datasets.mapping import Mapping, Part, load_mapping
from l3p.datasets.messages import BadMessage, message_vector, part_fields
from l3p.datasets.writer import EpisodeWriter

# An executor serves ready subscriptions in its own order, not in the order messages arrived: each
# message waits this long, then all go to the aligner sorted by their receive time (rmw's stamp).
REORDER_NS = 200_000_000
DEFAULT_TYPE = "std_msgs/msg/Float64MultiArray"
GOAL_TYPE = "geometry_msgs/msg/PointStamped"


def message_class(name: str) -> type:
    """``pkg/msg/Type`` -> the rclpy message class."""
    pkg, _, kind = name.partition("/msg/")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), kind)
    except (ImportError, AttributeError):
        raise L3PError(f"message type {name!r} is not installed (pkg/msg/Type, e.g. {DEFAULT_TYPE})") from None


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


class Recording:
    """The recorder's state, apart from ROS: messages in, steps out to the writer."""

    def __init__(self, mapping: Mapping, writer: EpisodeWriter) -> None:
        self.mapping = mapping
        self.writer = writer
        self.observed = [*mapping.observation, *mapping.achieved_goal]
        self.n_obs = len(mapping.observation)
        a = mapping.alignment
        self.aligner = LiveAligner(len(self.observed), len(mapping.desired_goal), int(a.max_skew_s * 1e9),
                                   int(a.max_gap_s * 1e9), self._step)
        self.bad: dict[str, int] = {}
        self.last_bad = ""
        self.messages = 0
        self.steps = 0
        self.rss: list[tuple[int, float]] = []
        self.waiting: list[tuple[int, int, list, list[np.ndarray]]] = []  # a heap by receive time

    def topics(self) -> dict[str, tuple[str, list[tuple[str, int, Part]]]]:
        """topic -> (message type, [(role, index, part)]) for every topic the mapping reads."""
        out: dict[str, tuple[str, list[tuple[str, int, Part]]]] = {}
        uses = [("observed", k, p) for k, p in enumerate(self.observed)]
        uses += [("goal", k, p) for k, p in enumerate(self.mapping.desired_goal)]
        uses += [("action", 0, p) for p in self.mapping.action]
        for role, k, part in uses:
            kind = part.type or (GOAL_TYPE if role == "goal" else DEFAULT_TYPE)
            have = out.setdefault(part.topic, (kind, []))
            if have[0] != kind:
                raise L3PError(f"{self.mapping.where()}: topic {part.topic} is given two types, {have[0]} and {kind}")
            have[1].append((role, k, part))
        return out

    def message(self, topic: str, kind: str, uses: list[tuple[str, int, Part]], msg: Any, stamp_ns: int,
                now_ns: int | None = None) -> None:
        """One message, received at ``stamp_ns``; the aligner gets the messages received before
        ``now_ns - REORDER_NS`` (default: this one's stamp), in the order they were received."""
        self.messages += 1
        try:
            vectors = []
            for role, k, part in uses:
                vec = message_vector(msg, part, part_fields(part, kind))
                if not np.all(np.isfinite(vec)):
                    raise BadMessage(f"has NaN or Inf at index {int(np.flatnonzero(~np.isfinite(vec))[0])}")
                vectors.append(vec)
        except BadMessage as err:
            self.bad[topic] = self.bad.get(topic, 0) + 1
            self.last_bad = f"topic {topic}: message {self.messages} {err}"
            return
        heapq.heappush(self.waiting, (stamp_ns, self.messages, uses, vectors))
        self.release(stamp_ns if now_ns is None else now_ns)

    def release(self, now_ns: int | None) -> None:
        """Messages received before ``now_ns - REORDER_NS`` to the aligner, oldest first (all: None)."""
        while self.waiting and (now_ns is None or self.waiting[0][0] < now_ns - REORDER_NS):
            stamp_ns, _, uses, vectors = heapq.heappop(self.waiting)
            for (role, k, _), vec in zip(uses, vectors):
                if role == "observed":
                    self.aligner.observed(k, stamp_ns, vec)
                elif role == "goal":
                    self.aligner.goal(k, vec)
                else:
                    self.aligner.action(stamp_ns, vec)

    def _step(self, step: dict[str, Any], starts: bool) -> None:
        if starts:
            self.writer.end_episode()
        obs = np.concatenate(step["observed"][:self.n_obs]).astype(np.float32)
        if self.mapping.achieved_goal_indices:
            achieved = obs[list(self.mapping.achieved_goal_indices)]
        else:
            achieved = np.concatenate(step["observed"][self.n_obs:]).astype(np.float32)
        row = {"observations": obs, "actions": step["action"].astype(np.float32), "achieved_goals": achieved}
        if step["goals"]:
            row["desired_goals"] = np.concatenate(step["goals"]).astype(np.float32)
        self.writer.add(**row)
        self.steps += 1
        if self.steps % 10_000 == 0:
            self.rss.append((self.steps, rss_mb()))

    def close(self) -> dict[str, Any]:
        self.release(None)
        self.aligner.flush()
        self.writer.close()
        return {**self.writer.counts, "files": [str(f) for f in self.writer.files], "dropped": self.aligner.dropped,
                "bad_messages": self.bad, "last_bad_message": self.last_bad, "messages": self.messages,
                "rss_mb": {"samples": self.rss, "now": rss_mb(),
                           "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}}


def run_record(mapping_path: str, out: str, *, rotate_steps: int, max_episode_steps: int, duration_s: float | None,
               qos: str, stats_path: str | None, ros_args: list[str]) -> int:
    mapping = load_mapping(mapping_path, "rosbag2")
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions

    made_by = {"recorder": "l3p ros2 record", "mapping": str(mapping_path),
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    recording = Recording(mapping, EpisodeWriter(out, mapping.env_id, made_by, rotate_steps=rotate_steps,
                                                 max_episode_steps=max_episode_steps))
    topics = recording.topics()
    classes = {topic: message_class(kind) for topic, (kind, _) in topics.items()}
    rclpy.init(args=["l3p_record", "--ros-args", *ros_args] if ros_args else None,
               signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("l3p_record")
    # A deep queue: when writing a file holds the recorder up, messages wait instead of being replaced.
    profile = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT if qos == "best_effort"
                         else ReliabilityPolicy.RELIABLE)

    def callback(topic: str, kind: str, uses: list) -> Any:
        def on_message(msg: Any, info: Any) -> None:
            now = time.time_ns()  # rmw's receive stamps are system time; 0 where an rmw has none
            recording.message(topic, kind, uses, msg, info.get("received_timestamp") or now, now)
        return on_message

    for topic, (kind, uses) in topics.items():
        node.create_subscription(classes[topic], topic, callback(topic, kind, uses), profile)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print(f"l3p ros2 record: READY recording {', '.join(node.resolve_topic_name(t) for t in topics)} to {out}",
          flush=True)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while deadline is None or time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
            recording.release(time.time_ns())
    except KeyboardInterrupt:
        pass
    finally:
        result = recording.close()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    dropped = ", ".join(f"{n} {why}" for why, n in result["dropped"].items() if n) or "none"
    bad = sum(result["bad_messages"].values())
    last = f" (last: {result['last_bad_message']})" if bad else ""
    print(f"recorded {result['steps']} steps in {result['episodes']} episodes to {len(result['files'])} file(s); "
          f"dropped: {dropped}; bad messages: {bad}{last}", flush=True)
    if stats_path:
        Path(stats_path).write_text(json.dumps(result, indent=2) + "\n")
    return 0
