"""The serving benchmarks' workloads: episodes, the in-process planner, the served planner (unary,
stream, closed loops, bursts of starts, TLS), the summary of a list of times, and a report's common
parts (the arguments, the machine, the latency table, the targets, the JSON file)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import queue
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np

from l3p.clients.client import channel_credentials
from l3p.core import EpisodePlanner, distances_to_goal
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import Bundle
from l3p.serving.engine import solved_graph
from l3p.serving.local_server import LocalServer
from l3p.serving.threads import without_thread_variables

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 30.0


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


def step_kind(replanned: bool) -> str:
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
            times[step_kind(result.replanned)].append(time.perf_counter() - started)
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
            times[step_kind(response.replanned)].append(time.perf_counter() - started)
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
            times[step_kind(response.replanned)].append(time.perf_counter() - started)
        requests.put(None)
        list(responses)
    return times



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
    return window_row(sessions, steps, latencies, seconds, tuple(cpu) if server_pid else None)


def window_row(sessions: int, steps: list[int], latencies: list[float], seconds: float,
               cpu: tuple[float, float] | None = None) -> dict:
    """A closed loop's row: actions/s, the fewest actions a session got, per-step latency, and with the
    server's CPU seconds at the window's start and end, its CPU per action."""
    row = {"sessions": sessions, "actions_per_s": round(sum(steps) / seconds, 1),
           "min_actions_per_session": int(min(steps)), "latency": summarize(latencies)}
    if cpu is not None:
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



async def bursts(target: str, concurrent: int, rounds: int, start_and_end,
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
    the cores the bursts kept busy (`bursts`)."""
    async def start_and_end(channel, index: int) -> float:
        stub = pb_grpc.PlannerStub(channel)
        started = time.perf_counter()
        response = await stub.StartEpisode(
            pb.StartEpisodeRequest(goal=episodes[index % len(episodes)][0]), timeout=TIMEOUT)
        latency = time.perf_counter() - started
        await stub.EndEpisode(pb.EndEpisodeRequest(session_id=response.session_id), timeout=TIMEOUT)
        return latency

    return asyncio.run(bursts(target, concurrent, rounds, start_and_end, server_pid))



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


# A report: `benchmark_parser` for its arguments, `machine` in its JSON, `print_latency`, `print_load`
# and `print_targets` for its table, `write_report` to end the run.


def benchmark_parser(name: str, doc: str, out: str) -> argparse.ArgumentParser:
    """``python benchmarks/NAME.py``'s parser with the arguments every serving benchmark takes:
    --bundle (default: the shipped FetchPush-v4) and --out (the JSON report, default ``out``)."""
    parser = argparse.ArgumentParser(prog=f"python benchmarks/{name}.py", description=doc.split("\n")[0])
    parser.add_argument("--bundle", type=Path, default=REPO / "models" / "FetchPush-v4",
                        help="bundle to serve (default: the shipped models/FetchPush-v4)")
    parser.add_argument("--out", type=Path, default=Path(out), help=f"JSON report (default {out})")
    return parser


def machine(**versions: str) -> dict:
    """What the run measured on (with ``versions`` of other libraries), read at its end: the load average
    says how shared the machine was."""
    return {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "platform": platform.platform(), "python": platform.python_version(), "grpc": grpc.__version__,
            **versions, "load_avg_1m_at_end": round(os.getloadavg()[0], 2)}


def print_latency(rows: dict[str, dict], width: int) -> None:
    """`summarize` rows by name: n, p50 and p99 in µs (rows with no times left out)."""
    print(f"{'':{width}s}{'n':>7s}{'p50':>10s}{'p99':>10s}")
    for name, row in rows.items():
        if row["n"]:
            print(f"{name:{width}s}{row['n']:>7d}{row['p50_us']:>10.0f}{row['p99_us']:>10.0f}")


def print_load(host: dict) -> None:
    """A report's `machine`: how loaded it was at the end of the run."""
    print(f"load average (1 min) at the end: {host['load_avg_1m_at_end']} on {host['cpus']} CPUs")


def print_targets(targets: list[dict], heading: str = "targets, this run:") -> None:
    """Each target ({"target", "measured", "met"}), met or not."""
    print(heading)
    for row in targets:
        print(f"  {'met    ' if row['met'] else 'NOT met'}  {row['target']}: {row['measured']}")


def write_report(report: dict, out: Path, print_table: Callable[[dict], None]) -> int:
    """The end of a benchmark's run: the JSON report written, its table printed."""
    out.write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print(f"wrote {out}")
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


def planner_server(bundle_dir: Path, *extra: str, code: tuple[str, Path] | None = None) -> LocalServer:
    """The server as a user's shell starts it: no thread variables in its environment. With
    `code` = (module, sys.path entry), another checkout's server (start_bursts.py --against); else
    the installed package's."""
    env = without_thread_variables(os.environ)
    module = "l3p.serving"
    if code is not None:
        module, env["PYTHONPATH"] = code[0], str(code[1])
    return LocalServer(bundle_dir, extra_args=["--max-sessions", "2048", *extra], module=module, env=env)
