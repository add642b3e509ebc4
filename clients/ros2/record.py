"""``l3p ros2 record``: record a robot that something else drives (teleoperation, a scripted routine,
an earlier policy), with no planner in the loop, into the project's dataset format (``--format npz``)
or into rosbag2 bags (``--format mcap``: the topics' messages as received, which ``l3p dataset
import rosbag2`` turns into the same dataset with the same mapping).

The topics and how their messages become vectors come from a mapping file (`l3p.datasets.mapping`,
format rosbag2): the same file imports a ``ros2 bag record`` of the same topics, and each part may
name its message ``type`` (default ``std_msgs/msg/Float64MultiArray``; ``geometry_msgs/msg/PointStamped``
for a desired goal). Steps follow the bag import's time alignment, on publish times (rmw's source
stamps, else receive stamps; `l3p.datasets.align.LiveAligner`): one step per command, paired with the
newest observation within ``max_skew_s``; an episode ends where a step was dropped, commands pause
for ``max_gap_s``, and as the mapping's ``episodes.split`` says: where the goal changes, at a message of an end topic, or at a call of
the recorder's ``std_srvs/srv/Trigger`` service. What happens to the messages: `recording.Recording`.
"""
from __future__ import annotations

import importlib
import json
import signal
import time
from pathlib import Path
from typing import Any

from l3p.clients.ros2.recording import DEFAULT_TYPE, Recording, bag_series
from l3p.core.errors import L3PError
from l3p.datasets.mapping import load_mapping
from l3p.datasets.sizes import size_problems
from l3p.datasets.writer import EpisodeWriter

FORMATS = ("npz", "mcap")
PROGRESS_EVERY_S = 5.0  # the running count's period


def message_class(name: str) -> type:
    """``pkg/msg/Type`` -> the rclpy message class."""
    pkg, _, kind = name.partition("/msg/")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), kind)
    except (ImportError, AttributeError):
        raise L3PError(f"message type {name!r} is not installed (pkg/msg/Type, e.g. {DEFAULT_TYPE})") from None


def _trigger() -> type:
    try:
        from std_srvs.srv import Trigger
    except ImportError:
        raise L3PError("episodes.split: service needs std_srvs (pip install ros-std-srvs==5.5.1, in the ros2 extra)") \
            from None
    return Trigger


def _tell_publishers(subscriptions: list, heard: dict[str, int]) -> None:
    """A line each time the publishers a topic is heard from change: discovery takes a moment, and a
    topic nobody publishes records nothing."""
    for s in subscriptions:
        count = s.get_publisher_count()
        if count != heard[s.topic_name]:
            heard[s.topic_name] = count
            print(f"l3p ros2 record: hearing {s.topic_name} from {count} publisher(s)", flush=True)


def _take_waiting(subscriptions: list) -> bool:
    """Every message waiting on the subscriptions, taken now and handed to its callback, topic by
    topic; whether there was any. Emptiness is checked by taking: a held-up recorder that trusted an
    executor's empty spin still paired commands with the wrong observations."""
    took = False
    for s in subscriptions:
        with s.handle:
            while (taken := s.handle.take_message(s.msg_type, s.raw)) is not None:
                s.callback(*taken)
                took = True
    return took


def run_record(mapping_path: str, out: str, *, rotate_steps: int, max_episode_steps: int, duration_s: float | None,
               qos: str, stats_path: str | None, ros_args: list[str], format: str = "npz") -> int:
    mapping = load_mapping(mapping_path, "rosbag2")
    problems = size_problems(mapping)  # before hours of recording that its import would refuse
    if problems:
        raise L3PError(f"{mapping.where()}: " + "; ".join(problems) + " (l3p dataset check MAPPING --env-id ENV "
                       "compares it with the env)")
    if format not in FORMATS:
        raise L3PError(f"--format: one of {', '.join(FORMATS)}, got {format!r}")
    service = mapping.episodes.split == "service"
    trigger = _trigger() if service else None
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message, serialize_message
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Empty

    made_by = {"recorder": "l3p ros2 record", "mapping": str(mapping_path),
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if format == "npz":
        recording = Recording(mapping, EpisodeWriter(out, mapping.env_id, made_by, rotate_steps=rotate_steps,
                                                     max_episode_steps=max_episode_steps))
    else:
        recording = Recording(mapping, bag_series(mapping, out), rotate_steps=rotate_steps,
                              max_episode_steps=max_episode_steps)
    topics = recording.topics()
    classes = {topic: message_class(kind) for topic, (kind, _) in topics.items()}
    rclpy.init(args=["l3p_record", "--ros-args", *ros_args] if ros_args else None,
               signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("l3p_record")
    # A deep queue: when writing a file holds the recorder up, messages wait instead of being replaced.
    profile = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT if qos == "best_effort"
                         else ReliabilityPolicy.RELIABLE)
    raw = format == "mcap"  # a bag keeps the bytes as received; the mapping reads them decoded
    # When every subscription's queue was last found empty: all sent before then has been taken, so
    # only that much is released to the aligner. A recorder held up (a slow write, a loaded machine)
    # takes its backlog in the executor's order, topic by topic, not in the order it was sent.
    drained = [time.time_ns()]

    def callback(topic: str, kind: str, uses: list) -> Any:
        def on_message(msg: Any, info: Any) -> None:
            now = time.time_ns()  # rmw's stamps are system time; 0 where an rmw has none
            data = msg if raw else None
            if raw:
                msg = deserialize_message(msg, classes[topic])
            # The publisher's stamp: a lockstep robot's observation is sent before the command that
            # answers it, but on a loaded machine the command can be received first.
            stamp = info.get("source_timestamp") or info.get("received_timestamp") or now
            recording.message(topic, kind, uses, msg, stamp, drained[0], data)
        return on_message

    subscriptions = [node.create_subscription(classes[topic], topic, callback(topic, kind, uses), profile, raw=raw)
                     for topic, (kind, uses) in topics.items()]
    if service:
        calls = [0]
        empty = serialize_message(Empty())

        def on_call(_request: Any, response: Any) -> Any:
            recording.end_episode(time.time_ns(), empty if raw else None, drained[0])
            calls[0] += 1
            response.success, response.message = True, f"episode end {calls[0]} recorded"
            return response

        node.create_service(trigger, mapping.episodes.service, on_call)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    extra = f"; episode ends: service {mapping.episodes.service}" if service else ""
    print(f"l3p ros2 record: READY recording {', '.join(node.resolve_topic_name(t) for t in topics)} to {out}"
          f"{extra}", flush=True)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    heard, told, counted = {s.topic_name: 0 for s in subscriptions}, 0.0, time.monotonic()
    try:
        while deadline is None or time.monotonic() < deadline:
            checked = time.time_ns()
            if not _take_waiting(subscriptions):
                drained[0] = checked
                recording.release(checked)
                executor.spin_once(timeout_sec=0.1)
            if time.monotonic() - told > 0.2:
                _tell_publishers(subscriptions, heard)
                told = time.monotonic()
            if time.monotonic() - counted >= PROGRESS_EVERY_S:
                print(f"l3p ros2 record: {recording.progress()}", flush=True)
                counted = time.monotonic()
    except KeyboardInterrupt:
        pass
    finally:
        _take_waiting(subscriptions)  # what a held-up recorder had not taken yet
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
