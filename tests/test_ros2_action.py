"""The bridge's ReachGoal action (clients/ros2/goal_action.py), driven by real rclpy ActionClients in other
processes than the bridge's, against a real planner server, in a network namespace of its own: the
``action`` scenario of tests/ros2_action.py, run once for the module (one server, three bridges, a
FetchPush and a PointMaze episode; benchmarks/ros2_action.py runs more)."""
from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ros2_harness import netns_unavailable, run_scenario

# Its scenario restarts a server within time limits: scripts/test runs it alone, after the rest.
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[1]
INTERFACES = ROOT / "clients" / "ros2" / "interfaces"
REASON = netns_unavailable()
needs_ros2 = pytest.mark.skipif(REASON is not None, reason=REASON or "")
SUCCEEDED, CANCELED_STATUS, ABORTED = 4, 5, 6  # action_msgs/GoalStatus
REACHED, TIMED_OUT, CANCELED, PREEMPTED = 0, 1, 2, 3  # ReachGoal.Result.outcome
CI = dict(seed=2_000_000_000, fetch_episodes=1, base_episodes=1, probe=True, trials=1, restart=True,
          restart_max_steps=1500, timeout_s=300)


@pytest.fixture(scope="module")
def action():
    if REASON is not None:
        pytest.skip(REASON)
    return run_scenario("action", CI, timeout_s=600, script=Path(__file__).with_name("ros2_action.py"))


def test_the_shipped_build_is_of_the_action_file_and_the_pinned_wheels():
    """clients/ros2/interfaces/built/ (scripts/build_ros2_interfaces.py) matches ReachGoal.action as it is
    and the [ros2] extra's pins, or the loader would refuse it."""
    built = json.loads((INTERFACES / "built" / "BUILT.json").read_text())
    action = INTERFACES / "l3p_interfaces" / built["action"]
    assert built["action_sha256"] == hashlib.sha256(action.read_bytes()).hexdigest(), \
        "ReachGoal.action changed: run scripts/build_ros2_interfaces.py"
    pins = dict(re.findall(r'"(ros-[a-z-]+)(?:\[\w+\])?==([\d.]+)"', (ROOT / "pyproject.toml").read_text()))
    assert {w: v for w, v in built["wheels"].items() if w in pins} == {w: pins[w] for w in built["wheels"] if w in pins}
    assert "ros-rclpy" in pins


def test_the_shipped_build_is_refused_with_other_wheels_naming_the_fix(monkeypatch):
    from l3p.clients.ros2 import action_type
    from l3p.core.errors import L3PError

    if "l3p_interfaces" in sys.modules:
        pytest.skip("the type is loaded in this process already")
    monkeypatch.setattr(action_type, "version", lambda wheel: "7.1.6")  # as if Jazzy's wheels
    with pytest.raises(L3PError, match=r"not built for this ROS 2 \(ros-rclpy 7\.1\.6 \(built with 9\.1\.2\), .*"
                                       r"build .*l3p_interfaces with colcon .* run scripts/build_ros2_interfaces\.py"):
        action_type.reach_goal_type()


def test_the_goal_action_needs_where_the_achieved_goal_is():
    from l3p.clients.ros2 import config as cfg

    with pytest.raises(cfg.BridgeConfigError, match="^achieved_goal_indices: the goal action needs"):
        cfg.load(None, ["goal_action.enabled=true"])
    with pytest.raises(cfg.BridgeConfigError, match="^goal_action.tolerance: must be > 0"):
        cfg.load(None, ["goal_action.tolerance=0"])


