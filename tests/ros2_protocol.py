"""The ``protocol`` scenario of tests/ros2_harness.py: this process is a robot (stamped JointState
observations, stamped goals, lockstep on the action topic) speaking to the bridge the way the guide
says, and then misbehaving: an observation beyond float32, a goal of 1e300, a goal in another
frame, an observation stamped before its goal, a goal stamped ahead of the bridge's clock, a goal
and an observation published back to back, a pause past the observation timeout; at the end
SIGTERM. The planner runs mode ``policy`` (action = pi(observation, goal), no state), so every
action received is compared with the action the server gives for that observation and either goal."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from ros2_harness import MODELS, Probe, bridge_config, bridge_process, start_server, status_values

GOALS = {"a": [1.3, 0.75, 0.42], "b": [1.1, 0.6, 0.5]}
ANSWER_S = 5.0  # the longest wait for one answer (a missing answer is recorded, not raised)
HOUR_NS = 3600 * 1_000_000_000


def scenario_protocol(p: dict[str, Any]) -> dict[str, Any]:
    from builtin_interfaces.msg import Time
    from diagnostic_msgs.msg import DiagnosticStatus
    from geometry_msgs.msg import PointStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from l3p.clients.client import InvalidArgument, PlannerClient
    from l3p.clients.ros2.convert import point_message

    bundle = MODELS / "FetchPush-v4"
    obs_dim = int(json.loads((bundle / "manifest.json").read_text())["dims"]["obs"])
    joints = [f"joint_{i}" for i in range(obs_dim)]
    work = Path(tempfile.mkdtemp(prefix="l3p-ros2-"))
    server = start_server(bundle)
    timeout = p["observation_timeout_s"]
    config = bridge_config(server.target, robots=["/arm"], planner="policy", observation_timeout_s=timeout,
                           observation={"type": "joint_state", "joints": joints, "fields": ["position"]})
    probe = Probe()
    commands = probe.record("/arm/forward_command_controller/commands", Float64MultiArray)
    stamped = probe.record("/arm/action_stamped", JointState)
    statuses = probe.record("/arm/status", DiagnosticStatus)
    pub_obs = probe.publisher("/arm/observation", JointState)
    pub_goal = probe.publisher("/arm/goal", PointStamped)
    clock = probe.node.get_clock()
    rng = np.random.default_rng(0)
    lock = threading.Lock()
    sent: list[dict[str, Any]] = []  # every observation published: its values, stamp, the goal in force

    def labels(msg: Any) -> list[str]:
        return [d.label for d in msg.layout.dim]

    def answers() -> int:  # command messages that are not labelled (on today's bridge: every one)
        return sum(not labels(m) for _, m in commands)

    def now_ns() -> int:
        return clock.now().nanoseconds

    def stamp(ns: int) -> Any:
        return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

    def publish_goal(name: str, frame: str = "world", values: list[float] | None = None, ahead_ns: int = 0) -> int:
        ns = now_ns() + ahead_ns  # ahead: a robot whose clock runs ahead of the bridge's
        msg = point_message(values or GOALS[name], frame, stamp(ns))
        pub_goal.publish(msg)
        return ns

    def publish_obs(values: np.ndarray, goal: str, ns: int | None = None) -> dict[str, Any]:
        ns = now_ns() if ns is None else ns
        msg = JointState(name=joints, position=[float(v) for v in values])
        msg.header.stamp = stamp(ns)
        record = {"obs": values.tolist(), "stamp": ns, "goal": goal, "answers_before": answers()}
        with lock:
            sent.append(record)
        pub_obs.publish(msg)
        return record

    def step(goal: str, values: np.ndarray | None = None) -> bool:
        """Lockstep: one observation, then wait for an answer on the action topic."""
        record = publish_obs(rng.normal(0, 0.1, obs_dim) if values is None else values, goal)
        deadline = time.monotonic() + ANSWER_S
        while answers() <= record["answers_before"]:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def handshake(name: str, ns: int) -> dict[str, str]:
        """Wait for the status to show an episode pursuing goal ``name`` stamped ``ns`` (by its values
        where the status has no goal_stamp: today's bridge); re-send the same goal meanwhile."""
        want = np.float32(GOALS[name])
        deadline = time.monotonic() + 20
        while True:
            for _, s in reversed(statuses[-5:]):
                v = status_values(s)
                seen = json.loads(v.get("goal", "null"))
                if (v.get("session") and v.get("goal_stamp", str(ns)) == str(ns) and seen is not None
                        and np.array_equal(np.float32(seen), want)):
                    return v
            if time.monotonic() > deadline:
                raise AssertionError(f"no episode for goal {name}")
            pub_goal.publish(point_message(GOALS[name], "world", stamp(ns)))
            time.sleep(0.1)

    def settle(predicate: Any, timeout_s: float = 3.0) -> None:
        """Wait for what the bridge should do (it may not: today's bridge, a fault); never raises."""
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # anything else it sends for the same message

    def running(ns: int) -> bool:
        """The status shows an episode pursuing the goal stamped ``ns``."""
        return last_status().get("goal_stamp") == str(ns) and bool(last_status().get("session"))

    def errors_since(mark: int) -> int:
        return sum(int.from_bytes(s.level, "little") == 2 for _, s in statuses[mark:])

    def last_status() -> dict[str, str]:
        return status_values(statuses[-1][1])

    def since(mark: int) -> list[tuple[int, str, dict[str, str]]]:
        return [(int.from_bytes(s.level, "little"), s.message, status_values(s)) for _, s in statuses[mark:]]

    bridge = None
    out: dict[str, Any] = {}
    try:
        bridge, stats_path = bridge_process(config, work)
        probe.wait_for(lambda: "/arm/status" in probe.topics(), 20, "the bridge's status topic")

        # -- the guide's robot: the handshake, lockstep, a pause past the observation timeout
        ga = publish_goal("a")
        first = handshake("a", ga)
        out["handshake"] = {"goal_stamp": first.get("goal_stamp"), "sent_stamp": str(ga),
                            "episode": first.get("episode")}
        mark_lockstep = len(sent)
        for _ in range(4):
            step("a")
        time.sleep(2.5 * timeout)
        for _ in range(3):
            step("a")
        out["lockstep"] = [s["stamp"] for s in sent[mark_lockstep:]]

        # -- an observation stamped before its goal, then one after
        gb = publish_goal("b")
        after_b = handshake("b", gb)
        mark = len(statuses)
        stale = publish_obs(rng.normal(0, 0.1, obs_dim), "b", ns=gb - 500_000_000)
        settle(lambda: "dropped" in statuses[-1][1].message or answers() > stale["answers_before"])
        out["stale"] = {"answered": answers() > stale["answers_before"], "statuses": since(mark)}
        step("b")
        # -- the same goal with a newer stamp: a new episode
        gb2 = publish_goal("b")
        settle(lambda: last_status().get("goal_stamp") == str(gb2) and bool(last_status().get("session")))
        step("b")
        out["same_goal_new_stamp"] = {"before": after_b, "after": last_status(), "stamp": str(gb2)}

        # -- the same goal stamped 0.5 s ahead (within goal_ahead_tolerance_s), then re-stamped by a clock
        # put right (an older stamp): a new episode each time
        soon = publish_goal("b", ahead_ns=500_000_000)
        settle(lambda: running(soon))
        within = last_status()
        put_right = publish_goal("b")
        settle(lambda: running(put_right))
        out["older_stamp"] = {"within": within, "after": last_status(), "stamps": [str(soon), str(put_right)]}

        # -- the same goal stamped an hour ahead (a clock set wrong), three times: refused each time, the
        # episode goes on; then with a valid stamp: its episode runs, every observation answered
        before = last_status()
        mark, log_mark = len(statuses), len(bridge.lines)
        ahead: list[int] = []
        for _ in range(3):
            ahead.append(publish_goal("b", ahead_ns=HOUR_NS))
            settle(lambda: errors_since(mark) >= len(ahead))
        refused = last_status()
        valid = publish_goal("b")
        settle(lambda: running(valid))
        mark_sent = len(sent)
        answered = [step("b") for _ in range(6)]
        out["ahead"] = {"stamps": ahead, "statuses": since(mark), "before": before, "refused": refused,
                        "stamp": str(valid), "answered": answered, "sent": list(range(mark_sent, len(sent))),
                        "after": last_status(),
                        "log": [line.strip() for line in bridge.lines[log_mark:] if "ahead of the bridge" in line]}

        # -- goal then observation, back to back, as a robot skipping the handshake would
        mark_b2b = len(sent)
        for j in range(p["back_to_back"]):
            name = "a" if j % 2 == 0 else "b"
            publish_goal(name)
            step(name)
        out["back_to_back"] = list(range(mark_b2b, len(sent)))

        # -- an observation beyond float32, then 10 valid ones
        gb3 = publish_goal("b")
        handshake("b", gb3)
        step("b")
        before = last_status()
        mark = len(statuses)
        big = rng.normal(0, 0.1, obs_dim)
        big[3] = 1e39
        refused = publish_obs(big, "b")
        settle(lambda: errors_since(mark) > 0 or answers() > refused["answers_before"])
        out["beyond_float32"] = {"answered": answers() > refused["answers_before"], "statuses": since(mark),
                                 "before": before}
        out["after_beyond_float32"] = [step("b") for _ in range(10)]

        # -- a goal of 1e300 and a goal in another frame while the episode runs
        before = last_status()
        mark = len(statuses)
        publish_goal("b", values=[1e300, 0.6, 0.5])
        settle(lambda: len(statuses) > mark)
        publish_goal("a", frame="map")
        settle(lambda: errors_since(mark) > 1)
        out["bad_goals"] = {"before": before, "statuses": since(mark)}
        out["after_bad_goals"] = [step("b") for _ in range(3)]
        out["after_bad_goals_status"] = last_status()

        # -- SIGTERM
        mark_cmd = len(commands)
        out["bridge_exit"] = bridge.stop(signal.SIGTERM)
        time.sleep(0.5)
        out["final_status"] = (int.from_bytes(statuses[-1][1].level, "little"), statuses[-1][1].message,
                               last_status())
        out["term_from"] = mark_cmd
        out["stats"] = json.loads(stats_path.read_text())["/arm"]
    except AssertionError as err:
        last = [(s.message, status_values(s)) for _, s in statuses[-5:]]
        raise AssertionError(f"{err}; last statuses {last}; bridge:\n{bridge.output() if bridge else ''}") from None
    finally:
        if bridge is not None:
            bridge.stop()
        probe.close()

    try:
        # What the server answers for each observation published, under either goal.
        client = PlannerClient(server.target)
        for name, goal in GOALS.items():
            with client.episode(goal, mode="policy") as ep:
                for record in sent:
                    try:
                        record[f"policy_{name}"] = ep.act(record["obs"]).action.tolist()
                    except InvalidArgument:  # the observation beyond float32
                        record[f"policy_{name}"] = None
        client.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    out["sent"] = [{k: v for k, v in r.items() if k != "obs"} for r in sent]
    out["commands"] = [(labels(m), list(m.data)) for _, m in commands]
    out["stamped"] = [(s.header.stamp.sec * 1_000_000_000 + s.header.stamp.nanosec, list(s.position))
                      for _, s in stamped]
    return out
