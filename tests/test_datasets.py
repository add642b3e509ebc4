"""Dataset sources (l3p.datasets): each format written by its own library, read back equal to the
source arrays; the bag time alignment; bad input as one line naming the file, topic/column and step;
the converter (`l3p dataset import`) and `open_dataset` (what `l3p train --dataset` reads).

Writers: rosbags writes the rosbag2 MCAP bags; minari's DataCollector writes the Minari dataset;
LeRobot v3 is written with pyarrow per the v3 layout (`lerobot` does not install beside the [dev]
pins: 0.5+ needs Python 3.12, 0.4.4 pins torch 2.10 and protobuf 6)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from l3p.core.dataset import DatasetError, load_dataset, save_dataset
from l3p.datasets.align import ONE_STEP
from l3p.datasets.mapping import mapping_from_dict
from l3p.datasets.source import import_to, open_dataset, read

rosbags = pytest.importorskip("rosbags")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[1]
MS = 1_000_000
JOINTS = ["j1", "j2", "j3"]


# ---------------------------------------------------------------------------------- rosbag2 / MCAP


def write_bag(path: Path, obs: np.ndarray, actions: np.ndarray, goals: np.ndarray, *, obs_ms: np.ndarray | None = None,
              act_ms: np.ndarray | None = None, joint_state: bool = False, shuffle_names: bool = False,
              header_ms: np.ndarray | None = None) -> Path:
    """A rosbag2 MCAP bag written by rosbags: observation i at 20 ms * i (Float64MultiArray, or
    JointState of JOINTS' positions), action i 5 ms later, goal i (PointStamped) just before its step."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    T = store.types
    F64, JS, PS = ("std_msgs/msg/Float64MultiArray", "sensor_msgs/msg/JointState", "geometry_msgs/msg/PointStamped")
    layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    n = len(obs)
    obs_ms = np.arange(n) * 20 if obs_ms is None else obs_ms
    act_ms = obs_ms[:len(actions)] + 5 if act_ms is None else act_ms
    header_ms = obs_ms if header_ms is None else header_ms
    rng = np.random.default_rng(0)

    def stamp(ms: float):
        ns = int(1e9) + int(ms * MS)
        return T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)

    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c_obs = w.add_connection("/robot/observation", JS if joint_state else F64, typestore=store)
        c_act = w.add_connection("/robot/commands", F64, typestore=store)
        c_goal = w.add_connection("/robot/goal", PS, typestore=store)
        events = []
        for i in range(n):
            if joint_state:
                order = rng.permutation(3) if shuffle_names else np.arange(3)
                msg = T[JS](header=T["std_msgs/msg/Header"](stamp=stamp(header_ms[i]), frame_id="base"),
                         name=[JOINTS[k] for k in order], position=obs[i][order].astype(np.float64),
                         velocity=np.zeros(3), effort=np.zeros(0))
                events.append((obs_ms[i], 1, c_obs, store.serialize_cdr(msg, JS)))
            else:
                events.append((obs_ms[i], 1, c_obs, store.serialize_cdr(T[F64](layout=layout, data=obs[i].astype(np.float64)), F64)))
        for i in range(len(actions)):
            events.append((act_ms[i], 2, c_act, store.serialize_cdr(T[F64](layout=layout, data=actions[i].astype(np.float64)), F64)))
            if i == 0 or not np.array_equal(goals[i], goals[i - 1]):
                g = T[PS](header=T["std_msgs/msg/Header"](stamp=stamp(act_ms[i] - 1), frame_id="world"),
                          point=T["geometry_msgs/msg/Point"](x=float(goals[i][0]), y=float(goals[i][1]), z=0.0))
                events.append((act_ms[i] - 1, 0, c_goal, store.serialize_cdr(g, PS)))
        for ms, _, conn, data in sorted(events, key=lambda e: (e[0], e[1])):
            w.write(conn, int(1e9) + int(ms * MS), data)
    return path


def bag_mapping(**more) -> dict:
    return {"format": "rosbag2", "env_id": "PointMaze_UMaze-v3",
            "observation": [{"topic": "/robot/observation"}], "action": [{"topic": "/robot/commands"}],
            "achieved_goal_indices": [0, 1], "desired_goal": [{"topic": "/robot/goal", "fields": ["point.x", "point.y"]}],
            "alignment": {"max_skew_s": 0.012, "max_gap_s": 0.5}, **more}


