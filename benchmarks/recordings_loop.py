"""The loop from recordings to a served planner, over ROS 2, at any size (issue 45's point 3; the
test runs it tiny: tests/test_recordings_loop.py, whose scenario this runs in a network namespace):
a scripted noisy controller drives `l3p ros2 sim` on PointMaze_Large-v3 along segments of <= 4 cells,
`l3p ros2 record` records it, `l3p train --dataset` learns from the recording, `l3p serve` serves the
bundle and `l3p ros2 bridge` drives the same simulated robot to far pairs (>= 10 cells). Beside it,
the recording controller's own success, straight for the same far goals.

    python benchmarks/recordings_loop.py --episodes 900 --steps 200 --updates 50000 --far-episodes 50 \\
        --far-steps 1000 --config benchmarks/recordings_loop.toml --out bench_recordings_loop.json
        # 180,000 recorded steps: the issue's target size; far pairs from the held-out seeds
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from l3p.core.seeds import HELD_OUT, seed_range

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from ros2_harness import RESULT, in_netns, netns_unavailable  # noqa: E402

SCENARIO = ROOT / "tests" / "test_recordings_loop.py"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=20, help="recorded robot episodes")
    ap.add_argument("--steps", type=int, default=200, help="steps per episode (recorded and far)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--updates", type=int, default=2000, help="offline updates")
    ap.add_argument("--set", action="append", default=None, metavar="KEY=VALUE",
                    help="training config overrides, after --config (without --config, default random_goal_p=0.1: "
                         "the env's online preset has 0.2 beside relabel_p 0.85, which offline training refuses)")
    ap.add_argument("--config", help="a training config file (TOML), e.g. benchmarks/recordings_loop.toml")
    ap.add_argument("--far-episodes", type=int, default=10)
    ap.add_argument("--far-seed", type=int, default=HELD_OUT,
                    help="far episode i's env seed and pair: this + i (default: the held-out range)")
    ap.add_argument("--far-steps", type=int, default=600, help="steps per far episode")
    ap.add_argument("--stage-timeout", type=float, default=7200.0, metavar="S")
    ap.add_argument("--work", type=Path, metavar="DIR",
                    help="the loop's folder (default: a new one in the temp dir, printed): a stage finished there "
                         "by an earlier run is not done again (the recording, the training; a training stopped early "
                         "goes on from its last checkpoint to --updates), so a run past --stage-timeout can be taken up")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.set is None:  # a config file says its own offline settings
        args.set = [] if args.config else ["random_goal_p=0.1"]
    reason = netns_unavailable()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    params = {"episodes": args.episodes, "steps": args.steps, "seed": args.seed, "updates": args.updates,
              "train_set": args.set, "train_config": args.config, "far_episodes": args.far_episodes,
              "far_steps": args.far_steps, "far_seed": args.far_seed,
              "controller_far": True, "stage_timeout_s": args.stage_timeout,
              "work": str(args.work.resolve()) if args.work else None}
    proc = in_netns([sys.executable, str(SCENARIO), json.dumps(params)], 4 * args.stage_timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the loop failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    r = json.loads(lines[-1][len(RESULT):])
    rec, s = r["record"], r["seconds"]
    def took(key: str) -> str:  # None: done by an earlier run in the same folder, its time not recorded
        return "time not recorded" if s.get(key) is None else f"{s[key]:.0f} s"

    t = r["trained_on"]
    short = t.get("short_episodes_left_out", {"episodes": 0, "steps": 0})
    print(f"The loop on PointMaze_Large-v3: {args.episodes} x {args.steps} steps recorded, {args.updates} updates")
    print(f"  folder        {r['work']}")
    print(f"  recorded      {rec['steps']:,} steps in {rec['episodes']:,} episodes (segments), dropped "
          f"{sum(rec['dropped'].values())}, {took('record')}")
    print(f"  trained       {r['trained_updates']:,} updates, {took('train')} (the run's own wall time "
          f"{r['trained_wall_s']:.0f} s) on {t['steps']:,} steps ({rec['files']} files made one): "
          f"{t['replay_windows']:,} windows of {t['window_steps']} steps, {short['episodes']} shorter segments "
          f"({short['steps']} steps) left out; served d_max {r['bundle_planner']['d_max']}")
    n = args.far_episodes
    print(f"  far pairs     seeds {args.far_seed} + i ({seed_range(args.far_seed)}), {args.far_steps} steps; success "
          f"judged at the last step (the goal reached at some step):")
    print(f"    served planner through the bridge  {r['far_successes']}/{n} ({r['far_reached']}/{n}), "
          f"{s['far_through_bridge']:.0f} s")
    print(f"    the recording controller itself    {r['controller_far_successes']}/{n} ({r['controller_far_reached']}/{n})")
    result = {"params": params, **r}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
