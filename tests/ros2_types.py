"""The ``types`` scenario (run by tests/test_ros2_types.py through tests/ros2_harness.py): one bridge
serving two mobile bases with ``command.type: twist`` against PointMaze's model. ``/base`` takes its
``cmd_vel`` as Twist and gets one Twist per observation; ``/wrong``'s ``cmd_vel`` is heard as
Float64MultiArray, so the bridge refuses to publish there and says so. A goal in another frame sent 30
times is 30 bad messages and one console line. ``l3p ros2 status`` and ``l3p ros2 end`` run as a robot
without the ros2 CLI would run them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ros2_harness import MODELS, RESULT, Probe, bridge_config, bridge_process, child_env, l3p, start_server, \
    status_values


def _l3p(*args: str) -> dict[str, Any]:
    proc = subprocess.run(l3p(*args), capture_output=True, text=True, env=child_env(), timeout=60)
    return {"rc": proc.returncode, "out": proc.stdout.strip(), "err": proc.stderr.strip()[-500:]}


def scenario_types(p: dict[str, Any]) -> dict[str, Any]:
    from diagnostic_msgs.msg import DiagnosticStatus
    from geometry_msgs.msg import PointStamped, Twist
    from std_msgs.msg import Float64MultiArray

    from l3p.clients.ros2.convert import point_message

    work = Path(tempfile.mkdtemp(prefix="l3p-ros2-types-"))
    server = start_server(MODELS / "PointMaze_Large-v3")
    config = bridge_config(server.target, robots=["/base", "/wrong"], planner="policy", observation={"type": "array"},
                           goal={"type": "point", "indices": [0, 1]},
                           command={"type": "twist", "fields": ["linear.x", "linear.y"]},
                           topics={"action": "cmd_vel"}, status_period_s=0.2, observation_timeout_s=60.0)
    probe = Probe()
    twists = probe.record("/base/cmd_vel", Twist)
    wrong = probe.record("/wrong/cmd_vel", Float64MultiArray)  # the robot's controller takes arrays
    statuses = probe.record("/base/status", DiagnosticStatus)
    wrong_status = probe.record("/wrong/status", DiagnosticStatus)
    pubs = {ns: (probe.publisher(f"{ns}/observation", Float64MultiArray), probe.publisher(f"{ns}/goal", PointStamped))
            for ns in ("/base", "/wrong")}
    clock = probe.node.get_clock()
    out: dict[str, Any] = {}
    bridge = None
    try:
        bridge, _ = bridge_process(config, work)
        probe.wait_for(lambda: "/base/status" in probe.topics(), 20, "the bridge's status topic")
        goal_msg = point_message([3.0, 2.0, 0.0], "world", clock.now().to_msg())

        def started() -> bool:  # the same goal re-sent until the bridge has heard it (discovery)
            for _, goal in pubs.values():
                goal.publish(goal_msg)
            time.sleep(0.1)
            return bool(statuses) and bool(status_values(statuses[-1][1]).get("session"))

        probe.wait_for(started, 20, "an episode")
        sent = []
        for i in range(p["steps"]):
            obs = [0.1 * i, -0.2, 0.0, 0.0]
            sent.append(obs)
            before = len(twists)
            for ns, (pub, _) in pubs.items():
                pub.publish(Float64MultiArray(data=obs))
            probe.wait_for(lambda: len(twists) > before, 5, f"the Twist of step {i}")
        out["twists"] = [[t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z] for _, t in twists]
        out["sent"] = sent
        probe.wait_for(lambda: any(s.message.startswith("the action topic") for _, s in wrong_status), 5,
                       "the wrong type's status")
        out["wrong_commands"] = len(wrong)
        out["wrong_status"] = next((int.from_bytes(s.level, "little"), s.message, status_values(s)["state"])
                                   for _, s in reversed(wrong_status) if s.message.startswith("the action topic"))
        # a goal in another frame, 30 times: 30 bad messages, one console line
        mark = len(bridge.lines)
        for _ in range(p["bad_goals"]):
            pubs["/base"][1].publish(point_message([1.0, 1.0, 0.0], "map", clock.now().to_msg()))
            time.sleep(0.01)
        probe.wait_for(lambda: int(status_values(statuses[-1][1]).get("bad_messages", 0)) >= p["bad_goals"], 10,
                       "the bad goals counted")
        out["bad_messages"] = int(status_values(statuses[-1][1])["bad_messages"])
        out["bad_goal_lines"] = [line.strip() for line in bridge.lines[mark:] if "frame 'map'" in line]
        # a robot without the ros2 CLI: its status, the end of its episode, the end again
        out["status"] = _l3p("ros2", "status", "/base")
        out["end"] = _l3p("ros2", "end", "/base")
        out["after_end"] = _l3p("ros2", "status", "/base")
        out["end_again"] = _l3p("ros2", "end", "/base")
        out["no_bridge"] = _l3p("ros2", "status", "/nobody", "--wait", "1")
        out["lines"] = [line.strip() for line in bridge.lines if "cmd_vel" in line]
    except AssertionError as err:
        raise AssertionError(f"{err}; bridge:\n{bridge.output() if bridge else ''}") from None
    finally:
        if bridge is not None:
            bridge.stop()
        probe.close()
    try:
        from l3p.clients.client import PlannerClient

        client = PlannerClient(server.target)
        with client.episode([3.0, 2.0], mode="policy") as ep:
            out["policy"] = [ep.act(obs).action.tolist() for obs in out["sent"]]
        client.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out


if __name__ == "__main__":
    result = {"types": scenario_types}[sys.argv[1]](json.loads(sys.argv[2]))
    print(RESULT + json.dumps(result), flush=True)
