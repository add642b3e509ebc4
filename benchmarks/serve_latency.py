"""Serving benchmark: per-step round trip and throughput of the planner server, with references.

    python benchmarks/serve_latency.py [--bundle DIR] [--out serve_latency.json]   # or: l3p bench serve

Measured in one run, on the same inputs:
- the in-process planner (the bundle loader + the planner core, no gRPC): the compute floor, also
  with the thread idle between steps as a server's is between one robot's steps, and a batch
  of 32 episode starts solved at once;
- two bare gRPC echo servers (generic handlers, own processes), threaded (grpc.server) and
  asyncio (grpc.aio), answering with the same message sizes as the planner: the transport
  floors, unary and ping-pong stream;
- the planner server (`python -m serving.server`, own process, started with no thread variables
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
It ends with issue 9's targets checked against the run.
Machines are shared and noisy: compare rows within a run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import queue
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from a checkout

import grpc  # noqa: E402
import numpy as np  # noqa: E402

from l3p.clients.client import channel_credentials  # noqa: E402
from l3p.serving.local_server import LocalServer  # noqa: E402
from l3p.protos import l3p_planner_pb2 as pb  # noqa: E402
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc  # noqa: E402
from l3p.serving.bundle import Bundle, load_bundle  # noqa: E402
from l3p.core import EpisodePlanner, distances_to_goal  # noqa: E402
from l3p.serving.engine import solved_graph  # noqa: E402
from l3p.serving.threads import limit_blas_threads, without_thread_variables  # noqa: E402

ECHO_SERVICE = "bench.Echo"
TIMEOUT = 30.0


# ------------------------------------------------------------------------- the echo server


# Replies of the echo servers, by method: the planner's message of the same role (bytes).
UNARY_METHODS = {"Unary": "act_response", "Start": "start_response", "End": "end_response"}


def run_echo_server(reply_bytes: dict[str, int]) -> None:
    """A threaded gRPC server with no application work: bytes in, a fixed-size reply out."""
    handlers = {
        method: grpc.unary_unary_rpc_method_handler(lambda request, context, r=bytes(reply_bytes[size]): r)
        for method, size in UNARY_METHODS.items()
    }
    stream_reply = bytes(reply_bytes["control_response"])
    handlers["Stream"] = grpc.stream_stream_rpc_method_handler(
        lambda requests, context: (stream_reply for _ in requests))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO_SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"ECHO_READY port={port}", flush=True)
    server.wait_for_termination()


def run_aio_echo_server(reply_bytes: dict[str, int]) -> None:
    """The same echo on grpc.aio, the planner server's transport."""
    stream_reply = bytes(reply_bytes["control_response"])

    def unary(reply: bytes):
        async def answer(request, context):
            return reply
        return answer

    async def stream(requests, context):
        async for _ in requests:
            yield stream_reply

    async def serve() -> None:
        server = grpc.aio.server()
        handlers = {method: grpc.unary_unary_rpc_method_handler(unary(bytes(reply_bytes[size])))
                    for method, size in UNARY_METHODS.items()}
        handlers["Stream"] = grpc.stream_stream_rpc_method_handler(stream)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO_SERVICE, handlers),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(f"ECHO_READY port={port}", flush=True)
        await server.wait_for_termination()

    asyncio.run(serve())


class EchoProcess:
    """An echo server (threaded or asyncio) in its own process, replying with `sizes`' bytes."""

    def __init__(self, sizes: dict[str, int], kind: str = "threaded"):
        flag = {"threaded": "--echo-server", "asyncio": "--aio-echo-server"}[kind]
        self.process = subprocess.Popen(
            [sys.executable, __file__, flag, json.dumps(sizes)], stdout=subprocess.PIPE, text=True,
        )
        line = self.process.stdout.readline()
        match = re.match(r"ECHO_READY port=(\d+)", line)
        if match is None:
            self.process.kill()
            raise RuntimeError(f"echo server did not start (printed {line!r})")
        self.target = f"127.0.0.1:{match.group(1)}"

    def __enter__(self) -> "EchoProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(10)


