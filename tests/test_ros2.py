"""The ROS 2 bridge against a real ROS 2 stack: the bridge, the simulated robot, a real planner
server and an introspecting third participant, each its own process, all inside a network
namespace the test makes (tests/ros2_harness.py). Skipped, with the reason, where the ROS 2 wheels
cannot be installed or no namespace can be made."""
from __future__ import annotations

import re

import numpy as np
import pytest

from ros2_harness import in_netns, l3p, netns_unavailable, run_scenario
from ros2_protocol import HOUR_NS

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
    ("planner=l3p@next_hop=true@follow_edges=true", "planner: next_hop=true makes follow_edges do nothing; drop one"),
    ("rate_hz", "--set expects KEY=VALUE, got 'rate_hz'"),
    ("topics.colour=red", "unknown key 'topics.colour'"),
    ("nonsense=1", "unknown key 'nonsense'"),
    ("record=out.npz", "achieved_goal_indices: recording needs where the achieved goal sits"),
    ("observation_timeout_s=abc", "observation_timeout_s: expected float, got 'abc'"),
    ("goal_ahead_tolerance_s=-1", "goal_ahead_tolerance_s: must be >= 0, got -1.0"),
    ("connect_timeout_s=-1", "connect_timeout_s: must be >= 0, got -1.0"),
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
    with pytest.raises(BadMessage, match="observation has 1e\\+39 at index 2, beyond float32"):
        observation_vector(array_message([1, 2, 1e39]), ObservationSpec(), 3)  # finite in float64 only
    pose = PoseStamped()
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = 1.5, -2.0, 0.3
    np.testing.assert_array_equal(goal_vector(pose, GoalSpec(type="pose", indices=(0, 1)), 2), [1.5, -2.0])
    pose.pose.position.x = -1e300
    with pytest.raises(BadMessage, match="goal has -1e\\+300 at index 0, beyond float32"):
        goal_vector(pose, GoalSpec(type="pose"), 3)


@pytest.mark.skipif(REASON is not None and "wheels" in (REASON or ""), reason=REASON or "")
def test_the_bridge_waits_for_a_server_not_up_yet_then_stops_in_one_line(capsys):
    """A server still starting is waited for (one console line), up to connect_timeout_s; then
    the bridge stops with the one line that names the server. 0: one try, no wait."""
    from l3p.clients.ros2.bridge import BridgeStartError, connect
    from l3p.clients.ros2.config import BridgeConfig

    with pytest.raises(BridgeStartError) as err:
        connect(BridgeConfig(server="127.0.0.1:1", connect_timeout_s=1.0))
    assert str(err.value).startswith("cannot reach the planner server at 127.0.0.1:1: GetModelInfo: UNAVAILABLE")
    assert str(err.value).endswith("(waited 1 s: connect_timeout_s)")
    assert capsys.readouterr().out.startswith(
        "l3p ros2 bridge: waiting up to 1 s (connect_timeout_s) for the planner server at 127.0.0.1:1: ")
    with pytest.raises(BridgeStartError) as err:
        connect(BridgeConfig(server="127.0.0.1:1", connect_timeout_s=0))
    assert "UNAVAILABLE" in str(err.value) and "waited" not in str(err.value)
    assert capsys.readouterr().out == ""


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
        "/arm/action_stamped": ["sensor_msgs/msg/JointState"],
        "/arm/end_episode": ["std_msgs/msg/Empty"],  # the bridge listens: l3p ros2 end /arm
        "/arm/forward_command_controller/commands": ["std_msgs/msg/Float64MultiArray"],
        "/arm/goal": ["geometry_msgs/msg/PointStamped"],
        "/arm/observation": ["std_msgs/msg/Float64MultiArray"],
        "/arm/status": ["diagnostic_msgs/msg/DiagnosticStatus"],
        "/arm/subgoal": ["geometry_msgs/msg/PointStamped"],
        "/arm/success": ["std_msgs/msg/Bool"],
    }
    assert r["steps"] == [50, 50, 50]
    assert r["compare"]["same_successes"] and r["compare"]["same_lengths"]
    assert r["compare"]["same_reached"]  # the step each episode first reached its goal, or None: the runner's
    assert r["compare"]["max_action_diff"] == 0.0
    assert r["sim"]["missed"] == 0 and r["sim"]["rtt_ms"]["n"] == 150
    # Every action message was applied, in order; after them, the one hold of the bridge's SIGTERM.
    assert r["rosbags"] == {"messages": 151, "bytes_equal": True, "matches_applied": True, "after": [[0.0] * 4]}
    assert r["bridge_exit"] == 0
    assert r["last_status"]["state"] == "stopped" and r["last_status"]["episode"] == "2"
    assert r["last_status_level"] == 1  # WARN: a monitor watching levels sees the bridge stop
    assert r["last_status"]["holds"] == "0" and r["last_status"]["bad_messages"] == "0"
    stats = r["stats"]["/arm"]
    assert (stats["episodes"], stats["actions"], stats["holds"], stats["resumes"]) == (3, 150, 0, 0)
    d = r["dataset"]
    assert (d["steps"], d["episodes"], d["obs_dim"], d["env_id"], d["actions_match"]) == (150, 3, 25, "FetchPush-v4",
                                                                                           True)
    assert d["extras"] == ["counter", "replanned", "resumed", "subgoal_index", "success"]
    assert d["made_by"]["recorder"] == "l3p ros2 bridge" and d["made_by"]["robot"] == "/arm"


