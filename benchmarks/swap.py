"""Hot swap benchmark: a new model version made current under 32 live sessions, and the cost of
serving several models instead of one.

    python benchmarks/swap.py [--models DIR] [--episodes 6] [--steps 40] [--out swap.json]

One server (`l3p serve --models`, own process, no thread variables in its environment) hosts two
models: "arm" (version 1: the shipped FetchPush-v4) and "pick" (FetchPickAndPlace-v4). 32 closed-
loop sessions (asyncio clients in this process, one channel each), half on each model, half of
each on unary calls and half on Control streams, run `--episodes` episodes of `--steps` steps,
each episode with its own seed and inputs:

1. reference: the whole workload with nothing swapped (every action recorded, per-step latency);
2. swap: the same workload; at 20% of its steps, version 2 of "arm" (another export of
   FetchPush-v4: untrained networks, so its actions differ) is copied into the repository and
   ReloadModels is called. Counted: failed calls, lost episodes (not completed), episodes whose
   actions are not bit for bit the reference's (those that started on version 1), and episodes
   that started on version 2 whose actions differ from the same episode replayed alone afterwards.
   The p99 step during the swap (steps begun between the reload call and its answer, plus one
   second after it: the old version is still draining) is compared with the reference run's p99;
3. several models vs one: the same 32 sessions all on one model, or split over two names of the
   same bundle, measured in alternation (rounds), so both see the same machine load;
4. copied under the watch: a second server, watching its repository every --watch-interval
   seconds (no ReloadModels), runs the same workload; at 20% of its steps version 2 is copied in
   with a plain `cp -r` (files land one by one: the watch may look at a half-copied version,
   refuse it, and must try it again once the rest has landed). Counted: failed calls, lost
   episodes, the seconds from the copy's end to version 2 serving, and the "arm" episodes
   started after the copy's end on each version: those on version 1 started while the watch had
   not yet looked (at most --watch-interval plus a load), every later one must be on version 2.

Machines are shared and noisy: compare rows within a run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np

from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from l3p.serving.local_server import LocalServer
from l3p.serving.threads import without_thread_variables
from workloads import REPO, TIMEOUT, make_episodes, summarize

SESSIONS = 32
SWAP_AT = 0.2  # the share of the swap run's steps after which the new version is loaded
DRAIN_S = 1.0  # after the reload answers, steps still count as "during the swap" this long
ADMIN_TOKEN = "swap-benchmark-admin-token"


class Run:
    """One pass of the workload: actions by (session, episode), step latencies with start times,
    failures, and the version each episode started on."""

    def __init__(self) -> None:
        self.actions: dict[tuple[int, int], list[list[float]]] = {}
        self.versions: dict[tuple[int, int], str] = {}
        self.started: dict[tuple[int, int], float] = {}  # when StartEpisode (or the stream's start) was sent
        self.steps: list[tuple[float, float]] = []  # (start time, latency)
        self.failures: list[str] = []
        self.done = 0


async def session(index: int, target: str, model: str, stream: bool, episodes, steps_done,
                  run: Run, on_step=None) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        for e, goal, observations in episodes:
            key = (index, e)
            start = pb.StartEpisodeRequest(goal=goal.tolist(), model=model,
                                           options=pb.EpisodeOptions(seed=index * 1000 + e))
            actions = []
            run.started[key] = time.perf_counter()
            try:
                if stream:
                    requests: asyncio.Queue = asyncio.Queue()
                    call = stub.Control(_drain(requests), timeout=TIMEOUT * 10)
                    await requests.put(pb.ControlRequest(start=start))
                    started = (await call.read()).started
                else:
                    started = await stub.StartEpisode(start, timeout=TIMEOUT)
                run.versions[key] = started.version
                for obs in observations:
                    begun = time.perf_counter()
                    if stream:
                        await requests.put(pb.ControlRequest(observation=pb.ActRequest(observation=obs.tolist())))
                        action = (await call.read()).action.action
                    else:
                        action = (await stub.Act(pb.ActRequest(session_id=started.session_id,
                                                               observation=obs.tolist()), timeout=TIMEOUT)).action
                    run.steps.append((begun, time.perf_counter() - begun))
                    actions.append(list(action))
                    steps_done[0] += 1
                    if on_step is not None:
                        on_step()
                if stream:
                    await requests.put(None)  # ends the request stream: the episode ends with it
                    if await call.read() is not grpc.aio.EOF:
                        raise RuntimeError("the server answered after the stream ended")
                else:
                    await stub.EndEpisode(pb.EndEpisodeRequest(session_id=started.session_id), timeout=TIMEOUT)
            except grpc.RpcError as err:
                run.failures.append(f"session {index} episode {e}: {err.code().name} {err.details()}")
                continue
            run.actions[key] = actions
            run.done += 1


async def _drain(requests: asyncio.Queue):
    while (request := await requests.get()) is not None:
        yield request


def plan(models: list[str], workloads: dict[str, list]) -> list[tuple[int, str, bool, list]]:
    """(index, model, stream, episodes) per session: models round-robin, unary and streams alternating."""
    sessions = []
    for i in range(SESSIONS):
        model = models[i % len(models)]
        episodes = [(e, goal, obs) for e, (goal, obs) in enumerate(workloads[model][i])]
        sessions.append((i, model, (i // len(models)) % 2 == 1, episodes))
    return sessions


async def run_workload(target: str, sessions, run: Run, on_step=None) -> float:
    steps_done = [0]
    started = time.perf_counter()
    await asyncio.gather(*(session(i, target, model, stream, episodes, steps_done, run, on_step)
                           for i, model, stream, episodes in sessions))
    return time.perf_counter() - started


def swap_trigger(total_steps: int) -> tuple[asyncio.Event, Callable[[], None]]:
    """An event set after SWAP_AT of the run's steps, and the per-step callback that counts them."""
    trigger = asyncio.Event()
    counted = [0]

    def on_step() -> None:
        counted[0] += 1
        if counted[0] == int(SWAP_AT * total_steps):
            trigger.set()

    return trigger, on_step


