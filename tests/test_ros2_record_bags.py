"""``l3p ros2 record --format mcap`` and the episode splits (``episodes.split``: goal, topic, service):
a recording's bags, imported with the same mapping, give the arrays and episodes of its ``.npz``
output; the bag series' rotation and its files after ``kill -9``; and both recorders side by side on
real ROS 2 topics inside a network namespace the test makes (tests/ros2_harness.py); this file is
also the scenario script run inside it."""
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
from l3p.datasets.align import ONE_STEP, SUPERSEDED, LiveAligner, Stream, align  # noqa: E402
from l3p.datasets.mapping import mapping_from_dict  # noqa: E402
from l3p.datasets.source import read  # noqa: E402

MS = 1_000_000
ROBOT = {"format": "rosbag2", "env_id": "PointMaze_UMaze-v3", "observation": [{"topic": "/robot/observation"}],
         "action": [{"topic": "/robot/commands"}], "achieved_goal_indices": [0, 1]}
GOAL = [{"topic": "/robot/goal", "fields": ["point.x", "point.y"]}]
SPLITS = {"goal": {}, "topic": {"split": "topic", "topic": "/robot/episode_end", "type": "std_msgs/msg/Bool"},
          "service": {"split": "service"}}


# ------------------------------------------------------------------------------------ no ROS needed


def test_episode_ends_split_alike_live_and_in_a_bag():
    """Ends between two commands on one observation (the first superseded, the second starts an
    episode), two ends in a row, an end before any step; and in goal mode a goal changed and changed
    back within one observation period: the same steps and episodes both ways."""
    obs_t = np.arange(40, dtype=np.int64) * 20 * MS
    act_t = np.sort(np.r_[obs_t + 5 * MS, obs_t[10] + 9 * MS, obs_t[25] + 9 * MS])
    rng = np.random.default_rng(3)
    obs_v, act_v = rng.normal(size=(40, 3)), rng.normal(size=(len(act_t), 2))
    for ends_t, goal_t, goal_v, split_on_goal in [
            (np.array([1, 10 * 20 + 7, 18 * 20 + 10, 18 * 20 + 11, 30 * 20 + 15], np.int64) * MS,
             np.array([0], np.int64), np.zeros((1, 2)), False),
            (None, np.array([0, 12 * 20 + 7, 12 * 20 + 8, 25 * 20 + 7, 33 * 20 + 1], np.int64) * MS,
             np.array([[1.0, 1], [2, 2], [1, 1], [1, 1], [3, 3]]), True)]:
        ref = align(Stream("topic /a", act_t, act_v), [Stream("topic /o", obs_t, obs_v, 12 * MS)], [],
                    [Stream("topic /g", goal_t, goal_v)], 500 * MS, "test", ends_t)
        steps, starts = [], []
        live = LiveAligner(1, 1, 12 * MS, 500 * MS, lambda step, s: (steps.append(step), starts.append(s)),
                           split_on_goal=split_on_goal)
        events = sorted([(t, 0, "o", v) for t, v in zip(obs_t, obs_v)]
                        + [(t, 0, "g", v) for t, v in zip(goal_t, goal_v)]
                        + [(t, 0, "e", None) for t in ([] if ends_t is None else ends_t)]
                        + [(t, 1, "a", v) for t, v in zip(act_t, act_v)], key=lambda e: (e[0], e[1]))
        for t, _, kind, v in events:
            {"o": lambda: live.observed(0, t, v), "g": lambda: live.goal(0, v), "e": live.end_episode,
             "a": lambda: live.action(t, v)}[kind]()
        live.flush()
        np.testing.assert_array_equal(np.array([s["action"] for s in steps]), ref.actions)
        np.testing.assert_array_equal(np.r_[starts[1:], True].astype(np.float32), ref.terminals)
        assert live.dropped == ref.dropped
        # topic: step 10 starts (its superseded command came before the end), two ends at once after step
        # 18 start one episode, an end after step 30; goal: the change and back after step 12 ends one, the
        # same goal again (step 25) none, the change after step 32 one
        assert np.flatnonzero(ref.terminals).tolist() == ([9, 18, 30, 39] if not split_on_goal else [12, 32, 39])
        assert ref.dropped[SUPERSEDED] == 2


