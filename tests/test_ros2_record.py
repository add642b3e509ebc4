"""Recording a robot that something else drives: the streaming writer (rotated files, every finished
episode readable after kill -9, bounded memory), the live time alignment (equal to the bag import's),
and `l3p ros2 record` against real ROS 2 topics inside a network namespace the test makes
(tests/ros2_harness.py); this file is also the scenario script run inside it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ros2_harness import RESULT, Process, l3p, netns_unavailable, run_scenario  # noqa: E402

from l3p.core.dataset import load_dataset  # noqa: E402
from l3p.datasets.align import NO_GOAL, NO_OBSERVATION, SUPERSEDED, LiveAligner, Stream, align  # noqa: E402
from l3p.datasets.writer import EpisodeWriter  # noqa: E402

MS = 1_000_000


# ------------------------------------------------------------------------------------ no ROS needed


def test_live_alignment_equals_the_bag_alignment():
    """Observations every 20 ms (one missing), actions 5 ms after (one extra, superseded), a goal
    change, a pause over max_gap, an action before any goal: the same steps and episodes both ways."""
    rng = np.random.default_rng(0)
    n = 60
    obs_t = np.array([i * 20 for i in range(n) if i != 17], np.int64) * MS + (np.arange(n - 1) >= 40) * 2000 * MS
    obs_v = rng.normal(size=(len(obs_t), 3))
    act_t = np.sort(np.r_[obs_t + 5 * MS, obs_t[30] + 2 * MS, (17 * 20 + 5) * MS])
    act_v = rng.normal(size=(len(act_t), 2))
    goal_t = np.array([6, 25 * 20 + 1], np.int64) * MS  # the first action (5 ms) has no goal yet
    goal_v = np.array([[1.0, 1.0], [2.0, 2.0]])
    skew, gap = 12 * MS, 500 * MS
    ref = align(Stream("topic /a", act_t, act_v), [Stream("topic /o", obs_t, obs_v, skew)], [],
                [Stream("topic /g", goal_t, goal_v)], gap, "test")
    steps, starts = [], []
    live = LiveAligner(1, 1, skew, gap, lambda step, s: (steps.append(step), starts.append(s)))
    events = sorted([(t, 0, "o", v) for t, v in zip(obs_t, obs_v)] + [(t, 0, "g", v) for t, v in zip(goal_t, goal_v)]
                    + [(t, 1, "a", v) for t, v in zip(act_t, act_v)], key=lambda e: (e[0], e[1]))
    for t, _, kind, v in events:
        if kind == "o":
            live.observed(0, t, v)
        elif kind == "g":
            live.goal(0, v)
        else:
            live.action(t, v)
    live.flush()
    np.testing.assert_array_equal(np.array([s["observed"][0] for s in steps]), ref.observations)
    np.testing.assert_array_equal(np.array([s["action"] for s in steps]), ref.actions)
    np.testing.assert_array_equal(np.array([s["goals"][0] for s in steps]), ref.desired_goals)
    np.testing.assert_array_equal(np.r_[starts[1:], True].astype(np.float32), ref.terminals)
    assert live.dropped == ref.dropped == {NO_OBSERVATION: 1, NO_GOAL: 1, SUPERSEDED: 1}
    assert ref.terminals.sum() == 4  # split at the dropped step, the goal change and the pause


def test_the_writer_rotates_files_and_holds_only_the_current_one(tmp_path):
    writer = EpisodeWriter(tmp_path / "rec.npz", "E", {"by": "test"}, rotate_steps=25, max_episode_steps=12)
    held = []
    for e in range(9):
        for t in range(10 if e != 4 else 30):  # episode 4 is cut at 12 steps (twice), its rest of 6 kept
            writer.add(observations=[e, t, 0.0], actions=[t, 0.0], achieved_goals=[e, t])
            held.append(sum(len(x["actions"]) for x in writer.episodes) + writer.running_steps())
        writer.end_episode()
    writer.add(observations=[0, 0, 0.0], actions=[0, 0.0], achieved_goals=[0, 0])
    writer.close()  # a one-step episode: no transition, left out
    assert max(held) <= 25 + 12
    assert [f.name for f in writer.files] == ["rec.npz", "rec_0001.npz", "rec_0002.npz", "rec_0003.npz"]
    lengths = [load_dataset(f).episode_lengths().tolist() for f in writer.files]
    assert lengths == [[10, 10, 10], [10, 12, 12], [6, 10, 10], [10, 10]]
    assert writer.counts == {"episodes": 11, "steps": 110, "short_episodes_left_out": 1, "episodes_cut": 2}
    again = EpisodeWriter(tmp_path / "rec.npz", "E", {"by": "test"})  # a restarted recorder writes over nothing
    for t in range(3):
        again.add(observations=[9, t, 0.0], actions=[t, 0.0], achieved_goals=[9, t])
    again.close()
    assert [f.name for f in again.files] == ["rec_0004.npz"]
    assert load_dataset(tmp_path / "rec.npz").episode_lengths().tolist() == [10, 10, 10]


WRITER_CHILD = """
import sys, time
from l3p.datasets.writer import EpisodeWriter
w = EpisodeWriter(sys.argv[1], "E", {}, rotate_steps=400, max_episode_steps=1000)
for e in range(10**6):
    for t in range(50):
        w.add(observations=[e, t], actions=[t], achieved_goals=[e])
    w.end_episode()
    print(e, flush=True)