async def swap_run(target: str, sessions, new_version: Path, destination: Path, total_steps: int) -> tuple[Run, dict]:
    run = Run()
    window: dict = {}
    trigger, on_step = swap_trigger(total_steps)

    async def swapper() -> None:
        await trigger.wait()
        shutil.copytree(new_version, destination)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = pb_grpc.PlannerStub(channel)
            window["begin"] = time.perf_counter()
            answer = await stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT,
                                             metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),))
            window["answered"] = time.perf_counter()
            window["loads"] = [(load.model, load.version, load.loaded, load.error) for load in answer.loads]

    await asyncio.gather(run_workload(target, sessions, run, on_step), swapper())
    return run, window


async def copy_run(target: str, sessions, new_version: Path, destination: Path, total_steps: int) -> tuple[Run, dict]:
    """The workload while `cp -r` copies version 2 in under the watch; when the copy ended and
    when the server first reported version 2 of "arm" current."""
    run = Run()
    window: dict = {}
    trigger, on_step = swap_trigger(total_steps)
    finished = asyncio.Event()

    async def workload() -> None:
        try:
            await run_workload(target, sessions, run, on_step)
        finally:
            finished.set()

    async def copier() -> None:
        await trigger.wait()
        copy = await asyncio.create_subprocess_exec("cp", "-r", str(new_version), str(destination))
        window["cp_returncode"] = await copy.wait()
        window["copied"] = time.perf_counter()
        async with grpc.aio.insecure_channel(target) as channel:
            stub = pb_grpc.PlannerStub(channel)
            while not finished.is_set():
                listed = await stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
                arm = next(m for m in listed.models if m.info.model == "arm")
                if arm.info.version == "2":
                    window["served"] = time.perf_counter()
                    return
                await asyncio.sleep(0.02)

    await asyncio.gather(workload(), copier())
    return run, window


