"""C++ client benchmark: the C++ client's Control-stream step against the Python client's, one run.

    python benchmarks/cpp_client.py [--bundle DIR] [--rounds 6] [--build DIR] [--out cpp_client.json]

Builds clients/cpp (`cmake -S clients/cpp -B BUILD`: a Release build in a new BUILD; an existing
one keeps its build type) and starts one planner server (own process). Both clients replay the
same episodes (benchmarks/workloads.py: observations that do not depend on the actions) on a
Control stream each, round after round, taking turns which goes first: the Python client
(`PlannerClient.stream_episode`, one client for the whole run) timed around `ep.act`, and the
C++ client (`l3p_replay`, one process a round) timed around `StreamEpisode::act`. A first round
warms both up and is not counted. The two clients' actions are compared bit for bit. It ends
with the target checked against the run: the C++ step p50 <= the Python client's. Machines are
shared and noisy: compare rows within a run, not absolute numbers across runs.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from l3p.clients.client import PlannerClient
from l3p.serving.bundle import load_bundle
from workloads import (REPO, benchmark_parser, machine, make_episodes, planner_server, print_latency, print_load,
                       print_targets, step_kind, summarize, write_report)

CLIENTS = ("Python client", "C++ client")


def build(directory: Path) -> dict:
    """l3p_replay, built (or brought up to date) in `directory`: how, and how long it took."""
    started = time.perf_counter()
    for command in (["cmake", "-S", str(REPO / "clients" / "cpp"), "-B", str(directory)],
                    ["cmake", "--build", str(directory), "-j2", "--target", "l3p_replay"]):
        subprocess.run(command, check=True, capture_output=True, text=True)
    cache = (directory / "CMakeCache.txt").read_text()
    build_type, flags = (re.search(rf"^{name}:\w+=(.*)$", cache, re.M)[1] for name in ("CMAKE_BUILD_TYPE",
                                                                                       "CMAKE_CXX_FLAGS"))
    return {"dir": str(directory), "build_type": build_type, "cxx_flags": flags,
            "seconds": round(time.perf_counter() - started, 1)}


def line(word: str, values) -> str:
    return " ".join([word, *(repr(float(v)) for v in np.asarray(values, np.float32))])


def time_python(client: PlannerClient, episodes) -> tuple[dict[str, list[float]], list[np.ndarray]]:
    times, actions = collections.defaultdict(list), []
    for goal, observations in episodes:
        with client.stream_episode(goal) as ep:
            for obs in observations:
                started = time.perf_counter()
                step = ep.act(obs)
                times[step_kind(step.replanned)].append(time.perf_counter() - started)
                actions.append(step.action)
    return times, actions


def time_cpp(replay: Path, target: str, episodes) -> tuple[dict[str, list[float]], list[np.ndarray]]:
    script = []
    for goal, observations in episodes:
        script += [line("goal", goal), *(line("obs", obs) for obs in observations), "end"]
    proc = subprocess.run([str(replay), "--target", target], input="\n".join(script) + "\n", capture_output=True,
                          text=True, check=True, timeout=600)
    times, actions = collections.defaultdict(list), []
    for record in map(json.loads, proc.stdout.splitlines()):
        if "error" in record:
            raise RuntimeError(f"l3p_replay: {record}")
        if "action" in record:
            times[step_kind(record["replanned"])].append(record["latency_us"] * 1e-6)
            actions.append(np.array([int(word, 16) for word in record["action"]], np.uint32).view(np.float32))
    return times, actions


def run(args) -> dict:
    built = build(args.build)
    bundle = load_bundle(args.bundle)
    episodes = make_episodes(bundle, args.episodes, args.steps)
    times = {name: collections.defaultdict(list) for name in CLIENTS}
    differences = compared = 0
    with planner_server(args.bundle) as server, PlannerClient(server.target, timeout_s=30.0) as client:
        print(f"server on {server.target}; {args.rounds} rounds after a warm-up...", flush=True)
        for round_ in range(args.rounds + 1):
            measured = {}
            order = CLIENTS if round_ % 2 else CLIENTS[::-1]
            for name in order:
                measured[name] = (time_python(client, episodes) if name == "Python client"
                                  else time_cpp(args.build / "l3p_replay", server.target, episodes))
            if round_ == 0:
                continue
            for name, (new, _) in measured.items():
                for kind, values in new.items():
                    times[name][kind] += values
            python_actions, cpp_actions = measured["Python client"][1], measured["C++ client"][1]
            compared += len(python_actions)
            differences += sum(not np.array_equal(a.view(np.uint32), b.view(np.uint32))
                               for a, b in zip(python_actions, cpp_actions, strict=True))
    latency = {}
    for name in CLIENTS:
        latency[f"{name} stream step (all)"] = summarize(times[name]["keep"] + times[name]["replan"])
        for kind in ("keep", "replan"):
            latency[f"{name} stream step ({kind})"] = summarize(times[name][kind])
    cpp, python = (latency[f"{name} stream step (all)"]["p50_us"] for name in ("C++ client", "Python client"))
    return {
        "benchmark": "cpp_client",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "bundle": {"path": str(args.bundle), "env_id": bundle.env_id, "n_landmarks": bundle.n_landmarks},
        "build": built,
        "settings": {"rounds": args.rounds, "episodes": args.episodes, "steps": args.steps},
        "latency": latency,
        "actions": {"compared": compared, "differences": differences},
        "targets": [{"target": "C++ stream step p50 <= the Python client's (all steps)",
                     "measured": f"{cpp:.0f} µs = {cpp / python:.2f}x", "met": cpp <= python}],
    }


def print_table(report: dict) -> None:
    settings = report["settings"]
    print(f"\nControl-stream step round trip (µs), {report['bundle']['env_id']}, {report['bundle']['n_landmarks']} "
          f"landmarks, {settings['rounds']} rounds x {settings['episodes']} episodes x {settings['steps']} steps")
    print_latency(report["latency"], 36)
    build = report["build"]
    print(f"\nactions compared: {report['actions']['compared']}, differing bits: {report['actions']['differences']}")
    print(f"C++ build: {build['build_type'] or 'no build type'} {build['cxx_flags']} in {build['dir']}")
    print_load(report["machine"])
    print_targets(report["targets"])


def parse_args(argv):
    parser = benchmark_parser("cpp_client", __doc__, "cpp_client.json")
    parser.add_argument("--rounds", type=int, default=6, help="measured rounds, after one warm-up (default 6)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per round (default 10)")
    parser.add_argument("--steps", type=int, default=100, help="steps per episode (default 100)")
    parser.add_argument("--build", type=Path, default=REPO / "build" / "cpp-bench",
                        help="the C++ build directory (default build/cpp-bench)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return write_report(run(args), args.out, print_table)


if __name__ == "__main__":
    sys.exit(main())
