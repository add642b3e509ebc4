"""openpi listener benchmark: openpi-client's step against the gRPC stream's, one server, one run.

    python benchmarks/openpi_latency.py [--bundle DIR] [--out openpi_latency.json]

One planner server (`l3p serve --openpi-port 0`, own process) answers both front doors, on the
same episodes (benchmarks/workloads.py: observations that do not depend on the actions):
- one robot: the real openpi-client (`WebsocketClientPolicy.infer`) against the gRPC Control
  stream's step (the synchronous client, as serve_latency.py times it), episode by episode in
  turn so both see the same machine load; re-planning and subgoal-keeping steps apart;
- 32 robots at once, closed loop for --seconds: openpi-client robots (a thread each, all in
  this process, and spread over --client-processes processes as separate robot programs would
  be), the same frames from asyncio websocket clients, and gRPC Control streams from asyncio
  clients (the reference): actions/s, per-step p50/p99, the fewest actions a robot got, and the
  server's CPU per action (less sensitive to other load than actions/s).
It ends with the openpi targets checked against the run. Machines are shared and noisy: compare
rows within a run, not absolute numbers across runs.
"""

from __future__ import annotations

import asyncio
import collections
import multiprocessing
import sys
import threading
import time

import grpc
import websockets
from openpi_client import msgpack_numpy
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from websockets.asyncio.client import connect

from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from workloads import (benchmark_parser, closed_loop, machine, make_episodes, planner_server, print_latency, print_load,
                       print_targets, process_cpu_s, step_kind, summarize, time_stream, window_row, write_report)

OBS_KEY = "observation/state"


def time_openpi(policy: WebsocketClientPolicy, episodes) -> dict[str, list[float]]:
    """openpi-client's round trip per step; each episode a new goal (a new planner episode)."""
    times = collections.defaultdict(list)
    for goal, observations in episodes:
        for obs in observations:
            started = time.perf_counter()
            reply = policy.infer({OBS_KEY: obs, "goal": goal})
            times[step_kind(reply["replanned"])].append(time.perf_counter() - started)
    return times


def alternating(stub, policy, episodes) -> tuple[dict, dict]:
    """Both transports, one episode each in turn."""
    stream, openpi = collections.defaultdict(list), collections.defaultdict(list)
    for episode in episodes:
        for times, new in ((stream, time_stream(stub, [episode])), (openpi, time_openpi(policy, [episode]))):
            for kind, values in new.items():
                times[kind] += values
    return stream, openpi


class _ClientRobots:
    """Robots `indices`, each an openpi-client in a thread of this process, in an episode once
    made; `run` drives them closed loop from time.time() = start_at for `seconds`."""

    def __init__(self, port: int, episodes, indices: list[int]):
        self.episodes, self.indices = episodes, indices
        self.policies = {}
        for index in indices:
            goal, observations = episodes[index % len(episodes)]
            self.policies[index] = WebsocketClientPolicy("127.0.0.1", port)
            self.policies[index].infer({OBS_KEY: observations[0], "goal": goal})

    def run(self, start_at: float, seconds: float) -> tuple[list[int], list[float]]:
        steps, latencies = dict.fromkeys(self.indices, 0), {index: [] for index in self.indices}

        def robot(index: int) -> None:
            observations = self.episodes[index % len(self.episodes)][1]
            time.sleep(max(0.0, start_at - time.time()))
            while True:
                started = time.perf_counter()
                reply = self.policies[index].infer({OBS_KEY: observations[steps[index] % len(observations)]})
                finished = time.perf_counter()
                if time.time() > start_at + seconds:
                    return
                assert reply["actions"].shape[0] == 1
                latencies[index].append(finished - started)
                steps[index] += 1

        threads = [threading.Thread(target=robot, args=(index,), daemon=True) for index in self.indices]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for policy in self.policies.values():
            policy._ws.close()  # openpi-client has no close(): its connection's
        return list(steps.values()), [t for index in self.indices for t in latencies[index]]


def _client_process(port: int, episodes, indices: list[int], seconds: float, pipe) -> None:
    robots = _ClientRobots(port, episodes, indices)
    pipe.send("ready")
    pipe.send(robots.run(pipe.recv(), seconds))


def openpi_client_robots(robots: int, processes: int, port: int, episodes, seconds: float, server_pid: int) -> dict:
    """`robots` openpi-client robots, a thread each, spread over `processes` client processes
    (the first: this one), closed loop for `seconds` once every robot is in an episode."""
    groups = [list(range(robots))[i::processes] for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    children = []
    for group in groups[1:]:
        pipe, theirs = context.Pipe()
        child = context.Process(target=_client_process, args=(port, episodes, group, seconds, theirs))
        child.start()
        children.append((child, pipe))
    mine = _ClientRobots(port, episodes, groups[0])
    for _, pipe in children:
        assert pipe.recv() == "ready"
    start_at = time.time() + 0.2
    for _, pipe in children:
        pipe.send(start_at)
    cpu: list[float] = []
    timer = threading.Timer(start_at - time.time(), lambda: cpu.append(process_cpu_s(server_pid)))
    timer.start()
    steps, latencies = mine.run(start_at, seconds)
    cpu.append(process_cpu_s(server_pid))
    for child, pipe in children:
        more_steps, more_latencies = pipe.recv()
        steps += more_steps
        latencies += more_latencies
        child.join()
    return window_row(robots, steps, latencies, seconds, (cpu[0], cpu[-1]))


async def _asyncio_robots(robots: int, port: int, episodes, seconds: float, server_pid: int) -> dict:
    """The same frames from asyncio websocket clients in this process (no thread per robot)."""
    packer = msgpack_numpy.Packer()
    connections = []
    for index in range(robots):
        ws = await connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None)
        await ws.recv()
        goal, observations = episodes[index % len(episodes)]
        await ws.send(packer.pack({OBS_KEY: observations[0], "goal": goal}))
        await ws.recv()
        connections.append(ws)
    frames = [[packer.pack({OBS_KEY: obs}) for obs in episodes[i % len(episodes)][1]] for i in range(robots)]
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def robot(index: int) -> int:
        steps = 0
        while True:
            started = time.perf_counter()
            await connections[index].send(frames[index][steps % len(frames[index])])
            reply = await connections[index].recv()
            finished = time.perf_counter()
            if finished > end:
                return steps
            assert isinstance(reply, bytes)
            latencies.append(finished - started)
            steps += 1

    cpu = [process_cpu_s(server_pid)]
    steps = await asyncio.gather(*(robot(i) for i in range(robots)))
    cpu.append(process_cpu_s(server_pid))
    for ws in connections:
        await ws.close()
    return window_row(robots, steps, latencies, seconds, tuple(cpu))


