"""``l3p ros2``'s options, in a module light enough (the standard library) for ``l3p ros2 --help`` to
list them in an install without ROS 2; the command itself is in clients/ros2/commands.py."""

from __future__ import annotations

import argparse


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
    sim.add_argument("--wait-subscribers", type=int, default=0, metavar="N",
                     help="before the first episode, wait (up to --wait) until N subscribers hear the observation "
                          "topic, e.g. a recorder and the controller (as ros2 topic pub --wait-matching-subscriptions)")
    sim.add_argument("--log-received", action="store_true", help="keep every command received, with its time")
    sim.add_argument("--goal-action", nargs="?", const="reach_goal", default="", metavar="NAME",
                     help="send each goal as a ReachGoal action (a bridge with goal_action.enabled; NAME: "
                          "goal_action.name, default reach_goal) and end the episode with its result; steps at "
                          "--rate (default 50)")
    sim.add_argument("--start-at", type=float, default=None, metavar="UNIX_TIME",
                     help="begin the first episode at this time (to start several robots together)")
    sim.add_argument("--out", metavar="JSON", help="write the episodes (success, actions, latencies)")
    record = sub.add_parser("record", help="record a robot that something else drives (no planner) to the dataset format")
    record.add_argument("--mapping", required=True, metavar="YAML",
                        help="the topics: observation, action (command), goals (docs/guides/recordings.md)")
    record.add_argument("--format", choices=("npz", "mcap"), default="npz",
                        help="npz: the dataset's steps; mcap: rosbag2 bags of the messages as received (l3p dataset "
                        "import rosbag2 reads them with the same mapping)")
    record.add_argument("--out", required=True, metavar="PATH", help="the first file, FILE.npz (then FILE_0001.npz, "
                        "...), or with --format mcap the first bag, a folder BAG (then BAG_0001, ...)")
    record.add_argument("--rotate-steps", type=int, default=20_000, metavar="N",
                        help="start a new file after N steps (a bag: at the next episode start)")
    record.add_argument("--max-episode-steps", type=int, default=10_000, metavar="N",
                        help="cut an episode (one goal held for long) at N steps")
    record.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds (default: "
                        "until SIGINT/SIGTERM)")
    record.add_argument("--qos", choices=("reliable", "best_effort"), default="reliable")
    record.add_argument("--stats", metavar="JSON", help="write the counts (steps, dropped, bad messages, RSS) on exit")
    record.add_argument("--ros-args", nargs=argparse.REMAINDER, default=[], metavar="ROS_ARGS",
                        help="the rest goes to ROS 2, e.g. --ros-args -r __ns:=/arm")
    status = sub.add_parser("status", help="print a bridge's status (its status topic), without the ros2 CLI")
    status.add_argument("namespace", metavar="NS", help="the robot's namespace, e.g. /arm ('/' for none)")
    status.add_argument("--topic", default="status", help="the status topic under NS (topics.status)")
    status.add_argument("--wait", type=float, default=10.0, metavar="S", help="longest wait for a status")
    status.add_argument("--follow", action="store_true", help="print every status until Ctrl-C")
    end = sub.add_parser("end", help="end the bridge's running episode (the robot is held until the next goal)")
    end.add_argument("namespace", metavar="NS", help="the robot's namespace, e.g. /arm ('/' for none)")
    end.add_argument("--topic", default="end_episode", help="the bridge's end topic under NS (topics.end_episode)")
    end.add_argument("--status", default="status", help="its status topic under NS (topics.status)")
    end.add_argument("--wait", type=float, default=10.0, metavar="S", help="longest wait for the bridge")