# ------------------------------------------------------------------------------ workloads


def make_episodes(bundle: Bundle, n: int, steps: int, seed: int = 0):
    """(goal, observations [steps, obs_dim]) per episode: goals near landmarks, random-walk obs.

    Observations do not depend on actions, so every transport sees exactly the same inputs."""
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(n):
        goal = bundle.landmarks[rng.integers(bundle.n_landmarks)] + rng.normal(0, 0.05, bundle.goal_dim)
        walk = np.cumsum(rng.normal(0, 0.02, (steps, bundle.obs_dim)), axis=0)
        obs = rng.normal(0, 0.1, bundle.obs_dim) + walk
        obs[:, : bundle.goal_dim] += bundle.landmarks.mean(axis=0)
        episodes.append((goal.astype(np.float32), obs.astype(np.float32)))
    return episodes


# Each timing function returns seconds by kind: "start" (StartEpisode: the graph solve),
# "replan" (steps that ran the graph search) and "keep" (steps that kept the subgoal).


def _kind(replanned: bool) -> str:
    return "replan" if replanned else "keep"


def time_in_process(bundle: Bundle, episodes) -> dict[str, list[float]]:
    times = collections.defaultdict(list)
    graph = solved_graph(bundle)
    for goal, observations in episodes:
        started = time.perf_counter()  # the whole graph, as before the per-bundle cache
        distances_to_goal(bundle.landmarks, goal, bundle.value_fn, bundle.planner_defaults)
        times["solve"].append(time.perf_counter() - started)
        started = time.perf_counter()
        planner = EpisodePlanner(graph, goal, bundle.value_fn, bundle.planner_defaults)
        times["start"].append(time.perf_counter() - started)
        for obs in observations:
            started = time.perf_counter()
            result = planner.step(obs, bundle.distance_fn, bundle.policy_fn)
            times[_kind(result.replanned)].append(time.perf_counter() - started)
    return times


def time_after_idle(bundle: Bundle, episodes, idle_s: float) -> dict[str, list[float]]:
    """Keep steps, and the actor call alone, in process with the thread asleep for `idle_s`
    before each, as a server's thread is between one robot's steps: the compute floor of a
    served keep step. (Code run right after its thread wakes takes longer than in a tight loop:
    caches are cold and the core may have been given to something else.)"""
    times = collections.defaultdict(list)
    graph = solved_graph(bundle)
    for goal, observations in episodes:
        planner = EpisodePlanner(graph, goal, bundle.value_fn, bundle.planner_defaults)
        for obs in observations:
            time.sleep(idle_s)
            started = time.perf_counter()
            result = planner.step(obs, bundle.distance_fn, bundle.policy_fn)
            if not result.replanned:
                times["keep"].append(time.perf_counter() - started)
                time.sleep(idle_s)
                started = time.perf_counter()
                bundle.policy_fn(obs[None], goal[None])
                times["actor"].append(time.perf_counter() - started)
    return times


def time_goal_batch(bundle: Bundle, episodes, goals: int, repeats: int) -> list[float]:
    """In process: `goals` episode starts solved in one batch (the value call over goals x N
    pairs and the goal columns), what the server does for a burst of starts at best."""
    batch = np.stack([episodes[i % len(episodes)][0] for i in range(goals)])
    graph, config = solved_graph(bundle), bundle.planner_defaults
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        graph.distances_to_goals(batch, bundle.value_fn, config)
        times.append(time.perf_counter() - started)
    return times


def time_unary(stub, episodes, metadata=()) -> dict[str, list[float]]:
    times = collections.defaultdict(list)
    for goal, observations in episodes:
        started = time.perf_counter()
        session_id = stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=TIMEOUT,
                                       metadata=metadata).session_id
        times["start"].append(time.perf_counter() - started)
        for obs in observations:
            request = pb.ActRequest(session_id=session_id, observation=obs)
            started = time.perf_counter()
            response = stub.Act(request, timeout=TIMEOUT, metadata=metadata)
            times[_kind(response.replanned)].append(time.perf_counter() - started)
        stub.EndEpisode(pb.EndEpisodeRequest(session_id=session_id), timeout=TIMEOUT, metadata=metadata)
    return times