def print_table(report: dict) -> None:
    print(f"\none robot, per-step round trip (µs), {report['bundle']['env_id']}, "
          f"{report['bundle']['n_landmarks']} landmarks")
    print_latency(report["latency"], 52)
    print("\nrobots at once, closed loop")
    print(f"{'':40s}{'robots':>7s}{'actions/s':>11s}{'step p50 µs':>13s}{'step p99 µs':>13s}"
          f"{'min actions':>13s}{'server CPU µs/action':>22s}")
    for row in report["concurrency"]:
        print(f"{row['transport']:40s}{row['sessions']:>7d}{row['actions_per_s']:>11.0f}"
              f"{row['latency']['p50_us']:>13.0f}{row['latency']['p99_us']:>13.0f}"
              f"{row['min_actions_per_session']:>13d}{row['server_cpu_us_per_action']:>22.0f}")
    print()
    print_load(report["machine"])
    print_targets(report["targets"], "openpi targets, this run:")


def targets(report: dict) -> list[dict]:
    latency = report["latency"]
    rows = []
    for kind in ("keep", "all"):
        openpi = latency[f"openpi-client step ({kind})"]["p50_us"]
        stream = latency[f"gRPC Control stream step ({kind})"]["p50_us"]
        rows.append({"target": f"openpi-client step p50 <= 1.3x the gRPC stream step p50 ({kind} steps)",
                     "measured": f"{openpi:.0f} µs = {openpi / stream:.2f}x", "met": openpi <= 1.3 * stream})
    for row in report["concurrency"]:
        if row["transport"].startswith("openpi") and row["sessions"] == 32:
            rows.append({"target": f">= 3000 actions/s at 32 robots ({row['transport']})",
                         "measured": f"{row['actions_per_s']:.0f} actions/s", "met": row["actions_per_s"] >= 3000})
    return rows


def parse_args(argv):
    parser = benchmark_parser("openpi_latency", __doc__, "openpi_latency.json")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per transport, one robot (default 40)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode (default 50)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per closed loop (default 5)")
    parser.add_argument("--robots", default="1,32", help="robots at once, comma-separated (default 1,32)")
    parser.add_argument("--client-processes", type=int, default=4,
                        help="openpi-client robots also spread over this many processes (default 4), as "
                             "robot programs run; their threads in one process share its GIL")
    return parser.parse_args(argv)


def run(args) -> dict:
    bundle = load_bundle(args.bundle)
    episodes = make_episodes(bundle, args.episodes, args.steps)
    with planner_server(args.bundle, "--openpi-port", "0") as server, \
            grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        policy = WebsocketClientPolicy("127.0.0.1", server.openpi_port)
        print(f"server on {server.target}, openpi on port {server.openpi_port}; measuring...", flush=True)
        alternating(stub, policy, episodes[:2])  # warm-up
        stream, openpi = alternating(stub, policy, episodes)
        policy._ws.close()
        latency = {}
        for name, times in (("gRPC Control stream step", stream), ("openpi-client step", openpi)):
            for kind in ("keep", "replan"):
                latency[f"{name} ({kind})"] = summarize(times[kind])
            latency[f"{name} (all)"] = summarize(times["keep"] + times["replan"])
        concurrency = []
        for robots in [int(n) for n in args.robots.split(",") if n.strip()]:
            print(f"{robots} robots at once...", flush=True)
            concurrency.append({"transport": "gRPC Control streams (asyncio clients)",
                                **closed_loop(robots, server.target, episodes, args.seconds, True, server.proc.pid)})
            for processes in sorted({1, min(robots, args.client_processes)}):
                concurrency.append({"transport": f"openpi-client (threads in {processes} process"
                                                 f"{'es' if processes > 1 else ''})",
                                    **openpi_client_robots(robots, processes, server.openpi_port, episodes,
                                                           args.seconds, server.proc.pid)})
            concurrency.append({"transport": "openpi frames (asyncio clients)",
                                **asyncio.run(_asyncio_robots(robots, server.openpi_port, episodes, args.seconds,
                                                              server.proc.pid))})
    report = {
        "benchmark": "openpi_latency",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(websockets=websockets.__version__),
        "bundle": {"path": str(args.bundle), "env_id": bundle.env_id, "n_landmarks": bundle.n_landmarks,
                   "sha256": bundle.sha256},
        "settings": {"episodes": args.episodes, "steps": args.steps, "seconds": args.seconds},
        "latency": latency,
        "concurrency": concurrency,
    }
    report["targets"] = targets(report)
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return write_report(run(args), args.out, print_table)


if __name__ == "__main__":
    sys.exit(main())
