"""The bridge speaks a mobile base's and an arm's own command types, refuses a topic of another
type, says every problem on the console (rate-limited), and is read and driven without the ros2 CLI
(``l3p ros2 status``, ``l3p ros2 end``). The DDS part runs in a network namespace (tests/ros2_harness.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ros2_harness import netns_unavailable, run_scenario

REASON = netns_unavailable()
needs_ros2 = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def _info(obs: int, goal: int, action: int):
    from l3p.clients.messages import ModelInfo

    return ModelInfo(env_id="PointMaze_Large-v3", obs_dim=obs, goal_dim=goal, action_dim=action,
                     action_low=np.full(action, -1.0, np.float32), action_high=np.full(action, 1.0, np.float32),
                     n_landmarks=0, format_version=1, bundle_sha256="", gamma=0.99, defaults={}, provenance={})


def test_a_config_that_cannot_fit_the_model_is_one_line_naming_the_fix():
    pytest.importorskip("rclpy")
    from l3p.clients.ros2 import config as cfg
    from l3p.clients.ros2.bridge import check_model
    from l3p.core.errors import L3PError

    with pytest.raises(L3PError) as err:
        check_model(cfg.build({"command.type": "twist", "command.fields": ["linear.x", "linear.y", "angular.z"]}),
                    _info(4, 2, 2))
    assert str(err.value) == ("the configuration does not fit the served model PointMaze_Large-v3: goal: a point "
                              "gives 3 values (x, y, z), the model's goal has 2: set goal.indices: [0, 1]; "
                              "command.fields: 3 for the model's 2 action values")
    check_model(cfg.build({"goal.indices": [0, 1], "command.type": "twist", "command.fields": ["linear.x", "angular.z"]}),
                _info(4, 2, 2))
    with pytest.raises(cfg.BridgeConfigError, match=r"^command.fields: for twist: distinct ones of linear.x"):
        cfg.build({"command.type": "twist", "command.fields": ["linear.w"]})
    with pytest.raises(cfg.BridgeConfigError, match="^command.joints: joint_trajectory needs the joint names"):
        cfg.build({"command.type": "joint_trajectory"})


def test_commands_as_twist_and_joint_trajectory():
    pytest.importorskip("trajectory_msgs")
    from l3p.clients.ros2.config import CommandSpec
    from l3p.clients.ros2.convert import command_message, command_message_type, type_name

    twist = command_message([0.5, -0.25], CommandSpec(type="twist", fields=("linear.x", "angular.z")))
    assert (twist.linear.x, twist.linear.y, twist.angular.z) == (0.5, 0.0, -0.25)
    spec = CommandSpec(type="joint_trajectory", joints=("shoulder", "elbow"), time_from_start_s=1.25)
    traj = command_message([0.1, 0.2], spec)
    assert traj.joint_names == ["shoulder", "elbow"] and list(traj.points[0].positions) == [0.1, 0.2]
    assert (traj.points[0].time_from_start.sec, traj.points[0].time_from_start.nanosec) == (1, 250_000_000)
    assert type_name(command_message_type(spec)) == "trajectory_msgs/msg/JointTrajectory"
    hold = command_message([0.0, 0.0], CommandSpec(), label="hold")
    assert [d.label for d in hold.layout.dim] == ["hold"]


@needs_ros2
def test_the_bridge_drives_a_twist_base_refuses_a_wrong_type_and_answers_status_and_end():
    r = run_scenario("types", {"steps": 8, "bad_goals": 30}, script=Path(__file__).with_name("ros2_types.py"))
    # /base: one Twist per observation, the policy's action in linear.x/linear.y, the rest 0
    np.testing.assert_allclose(np.array(r["twists"])[:, :2], np.clip(r["policy"], -1, 1), rtol=1e-6)
    assert len(r["twists"]) == 8 and not np.any(np.array(r["twists"])[:, 2:])
    # /wrong: a Float64MultiArray subscriber on cmd_vel: nothing published, one line and the status say why
    why = ("the action topic /wrong/cmd_vel has type std_msgs/msg/Float64MultiArray; the bridge's command is "
           "geometry_msgs/msg/Twist: nothing published (set command.type: array)")
    assert r["wrong_commands"] == 0 and r["wrong_status"] == [2, why, "wrong_command_type"]
    assert [line for line in r["lines"] if line.endswith(why)] and len([ln for ln in r["lines"] if why in ln]) == 1
    # 30 bad goals: 30 counted, one console line
    assert r["bad_messages"] == 30
    assert len(r["bad_goal_lines"]) == 1 and r["bad_goal_lines"][0].endswith(
        "/base: bad goal: goal is in frame 'map'; the bridge's frame_id is 'world'")
    assert r["status"]["rc"] == 0 and r["status"]["out"].startswith("l3p_bridge/base: OK acting; state=acting "
                                                                     "episode=0 step=8")
    assert " bad_messages=30 " in r["status"]["out"]
    assert (r["end"]["rc"], r["end"]["out"]) == (0, "/base: episode 0 ended on request; waiting for a goal")
    assert "OK episode 0 ended on request; waiting for a goal; state=waiting_for_goal" in r["after_end"]["out"]
    assert (r["end_again"]["rc"], r["end_again"]["out"]) == (1, "/base: no episode to end: waiting for a goal")
    assert r["no_bridge"]["rc"] == 1 and r["no_bridge"]["err"].endswith(
        "no status on /nobody/status within 1 s: is the bridge running (l3p ros2 bridge), with this namespace and "
        "ROS_DOMAIN_ID?")