def time_stream(stub, episodes, metadata=()) -> dict[str, list[float]]:
    times = collections.defaultdict(list)
    for goal, observations in episodes:
        requests = queue.SimpleQueue()
        responses = stub.Control(iter(requests.get, None), timeout=TIMEOUT * len(observations),
                                 metadata=metadata)
        requests.put(pb.ControlRequest(start=pb.StartEpisodeRequest(goal=goal)))
        next(responses)
        for obs in observations:
            request = pb.ControlRequest(observation=pb.ActRequest(observation=obs))
            started = time.perf_counter()
            requests.put(request)
            response = next(responses).action
            times[_kind(response.replanned)].append(time.perf_counter() - started)
        requests.put(None)
        list(responses)
    return times


def time_echo(channel: grpc.Channel, calls: int, request_bytes: int, stream_request_bytes: int):
    unary = channel.unary_unary(f"/{ECHO_SERVICE}/Unary")
    payload = bytes(request_bytes)
    unary_times = []
    for _ in range(calls):
        started = time.perf_counter()
        unary(payload, timeout=TIMEOUT)
        unary_times.append(time.perf_counter() - started)

    stream = channel.stream_stream(f"/{ECHO_SERVICE}/Stream")
    requests = queue.SimpleQueue()
    responses = stream(iter(requests.get, None), timeout=TIMEOUT * calls)
    payload = bytes(stream_request_bytes)
    stream_times = []
    for _ in range(calls):
        started = time.perf_counter()
        requests.put(payload)
        next(responses)
        stream_times.append(time.perf_counter() - started)
    requests.put(None)
    list(responses)
    return unary_times, stream_times


def time_echo_pair(target: str, sizes: dict, calls: int) -> tuple[list[float], list[float]]:
    with grpc.insecure_channel(target) as channel:
        time_echo(channel, 100, sizes["act_request"], sizes["control_request"])  # warm-up
        return time_echo(channel, calls, sizes["act_request"], sizes["control_request"])


# Concurrency runs on asyncio clients: thousands of sessions from one process without a thread
# each (a robot is one client; here one process stands in for all of them).


async def _open_stream(stub, goal):
    call = stub.Control()
    await call.write(pb.ControlRequest(start=pb.StartEpisodeRequest(goal=goal)))
    await call.read()
    return call