"""


def test_a_killed_writer_leaves_every_finished_episode_readable(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER_CHILD, str(tmp_path / "rec.npz")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    finished = -1
    for line in proc.stdout:
        finished = int(line)
        if finished >= 30:
            break
    proc.send_signal(signal.SIGKILL)  # mid-episode, possibly mid-write
    proc.wait()
    files = sorted(tmp_path.glob("rec*.npz"))
    assert [f.name for f in files if ".tmp" not in f.name][:2] == ["rec.npz", "rec_0001.npz"]
    obs = np.concatenate([load_dataset(f).observations for f in files if ".tmp" not in f.name])
    episodes = obs[:, 0].reshape(-1, 50)
    # every episode reported finished is there, whole and in order (the one being written may be too)
    assert len(episodes) >= finished + 1
    np.testing.assert_array_equal(episodes, np.repeat(np.arange(len(episodes))[:, None], 50, axis=1))


# ------------------------------------------------------------------------------------- over ROS 2

REASON = netns_unavailable()
needs_ros2 = pytest.mark.skipif(REASON is not None, reason=REASON or "")
MAPPING = {"format": "rosbag2", "env_id": "PointMaze_UMaze-v3",
           "observation": [{"topic": "/robot/observation"}], "action": [{"topic": "/robot/commands"}],
           "achieved_goal_indices": [0, 1],
           "desired_goal": [{"topic": "/robot/goal", "fields": ["point.x", "point.y"]}],
           "alignment": {"max_skew_s": 0.5, "max_gap_s": 2.0}}


# `l3p ...` whose Python thread is held up now and then (a GC pause, a slow write, a loaded machine):
# a thread holds the GIL for a long C call while the DDS threads go on receiving.
HELD_UP = """
import random, runpy, sys, threading, time
def hold():
    data = [random.random() for _ in range(1_500_000)]  # about 0.5 s to sort, past the reorder window
    while True:
        time.sleep(0.2)
        sorted(data)
