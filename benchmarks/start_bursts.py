"""Bursts of concurrent episode starts against several planner servers, side by side.

This checkout's server against other checkouts (an older commit) or other server arguments, all
measured in alternation, round by round, so that every server sees the same machine load. The
machine's speed drifts from run to run by more than most changes to the start path are worth;
only a side-by-side run tells them apart.

    git worktree add /tmp/base <commit>
    python benchmarks/start_bursts.py --bundle models/FetchPush-v4 --against /tmp/base \\
        --server-args "--processes 2"

Per server: StartEpisode latency under bursts of `--concurrent` callers (one channel each, each
then ending its episode), the idle single-start p50 and the ratio of the two (the serving target:
p99 <= 10x the idle p50); and the asyncio echo answering the same bursts (the transport floor).
Servers start with no thread variables in their environment, like a user's shell.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import grpc
import numpy as np

from echo import EchoProcess, concurrent_echo_starts
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from workloads import REPO, concurrent_starts, make_episodes, message_sizes, planner_server, summarize, time_unary

SUBPACKAGES = ("core", "protos", "sim", "training", "serving", "clients")


def checkout_server(checkout: Path, scratch: Path) -> tuple[str, Path]:
    """(server module, sys.path entry) running `checkout`'s own code: its folders assembled into
    an `l3p` package (the namespaced layout), or the checkout itself (top-level `serving`)."""
    if not (checkout / "core").is_dir():
        return "serving.server", checkout
    tree = Path(tempfile.mkdtemp(dir=scratch))
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    apps = checkout / "apps" if (checkout / "apps").is_dir() else checkout / "l3p"  # the apps' folder, then and now
    shutil.copytree(apps, tree / "l3p", ignore=skip)
    for name in SUBPACKAGES:
        shutil.copytree(checkout / name, tree / "l3p" / name, ignore=skip)
    module = "l3p.serving" if (checkout / "serving" / "__main__.py").is_file() else "l3p.serving.server"
    return module, tree


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python benchmarks/start_bursts.py", description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, default=REPO / "models" / "FetchPush-v4",
                        help="bundle to serve (default: models/FetchPush-v4)")
    parser.add_argument("--against", type=Path, action="append", default=[], metavar="CHECKOUT",
                        help="also a server run from this checkout (repeatable)")
    parser.add_argument("--server-args", action="append", default=[], metavar="ARGS",
                        help="also this checkout's server with these arguments (repeatable)")
    parser.add_argument("--rounds", type=int, default=8,
                        help="rounds; each makes 2 bursts and 10 idle starts per server (default 8)")
    parser.add_argument("--concurrent", type=int, default=32, help="callers per burst (default 32)")
    parser.add_argument("--out", type=Path, help="also write the table as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bundle = load_bundle(args.bundle)
    episodes = make_episodes(bundle, 40, 2)
    scratch = Path(tempfile.mkdtemp())
    variants = [("this checkout", None, [])]
    variants += [(str(checkout), checkout_server(checkout.resolve(), scratch), []) for checkout in args.against]
    variants += [(f"this checkout, {extra}", None, shlex.split(extra)) for extra in args.server_args]
    bursts = {name: [] for name, _, _ in variants}
    idle = {name: [] for name, _, _ in variants}
    echo: list[float] = []
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        servers = [stack.enter_context(planner_server(args.bundle, *extra, code=code))
                   for _, code, extra in variants]
        with grpc.insecure_channel(servers[0].target) as channel:
            sizes = message_sizes(pb_grpc.PlannerStub(channel), episodes[0])
        process = stack.enter_context(EchoProcess(sizes, "asyncio"))
        for server in servers:  # warm-up
            concurrent_starts(server.target, episodes, args.concurrent, 1, server.proc.pid)
        concurrent_echo_starts(process.target, sizes, args.concurrent, 1, process.process.pid)
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", flush=True)
            for (name, _, _), server in zip(variants, servers):
                bursts[name] += concurrent_starts(server.target, episodes, args.concurrent, 2,
                                                  server.proc.pid)[0]
                with grpc.insecure_channel(server.target) as channel:
                    idle[name] += time_unary(pb_grpc.PlannerStub(channel),
                                             [(goal, obs[:1]) for goal, obs in episodes[:10]])["start"]
            echo += concurrent_echo_starts(process.target, sizes, args.concurrent, 2,
                                           process.process.pid)[0]

    def row(name: str, seconds: list[float], idle_s: list[float] | None) -> dict:
        burst = summarize(seconds)
        p50, p99 = burst["p50_us"] / 1e3, burst["p99_us"] / 1e3
        idle_p50 = None if idle_s is None else float(np.median(idle_s)) * 1e3
        return {"server": name, "p50_ms": p50, "p99_ms": p99, "idle_p50_ms": idle_p50,
                "p99_over_idle": None if idle_p50 is None else p99 / idle_p50}

    rows = [row(name, bursts[name], idle[name]) for name, _, _ in variants]
    rows.append(row("asyncio echo (transport floor)", echo, None))

    print(f"\n{args.concurrent} concurrent StartEpisode calls, {args.rounds} rounds of 2 bursts, "
          f"{bundle.env_id}, {bundle.n_landmarks} landmarks")
    print(f"{'server':48s}{'p50 ms':>9s}{'p99 ms':>9s}{'idle p50 ms':>13s}{'p99 / idle':>12s}")
    for row in rows:
        idle_text = "-" if row["idle_p50_ms"] is None else f"{row['idle_p50_ms']:.2f}"
        ratio = "-" if row["p99_over_idle"] is None else f"{row['p99_over_idle']:.1f}x"
        print(f"{row['server'][-48:]:48s}{row['p50_ms']:>9.1f}{row['p99_ms']:>9.1f}{idle_text:>13s}{ratio:>12s}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
