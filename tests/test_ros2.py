"""The ROS 2 bridge against a real ROS 2 stack: the bridge, the simulated robot, a real planner
server and an introspecting third participant, each its own process, all inside a network
namespace the test makes (tests/ros2_harness.py). Skipped, with the reason, where the ROS 2 wheels
cannot be installed or no namespace can be made."""
from __future__ import annotations

import numpy as np
import pytest

from ros2_harness import netns_unavailable, run_scenario

REASON = netns_unavailable()
needs_ros2 = pytest.mark.skipif(REASON is not None, reason=REASON or "")


# --------------------------------------------------------------------------- configuration (no DDS)


def test_config_from_a_ros2_parameters_file_and_overrides(tmp_path):
    pytest.importorskip("yaml")
    from l3p.clients.ros2 import config as cfg

    path = tmp_path / "arm.yaml"
    path.write_text("""
l3p_bridge:
  ros__parameters:
    server: planner:50051
    planner: l3p@search=hard
    rate_hz: 50.0
    robots: [/arm1, /arm2]
    observation:
      type: joint_state
      joints: [j1, j2]
      fields: [position, velocity]
    goal: {type: pose}
    topics: {action: /arm_controller/commands}
""")
    c = cfg.load(path, ["qos.reliability=best_effort", "seed=7", "goal.indices=[0,1]"])
    assert (c.server, c.planner, c.rate_hz, c.seed, c.robots) == ("planner:50051", "l3p@search=hard", 50.0, 7,
                                                                 ("/arm1", "/arm2"))
    assert c.observation.joints == ("j1", "j2") and c.observation.fields == ("position", "velocity")
    assert (c.goal.type, c.goal.indices, c.qos.reliability) == ("pose", (0, 1), "best_effort")
    assert c.topics.action == "/arm_controller/commands" and c.topics.goal == "goal"
    assert c.mode_and_overrides() == ("l3p", {"search": "hard"})


@pytest.mark.parametrize("override, message", [
    ("rate_hz=-1", "rate_hz: must be >= 0, got -1.0"),
    ("observation.type=imu", "observation.type: one of array, joint_state, odometry, got 'imu'"),
    ("planner=greedy", "planner: mode must be one of"),
    ("topics.colour=red", "unknown key 'topics.colour'"),
    ("nonsense=1", "unknown key 'nonsense'"),
    ("record=out.npz", "achieved_goal_indices: recording needs where the achieved goal sits"),
    ("observation_timeout_s=abc", "observation_timeout_s: expected float, got 'abc'"),
])
def test_config_refuses_bad_settings_naming_the_key(override, message):
    pytest.importorskip("yaml")
    from l3p.clients.ros2.config import BridgeConfigError, load

    with pytest.raises(BridgeConfigError) as err:
        load(None, [override])
    assert str(err.value).startswith(message)


@pytest.mark.skipif(REASON is not None and "wheels" in (REASON or ""), reason=REASON or "")
def test_messages_become_checked_vectors():
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    from l3p.clients.ros2.config import GoalSpec, ObservationSpec
    from l3p.clients.ros2.convert import BadMessage, array_message, goal_vector, observation_vector

    spec = ObservationSpec(type="joint_state", joints=("b", "a"), fields=("position", "velocity"))
    msg = JointState(name=["a", "b", "c"], position=[1.0, 2.0, 3.0], velocity=[10.0, 20.0, 30.0])
    np.testing.assert_array_equal(observation_vector(msg, spec, 4), [2.0, 1.0, 20.0, 10.0])
    with pytest.raises(BadMessage, match="lacks joint\\(s\\) 'b'"):
        observation_vector(JointState(name=["a"], position=[1.0], velocity=[1.0]), spec, 4)
    with pytest.raises(BadMessage, match="observation has 3 values, the model wants 4"):
        observation_vector(array_message([1, 2, 3]), ObservationSpec(), 4)
    with pytest.raises(BadMessage, match="NaN or Inf at index 1"):
        observation_vector(array_message([1, np.nan, 3]), ObservationSpec(), 3)
    pose = PoseStamped()
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = 1.5, -2.0, 0.3
    np.testing.assert_array_equal(goal_vector(pose, GoalSpec(type="pose", indices=(0, 1)), 2), [1.5, -2.0])


# --------------------------------------------------------------------------- against a real ROS 2 stack


