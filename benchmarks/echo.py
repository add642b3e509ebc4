"""Bare gRPC echo servers (threaded and asyncio) answering with the planner's message sizes: the
transport floors the serving benchmarks compare against, and the clients that time them.

    python benchmarks/echo.py --echo-server|--aio-echo-server '{"act_response": 12, ...}'
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import subprocess
import sys
import time
from concurrent import futures

import grpc

from workloads import TIMEOUT, bursts, process_cpu_s

ECHO_SERVICE = "bench.Echo"


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

    return asyncio.run(bursts(target, concurrent, rounds, start_and_end, server_pid))




if __name__ == "__main__":
    {"--echo-server": run_echo_server, "--aio-echo-server": run_aio_echo_server}[sys.argv[1]](json.loads(sys.argv[2]))
