"""Import speed of the dataset sources (l3p.datasets): steps/s from a rosbag2 MCAP bag and from a
LeRobot v3 parquet dataset into the project's dataset, beside references measured in the same run:
the bag's raw message iteration by rosbags (no decoding) and pyarrow's read of the same columns.

Recordings are made here: a point-maze robot (Float64MultiArray observation [4], command [2],
PointStamped goal every 200 steps) and a 7-joint arm (JointState position+velocity [14], command
[7]), at 50 Hz, written by rosbags; LeRobot v3 per its layout with pyarrow (fixed-size lists).
Each rate is the best of --repeats (this machine is shared: the best is the least disturbed).

    python benchmarks/dataset_import.py --steps 200000 --out bench_dataset_import.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tests' writers: one way to write each format

from test_datasets import write_lerobot  # noqa: E402

from l3p.datasets.mapping import mapping_from_dict  # noqa: E402
from l3p.datasets.source import import_to, read  # noqa: E402

TARGET = 100_000  # steps/s, issue 45


def write_bag(path: Path, obs: np.ndarray, actions: np.ndarray, goals: np.ndarray, joints: list[str] | None) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    T = store.types
    F64, JS, PS = "std_msgs/msg/Float64MultiArray", "sensor_msgs/msg/JointState", "geometry_msgs/msg/PointStamped"
    layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c_obs = w.add_connection("/robot/observation", JS if joints else F64, typestore=store)
        c_act = w.add_connection("/robot/commands", F64, typestore=store)
        c_goal = w.add_connection("/robot/goal", PS, typestore=store)
        for i in range(len(obs)):
            t = 10**9 + i * 20_000_000
            stamp = T["builtin_interfaces/msg/Time"](sec=t // 10**9, nanosec=t % 10**9)
            if i == 0 or not np.array_equal(goals[i], goals[i - 1]):
                g = T[PS](header=T["std_msgs/msg/Header"](stamp=stamp, frame_id="world"),
                          point=T["geometry_msgs/msg/Point"](x=float(goals[i, 0]), y=float(goals[i, 1]), z=0.0))
                w.write(c_goal, t, store.serialize_cdr(g, PS))
            if joints:
                k = len(joints)
                msg = T[JS](header=T["std_msgs/msg/Header"](stamp=stamp, frame_id="base"), name=joints,
                            position=obs[i, :k].astype(np.float64), velocity=obs[i, k:].astype(np.float64),
                            effort=np.zeros(0))
                w.write(c_obs, t + 1000, store.serialize_cdr(msg, JS))
            else:
                msg = T[F64](layout=layout, data=obs[i].astype(np.float64))
                w.write(c_obs, t + 1000, store.serialize_cdr(msg, F64))
            msg = T[F64](layout=layout, data=actions[i].astype(np.float64))
            w.write(c_act, t + 5_000_000, store.serialize_cdr(msg, F64))


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def rosbags_iteration(bag: Path) -> int:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        return sum(1 for _ in reader.messages())


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200_000,
                    help="steps per recording (default 200,000: ~67 min at 50 Hz)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    n = args.steps
    work = Path(tempfile.mkdtemp(prefix="l3p-import-bench-"))
    rows = []
    try:
        joints = [f"joint_{k}" for k in range(7)]
        goals = np.repeat(rng.uniform(0, 10, (n // 200 + 1, 2)), 200, axis=0)[:n]
        cases = {"point maze (array obs [4], command [2])": (rng.normal(size=(n, 4)), rng.uniform(-1, 1, (n, 2)), None),
                 "7-joint arm (JointState [14], command [7])": (rng.normal(size=(n, 14)), rng.uniform(-1, 1, (n, 7)),
                                                                joints)}
        for name, (obs, actions, names) in cases.items():
            bag = work / f"bag-{len(rows)}"
            write_bag(bag, obs, actions, goals, names)
            part = {"topic": "/robot/observation",
                    **({"joints": names, "fields": ["position", "velocity"]} if names else {})}
            mapping = mapping_from_dict({"format": "rosbag2", "env_id": "bench", "observation": [part],
                                         "action": [{"topic": "/robot/commands"}], "achieved_goal_indices": [0, 1],
                                         "desired_goal": [{"topic": "/robot/goal", "fields": ["point.x", "point.y"]}]})
            ref_s, count = best(lambda: rosbags_iteration(bag), args.repeats)
            read_s, (data, _) = best(lambda: read(mapping, [bag]), args.repeats)
            assert np.array_equal(data.actions, actions.astype(np.float32)) and len(data.terminals) == n
            npz_s, _ = best(lambda: import_to(work / "out.npz", mapping, [bag]), 1)
            rows.append({"source": f"MCAP: {name}", "steps": n, "messages": count,
                         "reference": "rosbags message iteration (no decoding)", "reference_steps_per_s": n / ref_s,
                         "read_steps_per_s": n / read_s, "import_to_npz_steps_per_s": n / npz_s,
                         "file_mb": sum(f.stat().st_size for f in bag.rglob("*")) / 1e6})
            root = write_lerobot(work / f"lerobot-{len(rows)}", obs.astype(np.float32), actions.astype(np.float32),
                                 [200] * (n // 200) + ([n % 200] if n % 200 else []), files=max(1, n // 100_000))
            lr = mapping_from_dict({"format": "lerobot", "env_id": "bench", "achieved_goal_indices": [0, 1]})

            def arrow_read() -> int:
                import pyarrow.parquet as pq

                columns = ["observation.state", "action", "episode_index", "frame_index"]
                return sum(pq.read_table(f, columns=columns).num_rows
                           for f in sorted((root / "data").rglob("*.parquet")))
            ref_s, _ = best(arrow_read, args.repeats)
            read_s, (data, _) = best(lambda: read(lr, [root]), args.repeats)
            assert np.array_equal(data.observations, obs.astype(np.float32))
            npz_s, _ = best(lambda: import_to(work / "out.npz", lr, [root]), 1)
            rows.append({"source": f"LeRobot v3: {name}", "steps": n, "reference": "pyarrow read_table of the columns",
                         "reference_steps_per_s": n / ref_s, "read_steps_per_s": n / read_s,
                         "import_to_npz_steps_per_s": n / npz_s,
                         "file_mb": sum(f.stat().st_size for f in root.rglob("*.parquet")) / 1e6})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"Import speed, {n:,} steps per recording, best of {args.repeats} (target >= {TARGET:,} steps/s)")
    print(f"{'source':<56} {'reference':>12} {'read':>12} {'to .npz':>12}  target")
    for r in rows:
        print(f"{r['source']:<56} {r['reference_steps_per_s']:>12,.0f} {r['read_steps_per_s']:>12,.0f} "
              f"{r['import_to_npz_steps_per_s']:>12,.0f}  {'met' if r['read_steps_per_s'] >= TARGET else 'NOT met'}")
    print("steps/s; reference: rosbags' bare message iteration (MCAP) or pyarrow's read (LeRobot); read: "
          "l3p.datasets.source.read (decoded, aligned, checked); to .npz: read + the compressed .npz written")
    result = {"steps": n, "repeats": args.repeats, "target_steps_per_s": TARGET, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