def p99(latencies: list[float]) -> float:
    return float(np.percentile(latencies, 99)) if latencies else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=REPO / "models", help="the shipped models")
    parser.add_argument("--episodes", type=int, default=6, help="episodes per session")
    parser.add_argument("--steps", type=int, default=40, help="steps per episode")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the one-vs-several rows")
    parser.add_argument("--watch-interval", type=float, default=1.0, metavar="SECONDS",
                        help="the watching server's --poll-interval (row 4)")
    parser.add_argument("--out", default=None, metavar="swap.json")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO / "tests"))
    from bundles import export_untrained_bundle  # torch: the new version is exported here

    scratch = Path(tempfile.mkdtemp(prefix="l3p-swap-"))
    try:
        root = scratch / "models"
        shutil.copytree(args.models / "FetchPush-v4", root / "arm" / "1")
        shutil.copytree(args.models / "FetchPickAndPlace-v4", root / "pick")
        shutil.copytree(args.models / "FetchPush-v4", root / "arm-b")  # the same bundle, another name
        new_version = export_untrained_bundle(scratch / "arm-v2", env_id="FetchPush-v4", n_landmarks=50)
        admin = scratch / "admin.txt"
        admin.write_text(f"benchmark:{ADMIN_TOKEN}\n")
        bundles = {"arm": load_bundle(root / "arm" / "1"), "pick": load_bundle(root / "pick")}
        bundles["arm-b"] = bundles["arm"]
        workloads = {name: [make_episodes(b, args.episodes, args.steps, seed=1 + i)
                            for i in range(SESSIONS)] for name, b in bundles.items()}
        server = LocalServer(models=root, env=without_thread_variables(os.environ),
                             extra_args=["--max-sessions", "2048", "--poll-interval", "0",
                                         "--admin-token-file", str(admin)])
        with server:
            target = server.target
            two = plan(["arm", "pick"], workloads)
            total = SESSIONS * args.episodes * args.steps

            reference = Run()
            asyncio.run(run_workload(target, two, reference))
            swapped, window = asyncio.run(swap_run(target, two, new_version, root / "arm" / "2", total))

            # Episodes that started before the swap (and every "pick" one) must be the reference's;
            # those that started on version 2 are replayed afterwards, version 2 being current.
            on_v2 = {key for key, version in swapped.versions.items() if version == "2"}
            mismatched_v1 = sum(actions != reference.actions.get(key)
                                for key, actions in swapped.actions.items() if key not in on_v2)
            replay = Run()
            asyncio.run(run_workload(target, [(i, model, stream, [ep for ep in eps if (i, ep[0]) in on_v2])
                                              for i, model, stream, eps in two], replay))
            mismatched_v2 = sum(swapped.actions[key] != replay.actions.get(key)
                                for key in on_v2 if key in swapped.actions)
            end = window["answered"] + DRAIN_S
            during = [lat for begun, lat in swapped.steps if window["begin"] <= begun <= end]

            # Several models vs one, alternating.
            one_model, two_models = [], []
            one_plan, two_plan = plan(["arm"], workloads), plan(["arm", "arm-b"], workloads)
            one_wall = two_wall = 0.0
            for _ in range(args.rounds):
                for sessions, latencies, which in ((one_plan, one_model, "one"), (two_plan, two_models, "two")):
                    run = Run()
                    wall = asyncio.run(run_workload(target, sessions, run))
                    latencies += [lat for _, lat in run.steps]
                    if which == "one":
                        one_wall += wall
                    else:
                        two_wall += wall

        # Copied in with cp -r under the watch: a server of its own, no ReloadModels.
        watched = scratch / "watched"
        shutil.copytree(args.models / "FetchPush-v4", watched / "arm" / "1")
        shutil.copytree(args.models / "FetchPickAndPlace-v4", watched / "pick")
        watcher = LocalServer(models=watched, env=without_thread_variables(os.environ), stderr_lines=100_000,
                              extra_args=["--max-sessions", "2048", "--poll-interval", str(args.watch_interval)])
        with watcher:
            copied, copy_window = asyncio.run(copy_run(watcher.target, two, new_version, watched / "arm" / "2", total))
            events = [json.loads(line) for line in watcher.stderr_tail(100_000).splitlines()]
        refused_mid_copy = [e["error"] for e in events
                            if e.get("event") == "model_load_failed" and e.get("version") == "2"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    expected_episodes = SESSIONS * args.episodes
    ref_p99 = p99([lat for _, lat in reference.steps])
    swap_p99 = p99(during)
    results = {
        "sessions": SESSIONS, "episodes_per_session": args.episodes, "steps_per_episode": args.steps,
        "reload": {"loads": window["loads"], "seconds": round(window["answered"] - window["begin"], 3)},
        "failed_calls": len(reference.failures) + len(swapped.failures),
        "failures": (reference.failures + swapped.failures)[:10],
        "lost_episodes": expected_episodes - swapped.done,
        "episodes_started_on_v1": sum(v == "1" for v in swapped.versions.values()),
        "episodes_started_on_v2": len(on_v2),
        "episodes_not_matching_their_version": mismatched_v1 + mismatched_v2,
        "step_reference": summarize([lat for _, lat in reference.steps]),
        "step_during_swap": summarize(during),
        "p99_ratio_swap_over_reference": round(swap_p99 / ref_p99, 2),
        "one_model_32_sessions": {**summarize(one_model), "actions_per_s": round(len(one_model) / one_wall)},
        "two_models_16_16": {**summarize(two_models), "actions_per_s": round(len(two_models) / two_wall)},
        "copied_under_watch": copy_summary(copied, copy_window, refused_mid_copy, expected_episodes,
                                           args.watch_interval),
    }
    print_table(results)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
        print(f"wrote {args.out}")
    return 0


def copy_summary(run: Run, window: dict, refused: list[str], expected_episodes: int, interval: float) -> dict:
    """Row 4's counts: arm episodes started after the copy's end, by version and by whether the
    server already reported version 2 when they started."""
    copied, served = window["copied"], window.get("served", float("inf"))
    arm = [key for key, version in run.versions.items() if version in ("1", "2")]
    after_copy = [key for key in arm if run.started[key] >= copied]
    after_served = [key for key in after_copy if run.started[key] >= served]
    return {
        "watch_interval_s": interval, "cp_returncode": window["cp_returncode"],
        "copy_to_served_s": round(served - copied, 3) if served != float("inf") else None,
        "refusals_of_v2_while_copying": refused,
        "failed_calls": len(run.failures), "failures": run.failures[:10],
        "lost_episodes": expected_episodes - run.done,
        "arm_episodes_started_after_copy": len(after_copy),
        "of_which_on_v2": sum(run.versions[key] == "2" for key in after_copy),
        "started_after_copy_before_v2_served_on_v1": sum(run.versions[key] == "1" for key in after_copy
                                                         if run.started[key] < served),
        "arm_episodes_started_after_v2_served": len(after_served),
        "of_which_on_v2_after_served": sum(run.versions[key] == "2" for key in after_served),
        "arm_episodes_on_v2_in_all": sum(run.versions[key] == "2" for key in arm),
    }


def print_table(r: dict) -> None:
    def row(name: str, s: dict) -> str:
        extra = f"  {s['actions_per_s']:>8} actions/s" if "actions_per_s" in s else ""
        return f"{name:<44} {s['n']:>7} {s['p50_us']:>9} {s['p99_us']:>9}{extra}"

    print(f"hot swap under {r['sessions']} live sessions (2 models, unary + streams), "
          f"{r['episodes_per_session']} episodes x {r['steps_per_episode']} steps each")
    print(f"{'':<44} {'steps':>7} {'p50 us':>9} {'p99 us':>9}")
    print(row("step, nothing swapped (reference)", r["step_reference"]))
    print(row("step during the swap (reload + 1 s)", r["step_during_swap"]))
    print(row("one model, 32 sessions", r["one_model_32_sessions"]))
    print(row("two models (same bundle), 16 + 16 sessions", r["two_models_16_16"]))
    print(f"reload: {r['reload']['loads']} in {r['reload']['seconds']} s")
    print(f"failed calls {r['failed_calls']}, lost episodes {r['lost_episodes']}, episodes started on "
          f"v1/v2 {r['episodes_started_on_v1']}/{r['episodes_started_on_v2']}, episodes whose actions "
          f"differ from their version's {r['episodes_not_matching_their_version']}")
    def ok(condition: bool) -> str:
        return "met" if condition else "NOT met"

    print(f"target: 0 failed, 0 lost, 0 mismatched: {ok(r['failed_calls'] == r['lost_episodes'] == r['episodes_not_matching_their_version'] == 0)}; "
          f"p99 during swap <= 2x reference ({r['p99_ratio_swap_over_reference']}x): "
          f"{ok(r['p99_ratio_swap_over_reference'] <= 2)}")
    c = r["copied_under_watch"]
    served = (f"{c['copy_to_served_s']} s after the copy ended" if c["copy_to_served_s"] is not None
              else "not before the workload ended")
    print(f"copied in with cp -r under a {c['watch_interval_s']:g} s watch (no ReloadModels): version 2 served "
          f"{served}; refusals while copying: {len(c['refusals_of_v2_while_copying'])}")
    print(f"  arm episodes started after the copy ended: {c['arm_episodes_started_after_copy']}, on v2 "
          f"{c['of_which_on_v2']}, on v1 {c['started_after_copy_before_v2_served_on_v1']} (started before the watch "
          f"had loaded v2); started after v2 served: {c['arm_episodes_started_after_v2_served']}, on v2 "
          f"{c['of_which_on_v2_after_served']}")
    print(f"  failed calls {c['failed_calls']}, lost episodes {c['lost_episodes']}")
    print(f"target: v2 served, every episode started after it on v2, 0 failed, 0 lost: "
          f"{ok(c['copy_to_served_s'] is not None and c['failed_calls'] == c['lost_episodes'] == 0 and c['of_which_on_v2_after_served'] == c['arm_episodes_started_after_v2_served'] > 0)}")


if __name__ == "__main__":
    sys.exit(main())