@needs_ros2
def test_bridge_and_sim_robot_in_lockstep_match_the_grpc_runner():
    """FetchPush-v4's shipped model, 3 held-out episodes: the same successes and the same actions
    (exactly) through sim robot -> bridge -> server as through the gRPC runner; a third rclpy
    process sees the standard type names; rosbags decodes and re-encodes the bridge's bytes
    identically; the recording reads back with the actions applied."""
    r = run_scenario("lockstep", dict(model="FetchPush-v4", env_id="FetchPush-v4", episodes=3, seed=2_000_000_000,
                                      achieved=[3, 4, 5]))
    assert r["topics"] == {
        "/arm/forward_command_controller/commands": ["std_msgs/msg/Float64MultiArray"],
        "/arm/goal": ["geometry_msgs/msg/PointStamped"],
        "/arm/observation": ["std_msgs/msg/Float64MultiArray"],
        "/arm/status": ["diagnostic_msgs/msg/DiagnosticStatus"],
        "/arm/subgoal": ["geometry_msgs/msg/PointStamped"],
        "/arm/success": ["std_msgs/msg/Bool"],
    }
    assert r["steps"] == [50, 50, 50]
    assert r["compare"]["same_successes"] and r["compare"]["same_lengths"]
    assert r["compare"]["max_action_diff"] == 0.0
    assert r["sim"]["missed"] == 0 and r["sim"]["rtt_ms"]["n"] == 150
    # Every action message was applied, in order; after them, the one hold of the bridge's SIGTERM.
    assert r["rosbags"] == {"messages": 151, "bytes_equal": True, "matches_applied": True, "after": [[0.0] * 4]}
    assert r["bridge_exit"] == 0
    assert r["last_status"]["state"] == "stopped" and r["last_status"]["episode"] == "2"
    assert r["last_status"]["holds"] == "0" and r["last_status"]["bad_messages"] == "0"
    stats = r["stats"]["/arm"]
    assert (stats["episodes"], stats["actions"], stats["holds"], stats["resumes"]) == (3, 150, 0, 0)
    d = r["dataset"]
    assert (d["steps"], d["episodes"], d["obs_dim"], d["env_id"], d["actions_match"]) == (150, 3, 25, "FetchPush-v4",
                                                                                           True)
    assert d["extras"] == ["counter", "replanned", "resumed", "subgoal_index", "success"]
    assert d["made_by"]["recorder"] == "l3p ros2 bridge" and d["made_by"]["robot"] == "/arm"


@needs_ros2
def test_bridge_holds_on_faults_and_resumes_after_a_server_restart():
    """The robot (JointState, names shuffled) at 20 Hz: malformed messages get an ERROR status each
    and nothing is sent for them; the server killed mid-episode -> one hold, then actions again
    from a resumed session of the same episode; observations stop -> one hold; SIGTERM -> one hold."""
    r = run_scenario("faults", dict(observation_timeout_s=1.0, rate_hz=20))
    lacks = ", ".join(f"'joint_{i}'" for i in range(3, 25))
    assert sorted(r["bad_statuses"]) == sorted([
        [2, f"bad observation: joint state lacks joint(s) {lacks} (has 'joint_0', 'joint_1', 'joint_2')"],
        [2, "bad observation: observation has NaN or Inf at index 4"],
        [2, "bad observation: joint state has 25 names but 24 position values"],
        [2, "bad goal: goal has NaN or Inf at index 0"],
    ])
    assert r["actions_after_bad"] == []  # nothing answered the bad messages
    assert r["all_actions_valid"]  # every message to the robot: finite, within the action bounds
    assert r["down"] == [[0.0] * 4]  # the server gone: the hold, once, and no action
    assert r["after_restart_nonzero"] >= 5 and r["resumes"] == 1
    assert r["episodes_seen"] == ["0"] == [r["episode_before"]]  # the same episode went on
    assert r["after_stop"] == [[0.0] * 4]  # observations stopped: the hold, once
    assert r["term"] == [[0.0] * 4] and r["bridge_exit"] == 0
    assert r["final_status"]["state"] == "stopped" and r["final_status"]["bad_messages"] == "4"


def test_l3p_ros2_is_listed_without_the_extra(capsys):
    from l3p import cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "ros2" in capsys.readouterr().out