async def _closed_loop(sessions: int, target: str, episodes, seconds: float, stream: bool,
                       server_pid: int | None = None) -> dict:
    """`sessions` episodes at once, each sending its next observation as soon as the previous
    action arrives, for `seconds` after all have started: actions/s, per-step latency, and the
    fewest actions any session got (0: a session was starved)."""
    channels = [grpc.aio.insecure_channel(target) for _ in range(min(sessions, 64))]
    stubs = [pb_grpc.PlannerStub(channel) for channel in channels]
    begin, all_open, window = asyncio.Event(), asyncio.Event(), {}
    latencies: list[float] = []
    opening = asyncio.Semaphore(64)  # starts in waves: the start burst is measured on its own
    opened = [0]

    async def session(index: int) -> int:
        stub = stubs[index % len(stubs)]
        goal, observations = episodes[index % len(episodes)]
        try:
            async with opening:
                if stream:
                    call = await _open_stream(stub, goal)
                else:
                    session_id = (await stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=TIMEOUT)).session_id
        except BaseException:
            all_open.set()  # no window without every session: report the failure
            raise
        opened[0] += 1
        if opened[0] == sessions:
            all_open.set()
        await begin.wait()
        steps = 0
        while time.perf_counter() < window["end"]:
            obs = observations[steps % len(observations)]  # (steps: this session's so far)
            started = time.perf_counter()
            if stream:
                await call.write(pb.ControlRequest(observation=pb.ActRequest(observation=obs)))
                await call.read()
            else:
                await stub.Act(pb.ActRequest(session_id=session_id, observation=obs), timeout=TIMEOUT)
            finished = time.perf_counter()
            if finished <= window["end"]:  # only actions inside the window count
                latencies.append(finished - started)
                steps += 1
        if stream:
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.OK
        else:
            await stub.EndEpisode(pb.EndEpisodeRequest(session_id=session_id), timeout=TIMEOUT)
        return steps

    tasks = [asyncio.ensure_future(session(i)) for i in range(sessions)]
    await all_open.wait()
    await asyncio.sleep(0)
    for task in tasks:
        if task.done():  # a session failed before the window: report it
            task.result()
    cpu = [process_cpu_s(server_pid) if server_pid else 0.0]
    window["start"] = time.perf_counter()
    window["end"] = window["start"] + seconds
    begin.set()
    await asyncio.sleep(seconds)
    cpu.append(process_cpu_s(server_pid) if server_pid else 0.0)  # the window only, no starts
    steps = await asyncio.gather(*tasks)
    for channel in channels:
        await channel.close()
    row = {"sessions": sessions, "actions_per_s": round(sum(steps) / seconds, 1),
           "min_actions_per_session": int(min(steps)), "latency": summarize(latencies)}
    if server_pid:
        row["server_cpu_us_per_action"] = round((cpu[1] - cpu[0]) / max(1, sum(steps)) * 1e6, 1)
    return row


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def closed_loop(sessions: int, target: str, episodes, seconds: float, stream: bool,
                server_pid: int | None = None) -> dict:
    """`_closed_loop`; with the server's pid also its CPU time per action over the window,
    which depends much less on other load on the machine than actions/s do."""
    return asyncio.run(_closed_loop(sessions, target, episodes, seconds, stream, server_pid))


async def _echo_closed_loop(sessions: int, target: str, sizes: dict, seconds: float, stream: bool) -> int:
    """The echo's counterpart of `_closed_loop` (same sessions, message sizes and clients):
    round trips completed in `seconds`."""
    channels = [grpc.aio.insecure_channel(target) for _ in range(min(sessions, 64))]
    end = time.perf_counter() + seconds
    done = [0]

    async def session(channel) -> None:
        if stream:
            call = channel.stream_stream(f"/{ECHO_SERVICE}/Stream")()
            payload = bytes(sizes["control_request"])
            while time.perf_counter() < end:
                await call.write(payload)
                await call.read()
                done[0] += 1
            await call.done_writing()
            await call.code()
        else:
            unary = channel.unary_unary(f"/{ECHO_SERVICE}/Unary")
            payload = bytes(sizes["act_request"])
            while time.perf_counter() < end:
                await unary(payload, timeout=TIMEOUT)
                done[0] += 1

    await asyncio.gather(*(session(channels[i % len(channels)]) for i in range(sessions)))
    for channel in channels:
        await channel.close()
    return done[0]


def echo_cpu_per_call(process: "EchoProcess", sizes: dict, sessions: int, seconds: float,
                      stream: bool) -> dict:
    before = process_cpu_s(process.process.pid)
    started = time.perf_counter()
    calls = asyncio.run(_echo_closed_loop(sessions, process.target, sizes, seconds, stream))
    elapsed = time.perf_counter() - started
    return {"sessions": sessions, "calls_per_s": round(calls / elapsed, 1),
            "server_cpu_us_per_call": round((process_cpu_s(process.process.pid) - before) / calls * 1e6, 1)}


async def _bursts(target: str, concurrent: int, rounds: int, start_and_end,
                  server_pid: int) -> tuple[list[float], float]:
    """`rounds` bursts of `concurrent` callers at once, one channel each: `await
    start_and_end(channel, index)` makes one start (returning its latency) then ends it.
    Returns the latencies and the cores the bursts kept busy: CPU seconds of this process (the
    clients) and of the server over the bursts' wall time."""
    channels = [grpc.aio.insecure_channel(target) for _ in range(concurrent)]
    for channel in channels:  # connect first: the connection is not part of a start
        await channel.channel_ready()
    times: list[float] = []
    cpu = wall = 0.0
    for r in range(rounds):
        cpu_before, started = time.process_time() + process_cpu_s(server_pid), time.perf_counter()
        times += await asyncio.gather(*(start_and_end(channel, r * concurrent + i)
                                        for i, channel in enumerate(channels)))
        wall += time.perf_counter() - started
        cpu += time.process_time() + process_cpu_s(server_pid) - cpu_before
    for channel in channels:
        await channel.close()
    return times, cpu / wall