def cdr(store, msgtype: str, **fields) -> tuple[object, bytes]:
    msg = store.types[msgtype](**fields)
    return msg, bytes(store.serialize_cdr(msg, msgtype))


def robot_messages(split: str, seed: int = 0) -> list[tuple]:
    """A robot's messages (stamp, topic, message, CDR bytes) over 8 episodes of 7 to 34 steps (some cut
    at 15): observations every 20 ms, each followed by a command (some by two: the first superseded);
    episodes end as ``split`` says, and once by a pause and once at a dropped command."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    arr, layout = "std_msgs/msg/Float64MultiArray", store.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    header = store.types["std_msgs/msg/Header"](stamp=store.types["builtin_interfaces/msg/Time"](sec=0, nanosec=0),
                                                 frame_id="")
    rng = np.random.default_rng(seed)
    out, t = [], 0

    def add(topic: str, msgtype: str, **fields) -> None:
        out.append((t, topic, *cdr(store, msgtype, **fields)))

    def goal(x: float) -> None:
        point = store.types["geometry_msgs/msg/Point"](x=x, y=-x, z=0.0)
        add("/robot/goal", "geometry_msgs/msg/PointStamped", header=header, point=point)

    goal(0.5)
    for e, length in enumerate([20, 7, 34, 12, 9, 16, 25, 11]):
        if split == "goal":
            goal(float(e + 1))
        for k in range(length):
            t += 20 * MS
            add("/robot/observation", arr, layout=layout, data=rng.normal(size=3))
            t += 5 * MS
            if k % 6 == 5:  # superseded
                add("/robot/commands", arr, layout=layout, data=rng.normal(size=2))
                t += 1 * MS
            if e == 4 and k == 4:  # no observation within max_skew_s: dropped, the episode ends
                t += 30 * MS
            add("/robot/commands", arr, layout=layout, data=rng.normal(size=2))
            if split == "topic" and k == 3:
                add("/robot/episode_end", "std_msgs/msg/Bool", data=False)  # false ends nothing
            if split == "goal" and k == 3:
                goal(float(e + 1))  # the same goal again ends nothing
        t += 1 * MS
        if e == 2:
            t += 600 * MS  # a pause: the next episode starts whatever the split
        elif split == "topic":
            add("/robot/episode_end", "std_msgs/msg/Bool", data=True)
        elif split == "service":
            out.append((t, "service", None, bytes(store.serialize_cdr(store.types["std_msgs/msg/Empty"](),
                                                                      "std_msgs/msg/Empty"))))
    return out


@pytest.mark.parametrize("split", ["goal", "topic", "service"])
def test_a_recordings_bags_import_as_its_npz(tmp_path, split):
    """One robot's messages through the recorder twice, to .npz files and to bags (rotated at 40
    steps, episodes cut at 15): the bags imported with the same mapping give the same arrays and
    episodes as the .npz files, each bag on its own too."""
    from l3p.clients.ros2.recording import Recording, bag_series
    from l3p.datasets.writer import EpisodeWriter

    mapping = mapping_from_dict({**ROBOT, **({"desired_goal": GOAL} if split != "service" else {}),
                                 "alignment": {"max_skew_s": 0.012, "max_gap_s": 0.5}, "episodes": SPLITS[split]})
    npz = Recording(mapping, EpisodeWriter(tmp_path / "rec.npz", mapping.env_id, {}, rotate_steps=40,
                                           max_episode_steps=15))
    bags = Recording(mapping, bag_series(mapping, str(tmp_path / "bag")), rotate_steps=40, max_episode_steps=15)
    topics = npz.topics()
    for stamp, topic, msg, data in robot_messages(split):
        for rec in (npz, bags):
            if topic == "service":
                rec.end_episode(stamp, data)
            elif topic in topics:
                rec.message(topic, *topics[topic], msg, stamp, raw=data)
    npz_stats, bag_stats = npz.close(), bags.close()
    want = [load_dataset(f) for f in npz_stats["files"]]
    bag_files = [Path(f) for f in bag_stats["files"]]
    got, reports = zip(*(read(mapping, [f]) for f in bag_files))  # each bag on its own
    for name in ("observations", "actions", "achieved_goals", "terminals") + ("desired_goals",) * (split != "service"):
        np.testing.assert_array_equal(np.concatenate([getattr(d, name) for d in got]),
                                      np.concatenate([getattr(d, name) for d in want]), err_msg=name)
    # 20 = 15 + 5 (cut), 7, 34 = 15 + 15 + 4, a pause, 12, 9 = 4 + 4 (a dropped command), 16 = 15 (+ one
    # step left out), 25 = 15 + 10, 11
    lengths = [15, 5, 7, 15, 15, 4, 12, 4, 4, 15, 15, 10, 11]
    assert [n for d in got for n in d.episode_lengths().tolist()] == lengths
    assert [n for d in want for n in d.episode_lengths().tolist()] == lengths
    # a bag ends at each cut, and at an episode start once it holds 40 steps
    assert [[n for n in d.episode_lengths().tolist()] for d in got] == [[15], [5, 7, 15], [15], [4, 12, 4, 4, 15],
                                                                        [15], [10, 11]]
    assert [f.name for f in bag_files] == ["bag"] + [f"bag_{i:04d}" for i in range(1, 6)]
    counts = ("episodes", "steps", "short_episodes_left_out", "episodes_cut", "dropped")
    assert {k: bag_stats[k] for k in counts} == {k: npz_stats[k] for k in counts}
    assert (npz_stats["episodes"], npz_stats["steps"], npz_stats["short_episodes_left_out"]) == (13, 132, 1)
    assert sum(r["dropped"].get(ONE_STEP, 0) for r in reports) == 1
    assert sum(r["dropped"][SUPERSEDED] for r in reports) == npz_stats["dropped"][SUPERSEDED] == 19


BAGS_CHILD = """
import sys
import numpy as np
from rosbags.typesys import Stores, get_typestore
from l3p.datasets.bag_writer import BagSeries
store = get_typestore(Stores.ROS2_KILTED)
F = "std_msgs/msg/Float64MultiArray"
layout = store.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
def cdr(v):
    return bytes(store.serialize_cdr(store.types[F](layout=layout, data=np.array(v, float)), F))