@needs_ros2
def test_the_sim_waits_for_its_observation_subscribers_and_says_who_never_came():
    """--wait-subscribers 1 with no one subscribed: no episode starts; exit UNAVAILABLE (1) naming
    the topic and the count after --wait seconds."""
    proc = in_netns(l3p("ros2", "sim", "--env", "PointMaze_UMaze-v3", "--namespace", "/robot",
                        "--wait-subscribers", "1", "--wait", "2"), 120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "0 of 1 subscribers heard /robot/observation within 2 s" in proc.stderr
    assert "episode" not in proc.stdout


@needs_ros2
def test_bridge_holds_on_faults_and_resumes_after_a_server_restart():
    """The robot (JointState, names shuffled) at 20 Hz: malformed messages (each sent once the last
    one's status came) get an ERROR status each and nothing is sent for them; the server killed mid-episode -> one hold, then actions again
    from a resumed session of the same episode; observations stop -> one hold; SIGTERM -> one hold."""
    r = run_scenario("faults", dict(observation_timeout_s=1.0, rate_hz=20))
    lacks = ", ".join(f"'joint_{i}'" for i in range(3, 25))
    assert sorted(r["bad_statuses"]) == sorted([
        [2, f"bad observation: joint state lacks joint(s) {lacks} (has 'joint_0', 'joint_1', 'joint_2')"],
        [2, "bad observation: observation has NaN or Inf at index 4"],
        [2, "bad observation: joint state has 25 names but 24 position values"],
        [2, "bad goal: goal has NaN or Inf at index 0"],
    ])
    assert len(r["steps_during_bad"]) == 1  # nothing answered the bad messages: no step taken for them
    assert r["all_actions_valid"]  # every message to the robot: finite, within the action bounds
    assert r["down"] == [[0.0] * 4]  # the server gone: the hold, once, and no action
    assert r["after_restart_nonzero"] >= 5 and r["resumes"] == 1
    assert r["episodes_seen"] == ["0"] == [r["episode_before"]]  # the same episode went on
    assert r["after_stop"] == [[0.0] * 4]  # observations stopped: the hold, once
    assert r["term"] == [[0.0] * 4] and r["bridge_exit"] == 0
    assert r["final_status"]["state"] == "stopped" and r["final_status"]["bad_messages"] == "4"


# --------------------------------------------------------------------------- the episode protocol

FLOAT32 = "(the planner's values are float32, |x| <= 3.403e+38)"


@pytest.fixture(scope="module")
def protocol():
    """One run of the ``protocol`` scenario (tests/ros2_protocol.py): a robot in this test's process
    against the bridge and a real server (mode policy), each point below asserted on it."""
    if REASON is not None:
        pytest.skip(REASON)
    r = run_scenario("protocol", dict(observation_timeout_s=1.0, back_to_back=20))
    # Which command answered each observation: in lockstep, the first action (unlabelled message)
    # after it was published; and which goal's policy that action is.
    actions = [data for labels, data in r["commands"][:r["term_from"]] if not labels]
    for i, sent in enumerate(r["sent"]):
        later = r["sent"][i + 1]["answers_before"] if i + 1 < len(r["sent"]) else len(actions)
        answer = actions[sent["answers_before"]] if later > sent["answers_before"] else None
        sent["answer"] = answer
        sent["answered_for"] = [goal for goal in ("a", "b") if answer is not None and sent[f"policy_{goal}"]
                                is not None and np.array_equal(np.float32(answer), np.float32(sent[f"policy_{goal}"]))]
    r["actions"] = actions
    return r


def errors(statuses):
    return [(level, message) for level, message, _ in statuses if level == 2]


@needs_ros2
def test_an_observation_beyond_float32_is_refused_and_the_episode_goes_on(protocol):
    """1e39 (finite in float64, Inf in float32): one ERROR status, nothing sent, and the next 10
    observations get their 10 actions from the same episode."""
    r = protocol["beyond_float32"]
    assert errors(r["statuses"]) == [
        (2, f"bad observation: observation has 1e+39 at index 3, beyond float32 {FLOAT32}")]
    assert not r["answered"]
    assert protocol["after_beyond_float32"] == [True] * 10
    refused = next(i for i, s in enumerate(protocol["sent"]) if s["policy_b"] is None)
    after = protocol["sent"][refused + 1:refused + 11]
    assert [s["answered_for"] for s in after] == [["b"]] * 10
    assert {s["episode"] for _, _, s in r["statuses"]} == {r["before"]["episode"]}


@needs_ros2
def test_a_goal_beyond_float32_is_a_bad_message_and_the_episode_goes_on(protocol):
    """A goal of 1e300: counted, one ERROR status; the running episode (and its session) goes on,
    the server is never called "unavailable"."""
    r = protocol["bad_goals"]
    assert errors(r["statuses"])[:1] == [(2, f"bad goal: goal has 1e+300 at index 0, beyond float32 {FLOAT32}")]
    assert not [s for _, _, s in r["statuses"] if s["server"] != "ok" or s["state"] == "server_unavailable"]
    after = protocol["after_bad_goals_status"]
    assert (after["episode"], after["session"], after["goal"]) == (r["before"]["episode"], r["before"]["session"],
                                                                   r["before"]["goal"])
    assert int(after["bad_messages"]) == int(r["before"]["bad_messages"]) + 2  # and the goal in another frame
    assert [s["answered_for"] for s in protocol["sent"][-3:]] == [["b"]] * 3


@needs_ros2
def test_a_goal_in_another_frame_is_refused(protocol):
    r = protocol["bad_goals"]
    assert errors(r["statuses"])[1:] == [(2, "bad goal: goal is in frame 'map'; the bridge's frame_id is 'world'")]
    assert protocol["after_bad_goals_status"]["episode"] == r["before"]["episode"]


@needs_ros2
def test_the_goal_handshake_ties_observations_to_their_goal(protocol):
    """The status names the goal's stamp once its episode runs; an observation stamped before the goal
    is dropped (WARN, counted), never answered by the new goal's session; the same goal with a newer
    stamp is a new episode; a goal and an observation published back to back: the observation is
    answered by that goal's episode, every time."""
    h = protocol["handshake"]
    assert h["goal_stamp"] == h["sent_stamp"] and h["episode"] == "0"
    stale = protocol["stale"]
    assert not stale["answered"]
    assert [(level, message) for level, message, _ in stale["statuses"] if level != 0] == [
        (1, "observation stamped 0.500 s before the goal: dropped")]
    assert protocol["stats"]["stale_observations"] == 1
    same = protocol["same_goal_new_stamp"]
    assert same["after"]["goal"] == same["before"]["goal"] and same["after"]["goal_stamp"] == same["stamp"]
    assert int(same["after"]["episode"]) == int(same["before"]["episode"]) + 1
    assert same["after"]["session"] not in ("", same["before"]["session"])
    b2b = [protocol["sent"][i] for i in protocol["back_to_back"]]
    assert len(b2b) == 20 and [s["answered_for"] for s in b2b] == [[s["goal"]] for s in b2b]


@needs_ros2
def test_the_same_goal_with_an_older_stamp_is_a_new_episode(protocol):
    """A goal stamped 0.5 s ahead (within goal_ahead_tolerance_s) runs; the same goal re-stamped by the
    robot's clock put right (an older stamp) is not "the same goal re-sent": a new episode."""
    o = protocol["older_stamp"]
    assert [o["within"]["goal_stamp"], o["after"]["goal_stamp"]] == o["stamps"]
    assert int(o["after"]["episode"]) == int(o["within"]["episode"]) + 1
    assert o["after"]["session"] not in ("", o["within"]["session"])


SECONDS = r"(\d+)\.(\d{9})"  # a stamp in seconds, to the nanosecond


@needs_ros2
def test_a_goal_stamped_ahead_of_the_bridges_clock_is_refused_and_the_goal_restamped_runs(protocol):
    """The same goal stamped an hour ahead of the bridge's clock, three times: each refused (ERROR naming
    both clocks, counted; one console line for the three), the running episode goes on; the goal
    re-sent with a valid stamp starts its episode, and its 6 observations get 6 actions, none dropped."""
    r = protocol["ahead"]
    refusals = errors(r["statuses"])
    assert len(refusals) == 3
    pattern = re.compile(rf"bad goal: stamped ([\d.]+) s ahead of the bridge's clock \(goal {SECONDS}, "
                         rf"bridge {SECONDS}\), more than goal_ahead_tolerance_s 1: refused; is the robot's clock "
                         r"synchronized with the bridge's\?")
    for (_, message), sent in zip(refusals, r["stamps"]):
        m = pattern.fullmatch(message)
        assert m, message
        goal, now = int(m[2] + m[3]), int(m[4] + m[5])
        assert goal == sent and sent - HOUR_NS <= now < sent - 1_000_000_000  # now: when the bridge took it
        assert m[1] == f"{(goal - now) / 1e9:.3f}"
    assert len(r["log"]) == 1 and r["log"][0].endswith(refusals[0][1])  # rate-limited
    before, refused, after = r["before"], r["refused"], r["after"]
    assert [refused[k] for k in ("episode", "session", "goal_stamp")] == [before[k] for k in
                                                                          ("episode", "session", "goal_stamp")]
    assert int(refused["bad_messages"]) == int(before["bad_messages"]) + 3
    assert int(after["episode"]) == int(before["episode"]) + 1 and after["goal_stamp"] == r["stamp"]
    assert r["answered"] == [True] * 6
    assert [protocol["sent"][i]["answered_for"] for i in r["sent"]] == [["b"]] * 6
    assert after["stale_observations"] == before["stale_observations"]


@needs_ros2
def test_holds_and_actions_are_told_apart(protocol):
    """On the action topic (ros2_control's) a hold is labelled ``hold``, an action is not; on
    action_stamped, every action and only actions, each stamped with the observation it answers. A
    lockstep robot paused past the observation timeout gets the hold between two actions."""
    commands = protocol["commands"][:protocol["term_from"]]
    assert all(labels in ([], ["hold"]) for labels, _ in commands)
    assert all(data == [0.0] * 4 for labels, data in commands if labels)
    # The first 7 observations, in lockstep with a pause after the 4th: 4 actions, the hold, 3 actions.
    assert [s["stamp"] for s in protocol["sent"][:7]] == protocol["lockstep"]
    assert [labels for labels, _ in commands[:8]] == [[]] * 4 + [["hold"]] + [[]] * 3
    assert [s["answered_for"] for s in protocol["sent"][:7]] == [["a"]] * 7
    answered = [s for s in protocol["sent"] if s["answer"] is not None]
    assert protocol["stamped"] == [[s["stamp"], s["answer"]] for s in answered]
    assert [values for _, values in protocol["stamped"]] == protocol["actions"]


@needs_ros2
def test_a_stopped_bridge_says_so_above_ok(protocol):
    level, message, status = protocol["final_status"]
    assert (level, message, status["state"]) == (1, "bridge stopped; hold published", "stopped")
    assert protocol["commands"][protocol["term_from"]:] == [[["hold"], [0.0] * 4]]
    assert protocol["bridge_exit"] == 0


def test_l3p_ros2_is_listed_without_the_extra(capsys):
    from l3p import cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "ros2" in capsys.readouterr().out

