"""The ROS 2 bridge measured: equality with the gRPC runner, and latency for many robots at once.

    python benchmarks/ros2_bridge.py --equality [--fetch-episodes 100 --maze-episodes 50]
    python benchmarks/ros2_bridge.py --latency [--robots 8 --rate 50 --episodes 3]

Every DDS process runs inside a network namespace this script makes (it re-runs itself under
``unshare -n``; root needed), never on the machine's interfaces.

--equality: the shipped FetchPush-v4 model on held-out seeds 2000000000.. and PointMaze_Large-v3 on
far pairs (>= 10 cells, 800 steps, as its held-out evaluation): the simulated robot in lockstep ->
bridge -> server against the gRPC runner (``l3p eval``'s own ``run_episodes``) on the same seeds, in
the same run: successes and the largest action difference.

--latency: N simulated robots (FetchPush, or ``--env``) at RATE Hz (each its own process), served
(a) by one bridge process for all N (namespaces /r0 ... /rN-1; also for 1 robot alone) and (b) by
one bridge process per robot. Per setup: the robot's observation-published -> action-received time,
the bridge's own gRPC stream step in the same run (the reference), their p50 ratio, the bridge's
time from the observation's callback to the action published (in bridge), and the control periods
in which no action answered the observation (missed). The ROS 2 floor: the round trip to a node
that answers in its callback, with no planner (two rclpy hops, nothing else).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from l3p.clients.ros2.config import yaml_value
from l3p.core.overrides import parse_pair

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import ros2_harness as h  # noqa: E402


def equality(args: argparse.Namespace) -> dict:
    runs = {
        "FetchPush-v4": dict(model="FetchPush-v4", env_id="FetchPush-v4", episodes=args.fetch_episodes,
                             seed=2_000_000_000, achieved=[3, 4, 5]),
        "PointMaze_Large-v3": dict(model="PointMaze_Large-v3", env_id="PointMaze_Large-v3",
                                   episodes=args.maze_episodes, seed=2_000_000_000, pairs="far", max_steps=800,
                                   achieved=[0, 1], goal_indices=[0, 1]),
    }
    out = {}
    for name, params in runs.items():
        if not params["episodes"]:
            continue
        t0 = time.perf_counter()
        r = h.scenario_lockstep({**params, "timeout_s": 3000})
        grpc = np.asarray(r.pop("grpc_latency_s")) * 1e3
        stats = next(iter(r["stats"].values()))
        out[name] = {**r["compare"], "episodes": params["episodes"], "steps": int(sum(r["steps"])),
                     "rosbags_bytes_equal": r["rosbags"]["bytes_equal"],
                     "ros2_obs_to_action_ms": r["sim"]["rtt_ms"],
                     "bridge_grpc_step_ms": {k: stats["grpc_step_ms"][k] for k in ("p50", "p99")},
                     "runner_grpc_step_ms": {"p50": float(np.percentile(grpc, 50)),
                                             "p99": float(np.percentile(grpc, 99))},
                     "wall_s": time.perf_counter() - t0}
    return out


# How the bridge reads a goal that is not a 3-d point (the sim publishes PointStamped, z = 0).
GOAL_SETTINGS = {"PointMaze_Large-v3": {"goal": {"type": "point", "indices": [0, 1]}}}


def _sim(ns: str, args: argparse.Namespace, work: Path, start_at: float) -> h.Process:
    return h.Process(h.l3p("ros2", "sim", "--env", args.env, "--namespace", ns, "--episodes",
                           str(args.episodes), "--seed", "2000000000", "--rate", str(args.rate),
                           "--start-at", str(start_at),
                           "--out", str(work / f"sim{ns.replace('/', '_')}.json")), f"sim {ns}")


def latency_setup(args: argparse.Namespace, server: object, per_process: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="l3p-ros2-bench-"))
    names = [f"/r{i}" for i in range(args.robots)]
    groups = [[n] for n in names] if per_process else [names]
    extra = {**GOAL_SETTINGS.get(args.env, {}),
             **dict(parse_pair(item, yaml_value, flag="--bridge-set") for item in args.bridge_set)}
    bridges = [h.bridge_process(h.bridge_config(server.target, robots=g, observation_timeout_s=2.0, **extra), work,
                                name=f"bridge{i}") for i, g in enumerate(groups)]
    # The robots start together, once every sim has imported its simulator (seconds of CPU each),
    # their control periods spread over the period as independent robots' clocks would be.
    start_at = time.time() + 4.0 + 2.5 * len(names)
    sims = [_sim(ns, args, work, start_at + i / args.rate / len(names)) for i, ns in enumerate(names)]
    time.sleep(max(0.0, start_at - time.time()))
    try:
        server_cpu0 = _cpu_s(server.proc.pid)
        cpu0 = [_cpu_s(b.proc.pid) for b, _ in bridges]
        sims_cpu0 = sum(_cpu_s(sim.proc.pid) for sim in sims)
        children0 = _children_cpu_s()
        t0 = time.perf_counter()
        for s in sims:
            s.proc.wait(timeout=900)
            if s.proc.returncode != 0:
                raise RuntimeError(f"{s.name} failed:\n{s.output()}")
        wall = time.perf_counter() - t0
        cpu = sum(_cpu_s(b.proc.pid) - c for (b, _), c in zip(bridges, cpu0))
        sims_cpu = _children_cpu_s() - children0 - sims_cpu0  # the sims, reaped above; the bridges still run
        server_cpu = _cpu_s(server.proc.pid) - server_cpu0
    finally:
        for sim in sims:
            sim.stop()
        for b, _ in bridges:
            b.stop()
    results = [json.loads((work / f"sim{ns.replace('/', '_')}.json").read_text()) for ns in names]
    rtt = np.array([t for r in results for e in r["episodes"] for t in e["rtt_s"]]) * 1e3
    stats = [s for _, path in bridges for s in json.loads(path.read_text()).values()]
    grpc = np.array([t for s in stats for t in s["grpc_step_s"]]) * 1e3
    steps = sum(e["steps"] for r in results for e in r["episodes"])
    return {
        "setup": "one process per robot" if per_process else "one process, all robots",
        "bridge_processes": len(bridges), "robots": len(names), "steps": int(steps),
        "obs_to_action_ms": {"p50": float(np.percentile(rtt, 50)), "p99": float(np.percentile(rtt, 99))},
        "grpc_step_ms": {"p50": float(np.percentile(grpc, 50)), "p99": float(np.percentile(grpc, 99))},
        "in_bridge_p50_ms": [s["in_bridge_ms"]["p50"] for s in stats],
        "added_p50_ms": float(np.percentile(rtt, 50) - np.percentile(grpc, 50)),
        "ratio_p50": float(np.percentile(rtt, 50) / np.percentile(grpc, 50)),
        "missed_periods": int(sum(r["missed"] for r in results)),
        "successes": int(sum(r["successes"] for r in results)),
        "bridge_cpu_s_per_step_ms": 1e3 * cpu / max(steps, 1),
        "cores_used": {"bridges": cpu / wall, "server": server_cpu / wall, "sims": sims_cpu / wall},
        "wall_s": wall,
    }


def _children_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def echo_node() -> None:
    """The ROS 2 floor: a node answering each observation (25 floats) with an action (4 floats) in
    its subscription callback, no planner behind it."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node("l3p_echo")
    pub = node.create_publisher(Float64MultiArray, "/echo/commands", 10)
    node.create_subscription(Float64MultiArray, "/echo/observation",
                             lambda m: pub.publish(Float64MultiArray(data=[0.0] * 4)), 10)
    print("READY", flush=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except KeyboardInterrupt:
        pass


def ros2_floor(steps: int) -> dict:
    """Round trips to `echo_node` from a participant built like the sim robot (its executor in a
    thread, answers handed over through a queue)."""
    import queue

    from std_msgs.msg import Float64MultiArray

    echo = h.Process([sys.executable, str(Path(__file__).resolve()), "--echo-node"], "echo")
    echo.wait_ready()
    probe = h.Probe()
    answers: queue.SimpleQueue = queue.SimpleQueue()
    probe.node.create_subscription(Float64MultiArray, "/echo/commands", lambda m: answers.put(time.perf_counter()), 10)
    pub = probe.publisher("/echo/observation", Float64MultiArray)
    probe.wait_for(lambda: pub.get_subscription_count() > 0, 20, "the echo node")
    time.sleep(0.5)
    rtt = []
    try:
        for _ in range(steps):
            t0 = time.perf_counter()
            pub.publish(Float64MultiArray(data=[0.1] * 25))
            rtt.append(answers.get(timeout=10) - t0)
            time.sleep(0.002)  # about a sim step
    finally:
        probe.close()
        echo.stop(signal.SIGINT)
    ms = np.asarray(rtt) * 1e3
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "n": len(rtt)}