bags = BagSeries(sys.argv[1], {"/o": F, "/a": F, "/unused": "std_msgs/msg/Empty"}, held={"/o"})
for i in range(10**6):
    bags.write("/o", 10 + i * 20, cdr([i, 0.5]))
    bags.write("/a", 15 + i * 20, cdr([i]))
    if i % 100 == 99:
        bags.rotate()
        print(len(bags.files), flush=True)
"""


def test_a_killed_bag_series_leaves_every_closed_bag_readable(tmp_path):
    """Bags rotated every 100 commands, the writer killed with SIGKILL: every bag under its final
    name reads whole (each beginning with the newest observation before it), the open one is left
    in its .partial folder, and a series started again writes over nothing."""
    from l3p.datasets.bag_writer import BagSeries
    from l3p.datasets.rosbag2 import read_raw

    proc = subprocess.Popen([sys.executable, "-c", BAGS_CHILD, str(tmp_path / "bag")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    for line in proc.stdout:
        if int(line) >= 3:
            break
    proc.send_signal(signal.SIGKILL)  # mid-bag
    proc.wait()
    closed = sorted(p for p in tmp_path.iterdir() if not p.name.endswith(".partial"))
    partial = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial"))
    assert len(closed) >= 3 and [p.name for p in closed[:3]] == ["bag", "bag_0001", "bag_0002"]
    assert partial == [f"bag_{len(closed):04d}.partial"]
    for k, path in enumerate(closed):
        raw, store = read_raw(path, ["/o", "/a", "/unused"])
        first = [store.deserialize_cdr(d, "std_msgs/msg/Float64MultiArray").data[0] for d in raw["/a"][2]]
        obs = [store.deserialize_cdr(d, "std_msgs/msg/Float64MultiArray").data[0] for d in raw["/o"][2]]
        assert first == list(range(100 * k, 100 * k + 100))
        assert obs == list(range(max(0, 100 * k - 1), 100 * k + 100))  # the held observation, then its own
        assert raw["/o"][1][0] == 10 + obs[0] * 20 and raw["/unused"][2] == []
    again = BagSeries(tmp_path / "bag", {"/o": "std_msgs/msg/Float64MultiArray"}, held=set())
    again.write("/o", 1, raw["/o"][2][0])
    again.close()
    assert [p.name for p in again.files] == [f"bag_{len(closed) + 1:04d}"]
    again = BagSeries(tmp_path / "bag", {"/o": "std_msgs/msg/Float64MultiArray"}, held=set())
    again.close(keep=False)  # nothing recorded: nothing left
    assert not again.files and sorted(tmp_path.iterdir()) == sorted([*closed, tmp_path / partial[0],
                                                                    tmp_path / f"bag_{len(closed) + 1:04d}"])


# ------------------------------------------------------------------------------------- over ROS 2

REASON = netns_unavailable()
needs_ros2 = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def scenario_bags(p: dict) -> dict:
    """This process is the robot, driven by a script: observation and command messages, a constant
    goal, and per episode an end (a message on the end topic, or a call of each recorder's service).
    Two `l3p ros2 record` processes record it, one to .npz files, one to bags; then SIGTERM."""
    import rclpy
    import yaml
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Bool, Float64MultiArray

    from l3p.datasets.mapping import load_mapping

    work = Path(tempfile.mkdtemp(prefix="l3p-record-bags-"))
    split = p["split"]
    recorders = {}
    for fmt, out in (("npz", "rec.npz"), ("mcap", "bag")):
        episodes = {**SPLITS[split], **({"service": f"/rec_{fmt}/end_episode"} if split == "service" else {})}
        mapping = {**ROBOT, **({"desired_goal": GOAL} if split == "topic" else {}), "episodes": episodes,
                   "alignment": {"max_skew_s": 0.5, "max_gap_s": 2.0}}
        (work / f"{fmt}.yaml").write_text(yaml.safe_dump(mapping))
        recorders[fmt] = Process(l3p("ros2", "record", "--mapping", str(work / f"{fmt}.yaml"), "--out", str(work / out),
                                     "--format", fmt, "--rotate-steps", "50", "--stats", str(work / f"{fmt}.json"),
                                     "--ros-args", "-r", f"__node:=rec_{fmt}"), fmt)
    for recorder in recorders.values():
        recorder.wait_ready(60)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("scripted_robot")
    qos = QoSProfile(depth=100)
    kinds = {"observation": Float64MultiArray, "commands": Float64MultiArray}
    if split == "topic":
        kinds.update(goal=PointStamped, episode_end=Bool)
    pubs = {name: node.create_publisher(kind, f"/robot/{name}", qos) for name, kind in kinds.items()}
    services = []
    if split == "service":
        from std_srvs.srv import Trigger

        services = [node.create_client(Trigger, f"/rec_{fmt}/end_episode") for fmt in recorders]
    # Both sides of each topic matched: this writer sees the readers, each recorder says it hears
    # this writer (a reader that has not matched a writer yet drops what it sends).
    deadline = time.monotonic() + 30
    while (any(pub.get_subscription_count() < 2 for pub in pubs.values())
           or not all(s.service_is_ready() for s in services)):
        if time.monotonic() > deadline:
            outputs = "\n".join(r.output() for r in recorders.values())
            raise AssertionError("the recorders never subscribed:\n" + outputs)
        time.sleep(0.05)
    for recorder in recorders.values():
        for name in kinds:
            recorder.wait_for(f"hearing /robot/{name} from 1 publisher(s)", 30)
    rng = np.random.default_rng(p["seed"])
    sent: dict[str, list] = {"observations": [], "actions": []}
    answers = []
    if split == "topic":
        goal = PointStamped()
        goal.point.x, goal.point.y = 1.5, -0.5
        pubs["goal"].publish(goal)
        time.sleep(0.02)
    for e, length in enumerate(p["episodes"]):
        for t in range(length):
            obs, action = rng.normal(size=4), rng.uniform(-1, 1, 2)
            pubs["observation"].publish(Float64MultiArray(data=obs.tolist()))
            time.sleep(0.004)
            pubs["commands"].publish(Float64MultiArray(data=action.tolist()))
            time.sleep(0.004)
            if split == "topic" and t == 3:
                pubs["episode_end"].publish(Bool(data=False))  # ends nothing
            sent["observations"].append(obs.tolist())
            sent["actions"].append(action.tolist())
        time.sleep(0.01)
        if split == "topic":
            pubs["episode_end"].publish(Bool(data=True))
        for service in services:
            future = service.call_async(Trigger.Request())
            rclpy.spin_until_future_complete(node, future, timeout_sec=10)
            answers.append([future.result().success, future.result().message])
        time.sleep(0.02)
    time.sleep(0.5)
    codes = {fmt: r.stop(signal.SIGTERM) for fmt, r in recorders.items()}
    node.destroy_node()
    rclpy.try_shutdown()
    npz = [load_dataset(f) for f in sorted(work.glob("rec*.npz"))]
    bags = sorted(p for p in work.iterdir() if p.is_dir() and p.name.startswith("bag"))
    imported = [read(load_mapping(work / "mcap.yaml"), [b])[0] for b in bags]

    def arrays(data: list) -> dict:
        names = ("observations", "actions", "achieved_goals", "desired_goals", "terminals")
        return {n: np.concatenate([getattr(d, n) for d in data]).tolist() for n in names
                if getattr(data[0], n) is not None}

    return {"exit": codes, "sent": sent, "answers": answers, "npz": arrays(npz), "bags": arrays(imported),
            "npz_files": [f.name for f in sorted(work.glob("rec*.npz"))], "bag_files": [b.name for b in bags],
            "lengths": [[n for d in data for n in d.episode_lengths().tolist()] for data in (npz, imported)],
            "output": {fmt: r.output()[-1500:] for fmt, r in recorders.items()},
            "stats": {fmt: json.loads((work / f"{fmt}.json").read_text()) for fmt in recorders}}


def run_bags_scenario(params: dict) -> dict:
    return run_scenario("bags", params, 240, script=__file__)


@needs_ros2
@pytest.mark.parametrize("split", ["topic", "service"])
def test_ros2_record_to_bags_imports_as_its_npz_split_by_a_topic_or_a_service(split):
    if split == "service":
        pytest.importorskip("std_srvs", reason="the service needs std_srvs: pip install '.[ros2]'")
    r = run_bags_scenario({"split": split, "episodes": [30, 25, 35], "seed": 4})
    assert r["exit"] == {"npz": 0, "mcap": 0}, r["output"]
    assert r["lengths"] == [[30, 25, 35], [30, 25, 35]], r  # one episode per end, the mid-episode false ending none
    assert r["npz_files"] == ["rec.npz", "rec_0001.npz"] and r["bag_files"] == ["bag", "bag_0001"]  # after 55 steps
    for name in ("observations", "actions"):
        np.testing.assert_array_equal(np.float32(r["npz"][name]), np.float32(r["sent"][name]))
    assert r["bags"] == r["npz"]  # every array, terminals too
    if split == "topic":
        assert r["npz"]["desired_goals"] == [[1.5, -0.5]] * 90
    else:
        assert r["answers"] == [[True, f"episode end {e} recorded"] for e in (1, 1, 2, 2, 3, 3)]
    for fmt in ("npz", "mcap"):
        assert r["stats"][fmt]["steps"] == 90 and r["stats"][fmt]["episodes"] == 3, r["stats"][fmt]
        assert "recorded 90 steps in 3 episodes to 2 file(s); dropped: none; bad messages: 0" in r["output"][fmt]


if __name__ == "__main__":
    name, params = sys.argv[1], json.loads(sys.argv[2])
    print(RESULT + json.dumps({"bags": scenario_bags}[name](params)), flush=True)
