"""What hostile openpi peers cost the other robots: a gRPC robot's step while websocket peers send
their worst frames, against the same robot with none, one server, one run.

    python benchmarks/hostile_peers.py [--bundle DIR] [--peers 4] [--rounds 3] [--against CHECKOUT]

One planner server (`l3p serve --openpi-port 0`, own process). The bystander is a gRPC Control
stream (the synchronous client, as serve_latency.py times it) stepping through the same episodes
(benchmarks/workloads.py) in rounds, in turn alone, while --peers ordinary openpi robots (one
other process, asyncio) step closed loop as fast as they are answered, and while as many hostile
peers send, the same way, each worst frame in turn:
- a valid observation whose ignored key holds 500,000 empty msgpack arrays (500 KB), answered;
- an observation vector of 100,000 empty arrays (refused past its bound; the peer reconnects);
- 1 MiB of ignored bytes (the frame limit), answered.
It prints the bystander's p50/p99 per condition and checks the targets: p99 with the hostile peers
<= 2x p99 alone, and <= 2x p99 beside the ordinary robots (what hostility itself costs; on a
2-core machine the peers' own process takes a share of the CPU either way). With --against, the
same against another checkout's server (an older commit), after this one's. Machines are shared
and noisy: compare rows within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import websockets
from openpi_client import msgpack_numpy
from websockets.asyncio.client import connect

from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from start_bursts import checkout_server
from workloads import (benchmark_parser, machine, make_episodes, planner_server, print_load, print_targets, summarize,
                       time_stream, write_report)

OBS_KEY = "observation/state"
TARGET_RATIO = 2.0


def ordinary_frames(obs: np.ndarray, goal: np.ndarray) -> list[bytes]:
    return [msgpack_numpy.packb({OBS_KEY: obs, "goal": goal})]


def worst_frames(obs: np.ndarray, goal: np.ndarray) -> list[bytes]:
    return [
        msgpack_numpy.packb({OBS_KEY: obs, "goal": goal, "image": [[]] * 500_000}),
        msgpack_numpy.packb({OBS_KEY: [[]] * 100_000, "goal": goal}),
        msgpack_numpy.packb({OBS_KEY: obs, "goal": goal, "image": b"\0" * ((1 << 20) - 200)}),
    ]


async def _peer(port: int, frames: list[bytes], stop, counts: collections.Counter) -> None:
    while not stop.is_set():
        try:
            async with connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None) as ws:
                await ws.recv()  # the metadata frame
                while not stop.is_set():
                    for frame in frames:
                        await ws.send(frame)
                        answer = await ws.recv()
                        counts["refused" if isinstance(answer, str) else "answered"] += 1
        except (websockets.ConnectionClosed, OSError):
            counts["reconnects"] += 1


def _peers_process(port: int, peers: int, frames: list[bytes], stop, pipe) -> None:
    counts: collections.Counter = collections.Counter()

    async def run() -> None:
        await asyncio.gather(*(_peer(port, frames, stop, counts) for _ in range(peers)))

    asyncio.run(run())
    pipe.send(dict(counts))


def bystander_round(stub, episodes, port: int, peers: int, frames: list[bytes]) -> tuple[list[float], dict]:
    """The bystander's step times over `episodes` and, with `peers` hostile connections
    meanwhile, what they sent (frames answered, refused, reconnections)."""
    counts: dict = {}
    if peers:
        stop, (ours, theirs) = multiprocessing.Event(), multiprocessing.Pipe()
        process = multiprocessing.Process(target=_peers_process, args=(port, peers, frames, stop, theirs))
        process.start()
        time.sleep(1.0)  # the peers connected and sending
    times = time_stream(stub, episodes)
    if peers:
        stop.set()
        counts = ours.recv()
        process.join()
    return [t for values in times.values() for t in values], counts


def run(args: argparse.Namespace, code: tuple[str, Path] | None = None) -> dict:
    """The three conditions against this checkout's server, or `code`'s (checkout_server)."""
    bundle = load_bundle(args.bundle)
    episodes = make_episodes(bundle, args.episodes, args.steps)
    goal, observations = episodes[0]
    obs, goal = np.asarray(observations[0], np.float32), np.asarray(goal, np.float32)
    conditions = {"alone": (0, []), "ordinary": (args.peers, ordinary_frames(obs, goal)),
                  "hostile": (args.peers, worst_frames(obs, goal))}
    with planner_server(args.bundle, "--openpi-port", "0", code=code) as server:
        channel = grpc.insecure_channel(server.target)
        stub = pb_grpc.PlannerStub(channel)
        time_stream(stub, episodes[:1])  # warm up
        steps = {condition: [] for condition in conditions}
        sent = {condition: collections.Counter() for condition in conditions}
        for _ in range(args.rounds):  # in turn, so every condition sees the same machine load
            for condition, (peers, frames) in conditions.items():
                times, counts = bystander_round(stub, episodes, server.openpi_port, peers, frames)
                steps[condition] += times
                sent[condition].update(counts)
        channel.close()
    rows = {condition: summarize(times) for condition, times in steps.items()}
    targets = []
    for reference in ("alone", "ordinary"):
        ratio = rows["hostile"]["p99_us"] / rows[reference]["p99_us"]
        targets.append({"target": f"p99 with {args.peers} hostile peers <= {TARGET_RATIO:g}x p99 {reference}",
                        "measured": f"ratio {ratio:.2f}", "ratio": round(ratio, 2), "met": ratio <= TARGET_RATIO})
    return {"bystander_step": rows, "targets": targets,
            "peer_frames": {condition: dict(counts) for condition, counts in sent.items() if counts}}


def print_table(report: dict) -> None:
    print(f"gRPC bystander step while openpi peers send ({report['machine']['processor']}, {report['rounds']} rounds "
          "in turn)")
    print(f"{'server':<24} {'condition':<20} {'n':>6} {'p50 ms':>9} {'p99 ms':>9}")
    peers = report["peers"]
    labels = {"alone": "alone", "ordinary": f"{peers} ordinary robots", "hostile": f"{peers} hostile peers"}
    for name, result in report["servers"].items():
        for condition, row in result["bystander_step"].items():
            print(f"{name[:24]:<24} {labels[condition]:<20} {row['n']:>6} {row['p50_us'] / 1e3:>9.2f} "
                  f"{row['p99_us'] / 1e3:>9.2f}")
    print_load(report["machine"])
    for name, result in report["servers"].items():
        for condition, counts in result["peer_frames"].items():
            print(f"{name}: the {labels[condition]}' frames: "
                  + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))
        print_targets(result["targets"], f"{name}: targets, this run:")


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("hostile_peers", __doc__, "hostile_peers.json")
    parser.add_argument("--peers", type=int, default=4, help="hostile websocket connections (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per condition, alternating (default 3)")
    parser.add_argument("--episodes", type=int, default=10, help="bystander episodes per round (default 10)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode (default 50)")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT", help="also another checkout's server")
    args = parser.parse_args(argv)
    servers = {"this checkout": run(args)}
    if args.against is not None:
        with tempfile.TemporaryDirectory() as scratch:
            servers[str(args.against)] = run(args, checkout_server(args.against.resolve(), Path(scratch)))
    report = {"machine": machine(), "bundle": str(args.bundle), "peers": args.peers, "rounds": args.rounds,
              "servers": servers}
    return write_report(report, args.out, print_table)


if __name__ == "__main__":
    sys.exit(main())