def latency(args: argparse.Namespace) -> dict:
    floor = ros2_floor(1000)
    server = h.start_server(h.MODELS / args.env)
    try:
        setups = []
        for robots in sorted({1, args.robots}):
            sub = argparse.Namespace(**{**vars(args), "robots": robots})
            setups.append(latency_setup(sub, server, per_process=False))
        setups.append(latency_setup(args, server, per_process=True))
        return {"env": args.env, "rate_hz": args.rate, "episodes_per_robot": args.episodes, "ros2_echo_rtt_ms": floor,
                "setups": setups}
    finally:
        server.stop()


def table(result: dict) -> str:
    lines = []
    for name, r in result.get("equality", {}).items():
        lines.append(f"{name}: {r['episodes']} episodes, {r['steps']} steps: successes ROS 2 {r['ros2_successes']} / "
                     f"gRPC {r['grpc_successes']}, same successes {r['same_successes']}, same lengths "
                     f"{r['same_lengths']}, max |action diff| {r['max_action_diff']:.3g}; rosbags bytes equal "
                     f"{r['rosbags_bytes_equal']}; obs->action p50 {r['ros2_obs_to_action_ms']['p50']:.2f} ms, "
                     f"bridge gRPC step p50 {r['bridge_grpc_step_ms']['p50']:.2f} ms")
    lat = result.get("latency")
    if lat:
        lines.append(f"latency at {lat['rate_hz']:g} Hz ({lat['episodes_per_robot']} {lat['env']} episodes per robot); "
                     f"ROS 2 floor (echo node round trip) p50 {lat['ros2_echo_rtt_ms']['p50']:.2f} ms, "
                     f"p99 {lat['ros2_echo_rtt_ms']['p99']:.2f} ms")
        head = ("setup", "robots", "obs->action p50/p99 ms", "gRPC step p50/p99 ms", "in bridge p50 ms", "ratio p50",
                "missed", "bridge CPU ms/step", "cores: bridge/server/sims")
        rows = [head] + [(s["setup"], str(s["robots"]),
                          f"{s['obs_to_action_ms']['p50']:.2f} / {s['obs_to_action_ms']['p99']:.2f}",
                          f"{s['grpc_step_ms']['p50']:.2f} / {s['grpc_step_ms']['p99']:.2f}",
                          f"{np.median(s['in_bridge_p50_ms']):.2f}", f"{s['ratio_p50']:.2f}",
                          f"{s['missed_periods']}/{s['steps']}",
                          f"{s['bridge_cpu_s_per_step_ms']:.3f}",
                          "/".join(f"{s['cores_used'][k]:.2f}" for k in ("bridges", "server", "sims")))
                         for s in lat["setups"]]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--equality", action="store_true")
    parser.add_argument("--fetch-episodes", type=int, default=100)
    parser.add_argument("--maze-episodes", type=int, default=50)
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--robots", type=int, default=8)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--episodes", type=int, default=3, help="--latency: episodes per robot")
    parser.add_argument("--env", default="FetchPush-v4",
                        help="--latency: the simulated robots' env and the shipped model serving them")
    parser.add_argument("--bridge-set", action="append", default=[], metavar="KEY=VALUE",
                        help="--latency: a bridge setting, e.g. stream=false")
    parser.add_argument("--out", metavar="JSON")
    parser.add_argument("--echo-node", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_node:
        echo_node()
        return 0
    if os.environ.get("L3P_IN_NETNS") != "1":
        reason = h.netns_unavailable()
        if reason:
            print(f"ros2_bridge: cannot run: {reason}", file=sys.stderr)
            return 2
        proc = subprocess.run(["unshare", "-n", "bash", "-c", f"{h.NETNS_SETUP} && exec \"$@\"", "bash",
                               sys.executable, *sys.argv], env=h.child_env())
        return proc.returncode
    result = {}
    if args.equality:
        result["equality"] = equality(args)
    if args.latency:
        result["latency"] = latency(args)
    print(table(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