def concurrent_starts(target: str, episodes, concurrent: int, rounds: int,
                      server_pid: int) -> tuple[list[float], float]:
    """StartEpisode latencies in bursts of `concurrent` (each caller then ends its episode), and
    the cores the bursts kept busy (`_bursts`)."""
    async def start_and_end(channel, index: int) -> float:
        stub = pb_grpc.PlannerStub(channel)
        started = time.perf_counter()
        response = await stub.StartEpisode(
            pb.StartEpisodeRequest(goal=episodes[index % len(episodes)][0]), timeout=TIMEOUT)
        latency = time.perf_counter() - started
        await stub.EndEpisode(pb.EndEpisodeRequest(session_id=response.session_id), timeout=TIMEOUT)
        return latency

    return asyncio.run(_bursts(target, concurrent, rounds, start_and_end, server_pid))


def concurrent_echo_starts(target: str, sizes: dict, concurrent: int, rounds: int,
                           server_pid: int) -> tuple[list[float], float]:
    """The echo's counterpart of `concurrent_starts`: the same bursts of start- and end-sized
    calls, answered with no work, the transport floor of a burst of starts."""
    start_request, end_request = bytes(sizes["start_request"]), bytes(sizes["end_request"])

    async def start_and_end(channel, index: int) -> float:
        start = channel.unary_unary(f"/{ECHO_SERVICE}/Start")  # made before the clock, as the stub is
        end = channel.unary_unary(f"/{ECHO_SERVICE}/End")
        started = time.perf_counter()
        await start(start_request, timeout=TIMEOUT)
        latency = time.perf_counter() - started
        await end(end_request, timeout=TIMEOUT)
        return latency

    return asyncio.run(_bursts(target, concurrent, rounds, start_and_end, server_pid))


def time_tls_overhead(bundle_dir: Path, plain_stub, episodes, scratch: Path) -> dict[str, dict]:
    """Keep-step round trips of a TLS + token server and of the plaintext one, measured in
    alternation, episode by episode. Empty if openssl is missing (no certificate)."""
    if shutil.which("openssl") is None:
        print("openssl not found: no TLS + token rows", flush=True)
        return {}
    certs = scratch / "tls"
    subprocess.run(["bash", str(REPO / "deploy" / "tls" / "make-certs.sh"), str(certs)],
                   check=True, capture_output=True)
    token = secrets.token_hex(32)
    (scratch / "tokens.txt").write_text(f"bench:{token}\n")
    args = ["--tls-cert", str(certs / "server.crt"),
            "--tls-key", str(certs / "server.key"), "--auth-token-file", str(scratch / "tokens.txt")]
    metadata = (("authorization", f"Bearer {token}"),)
    with planner_server(bundle_dir, *args) as server, grpc.secure_channel(
            f"localhost:{server.port}", channel_credentials(certs / "ca.crt")) as channel:
        tls_stub = pb_grpc.PlannerStub(channel)
        time_unary(tls_stub, episodes[:2], metadata)  # warm-up: handshake, first calls
        time_stream(tls_stub, episodes[:2], metadata)
        times = collections.defaultdict(list)
        for episode in episodes:
            for name, timing, stub, md in (
                ("unary, plaintext", time_unary, plain_stub, ()),
                ("unary, TLS + token", time_unary, tls_stub, metadata),
                ("stream, plaintext", time_stream, plain_stub, ()),
                ("stream, TLS + token", time_stream, tls_stub, metadata),
            ):
                times[name] += timing(stub, [episode], md)["keep"]
    return {f"served keep step ({name})": summarize(t) for name, t in times.items()}