@needs_ros2
def test_the_type_on_the_wire_is_the_action_files(action):
    """The feedback topic's type hash (RIHS01, what ROS 2 matches endpoints by) is the one rosidl computes
    from ReachGoal.action now."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from build_ros2_interfaces import generate

    with tempfile.TemporaryDirectory() as tmp:
        out = generate(Path(tmp))
        hashes = json.loads((out["description"] / "action" / "ReachGoal.json").read_text())["type_hashes"]
    expected = {h["type_name"]: h["hash_string"] for h in hashes}
    assert action["type_hash"] == expected["l3p_interfaces/action/ReachGoal_FeedbackMessage"]


@needs_ros2
def test_fetchpush_and_pointmaze_goals_are_reached_with_feedback_at_each_replan(action):
    """Held-out seeds: each goal REACHED within the env's success distance, with feedback from the first
    step on (subgoal index, the steps estimate, the distance to the goal)."""
    for ns, tolerance in (("/arm", 0.05), ("/base", 0.45)):
        (episode,) = action["episodes"][ns]
        result, feedback = episode["result"], episode["feedback"]
        assert result["outcome"] == "reached", (ns, result)
        assert result["final_distance"] <= tolerance and result["steps"] > 0
        assert feedback and feedback[0]["steps"] == 1 and all(f["estimated_steps"] > 0 for f in feedback)
        assert [f["steps"] for f in feedback] == sorted({f["steps"] for f in feedback})
        assert all(f["subgoal_index"] >= -1 and np.isfinite(f["distance"]) for f in feedback)


@needs_ros2
def test_a_bad_goal_is_rejected_and_the_status_names_the_problem(action):
    p = action["probe"]
    assert p["rejected"] == [False, False, False]
    assert p["rejected_statuses"] == [
        "bad goal: goal has 2 values, the model wants 3",
        "bad goal: goal has NaN or Inf at index 0",
        "bad goal: goal is in frame 'map'; the bridge's frame_id is 'world'",
    ]


@needs_ros2
def test_cancel_holds_within_one_control_period(action):
    """From the cancel request on: at most one action (the one in flight), then the hold, then nothing
    while the robot keeps sending observations; the result CANCELED counts the goal's actions."""
    (c,) = action["probe"]["cancel"]
    assert c["accepted"]
    assert (c["result"]["status"], c["result"]["outcome"]) == (CANCELED_STATUS, CANCELED)
    holds = [i for i, command in enumerate(c["after"]) if command["hold"]]
    assert len(holds) == 1 and holds[0] <= 1 and holds[0] == len(c["after"]) - 1
    assert not any(command["hold"] for command in c["before"])
    assert c["result"]["steps"] == len(c["before"]) + holds[0]


@needs_ros2
def test_a_new_goal_replaces_the_running_one_and_no_action_for_the_old_one_follows(action):
    """Every command the bridge stamped after it accepted goal b answers for b (mode policy: an action
    tells its goal); goal a ends PREEMPTED (ABORTED), having acted before."""
    p = action["probe"]
    (pre,), a, b = p["preempt"], np.array(p["policy"]["a"]), np.array(p["policy"]["b"])
    assert not np.allclose(a, b, atol=1e-3)
    after = [np.array(c["data"]) for c in pre["commands"] if c["stamp"] > pre["accepted_ns"]]
    before = [np.array(c["data"]) for c in pre["commands"] if c["stamp"] <= pre["accepted_ns"]]
    assert sum(np.allclose(x, a, atol=1e-6) for x in after) == 0
    assert sum(np.allclose(x, b, atol=1e-6) for x in after) >= 10
    assert sum(np.allclose(x, a, atol=1e-6) for x in before) >= 1
    assert (pre["first"]["status"], pre["first"]["outcome"]) == (ABORTED, PREEMPTED)
    assert pre["first"]["message"] == "replaced by a new goal"
    assert (pre["second"]["status"], pre["second"]["outcome"]) == (CANCELED_STATUS, CANCELED)


@needs_ros2
def test_the_step_and_time_limits_and_a_goal_already_reached(action):
    p = action["probe"]
    steps = p["max_steps"]
    assert (steps["result"]["status"], steps["result"]["outcome"], steps["result"]["steps"]) == (ABORTED, TIMED_OUT, 5)
    assert steps["result"]["message"] == "not reached in 5 steps"
    assert [c["hold"] for c in steps["commands"]] == [False] * 5 + [True]
    assert (p["timeout"]["outcome"], p["timeout"]["message"]) == (TIMED_OUT, "not reached in 0.3 s")
    at = p["at_goal"]
    assert (at["result"]["status"], at["result"]["outcome"], at["result"]["steps"]) == (SUCCEEDED, REACHED, 0)
    assert at["result"]["final_distance"] == 0.0 and at["commands"] == []  # held already: nothing to send


@needs_ros2
def test_without_a_goal_the_robot_gets_nothing(action):
    """Before any goal, and after a goal ended (its one hold), observations get no command; the status
    says how the last goal ended."""
    p = action["probe"]
    assert p["before_any_goal"] == []
    assert p["cancel"][0]["after"][-1]["hold"]
    assert p["final_status"]["state"] == "reached" and p["final_status"]["goal"] == "null"


@needs_ros2
def test_the_goal_goes_on_through_a_server_restart(action):
    """The server killed mid-goal: the hold, nothing more while it is down, then actions again from a
    resumed session, and the goal REACHED."""
    r = action["restart"]
    assert r["commands_while_down"] == 0
    assert r["actions_after_restart"] >= 10
    assert r["episode"]["result"]["outcome"] == "reached", r["episode"]["result"]