def source_arrays(n: int = 60, seed: int = 1, segment: int = 20, obs_dim: int = 3
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
    actions = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
    goals = np.repeat(rng.normal(size=(n // segment + 1, 2)), segment, axis=0)[:n].astype(np.float32)
    return obs, actions, goals


def expected_terminals(n: int, segment: int) -> np.ndarray:
    t = np.zeros(n, np.float32)
    t[segment - 1::segment] = 1
    t[-1] = 1
    return t


@pytest.mark.parametrize("joint_state, shuffle", [(False, False), (True, False), (True, True)])
def test_a_rosbags_mcap_bag_reads_back_equal_to_its_arrays(tmp_path, joint_state, shuffle):
    obs, actions, goals = source_arrays()
    bag = write_bag(tmp_path / "bag", obs, actions, goals, joint_state=joint_state, shuffle_names=shuffle)
    more = {"observation": [{"topic": "/robot/observation", "joints": ["j1", "j2", "j3"]}]} if joint_state else {}
    mapping = mapping_from_dict(bag_mapping(**more))
    data, report = read(mapping, [bag])
    np.testing.assert_array_equal(data.observations, obs)
    np.testing.assert_array_equal(data.actions, actions)
    np.testing.assert_array_equal(data.achieved_goals, obs[:, :2])
    np.testing.assert_array_equal(data.desired_goals, goals)
    np.testing.assert_array_equal(data.terminals, expected_terminals(60, 20))  # a new goal, a new episode
    assert report["dropped"] == {"no observation within max_skew_s": 0, "no goal before it": 0,
                                 "a later action on the same observation": 0}
    # the bulk decoder and message-by-message decoding agree (shuffled joint names: only the latter applies)
    from l3p.datasets.rosbag2 import read_rosbag

    slow, _ = read_rosbag(bag, mapping, bulk=False)
    np.testing.assert_array_equal(slow["observations"], data.observations)


def test_mcap_records_read_directly_are_the_bytes_rosbags_reads(tmp_path):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    from l3p.datasets.rosbag2 import _scan_mcap

    obs, actions, goals = source_arrays()
    bag = write_bag(tmp_path / "bag", obs, actions, goals, joint_state=True, shuffle_names=True)
    topics = {"/robot/observation", "/robot/commands", "/robot/goal"}
    ours = _scan_mcap(next(bag.glob("*.mcap")), topics)
    theirs: dict[str, tuple[list, list]] = {}
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        for conn, stamp, data in reader.messages():
            theirs.setdefault(conn.topic, ([], []))[0].append(stamp)
            theirs[conn.topic][1].append(bytes(data))
    assert sorted(ours) == sorted(theirs) == sorted(topics)
    for topic in topics:
        assert ours[topic][0] == theirs[topic][0] and [bytes(d) for d in ours[topic][1]] == theirs[topic][1]


def test_bag_alignment_pairs_each_action_with_the_latest_observation_and_counts_drops(tmp_path):
    """Observations every 20 ms; actions 5 ms after, except: step 7's observation is missing (its
    action is 25 ms after the previous observation: over max_skew 12 ms, dropped, the episode ends),
    step 12 has a second, earlier action 2 ms after its observation (superseded by the later one)."""
    obs, actions, goals = source_arrays(40, segment=40)
    keep_obs = np.array([i != 7 for i in range(40)])
    obs_ms = np.arange(40) * 20.0
    act_ms = obs_ms + 5
    extra_ms, extra_action = obs_ms[12] + 2, np.array([[9.0, 9.0]], np.float32)
    all_act_ms = np.r_[act_ms, extra_ms]
    all_actions = np.r_[actions, extra_action]
    order = np.argsort(all_act_ms, kind="stable")
    bag = write_bag(tmp_path / "bag", obs[keep_obs], all_actions[order], np.repeat(goals[:1], 41, axis=0),
                    obs_ms=obs_ms[keep_obs], act_ms=all_act_ms[order])
    data, report = read(mapping_from_dict(bag_mapping()), [bag])
    kept = np.flatnonzero(keep_obs)
    np.testing.assert_array_equal(data.observations, obs[kept])
    np.testing.assert_array_equal(data.actions, actions[kept])  # 9,9 superseded, step 7's action dropped
    assert report["dropped"] == {"no observation within max_skew_s": 1, "no goal before it": 0,
                                 "a later action on the same observation": 1}
    np.testing.assert_array_equal(np.flatnonzero(data.terminals), [6, 38])  # split where step 7 was dropped


def test_bag_header_stamps_read_in_bulk_and_going_back_is_refused(tmp_path):
    from l3p.datasets.mapping import Part
    from l3p.datasets.rosbag2 import _bulk, decode_topic, read_raw

    obs, actions, goals = source_arrays(30, segment=30)
    ok = write_bag(tmp_path / "ok", obs, actions, goals, joint_state=True)
    raw, store = read_raw(ok, ["/robot/observation"])
    msgtype, _, datas = raw["/robot/observation"]
    part = Part(topic="/robot/observation", joints=tuple(JOINTS))
    assert _bulk(store, msgtype, datas, [part], [("position",)], True) is not None  # one layout: bulk
    (values,), stamps = decode_topic(store, msgtype, datas, [part], True, "x")
    np.testing.assert_array_equal(stamps, int(1e9) + np.arange(30) * 20 * MS)
    np.testing.assert_array_equal(values, obs)
    header_ms = np.arange(30) * 20.0
    header_ms[9] = header_ms[8] - 1
    bad = write_bag(tmp_path / "bad", obs, actions, goals, joint_state=True, header_ms=header_ms)
    mapping = bag_mapping(observation=[{"topic": "/robot/observation", "joints": JOINTS}],
                          alignment={"stamps": "header", "max_skew_s": 0.012})
    with pytest.raises(DatasetError) as err:
        read(mapping_from_dict(mapping), [bad])
    assert str(err.value).startswith(f"bag {bad}: topic /robot/observation: stamps go back in time at message 9")


def test_bad_bags_are_one_line_naming_the_file_topic_and_step(tmp_path):
    obs, actions, goals = source_arrays(40, segment=20)

    def error(bag: Path, **more) -> str:
        with pytest.raises(DatasetError) as err:
            read(mapping_from_dict(bag_mapping(**more)), [bag])
        assert "\n" not in str(err.value)
        return str(err.value)

    good = write_bag(tmp_path / "good", obs, actions, goals)
    assert error(good, action=[{"topic": "/robot/cmd"}]).startswith(
        f"bag {good}: no topic /robot/cmd (topics: /robot/commands, /robot/goal, /robot/observation)")
    nan = obs.copy()
    nan[13, 1] = np.nan
    bag = write_bag(tmp_path / "nan", nan, actions, goals)
    assert error(bag) == f"bag {bag}: topic /robot/observation: message 13 has NaN or Inf (observation)"
    bag = write_bag(tmp_path / "joints", obs, actions, goals, joint_state=True)
    assert error(bag, observation=[{"topic": "/robot/observation", "joints": ["j1", "elbow"]}]) == (
        f"bag {bag}: topic /robot/observation: message 0 has no joint(s) 'elbow' (has 'j1', 'j2', 'j3')")
    ragged = [o for o in obs]
    ragged[21] = obs[21][:2]
    bag = write_bag(tmp_path / "ragged", np.array(ragged, dtype=object), actions, goals)
    assert error(bag) == f"bag {bag}: topic /robot/observation: message 21 has 2 values, message 0 had 3"
    one = goals.copy()
    one[20] = [5.0, 5.0]  # a goal held for one step: no transition, left out (as the recorder leaves it out)
    bag = write_bag(tmp_path / "one", obs, actions, one)
    data, report = read(mapping_from_dict(bag_mapping()), [bag])
    assert report["dropped"][ONE_STEP] == 1 and data.episode_lengths().tolist() == [20, 19]
    np.testing.assert_array_equal(data.actions, np.float32(np.delete(actions, 20, axis=0)))
    # truncated: the writer was killed mid-file
    mcap = next((tmp_path / "good").glob("*.mcap"))
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / mcap.name).write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    (cut / "metadata.yaml").write_text((good / "metadata.yaml").read_text())
    message = error(cut)
    assert message.startswith(f"bag {cut}: unreadable") and "truncated or corrupt" in message


# ------------------------------------------------------------------------------- LeRobot v3 (pyarrow)


def write_lerobot(root: Path, states: np.ndarray, actions: np.ndarray, lengths: list[int], files: int = 2,
                  fixed: bool = True, frame_index: np.ndarray | None = None) -> Path:
    """A LeRobot v3 dataset per the v3 layout: meta/info.json, meta/tasks.parquet,
    meta/episodes/chunk-000/file-000.parquet, data/chunk-000/file-00K.parquet (episodes packed
    into files), list columns as fixed-size lists (as `datasets` writes them) or plain lists."""
    n = len(states)
    episode = np.repeat(np.arange(len(lengths)), lengths)
    frames = np.concatenate([np.arange(k) for k in lengths]) if frame_index is None else frame_index
    fps = 30

    def vectors(a: np.ndarray):
        flat = pa.array(a.astype(np.float32).ravel())
        return pa.FixedSizeListArray.from_arrays(flat, a.shape[1]) if fixed else pa.array([list(r) for r in a.astype(np.float32)])

    table = pa.table({"observation.state": vectors(states), "action": vectors(actions),
                      "timestamp": pa.array((frames / fps).astype(np.float32)), "frame_index": pa.array(frames),
                      "episode_index": pa.array(episode), "index": pa.array(np.arange(n)),
                      "task_index": pa.array(np.zeros(n, np.int64))})
    cuts = np.cumsum(lengths)[:-1]
    per_file = np.array_split(np.r_[0, cuts], files)
    bounds = [int(p[0]) for p in per_file if len(p)] + [n]
    for k in range(len(bounds) - 1):
        out = root / "data" / "chunk-000" / f"file-{k:03d}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(bounds[k], bounds[k + 1] - bounds[k]), out)
    meta = root / "meta"
    (meta / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
    starts = np.r_[0, cuts]
    pq.write_table(pa.table({"episode_index": np.arange(len(lengths)), "length": np.array(lengths),
                             "dataset_from_index": starts, "dataset_to_index": starts + np.array(lengths),
                             "tasks": [["reach"]] * len(lengths)}), meta / "episodes" / "chunk-000" / "file-000.parquet")
    pq.write_table(pa.table({"task_index": [0], "task": ["reach"]}), meta / "tasks.parquet")
    feature = lambda a: {"dtype": "float32", "shape": [a.shape[1]], "names": None}  # noqa: E731
    (meta / "info.json").write_text(json.dumps({
        "codebase_version": "v3.0", "robot_type": "test_arm", "total_episodes": len(lengths), "total_frames": n,
        "total_tasks": 1, "chunks_size": 1000, "data_files_size_in_mb": 100, "fps": fps, "splits": {"train": f"0:{len(lengths)}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "features": {"observation.state": feature(states), "action": feature(actions),
                     "timestamp": {"dtype": "float32", "shape": [1]}, "frame_index": {"dtype": "int64", "shape": [1]},
                     "episode_index": {"dtype": "int64", "shape": [1]}, "index": {"dtype": "int64", "shape": [1]},
                     "task_index": {"dtype": "int64", "shape": [1]}}}))
    return root


LEROBOT = {"format": "lerobot", "env_id": "PointMaze_UMaze-v3", "achieved_goal_indices": [0, 1]}


@pytest.mark.parametrize("fixed", [True, False])
def test_a_lerobot_v3_dataset_reads_back_equal_to_its_arrays(tmp_path, fixed):
    rng = np.random.default_rng(2)
    lengths = [5, 9, 3, 7]
    states = rng.normal(size=(24, 4)).astype(np.float32)
    actions = rng.normal(size=(24, 2)).astype(np.float32)
    root = write_lerobot(tmp_path / "ds", states, actions, lengths, fixed=fixed)
    data, report = read(mapping_from_dict(LEROBOT), [root])
    np.testing.assert_array_equal(data.observations, states)
    np.testing.assert_array_equal(data.actions, actions)
    np.testing.assert_array_equal(data.achieved_goals, states[:, :2])
    assert data.episode_lengths().tolist() == lengths and report["files"][0]["files"] == 2


def test_bad_lerobot_datasets_are_one_line_naming_the_file_column_and_step(tmp_path):
    rng = np.random.default_rng(3)
    states, actions = rng.normal(size=(20, 4)).astype(np.float32), rng.normal(size=(20, 2)).astype(np.float32)

    def error(root: Path, **more) -> str:
        with pytest.raises(DatasetError) as err:
            read(mapping_from_dict({**LEROBOT, **more}), [root])
        return str(err.value)

    root = write_lerobot(tmp_path / "a", states, actions, [10, 10], files=1)
    f0 = root / "data" / "chunk-000" / "file-000.parquet"
    assert error(root, action=[{"column": "action.joints"}]).startswith(f"lerobot {f0}: no column 'action.joints' (columns: ")
    nan = states.copy()
    nan[13, 2] = np.inf
    root = write_lerobot(tmp_path / "b", nan, actions, [10, 10], files=2)
    f1 = root / "data" / "chunk-000" / "file-001.parquet"
    assert error(root) == f"lerobot {f1}: column 'observation.state': NaN or Inf at step 13"
    frames = np.r_[np.arange(10), [0, 1, 2, 4, 3, 5, 6, 7, 8, 9]]
    root = write_lerobot(tmp_path / "c", states, actions, [10, 10], frame_index=frames)
    assert error(root) == f"lerobot {root}: column 'frame_index': frame 4 follows frame 2 at step 13 (not consecutive)"
    root = write_lerobot(tmp_path / "d", states, actions, [10, 1, 9])
    assert error(root) == f"lerobot {root}: column 'episode_index': episode 1 at step 10 has one step"
    root = write_lerobot(tmp_path / "e", states, actions, [10, 10], files=1)
    f0 = root / "data" / "chunk-000" / "file-000.parquet"
    f0.write_bytes(f0.read_bytes()[:-100])
    message = error(root)
    assert message.startswith(f"lerobot {f0}: unreadable (truncated or corrupt?") and "\n" not in message
    root = write_lerobot(tmp_path / "f", states, actions, [10, 10], files=2)
    f1 = root / "data" / "chunk-000" / "file-001.parquet"
    pq.write_table(pq.read_table(f1).drop(["action"]).append_column(
        "action", pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(30, np.float32)), 3)), f1)
    assert error(root) == (f"lerobot {f1}: column 'action' has 3 values per step, {root / 'data' / 'chunk-000' / 'file-000.parquet'} "
                           f"has 2 (mismatched dims)")
    root = tmp_path / "e"
    ragged = root / "data" / "chunk-000"
    pq.write_table(pa.table({"observation.state": pa.array([[1.0, 2.0], [1.0]]), "action": pa.array([[0.0], [0.0]]),
                             "episode_index": pa.array([0, 0]), "frame_index": pa.array([0, 1])}), ragged / "file-000.parquet")
    assert error(root) == f"lerobot {f0}: column 'observation.state': step 1 has 1 values, step 0 has 2"


# ------------------------------------------------------------------------ Minari (its DataCollector)


def test_a_minari_dataset_from_its_data_collector_reads_back_equal(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari")
    gym = pytest.importorskip("gymnasium")
    import gymnasium_robotics

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    gym.register_envs(gymnasium_robotics)
    env = minari.DataCollector(gym.make("PointMaze_UMaze-v3", max_episode_steps=15), record_infos=False,
                               data_format="hdf5")
    env.action_space.seed(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(15):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                break
    dataset = env.create_dataset(dataset_id="l3p/umaze-test-v0", algorithm_name="random", author="l3p",
                                 author_email="l3p@example.org", code_permalink="tests/test_datasets.py")
    env.close()
    episodes = list(minari.load_dataset("l3p/umaze-test-v0").iterate_episodes())
    root = tmp_path / "minari" / "l3p" / "umaze-test-v0"
    out = tmp_path / "umaze.npz"
    proc = l3p("dataset", "import", "minari", str(root), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    data = load_dataset(out)
    assert data.env_id == "PointMaze_UMaze-v3" and dataset.total_steps == len(data.terminals)
    cat = lambda key: np.concatenate([e.observations[key][:-1] for e in episodes])  # noqa: E731
    np.testing.assert_array_equal(data.observations, cat("observation").astype(np.float32))
    np.testing.assert_array_equal(data.achieved_goals, cat("achieved_goal").astype(np.float32))
    np.testing.assert_array_equal(data.desired_goals, cat("desired_goal").astype(np.float32))
    np.testing.assert_array_equal(data.actions, np.concatenate([e.actions for e in episodes]))
    assert data.episode_lengths().tolist() == [len(e.actions) for e in episodes]


# ----------------------------------------------------------------------------- the converter, in place


def l3p(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p", *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_import_round_trips_and_train_reads_a_mapping_in_place(tmp_path):
    import yaml

    obs, actions, goals = source_arrays(obs_dim=4)  # the import checks the sizes against PointMaze_UMaze-v3's
    write_bag(tmp_path / "day1", obs, actions, goals)
    write_bag(tmp_path / "day2", obs[::-1].copy(), actions, goals)
    mapping = tmp_path / "robot.yaml"
    mapping.write_text(yaml.safe_dump({**bag_mapping(), "paths": ["day*"]}))
    out = tmp_path / "robot.npz"
    proc = l3p("dataset", "import", "rosbag2", str(tmp_path / "day1"), str(tmp_path / "day2"), "--mapping",
               str(mapping), "--out", str(out), "--report", str(tmp_path / "report.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: 120 steps in 6 episodes of PointMaze_UMaze-v3 from 2 rosbag2 file(s); "
                                  "dropped: none; sha256 ")
    data = load_dataset(out)
    np.testing.assert_array_equal(data.observations, np.r_[obs, obs[::-1]])
    assert data.metadata["made_by"]["format"] == "rosbag2"
    in_place = open_dataset(mapping)  # what `l3p train --dataset robot.yaml` trains on
    for name in ("observations", "actions", "terminals", "achieved_goals", "desired_goals"):
        np.testing.assert_array_equal(getattr(in_place, name), getattr(data, name))
    # npz -> npz: several recordings (a recorder's rotated files) into one, equal arrays
    both = tmp_path / "both.npz"
    digest, _ = import_to(both, mapping_from_dict({"format": "npz"}), [out, out])
    again = load_dataset(both)
    np.testing.assert_array_equal(again.actions, np.r_[data.actions, data.actions])
    assert open_dataset(out).metadata["sha256"] == data.metadata["sha256"]  # an .npz reads as load_dataset reads it
    # a failed import leaves nothing at --out
    bad = tmp_path / "bad.npz"
    mapping.write_text(yaml.safe_dump({**bag_mapping(), "action": [{"topic": "/nope"}]}))
    proc = l3p("dataset", "import", "rosbag2", str(tmp_path / "day1"), "--mapping", str(mapping), "--out", str(bad))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"l3p dataset: error: bag {tmp_path / 'day1'}: no topic /nope")
    assert not bad.exists() and not list(tmp_path.glob("bad*"))


@pytest.mark.parametrize("tree, message", [
    ({"format": "rosbag2", "env_id": "E", "observation": [{"topic": "/o"}], "action": [{"topic": "/a"}],
      "achieved_goal_indices": [0], "alignment": {"max_skew": 1}}, "mapping m.yaml: unknown key 'alignment.max_skew'"),
    ({"format": "rosbag2", "env_id": "E", "observation": [{"column": "o"}], "action": [{"topic": "/a"}],
      "achieved_goal_indices": [0]}, "mapping m.yaml: observation[0] needs a topic (rosbag2 reads topics), and only that"),
    ({"format": "lerobot", "observation": [{"column": "o"}]}, "mapping m.yaml: env_id is missing"),
    ({"format": "lerobot", "env_id": "E", "achieved_goal_indices": "x"}, "mapping m.yaml: achieved_goal_indices[0] must be int"),
])
def test_mapping_files_are_checked_naming_the_key(tmp_path, tree, message):
    import yaml

    from l3p.datasets.mapping import load_mapping

    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(tree))
    with pytest.raises(DatasetError) as err:
        load_mapping(path)
    assert str(err.value).replace(str(tmp_path) + "/", "").startswith(message)


def test_an_npz_reads_exactly_as_load_dataset_reads_it(tmp_path):
    path = tmp_path / "d.npz"
    rng = np.random.default_rng(0)
    save_dataset(path, observations=rng.normal(size=(6, 3)), actions=rng.normal(size=(6, 2)),
                 terminals=[0, 0, 1, 0, 0, 1], achieved_goals=rng.normal(size=(6, 2)), env_id="E", made_by={},
                 success=np.ones(6, bool))
    a, b = open_dataset(path), load_dataset(path)
    assert a.metadata == b.metadata and sorted(a.extras) == sorted(b.extras) == ["success"]
    for name, array in b.arrays().items():
        np.testing.assert_array_equal(a.arrays()[name], array)


def test_the_import_benchmark_runs_as_a_script(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "benchmarks" / "dataset_import.py"),
                           "--steps", "600", "--repeats", "1", "--out", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["source"].split(":")[0] for r in rows] == ["MCAP", "LeRobot v3", "MCAP", "LeRobot v3"]
    assert all(r["steps"] == 600 and r["read_steps_per_s"] > 0 for r in rows)
    assert rows[0]["messages"] == 600 * 2 + 3  # observation and command per step, a goal per 200 steps
    assert "Import speed, 600 steps per recording" in proc.stdout


def test_offline_training_reads_a_mapping_in_place_as_its_converted_npz(tmp_path):
    """`l3p train --dataset robot.yaml`: the run's replay from the bags equals the one from the .npz
    the converter writes of them, and the run records the same dataset digest."""
    pytest.importorskip("torch")
    import yaml

    from l3p.training.presets import preset
    from l3p.training.offline import OfflineTrainer

    rng = np.random.default_rng(4)
    obs = rng.uniform(-1, 1, (60, 4)).astype(np.float32)
    actions = rng.uniform(-1, 1, (60, 2)).astype(np.float32)
    goals = np.repeat(rng.uniform(-1, 1, (3, 2)), 20, axis=0).astype(np.float32)
    write_bag(tmp_path / "bag", obs, actions, goals)
    (tmp_path / "robot.yaml").write_text(yaml.safe_dump({**bag_mapping(), "paths": ["bag"]}))
    import_to(tmp_path / "robot.npz", mapping_from_dict(bag_mapping()), [tmp_path / "bag"])
    tiny = dict(updates_per_cycle=2, batch_size=8, hidden=8, layers=1, ae_hidden=8, n_landmarks=4, gls_sample=20,
                cluster_batch=4, landmarks_after_updates=2, eval_every_cycles=10, eval_episodes=1, torch_threads=1,
                eval_max_steps=5, offline_updates=2, random_goal_p=0.0)
    runs = [OfflineTrainer(preset("PointMaze_UMaze-v3").replace(**tiny, dataset=str(tmp_path / name)), tmp_path / name[:-5])
            for name in ("robot.yaml", "robot.npz")]
    np.testing.assert_array_equal(runs[0].replay.obs, runs[1].replay.obs)
    np.testing.assert_array_equal(runs[0].replay.action, runs[1].replay.action)
    assert runs[0].dataset.metadata["sha256"] == runs[1].dataset.metadata["sha256"]


def test_the_guides_mapping_files_read_bags_of_their_robots(tmp_path):
    """docs/guides/mappings: a 7-joint arm (JointState + tool pose, joint velocity commands) and a
    mobile base (Odometry, Twist, a goal pose), each bag written by rosbags with the guide's topics."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from l3p.datasets.mapping import load_mapping

    store = get_typestore(Stores.ROS2_KILTED)
    T = store.types
    rng = np.random.default_rng(5)
    n = 40

    def header(ms: int):
        ns = 10**9 + ms * MS
        return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9),
                                        frame_id="base")

    def point(v):
        return T["geometry_msgs/msg/Point"](x=float(v[0]), y=float(v[1]), z=float(v[2]))

    def pose(v):
        return T["geometry_msgs/msg/Pose"](position=point(v), orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))

    def vec3(v):
        return T["geometry_msgs/msg/Vector3"](x=float(v[0]), y=float(v[1]), z=float(v[2]))

    # the arm: joint states list two gripper joints first and the arm's joints reversed
    joints = [f"panda_joint{i}" for i in range(1, 8)]
    q, qd, tool = rng.normal(size=(n, 7)), rng.normal(size=(n, 7)), rng.normal(size=(n, 3))
    cmd, target = rng.normal(size=(n, 7)), np.repeat(rng.normal(size=(2, 3)), n // 2, axis=0)
    arm = tmp_path / "arm"
    with Writer(arm, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c = {name: w.add_connection(topic, kind, typestore=store) for name, topic, kind in (
            ("js", "/arm/joint_states", "sensor_msgs/msg/JointState"), ("tool", "/arm/tool_pose", "geometry_msgs/msg/PoseStamped"),
            ("cmd", "/arm/forward_velocity_controller/commands", "std_msgs/msg/Float64MultiArray"),
            ("target", "/arm/target", "geometry_msgs/msg/PointStamped"))}
        for i in range(n):
            ms = 2 * i
            if i % (n // 2) == 0:
                w.write(c["target"], 10**9 + ms * MS, store.serialize_cdr(
                    T["geometry_msgs/msg/PointStamped"](header=header(ms), point=point(target[i])), "geometry_msgs/msg/PointStamped"))
            names = ["finger_left", "finger_right", *joints[::-1]]
            js = T["sensor_msgs/msg/JointState"](header=header(ms), name=names, position=np.r_[0.01, 0.01, q[i][::-1]],
                                                 velocity=np.r_[0.0, 0.0, qd[i][::-1]], effort=np.zeros(0))
            w.write(c["js"], 10**9 + ms * MS + 1, store.serialize_cdr(js, "sensor_msgs/msg/JointState"))
            w.write(c["tool"], 10**9 + ms * MS + 2, store.serialize_cdr(
                T["geometry_msgs/msg/PoseStamped"](header=header(ms), pose=pose(tool[i])), "geometry_msgs/msg/PoseStamped"))
            w.write(c["cmd"], 10**9 + ms * MS + MS, store.serialize_cdr(T["std_msgs/msg/Float64MultiArray"](
                layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0), data=cmd[i]), "std_msgs/msg/Float64MultiArray"))
    data, report = read(load_mapping(ROOT / "docs" / "guides" / "mappings" / "arm7.yaml"), [arm])
    np.testing.assert_array_equal(data.observations, np.c_[q, qd, tool].astype(np.float32))
    np.testing.assert_array_equal(data.actions, cmd.astype(np.float32))
    np.testing.assert_array_equal(data.achieved_goals, tool.astype(np.float32))
    np.testing.assert_array_equal(data.desired_goals, target.astype(np.float32))
    assert data.episode_lengths().tolist() == [20, 20] and sum(report["dropped"].values()) == 0

    # the base: odometry at 50 Hz, a command 10 ms after each, a pause of 2 s after step 24
    xy, v, twist = rng.normal(size=(n, 2)), rng.normal(size=(n, 2)), rng.uniform(-1, 1, (n, 2))
    goal = rng.normal(size=3)
    base = tmp_path / "base"
    with Writer(base, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c = {name: w.add_connection(topic, kind, typestore=store) for name, topic, kind in (
            ("odom", "/base/odom", "nav_msgs/msg/Odometry"), ("cmd", "/base/cmd_vel", "geometry_msgs/msg/Twist"),
            ("goal", "/base/goal_pose", "geometry_msgs/msg/PoseStamped"))}
        w.write(c["goal"], 10**9, store.serialize_cdr(T["geometry_msgs/msg/PoseStamped"](header=header(0), pose=pose(goal)),
                                                      "geometry_msgs/msg/PoseStamped"))
        for i in range(n):
            ms = 20 * i + (2000 if i >= 25 else 0)
            odom = T["nav_msgs/msg/Odometry"](
                header=header(ms), child_frame_id="base_link",
                pose=T["geometry_msgs/msg/PoseWithCovariance"](pose=pose([*xy[i], 0.0]), covariance=rng.normal(size=36)),
                twist=T["geometry_msgs/msg/TwistWithCovariance"](
                    twist=T["geometry_msgs/msg/Twist"](linear=vec3([*v[i], 0.0]), angular=vec3([0, 0, 0.1])),
                    covariance=np.zeros(36)))
            w.write(c["odom"], 10**9 + ms * MS + 1, store.serialize_cdr(odom, "nav_msgs/msg/Odometry"))
            w.write(c["cmd"], 10**9 + (ms + 10) * MS, store.serialize_cdr(T["geometry_msgs/msg/Twist"](
                linear=vec3([*twist[i], 0.0]), angular=vec3([0, 0, 0])), "geometry_msgs/msg/Twist"))
    data, _ = read(load_mapping(ROOT / "docs" / "guides" / "mappings" / "mobile_base.yaml"), [base])
    np.testing.assert_array_equal(data.observations, np.c_[xy, v].astype(np.float32))
    np.testing.assert_array_equal(data.actions, twist.astype(np.float32))
    np.testing.assert_array_equal(data.desired_goals, np.repeat(goal[None, :2], n, axis=0).astype(np.float32))
    assert data.episode_lengths().tolist() == [25, 15]  # the pause over max_gap_s ends an episode


def test_bad_minari_datasets_are_one_line_naming_the_file_column_and_step(tmp_path):
    """Files in Minari's HDF5 layout (episode_<id> groups, T actions, T + 1 observations), broken."""
    h5py = pytest.importorskip("h5py")

    def write(name: str, lengths: list[int], nan_at: tuple[int, int] | None = None, drop: str = "") -> Path:
        path = tmp_path / name / "data" / "main_data.hdf5"
        path.parent.mkdir(parents=True)
        rng = np.random.default_rng(6)
        with h5py.File(path, "w") as f:
            for e, n in enumerate(lengths):
                g = f.create_group(f"episode_{e}")
                obs = rng.normal(size=(n + 1, 4))
                if nan_at and nan_at[0] == e:
                    obs[nan_at[1], 0] = np.nan
                for key, value in (("observation", obs), ("achieved_goal", obs[:, :2]), ("desired_goal", obs[:, 2:])):
                    if key != drop:
                        g[f"observations/{key}"] = value
                g["actions"] = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        return path

    def error(path: Path) -> str:
        with pytest.raises(DatasetError) as err:
            read(mapping_from_dict({"format": "minari", "env_id": "PointMaze_UMaze-v3"}), [path.parents[1]])
        return str(err.value)

    path = write("missing", [5, 5], drop="achieved_goal")
    assert error(path).startswith(f"minari {path}: episode_0: column 'observations/achieved_goal': missing (has ")
    path = write("nan", [5, 6], nan_at=(1, 3))
    assert error(path) == f"minari {path}: episode_1: column 'observations/observation': NaN or Inf at step 8"
    path = write("one", [5, 1, 4])
    assert error(path) == f"minari {path}: episode_1: column 'actions': an episode of 1 step(s) at step 5"
    path = write("cut", [50, 50])
    path.write_bytes(path.read_bytes()[:1000])
    assert error(path).startswith(f"minari {path}: unreadable (truncated or corrupt?")
