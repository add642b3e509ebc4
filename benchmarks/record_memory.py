"""The recorder's memory over a long recording: ``l3p ros2 record``'s recording path (its message
handling, the live time alignment, the streaming writer with rotated files) fed 8 hours of a 50 Hz
robot (1,440,000 steps: an observation [4] and a command [2] per step, a new goal every 200 steps) as
fast as it goes, without the DDS transport. RSS sampled as it grows; every file read back at the end.
The reference: the same steps held in memory as the bridge's recorder used to (a list of every row).

    python benchmarks/record_memory.py --hours 8 --out bench_record_memory.json
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

from l3p.clients.ros2.record import Recording, rss_mb
from l3p.core.dataset import load_dataset
from l3p.datasets.mapping import mapping_from_dict
from l3p.datasets.writer import EpisodeWriter

MAPPING = {"format": "rosbag2", "env_id": "PointMaze_Large-v3", "observation": [{"topic": "/robot/observation"}],
           "action": [{"topic": "/robot/commands"}], "achieved_goal_indices": [0, 1],
           "desired_goal": [{"topic": "/robot/goal", "fields": ["point.x", "point.y"]}]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--rate", type=float, default=50.0, help="Hz")
    ap.add_argument("--rotate-steps", type=int, default=20_000)
    ap.add_argument("--samples", type=int, default=16, help="RSS samples over the run")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    steps = int(args.hours * 3600 * args.rate)
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
    out = {"steps": steps, "hours": args.hours, "rate_hz": args.rate, "seconds": seconds, "steps_per_s": steps / seconds,
           "files": len(files), "steps_read_back": read_back, "episodes": episodes, "rss_mb_start": start_rss,
           "rss_mb_samples": samples, "rss_mb_first_quarter_max": max(rss[: max(1, len(rss) // 4)]),
           "rss_mb_last_quarter_max": max(rss[-max(1, len(rss) // 4):]), "dropped": result["dropped"],
           "reference_all_rows_in_memory_mb": ref_mb}
    print(f"Recorder memory: {steps:,} steps ({args.hours:g} h at {args.rate:g} Hz) in {seconds:.0f} s "
          f"({out['steps_per_s']:,.0f} steps/s), {len(files)} files, {read_back:,} steps read back in {episodes:,} episodes")
    print(f"{'steps':>12} {'RSS MB':>8}")
    for k, mb in samples:
        print(f"{k:>12,} {mb:>8.1f}")
    print(f"RSS: first quarter max {out['rss_mb_first_quarter_max']:.1f} MB, last quarter max "
          f"{out['rss_mb_last_quarter_max']:.1f} MB; the same steps as a list of rows in memory: {ref_mb:.0f} MB more")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
