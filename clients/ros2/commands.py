"""``l3p ros2``: the bridge (``l3p ros2 bridge --config robot.yaml``) and the simulated robot
(``l3p ros2 sim --env FetchPush-v4``). See docs/guides/ros2.md."""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
from pathlib import Path

from l3p.core.errors import L3PError
from l3p.core.names import DISTRIBUTION

# A missing ROS 2 fails at import, so `l3p` names the extra to install.
if importlib.util.find_spec("rclpy") is None:
    raise ImportError(f"l3p ros2 needs rclpy: pip install '{DISTRIBUTION}[ros2]', or source a ROS 2 install "
                      "(/opt/ros/<distro>/setup.bash)", name="rclpy")


def add_ros2_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mode", required=True, metavar="MODE")
    bridge = sub.add_parser("bridge", help="the bridge: a ROS 2 node driving robots through a planner server")
    bridge.add_argument("--config", metavar="YAML", help="settings (plain YAML or a ROS 2 parameters file)")
    bridge.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting, e.g. --set rate_hz=50 --set topics.goal=/target (repeatable)")
    bridge.add_argument("--stats", metavar="JSON", help="write per-robot counts and gRPC step latencies on exit")
    bridge.add_argument("--print-config", action="store_true", help="print the resolved settings and exit")
    bridge.add_argument("--ros-args", nargs=argparse.REMAINDER, default=[], metavar="ROS_ARGS",
                        help="the rest goes to ROS 2, e.g. --ros-args -r __ns:=/arm -r __node:=arm_planner")
    sim = sub.add_parser("sim", help="a simulated robot: a goal env as a ROS 2 node")
    sim.add_argument("--env", required=True, metavar="ENV", help="a goal env id, as l3p run takes it")
    sim.add_argument("--namespace", default="", help="the robot's namespace, e.g. /arm1")
    sim.add_argument("--episodes", type=int, default=1)
    sim.add_argument("--seed", type=int, default=0, help="episode i resets the env with SEED + i")
    sim.add_argument("--pairs", choices=("random", "far"), default="random")
    sim.add_argument("--min-cells", type=int, default=None)
    sim.add_argument("--max-steps", type=int, default=None)
    sim.add_argument("--rate", type=float, default=None, metavar="HZ",
                     help="step at this rate with the newest command (default: lockstep)")
    sim.add_argument("--goal-type", choices=("point", "array"), default="point")
    sim.add_argument("--wait", type=float, default=30.0, metavar="S", help="longest wait for the bridge")
    sim.add_argument("--log-received", action="store_true", help="keep every command received, with its time")
    sim.add_argument("--start-at", type=float, default=None, metavar="UNIX_TIME",
                     help="begin the first episode at this time (to start several robots together)")
    sim.add_argument("--out", metavar="JSON", help="write the episodes (success, actions, latencies)")


def run_ros2(args: argparse.Namespace) -> int:
    if args.mode == "bridge":
        from l3p.clients.ros2 import config as cfg

        config = cfg.load(args.config, args.set)
        if args.print_config:
            print(json.dumps(cfg.as_dict(config), indent=2))
            return 0
        from l3p.clients.ros2.bridge import run_bridge

        return run_bridge(config, stats_path=args.stats, ros_args=args.ros_args)
    try:
        from l3p.clients.ros2.sim_robot import SimConfig, SimRobot, summary
    except ImportError as exc:
        raise L3PError(f"l3p ros2 sim needs the simulator (missing {exc.name!r}): "
                       f"pip install '{DISTRIBUTION}[ros2,sim]'") from None
    config = SimConfig(env_id=args.env, namespace=args.namespace, episodes=args.episodes, seed=args.seed,
                       pairs=args.pairs, max_steps=args.max_steps, lockstep=args.rate is None, rate_hz=args.rate or 50.0, goal_type=args.goal_type,
                       wait_s=args.wait, log_received=args.log_received, start_at=args.start_at,
                       **({"min_cells": args.min_cells} if args.min_cells else {}))
    robot = SimRobot(config)

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        episodes = robot.run()
    finally:
        robot.close()
    result = summary(episodes, config)
    for e in episodes:
        print(f"episode {e.index:3d}  seed {e.env_seed}  {'success' if e.success else 'failure'}  "
              f"final distance {e.final_distance:.3f}  steps {e.steps}"
              f"{f'  missed {e.missed}' if e.missed else ''}", flush=True)
    rtt = result["rtt_ms"]
    print(f"{config.env_id}{' ' + config.namespace if config.namespace else ''}: success "
          f"{result['successes']}/{len(episodes)}  observation->action p50 {rtt['p50'] or float('nan'):.2f} ms  "
          f"p99 {rtt['p99'] or float('nan'):.2f} ms  missed periods {result['missed']}")
    if args.out:
        Path(args.out).write_text(json.dumps(result) + "\n")
    return 0
