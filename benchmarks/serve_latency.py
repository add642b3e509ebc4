"""Serving benchmark: per-step round trip and throughput of the planner server, with references.

    python benchmarks/serve_latency.py [--bundle DIR] [--out serve_latency.json]

Measured in one run, on the same inputs:
- the in-process planner (the bundle loader + the planner core, no gRPC): the compute floor, also
  with the thread idle between steps as a server's is between one robot's steps, and a batch
  of 32 episode starts solved at once;
- two bare gRPC echo servers (generic handlers, own processes), threaded (grpc.server) and
  asyncio (grpc.aio), answering with the same message sizes as the planner: the transport
  floors, unary and ping-pong stream;
- the planner server (`l3p serve`, own process, started with no thread variables
  in its environment, like a user's shell): Act (unary) and Control (stream) round trips,
  re-planning and subgoal-keeping steps reported separately; StartEpisode alone and under 32
  concurrent starts, beside the asyncio echo answering the same bursts of start- and end-sized
  calls (a burst's transport floor), with the cores each kind of burst kept busy;
- aggregate actions/s with 1, 8 and 32 concurrent unary sessions and 32, 64, 256 and 1,000
  concurrent Control streams (closed loop; asyncio clients in this process, sharing the machine
  with the server), with the per-step latency the streams saw;
- the same single-robot and 32-session figures for a few max queue delays (--batch-delay-us);
- the cost of TLS + a bearer token: a second server with a certificate (deploy/tls/make-certs.sh)
  and a token file, its keep steps measured alternately with the plaintext server's, episode by
  episode, so both see the same machine load.
It ends with the serving targets checked against the run.
Machines are shared and noisy: compare rows within a run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

from echo import EchoProcess, concurrent_echo_starts, echo_cpu_per_call, time_echo_pair
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from l3p.serving.threads import limit_blas_threads
from workloads import (
    REPO,
    closed_loop,
    concurrent_starts,
    make_episodes,
    message_sizes,
    planner_server,
    summarize,
    time_after_idle,
    time_goal_batch,
    time_in_process,
    time_stream,
    time_tls_overhead,
    time_unary,
)


# ------------------------------------------------------------------------------ reporting



def print_table(report: dict) -> None:
    print(f"\nper-call round trip (µs), {report['bundle']['env_id']}, "
          f"{report['bundle']['n_landmarks']} landmarks, mode {report['bundle']['mode']}")
    print(f"{'':62s}{'n':>7s}{'p50':>10s}{'p99':>10s}")
    for name, row in report["latency"].items():
        p50 = "-" if row["p50_us"] is None else f"{row['p50_us']:.0f}"
        p99 = "-" if row["p99_us"] is None else f"{row['p99_us']:.0f}"
        print(f"{name:62s}{row['n']:>7d}{p50:>10s}{p99:>10s}")
    print("\nconcurrent sessions, closed loop (asyncio clients in the benchmark process)")
    print(f"{'':22s}{'sessions':>9s}{'actions/s':>11s}{'step p50 µs':>13s}{'step p99 µs':>13s}"
          f"{'min actions':>13s}{'server CPU µs/action':>22s}")
    for row in report["concurrency"]:
        print(f"{row['transport']:22s}{row['sessions']:>9d}{row['actions_per_s']:>11.0f}"
              f"{row['latency']['p50_us']:>13.0f}{row['latency']['p99_us']:>13.0f}"
              f"{row['min_actions_per_session']:>13d}{row['server_cpu_us_per_action']:>22.0f}")
    print("echo servers, same clients and message sizes:")
    for kind, rows in report["echo_closed_loop"].items():
        for name, row in rows.items():
            print(f"  {kind} echo, {name}: {row['calls_per_s']:.0f} calls/s, "
                  f"server CPU {row['server_cpu_us_per_call']:.0f} µs/call")
    if report.get("batch_delay"):
        print("\nmax queue delay (--batch-delay-us): one robot's stream keep step, 32 unary sessions")
        print(f"{'delay µs':>9s}{'1 robot p50 µs':>16s}{'1 robot p99 µs':>16s}{'32 sessions actions/s':>23s}")
        for row in report["batch_delay"]:
            print(f"{row['delay_us']:>9d}{row['one_robot_keep']['p50_us']:>16.0f}"
                  f"{row['one_robot_keep']['p99_us']:>16.0f}{row['actions_per_s_32']:>23.0f}")
    if report["tls_overhead"]:
        print("\nTLS + bearer token vs plaintext, keep steps measured alternately (µs)")
        for name, row in report["tls_overhead"].items():
            print(f"{name:62s}{row['n']:>7d}{row['p50_us']:>10.0f}{row['p99_us']:>10.0f}")
        rows = report["tls_overhead"]
        for kind in ("unary", "stream"):
            plain = rows[f"served keep step ({kind}, plaintext)"]
            tls = rows[f"served keep step ({kind}, TLS + token)"]
            print(f"  {kind}: p50 x{tls['p50_us'] / plain['p50_us']:.2f}, "
                  f"p99 x{tls['p99_us'] / plain['p99_us']:.2f}")
    cores = report["start_bursts_cores_busy"]
    print(f"\ncores busy during the 32-start bursts (clients' + server's CPU over the bursts' wall "
          f"time): served {cores['served']:.2f}, asyncio echo {cores['asyncio echo']:.2f}")
    print("\nserving targets, this run:")
    for row in report["targets"]:
        print(f"  {'met    ' if row['met'] else 'NOT met'}  {row['target']}: {row['measured']}")
    echo_p50 = report["latency"]["gRPC echo, stream ping-pong (asyncio server)"]["p50_us"]
    actor = report["latency"]["in-process actor call alone, after the same idle"]["p50_us"]
    print(f"  (a keep step 1.15x the asyncio echo leaves {0.15 * echo_p50:.0f} µs for all the "
          f"server's own work; the actor call alone, after the same idle, takes {actor:.0f} µs)")
    print(f"\nmessage bytes: {report['message_bytes']}")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python benchmarks/serve_latency.py", description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, default=REPO / "models" / "FetchPush-v4",
                        help="bundle to serve (default: the shipped models/FetchPush-v4, 80 landmarks as "
                             "in the paper; per-step cost depends on network and landmark sizes)")
    parser.add_argument("--episodes", type=int, default=80,
                        help="episodes per transport (default 80: ~370 re-plan steps for their p99)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode (default 50)")
    parser.add_argument("--echo-calls", type=int, default=2000,
                        help="echo round trips per kind and echo server (default 2000)")
    parser.add_argument("--throughput-seconds", type=float, default=5.0,
                        help="seconds per concurrency level (default 5)")
    parser.add_argument("--start-rounds", type=int, default=10,
                        help="bursts of 32 concurrent StartEpisode calls (default 10)")
    parser.add_argument("--delays", default="0,250,1000",
                        help="max queue delays (µs) to compare, comma-separated; '' skips (default 0,250,1000)")
    parser.add_argument("--out", type=Path, default=Path("serve_latency.json"), help="JSON report")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        report = run(args.bundle, args, Path(scratch))
    args.out.write_text(json.dumps(report, indent=2))
    print_table(report)
    print(f"wrote {args.out}")
    return 0



def run(bundle_dir: Path, args, scratch: Path) -> dict:
    limit_blas_threads(1)  # the in-process reference gets the server's one BLAS thread
    bundle = load_bundle(bundle_dir)
    episodes = make_episodes(bundle, args.episodes, args.steps)
    warmup = episodes[:2]

    time_in_process(bundle, warmup)
    in_process = time_in_process(bundle, episodes)

    with planner_server(bundle_dir) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        print(f"server on {server.target}; measuring...", flush=True)
        sizes = message_sizes(stub, episodes[0])
        echo = {}
        for kind in ("threaded", "asyncio"):
            with EchoProcess(sizes, kind) as process:
                echo[kind] = time_echo_pair(process.target, sizes, args.echo_calls)
                if kind == "asyncio":  # the planner server's transport
                    pid = process.process.pid
                    concurrent_echo_starts(process.target, sizes, 32, 1, pid)  # warm-up
                    echo_starts_32, echo_burst_cores = concurrent_echo_starts(
                        process.target, sizes, 32, args.start_rounds, pid)
        # The same in-process work with the thread idle between steps as long as a round trip
        # of the asyncio echo stream (the served keep step's transport floor).
        idle_s = float(np.median(echo["asyncio"][1]))
        after_idle = time_after_idle(bundle, episodes[:10], idle_s)
        goal_batch = time_goal_batch(bundle, episodes, 32, 3 * args.start_rounds)
        time_unary(stub, warmup)
        unary = time_unary(stub, episodes)
        time_stream(stub, warmup)
        stream = time_stream(stub, episodes)
        concurrent_starts(server.target, episodes, 32, 1, server.proc.pid)  # warm-up
        starts_32, burst_cores = concurrent_starts(server.target, episodes, 32, args.start_rounds,
                                                   server.proc.pid)

        latency = {
            "in-process planner, re-plan step": summarize(in_process["replan"]),
            "in-process planner, keep step": summarize(in_process["keep"]),
            "in-process keep step, after idling one echo stream round trip": summarize(after_idle["keep"]),
            "in-process actor call alone, after the same idle": summarize(after_idle["actor"]),
            "gRPC echo, unary (threaded server)": summarize(echo["threaded"][0]),
            "gRPC echo, unary (asyncio server)": summarize(echo["asyncio"][0]),
            "served Act (unary), re-plan step": summarize(unary["replan"]),
            "served Act (unary), keep step": summarize(unary["keep"]),
            "gRPC echo, stream ping-pong (threaded server)": summarize(echo["threaded"][1]),
            "gRPC echo, stream ping-pong (asyncio server)": summarize(echo["asyncio"][1]),
            "served Control (stream), re-plan step": summarize(stream["replan"]),
            "served Control (stream), keep step": summarize(stream["keep"]),
            "in-process graph solve from scratch": summarize(in_process["solve"]),
            "in-process episode start (cached landmark block)": summarize(in_process["start"]),
            "served StartEpisode, one at a time": summarize(unary["start"]),
            "in-process starts of 32 goals solved in one batch (per batch)": summarize(goal_batch),
            "served StartEpisode, 32 concurrent": summarize(starts_32),
            "gRPC echo, 32 concurrent start-sized calls (asyncio server)": summarize(echo_starts_32),
        }

        tls_overhead = time_tls_overhead(bundle_dir, stub, episodes, scratch)

        concurrency = []
        for transport, levels, is_stream in (("unary Act", (1, 8, 32), False),
                                             ("Control streams", (32, 64, 256, 1000), True)):
            for sessions in levels:
                print(f"{sessions} concurrent sessions ({transport})...", flush=True)
                row = closed_loop(sessions, server.target, episodes, args.throughput_seconds, is_stream,
                                  server.proc.pid)
                concurrency.append({"transport": transport, **row})

    # The echoes under the same closed-loop clients, last: asyncio clients in this process
    # slowed the synchronous clients of the latency rows when they ran before them.
    echo_cpu = {}
    for kind in ("threaded", "asyncio"):
        with EchoProcess(sizes, kind) as process:
            echo_cpu[kind] = {
                "unary, 32 sessions": echo_cpu_per_call(process, sizes, 32, args.throughput_seconds, False),
                "stream, 64 sessions": echo_cpu_per_call(process, sizes, 64, args.throughput_seconds, True),
            }

    batch_delay = []
    for delay in [int(d) for d in args.delays.split(",") if d.strip()]:
        print(f"max queue delay {delay} µs...", flush=True)
        with planner_server(bundle_dir, "--batch-delay-us", str(delay)) as server, \
                grpc.insecure_channel(server.target) as channel:
            stub = pb_grpc.PlannerStub(channel)
            time_stream(stub, warmup)
            one = time_stream(stub, episodes[:10])
            rate = closed_loop(32, server.target, episodes, args.throughput_seconds, False)
        batch_delay.append({"delay_us": delay, "one_robot_keep": summarize(one["keep"]),
                            "one_robot_replan": summarize(one["replan"]),
                            "actions_per_s_32": rate["actions_per_s"]})

    report = {
        "benchmark": "serve_latency",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "grpc": grpc.__version__,
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "bundle": {"path": str(bundle_dir), "env_id": bundle.env_id, "n_landmarks": bundle.n_landmarks,
                   "mode": bundle.planner_defaults.mode, "sha256": bundle.sha256},
        "settings": {"episodes": args.episodes, "steps": args.steps, "echo_calls": args.echo_calls,
                     "throughput_seconds": args.throughput_seconds, "start_rounds": args.start_rounds},
        "message_bytes": sizes,
        "latency": latency,
        "tls_overhead": tls_overhead,
        "concurrency": concurrency,
        "echo_closed_loop": echo_cpu,
        "batch_delay": batch_delay,
        "start_bursts_cores_busy": {"served": round(burst_cores, 2),
                                    "asyncio echo": round(echo_burst_cores, 2)},
    }
    report["targets"] = targets(report)
    return report


def targets(report: dict) -> list[dict]:
    """The serving targets against a report: what was measured, the limit, met or not. The stream
    targets are checked against both echoes: the threaded one (the only echo when the targets
    were set) and the asyncio one (the planner server's own transport)."""
    latency = report["latency"]
    p50 = lambda name: latency[name]["p50_us"] / 1e3  # noqa: E731 (ms)
    p99 = lambda name: latency[name]["p99_us"] / 1e3  # noqa: E731
    rate = {(row["transport"], row["sessions"]): row for row in report["concurrency"]}
    idle = p50("served StartEpisode, one at a time")
    burst = p99("served StartEpisode, 32 concurrent")
    keep = p50("served Control (stream), keep step")
    replan = p99("served Control (stream), re-plan step")
    rows = [
        {"target": "idle StartEpisode p50 <= 5 ms", "measured": f"{idle:.2f} ms", "met": idle <= 5},
        {"target": "32 concurrent StartEpisode p99 <= 10x the idle p50",
         "measured": f"{burst:.1f} ms = {burst / idle:.1f}x", "met": burst <= 10 * idle},
    ]
    for kind in ("threaded", "asyncio"):
        echo = f"gRPC echo, stream ping-pong ({kind} server)"
        rows += [
            {"target": f"stream keep step p50 <= 1.15x the {kind} echo stream p50",
             "measured": f"{keep:.3f} ms = {keep / p50(echo):.2f}x", "met": keep <= 1.15 * p50(echo)},
            {"target": f"stream re-plan p99 <= the {kind} echo stream p99 + 1 ms",
             "measured": f"{replan:.2f} ms against {p99(echo) + 1:.2f}", "met": replan <= p99(echo) + 1},
        ]
    for transport in ("unary Act", "Control streams"):
        if (transport, 32) in rate:
            actions = rate[(transport, 32)]["actions_per_s"]
            rows.append({"target": f">= 4000 actions/s at 32 sessions ({transport})",
                         "measured": f"{actions:.0f} actions/s", "met": actions >= 4000})
    if ("Control streams", 1000) in rate:
        least = rate[("Control streams", 1000)]["min_actions_per_session"]
        rows.append({"target": "1000 Control streams open, every one served",
                     "measured": f"least-served stream: {least} actions", "met": least > 0})
    return rows



if __name__ == "__main__":
    sys.exit(main())