# ------------------------------------------------------------------------------ reporting


def summarize(seconds: list[float]) -> dict:
    us = np.asarray(seconds) * 1e6
    if us.size == 0:
        return {"n": 0, "p50_us": None, "p99_us": None, "mean_us": None}
    return {
        "n": int(us.size),
        "p50_us": round(float(np.percentile(us, 50)), 1),
        "p99_us": round(float(np.percentile(us, 99)), 1),
        "mean_us": round(float(us.mean()), 1),
    }


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
    print("\nissue 9's targets, this run:")
    for row in report["targets"]:
        print(f"  {'met    ' if row['met'] else 'NOT met'}  {row['target']}: {row['measured']}")
    echo_p50 = report["latency"]["gRPC echo, stream ping-pong (asyncio server)"]["p50_us"]
    actor = report["latency"]["in-process actor call alone, after the same idle"]["p50_us"]
    print(f"  (a keep step 1.15x the asyncio echo leaves {0.15 * echo_p50:.0f} µs for all the "
          f"server's own work; the actor call alone, after the same idle, takes {actor:.0f} µs)")
    print(f"\nmessage bytes: {report['message_bytes']}")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="l3p bench serve", description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path,
                        help="bundle to serve (default: export an untrained one to a temp dir; "
                             "per-step cost depends on network and landmark sizes, not on training)")
    parser.add_argument("--landmarks", type=int, default=80,
                        help="landmarks of the untrained default bundle (default 80, the paper's)")
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
        bundle_dir = args.bundle
        if bundle_dir is None:
            from l3p.training.export import export_untrained_bundle  # torch: only for the default

            print(f"exporting an untrained bundle with {args.landmarks} landmarks...", flush=True)
            bundle_dir = export_untrained_bundle(Path(scratch) / "bundle", n_landmarks=args.landmarks)
        report = run(bundle_dir, args, Path(scratch))
    args.out.write_text(json.dumps(report, indent=2))
    print_table(report)
    print(f"wrote {args.out}")
    return 0


def message_sizes(stub, episode) -> dict[str, int]:
    """The planner's messages' sizes on the wire, by role, for the echo servers to mimic: one
    episode's start, first step and end."""
    goal, observations = episode
    start_request = pb.StartEpisodeRequest(goal=goal)
    start_response = stub.StartEpisode(start_request, timeout=TIMEOUT)
    session_id = start_response.session_id
    act_request = pb.ActRequest(session_id=session_id, observation=observations[0])
    act_response = stub.Act(act_request, timeout=TIMEOUT)
    end_request = pb.EndEpisodeRequest(session_id=session_id)
    end_response = stub.EndEpisode(end_request, timeout=TIMEOUT)
    return {
        "start_request": start_request.ByteSize(),
        "start_response": start_response.ByteSize(),
        "end_request": end_request.ByteSize(),
        "end_response": end_response.ByteSize(),
        "act_request": act_request.ByteSize(),
        "act_response": act_response.ByteSize(),
        "control_request": pb.ControlRequest(
            observation=pb.ActRequest(observation=observations[0])).ByteSize(),
        "control_response": pb.ControlResponse(action=act_response).ByteSize(),
    }


def planner_server(bundle_dir: Path, *extra: str, checkout: Path | None = None) -> LocalServer:
    """The server as a user's shell starts it: no thread variables in its environment. From
    `checkout` (another commit's working tree) when given, else from this one."""
    return LocalServer(bundle_dir, extra_args=["--max-sessions", "2048", *extra], cwd=checkout,
                       env=without_thread_variables(os.environ))


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
    """Issue 9's targets against a report: what was measured, the limit, met or not. The stream
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
    if sys.argv[1:2] == ["--echo-server"]:
        run_echo_server(json.loads(sys.argv[2]))
    elif sys.argv[1:2] == ["--aio-echo-server"]:
        run_aio_echo_server(json.loads(sys.argv[2]))
    else:
        sys.exit(main())
