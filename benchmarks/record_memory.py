"""The recorder's memory over a long recording: ``l3p ros2 record``'s recording path (its message
handling, the live time alignment, the streaming writer with rotated files) fed 8 hours of a 50 Hz
robot (1,440,000 steps: an observation [4] and a command [2] per step, a new goal every 200 steps) as
fast as it goes, without the DDS transport. RSS sampled as it grows; every file read back at the end.
The reference: the same steps held in memory as the bridge's recorder used to (a list of every row).

    python benchmarks/record_memory.py --hours 8 --out bench_record_memory.json

With ``--ros2`` the same steps go through ROS 2 to a real ``l3p ros2 record`` process (this process
publishes them as fast as the recorder keeps up, in a network namespace of its own, as the tests do)
and the recorder's RSS is read from /proc as it records.

    python benchmarks/record_memory.py --ros2 --hours 1 --out bench_record_memory_ros2.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from l3p.clients.ros2.recording import Recording, rss_mb
from l3p.core.dataset import load_dataset
from l3p.datasets.mapping import mapping_from_dict
from l3p.datasets.writer import EpisodeWriter

MAPPING = {"format": "rosbag2", "env_id": "PointMaze_Large-v3", "observation": [{"topic": "/robot/observation"}],
           "action": [{"topic": "/robot/commands"}], "achieved_goal_indices": [0, 1],
           "desired_goal": [{"topic": "/robot/goal", "fields": ["point.x", "point.y"]}]}


def vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e3
    return float("nan")


def over_ros2(steps: int, rate: float, rotate_steps: int, n_samples: int, publish_rate: float) -> dict:
    """Inside a network namespace: `l3p ros2 record` as a process, this one publishing the steps."""
    import signal
    import sys

    import rclpy
    import yaml
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile
    from std_msgs.msg import Float64MultiArray

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from ros2_harness import Process, l3p

    work = Path(tempfile.mkdtemp(prefix="l3p-record-bench-"))
    (work / "m.yaml").write_text(yaml.safe_dump({**MAPPING, "alignment": {"max_skew_s": 1.0, "max_gap_s": 10.0}}))
    recorder = Process(l3p("ros2", "record", "--mapping", str(work / "m.yaml"), "--out", str(work / "rec.npz"),
                           "--rotate-steps", str(rotate_steps), "--stats", str(work / "stats.json")), "recorder")
    recorder.wait_ready(60)
    rclpy.init()
    node = rclpy.create_node("bench_robot")
    qos = QoSProfile(depth=1000)
    pub_obs = node.create_publisher(Float64MultiArray, "/robot/observation", qos)
    pub_cmd = node.create_publisher(Float64MultiArray, "/robot/commands", qos)
    pub_goal = node.create_publisher(PointStamped, "/robot/goal", qos)
    while min(p.get_subscription_count() for p in (pub_obs, pub_cmd, pub_goal)) < 1:
        time.sleep(0.05)
    time.sleep(1.0)
    rng = np.random.default_rng(0)
    samples, every = [], max(1, steps // n_samples)
    t0 = time.perf_counter()
    for k in range(steps):
        if k % 200 == 0:
            goal = PointStamped()
            goal.point.x, goal.point.y = (float(v) for v in rng.uniform(0, 10, 2))
            pub_goal.publish(goal)
        pub_obs.publish(Float64MultiArray(data=rng.normal(size=4).tolist()))
        pub_cmd.publish(Float64MultiArray(data=rng.uniform(-1, 1, 2).tolist()))
        if k % 10 == 0:  # paced at publish_rate: faster, and messages are lost before the recorder sees them
            time.sleep(max(0.0, t0 + k / publish_rate - time.perf_counter()))
        if k % every == 0:
            samples.append((k, vm_rss_mb(recorder.proc.pid)))
    time.sleep(2.0)
    seconds = time.perf_counter() - t0
    recorder.stop(signal.SIGTERM, timeout_s=120)
    node.destroy_node()
    rclpy.try_shutdown()
    stats = json.loads((work / "stats.json").read_text())
    files = [Path(f) for f in stats["files"]]
    read_back = sum(len(load_dataset(f).terminals) for f in files)
    shutil.rmtree(work, ignore_errors=True)
    rss = [mb for _, mb in samples]
    return {"steps": steps, "rate_hz": rate, "seconds": seconds, "steps_per_s": steps / seconds, "files": len(files),
            "steps_recorded": stats["steps"], "steps_read_back": read_back, "episodes": stats["episodes"],
            "dropped": stats["dropped"], "rss_mb_samples": samples,
            "messages_published": 2 * steps + (steps + 199) // 200,
            "recorder": {k: stats[k] for k in ("messages", "short_episodes_left_out", "episodes_cut", "bad_messages")},
            "rss_mb_first_quarter_max": max(rss[: max(1, len(rss) // 4)]),
            "rss_mb_last_quarter_max": max(rss[-max(1, len(rss) // 4):])}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--rate", type=float, default=50.0, help="Hz")
    ap.add_argument("--rotate-steps", type=int, default=20_000)
    ap.add_argument("--samples", type=int, default=16, help="RSS samples over the run")
    ap.add_argument("--ros2", action="store_true", help="through ROS 2 to an l3p ros2 record process")
    ap.add_argument("--publish-rate", type=float, default=400.0, metavar="STEPS_PER_S",
                    help="--ros2: publish this fast (what the recorder keeps up with on the machine)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    steps = int(args.hours * 3600 * args.rate)
    if args.ros2:
        return ros2_main(argv or [], args, steps)
    period_ns = int(1e9 / args.rate)
    work = Path(tempfile.mkdtemp(prefix="l3p-record-bench-"))
    mapping = mapping_from_dict(MAPPING)
    recording = Recording(mapping, EpisodeWriter(work / "rec.npz", mapping.env_id, {"recorder": "benchmark"},
                                                 rotate_steps=args.rotate_steps))
    topics = recording.topics()
    obs_kind, obs_uses = topics["/robot/observation"]
    act_kind, act_uses = topics["/robot/commands"]
    goal_kind, goal_uses = topics["/robot/goal"]
    rng = np.random.default_rng(0)
    block = 10_000
    samples, every = [], max(1, steps // args.samples)
    start_rss = rss_mb()
    t0 = time.perf_counter()
    try:
        for first in range(0, steps, block):
            obs = rng.normal(size=(block, 4)).tolist()
            act = rng.uniform(-1, 1, (block, 2)).tolist()
            for i in range(min(block, steps - first)):
                k = first + i
                t = k * period_ns
                if k % 200 == 0:
                    g = rng.uniform(0, 10, 2)
                    recording.message("/robot/goal", goal_kind, goal_uses,
                                      SimpleNamespace(point=SimpleNamespace(x=g[0], y=g[1], z=0.0)), t)
                recording.message("/robot/observation", obs_kind, obs_uses, SimpleNamespace(data=obs[i]), t + 1000)
                recording.message("/robot/commands", act_kind, act_uses, SimpleNamespace(data=act[i]), t + 5_000_000)
                if k % every == 0:
                    samples.append((k, rss_mb()))
        result = recording.close()
        seconds = time.perf_counter() - t0
        files = [Path(f) for f in result["files"]]
        read_back = sum(len(load_dataset(f).terminals) for f in files)
        episodes = sum(len(load_dataset(f, check_digest=False).episode_bounds()) for f in files)
        # The reference: every row kept in a list, as the bridge's recorder did before (one row per step).
        ref0 = rss_mb()
        rows = [(np.zeros(4, np.float32), np.zeros(2, np.float32), np.zeros(2, np.float32), np.zeros(2, np.float32))
                for _ in range(steps)]
        ref_mb = rss_mb() - ref0
        del rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rss = [mb for _, mb in samples]
    out = {"steps": steps, "hours": args.hours, "rate_hz": args.rate, "seconds": seconds,
           "steps_per_s": steps / seconds,
           "files": len(files), "steps_read_back": read_back, "episodes": episodes, "rss_mb_start": start_rss,
           "rss_mb_samples": samples, "rss_mb_first_quarter_max": max(rss[: max(1, len(rss) // 4)]),
           "rss_mb_last_quarter_max": max(rss[-max(1, len(rss) // 4):]), "dropped": result["dropped"],
           "reference_all_rows_in_memory_mb": ref_mb}
    print(f"Recorder memory: {steps:,} steps ({args.hours:g} h at {args.rate:g} Hz) in {seconds:.0f} s "
          f"({out['steps_per_s']:,.0f} steps/s), {len(files)} files, {read_back:,} steps read back in "
          f"{episodes:,} episodes")
    print(f"{'steps':>12} {'RSS MB':>8}")
    for k, mb in samples:
        print(f"{k:>12,} {mb:>8.1f}")
    print(f"RSS: first quarter max {out['rss_mb_first_quarter_max']:.1f} MB, last quarter max "
          f"{out['rss_mb_last_quarter_max']:.1f} MB; the same steps as a list of rows in memory: {ref_mb:.0f} MB more")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return out


def ros2_main(argv: list[str], args: argparse.Namespace, steps: int) -> dict:
    import os
    import sys

    if os.environ.get("L3P_IN_NETNS") != "1":  # discovery stays inside a namespace of our own
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from ros2_harness import in_netns

        proc = in_netns([sys.executable, str(Path(__file__).resolve()), *(argv or sys.argv[1:])], 7200)
        print(proc.stdout, end="")
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-4000:])
        return json.loads(args.out.read_text()) if args.out else {}
    out = over_ros2(steps, args.rate, args.rotate_steps, args.samples, args.publish_rate)
    print(f"Recorder memory over ROS 2: {steps:,} steps ({args.hours:g} h at {args.rate:g} Hz) published in "
          f"{out['seconds']:.0f} s ({out['steps_per_s']:,.0f} steps/s); {out['steps_recorded']:,} recorded, "
          f"{out['steps_read_back']:,} read back from {out['files']} files; dropped {out['dropped']}")
    print(f"{'steps':>12} {'recorder RSS MB':>16}")
    for k, mb in out["rss_mb_samples"]:
        print(f"{k:>12,} {mb:>16.1f}")
    print(f"RSS: first quarter max {out['rss_mb_first_quarter_max']:.1f} MB, last quarter max "
          f"{out['rss_mb_last_quarter_max']:.1f} MB")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