threading.Thread(target=hold, daemon=True).start()
sys.argv = ["l3p", *sys.argv[1:]]
runpy.run_module("l3p", run_name="__main__")
"""


def scenario_record(p: dict) -> dict:
    """This process is the robot, driven by a script: per episode a goal, then observation and
    command messages (``lockstep``: each command right after its observation); `l3p ros2 record`
    (``held_up``: its Python thread held up now and then) records them. Then SIGTERM (or kill -9
    mid-episode)."""
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Float64MultiArray

    import yaml

    work = Path(tempfile.mkdtemp(prefix="l3p-record-"))
    (work / "robot.yaml").write_text(yaml.safe_dump(MAPPING))
    out = work / "rec.npz"
    command = (lambda *a: [sys.executable, "-c", HELD_UP, *a]) if p.get("held_up") else l3p
    recorder = Process(command("ros2", "record", "--mapping", str(work / "robot.yaml"), "--out", str(out),
                           "--rotate-steps", str(p["rotate_steps"]), "--stats", str(work / "stats.json")), "recorder")
    recorder.wait_ready(60)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("scripted_robot")
    qos = QoSProfile(depth=100)
    pubs = {name: node.create_publisher(kind, f"/robot/{name}", qos) for name, kind in
            (("observation", Float64MultiArray), ("commands", Float64MultiArray), ("goal", PointStamped))}
    deadline = time.monotonic() + 30
    while any(pub.get_subscription_count() < 1 for pub in pubs.values()):
        if time.monotonic() > deadline:
            raise AssertionError("the recorder never subscribed:\n" + recorder.output())
        time.sleep(0.05)
    rng = np.random.default_rng(p["seed"])
    sent = {"observations": [], "actions": [], "goals": []}
    for e, length in enumerate(p["episodes"]):
        goal = rng.uniform(0, 3, 2)
        msg = PointStamped()
        msg.point.x, msg.point.y = float(goal[0]), float(goal[1])
        pubs["goal"].publish(msg)
        time.sleep(0.02)
        for t in range(length):
            obs, action = rng.normal(size=4), rng.uniform(-1, 1, 2)
            pubs["observation"].publish(Float64MultiArray(data=obs.tolist()))
            time.sleep(0 if p.get("lockstep") else 0.004)
            pubs["commands"].publish(Float64MultiArray(data=action.tolist()))
            time.sleep(0.004)
            if e < len(p["episodes"]) - 1 or not p["kill"]:
                sent["observations"].append(obs.tolist())
                sent["actions"].append(action.tolist())
                sent["goals"].append(goal.tolist())
    time.sleep(0.5)
    if p["kill"]:  # the finished episodes are on disk before the kill
        want = len(p["episodes"]) - 1
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = sorted(work.glob("rec*.npz"))
            if sum(len(load_dataset(f).episode_bounds()) for f in files if ".tmp" not in f.name) >= want:
                break
            time.sleep(0.1)
        code = recorder.stop(signal.SIGKILL)
    else:
        code = recorder.stop(signal.Signals[p.get("stop", "SIGTERM")])
    node.destroy_node()
    rclpy.try_shutdown()
    files = sorted(f for f in work.glob("rec*.npz") if ".tmp" not in f.name)
    data = [load_dataset(f) for f in files]
    return {"exit": code, "files": [f.name for f in files], "sent": sent, "output": recorder.output()[-2000:],
            "observations": np.concatenate([d.observations for d in data]).tolist(),
            "actions": np.concatenate([d.actions for d in data]).tolist(),
            "desired_goals": np.concatenate([d.desired_goals for d in data]).tolist(),
            "achieved_goals": np.concatenate([d.achieved_goals for d in data]).tolist(),
            "lengths": [n for d in data for n in d.episode_lengths().tolist()],
            "env_id": data[0].env_id, "made_by": data[0].metadata["made_by"],
            "stats": json.loads((work / "stats.json").read_text()) if (work / "stats.json").exists() else None}


def run_record_scenario(params: dict) -> dict:
    return run_scenario("record", params, 240, script=__file__)


@needs_ros2
def test_ros2_record_writes_what_a_scripted_controller_did():
    r = run_record_scenario({"episodes": [30, 25, 35], "rotate_steps": 50, "seed": 1, "kill": False})
    assert r["exit"] == 0, r["output"]
    assert r["files"] == ["rec.npz", "rec_0001.npz"]  # rotated after 55 steps
    np.testing.assert_array_equal(np.float32(r["observations"]), np.float32(r["sent"]["observations"]))
    np.testing.assert_array_equal(np.float32(r["actions"]), np.float32(r["sent"]["actions"]))
    np.testing.assert_array_equal(np.float32(r["desired_goals"]), np.float32(r["sent"]["goals"]))
    np.testing.assert_array_equal(np.float32(r["achieved_goals"]), np.float32(r["sent"]["observations"])[:, :2])
    assert sorted(r["lengths"]) == [25, 30, 35]  # one episode per goal
    assert r["env_id"] == "PointMaze_UMaze-v3" and r["made_by"]["recorder"] == "l3p ros2 record"
    assert r["stats"]["dropped"] == {NO_OBSERVATION: 0, NO_GOAL: 0, SUPERSEDED: 0} and r["stats"]["steps"] == 90
    assert "recorded 90 steps in 3 episodes to 2 file(s); dropped: none; bad messages: 0" in r["output"]


@needs_ros2
def test_a_held_up_recorder_pairs_every_command_of_a_lockstep_robot_with_its_observation():
    """Commands sent right after their observations, the recorder's thread held up for longer than
    its reorder window: its backlog is taken topic by topic, yet every step is what was sent."""
    r = run_record_scenario({"episodes": [150, 150], "rotate_steps": 1000, "seed": 3, "kill": False, "lockstep": True,
                             "held_up": True})
    assert r["exit"] == 0, r["output"]
    assert r["stats"]["dropped"] == {NO_OBSERVATION: 0, NO_GOAL: 0, SUPERSEDED: 0} and r["stats"]["steps"] == 300
    np.testing.assert_array_equal(np.float32(r["observations"]), np.float32(r["sent"]["observations"]))
    np.testing.assert_array_equal(np.float32(r["actions"]), np.float32(r["sent"]["actions"]))


@needs_ros2
def test_ctrl_c_stops_the_recorder_and_writes_the_running_episode():
    """SIGINT (Ctrl-C, `timeout -s INT`) as SIGTERM: exit 0, the episode running then written whole."""
    r = run_record_scenario({"episodes": [20, 15], "rotate_steps": 1000, "seed": 4, "kill": False, "stop": "SIGINT"})
    assert r["exit"] == 0, r["output"]
    assert r["files"] == ["rec.npz"] and r["lengths"] == [20, 15]
    np.testing.assert_array_equal(np.float32(r["observations"]), np.float32(r["sent"]["observations"]))
    np.testing.assert_array_equal(np.float32(r["actions"]), np.float32(r["sent"]["actions"]))
    assert "recorded 35 steps in 2 episodes to 1 file(s)" in r["output"]


@needs_ros2
def test_a_killed_recorder_leaves_every_finished_episode_readable():
    r = run_record_scenario({"episodes": [20, 20, 40], "rotate_steps": 1000, "seed": 2, "kill": True})
    assert r["exit"] == -signal.SIGKILL
    assert r["files"] == ["rec.npz"] and r["lengths"] == [20, 20]
    np.testing.assert_array_equal(np.float32(r["observations"]), np.float32(r["sent"]["observations"]))
    np.testing.assert_array_equal(np.float32(r["actions"]), np.float32(r["sent"]["actions"]))


if __name__ == "__main__":
    name, params = sys.argv[1], json.loads(sys.argv[2])
    print(RESULT + json.dumps({"record": scenario_record}[name](params)), flush=True)
