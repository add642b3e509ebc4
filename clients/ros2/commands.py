"""``l3p ros2``: the bridge (``l3p ros2 bridge --config robot.yaml``) and the simulated robot
(``l3p ros2 sim --env FetchPush-v4``), the recorder of a robot driven by something else
(``l3p ros2 record --mapping robot.yaml --out rec.npz``), and a bridge's status and end of episode
(``l3p ros2 status /arm``, ``l3p ros2 end /arm``). See docs/guides/ros2.md."""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
from pathlib import Path

from l3p.core.errors import L3PError
from l3p.core.names import install_hint

# A missing ROS 2 fails at import, so `l3p` names the extra to install.
if importlib.util.find_spec("rclpy") is None:
    raise ImportError(f"l3p ros2 needs rclpy: {install_hint('ros2')}, or source a ROS 2 install "
                      "(/opt/ros/<distro>/setup.bash)", name="rclpy")


def run_ros2(args: argparse.Namespace) -> int:
    if args.mode == "bridge":
        from l3p.clients.ros2 import config as cfg

        config = cfg.load(args.config, args.set)
        if args.print_config:
            print(json.dumps(cfg.as_dict(config), indent=2))
            return 0
        from l3p.clients.ros2.bridge import run_bridge

        return run_bridge(config, stats_path=args.stats, ros_args=args.ros_args)
    if args.mode == "status":
        from l3p.clients.ros2.status_command import run_status

        return run_status(args.namespace, args.topic, args.wait, args.follow)
    if args.mode == "end":
        from l3p.clients.ros2.status_command import run_end

        return run_end(args.namespace, args.topic, args.status, args.wait)
    if args.mode == "record":
        from l3p.clients.ros2.record import run_record

        return run_record(args.mapping, args.out, rotate_steps=args.rotate_steps, max_episode_steps=args.max_episode_steps,
                          duration_s=args.duration, qos=args.qos, stats_path=args.stats, ros_args=args.ros_args,
                          format=args.format)
    try:
        from l3p.clients.ros2.sim_robot import SimConfig, SimRobot, summary
    except ImportError as exc:
        raise L3PError(f"l3p ros2 sim needs the simulator (missing {exc.name!r}): "
                       f"{install_hint('ros2,sim')}") from None
    config = SimConfig(env_id=args.env, namespace=args.namespace, episodes=args.episodes, seed=args.seed,
                       pairs=args.pairs, max_steps=args.max_steps, lockstep=args.rate is None and not args.goal_action,
                       rate_hz=args.rate or 50.0, goal_type=args.goal_type, wait_s=args.wait,
                       wait_subscribers=args.wait_subscribers, log_received=args.log_received, start_at=args.start_at,
                       goal_action=args.goal_action, **({"min_cells": args.min_cells} if args.min_cells else {}))
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
              f"{f'  reached at step {e.reached_at}' if e.reached_at is not None else ''}"
              f"{f'  missed {e.missed}' if e.missed else ''}"
              f"{'  action: {outcome} after {steps} steps'.format(**e.result) if e.result else ''}", flush=True)
    rtt = result["rtt_ms"]
    print(f"{config.env_id}{' ' + config.namespace if config.namespace else ''}: success "
          f"{result['successes']}/{len(episodes)} (reached at some step {result['reached']})  "
          f"observation->action p50 {rtt['p50'] or float('nan'):.2f} ms  "
          f"p99 {rtt['p99'] or float('nan'):.2f} ms  missed periods {result['missed']}"
          + (f"  goals reached {result['reached_by_action']}/{len(episodes)}" if config.goal_action else ""))
    if args.out:
        Path(args.out).write_text(json.dumps(result) + "\n")
    return 0
