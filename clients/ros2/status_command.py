"""``l3p ros2 status NS`` and ``l3p ros2 end NS``: read a bridge's status topic and end its episode
from a robot that has the ``[ros2]`` wheels but no ``ros2`` CLI (the wheels bring none)."""

from __future__ import annotations

import time
from typing import Any

from l3p.core.errors import UNAVAILABLE, L3PError

LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}


class NoBridge(L3PError):
    """No bridge answered within the wait: not running, another namespace or ROS_DOMAIN_ID."""

    exit_code = UNAVAILABLE


def _name(namespace: str, name: str) -> str:
    return "/" + "/".join(p.strip("/") for p in (namespace, name) if p.strip("/"))


def status_line(msg: Any) -> str:
    """One status message as one line: level, message, then the key/values."""
    level = msg.level if isinstance(msg.level, int) else int.from_bytes(msg.level, "little")
    values = " ".join(f"{kv.key}={kv.value}" for kv in msg.values)
    return f"{msg.name or 'l3p_bridge'}: {LEVELS.get(level, level)} {msg.message}; {values}"


class _Listener:
    """A node hearing ``NS/TOPIC``'s status messages (best effort: it hears a bridge publishing either way)."""

    def __init__(self, name: str, status: str, wait_s: float) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticStatus
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=[name], signal_handler_options=SignalHandlerOptions.NO)
        self.rclpy, self.status, self.wait_s = rclpy, status, wait_s
        self.node = rclpy.create_node(name)
        self.heard: list[Any] = []
        self.node.create_subscription(DiagnosticStatus, status, self.heard.append,
                                      QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))

    def next(self, deadline: float, what: str) -> Any:
        while not self.heard:
            if time.monotonic() > deadline:
                raise NoBridge(f"{what} within {self.wait_s:g} s: is the bridge running (l3p ros2 bridge), with "
                               "this namespace and ROS_DOMAIN_ID?")
            self.rclpy.spin_once(self.node, timeout_sec=0.1)
        return self.heard.pop(0)

    def __enter__(self) -> _Listener:
        return self

    def __exit__(self, *_: Any) -> None:
        self.node.destroy_node()
        self.rclpy.try_shutdown()


def run_status(namespace: str, topic: str = "status", wait_s: float = 10.0, follow: bool = False) -> int:
    """Print the bridge's next status message (``follow``: every one until SIGINT)."""
    with _Listener("l3p_status", _name(namespace, topic), wait_s) as listener:
        try:
            print(status_line(listener.next(time.monotonic() + wait_s, f"no status on {listener.status}")), flush=True)
            while follow:
                print(status_line(listener.next(float("inf"), "")), flush=True)
        except KeyboardInterrupt:
            pass
    return 0


def run_end(namespace: str, topic: str = "end_episode", status: str = "status", wait_s: float = 10.0) -> int:
    """End the bridge's episode: an ``std_msgs/Empty`` on ``NS/TOPIC`` once the bridge hears it, then
    the bridge's status answering it, printed (exit 1 if there was no episode to end). The answer is the
    first status whose count of end requests passed the one heard before: a status the bridge sent
    earlier (its heartbeat repeats the last message) is not taken for it."""
    from rclpy.qos import QoSProfile
    from std_msgs.msg import Empty

    from l3p.clients.ros2.diagnostics import END_DONE, END_NOTHING

    name = _name(namespace, topic)
    with _Listener("l3p_end", _name(namespace, status), wait_s) as listener:
        deadline = time.monotonic() + wait_s
        pub = listener.node.create_publisher(Empty, name, QoSProfile(depth=1))
        before = _end_requests(listener.next(deadline, f"no status on {listener.status}"))  # the bridge is there
        while pub.get_subscription_count() == 0:  # published before it is heard, the message would be lost
            if time.monotonic() > deadline:
                raise NoBridge(f"nobody subscribes to {name} within {wait_s:g} s (topics.end_episode)")
            listener.rclpy.spin_once(listener.node, timeout_sec=0.05)
        listener.heard.clear()
        pub.publish(Empty())
        while True:
            msg = listener.next(deadline, f"no answer on {listener.status} to {name}")
            if _end_requests(msg) > before and msg.message.endswith((END_DONE, END_NOTHING)):
                print(f"{namespace or '/'}: {msg.message}", flush=True)
                return 0 if msg.message.endswith(END_DONE) else 1


def _end_requests(msg: Any) -> int:
    """The bridge's count of end requests heard, from its status values."""
    return next((int(kv.value) for kv in msg.values if kv.key == "end_requests"), 0)
