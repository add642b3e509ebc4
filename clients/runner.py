"""Drive goal envs (Fetch, mazes, your own ``module:EnvClass``) through the planner server.

``l3p run --server HOST:PORT --env FetchPush-v4 --episodes 5 --video push.mp4``
``l3p run --server HOST:PORT --episodes 5 --pairs far``   (a served maze model)
``l3p run --config run.toml --episodes 20``   (options from a file; the command line wins)

This module runs episodes and is the ``l3p run`` command; its parts live beside it: the options
(``run_config``), the connection (``connection``), the env and its episodes (``protocol``) and the
results (``results``), each also importable from here.

The env is built by ``l3p.sim.envs.make_env``, the one the model was trained with (default: the
served model's env id). Episode ``i`` resets the env with seed ``seed + i`` (by default from the
held-out range, ``l3p.core.seeds``; the run prints its seeds) and starts the planner session with
the same seed, so a run is reproducible and ``l3p eval`` can replay the same
episodes under every planner mode. With ``--pairs far`` (mazes) episode ``i`` is also pinned to
the i-th pair of a fixed list of start/goal cells >= ``--min-cells`` (default 10) apart by BFS,
drawn from ``seed`` (``l3p.sim.mazes``). Episodes last the env's own time limit, or ``--max-steps``
(the paper's AntMaze test: 500 steps, the env's limit is 700). Success is the env's own flag at
the last step, read as the env declares it (``l3p.sim.envs.GoalEnvAdapter``). Latency is the
client-side round trip of each Act (or stream message).

A planner variant is a mode with optional per-episode overrides, ``MODE[@key=value...]``,
e.g. ``l3p@search=hard`` or ``naive@local_horizon=0``.

Episodes resume when their server is lost (the client library's ``resume=True``: a new
session with the same goal and options, one re-plan); each episode is still counted once, and
its resumes are reported. ``--video`` records every episode with the planner's subgoal marked
(``l3p.sim.render``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from l3p.clients.client import PlannerClient
from l3p.clients.connection import ConnectionConfigError, ServerUnreachable, connect
from l3p.clients.protocol import (
    EnvMismatchError,
    EpisodeProtocol,
    check_env,
    episode_plan,
    episode_protocol,
    open_env,
    reset_options,
    served_env_id,
)
from l3p.clients.results import EpisodeResult, RunResult, percentile_ms
from l3p.clients.run_config import RunConfig, seeds_text
from l3p.core.config import parse_variant
from l3p.sim import mazes
from l3p.sim.envs import goal_adapter
from l3p.sim.render import VideoRecorder, close_env

__all__ = [  # the runner's parts, importable from here
    "ConnectionConfigError", "EnvMismatchError", "EpisodeProtocol", "EpisodeResult", "RunResult",
    "ServerUnreachable", "check_env", "connect", "episode_plan", "episode_protocol", "open_env",
    "percentile_ms", "run", "run_episode", "run_episodes", "run_run", "served_env_id",
]


def run_episode(
    client: PlannerClient,
    env: Any,
    *,
    index: int,
    seed: int,
    mode: str,
    stream: bool = False,
    video: VideoRecorder | None = None,
    pair: tuple[tuple[int, int], tuple[int, int]] | int | None = None,
    record: bool = False,
) -> EpisodeResult:
    """One episode: reset with ``seed`` (pinned to a maze cell ``pair``, or an evaluation task
    number, if given: an `episode_plan` start), act until the env's time limit. ``mode`` is a
    variant, ``MODE[@key=value...]``."""
    planner_mode, overrides = parse_variant(mode)
    adapter = goal_adapter(env)
    obs, info = env.reset(seed=seed, options=reset_options(pair))
    open_episode = client.stream_episode if stream else client.episode
    latencies, replans, steps, fell_at, reached_at = [], 0, 0, None, None
    can_fall = adapter.can_fall
    trajectory, subgoals = [obs["achieved_goal"].copy()], []
    step = None
    with open_episode(obs["desired_goal"], mode=planner_mode, seed=seed, resume=True, **overrides) as ep:
        while True:
            step = ep.act(obs["observation"])
            latencies.append(step.latency_s)
            replans += step.replanned
            if video is not None:
                video.capture(env, step, f"{mode} ep {index} step {steps}")
            obs, _, terminated, truncated, info = env.step(step.action)
            steps += 1
            if can_fall and fell_at is None and adapter.fallen(obs["observation"]):
                fell_at = steps
            if reached_at is None and adapter.success(info):
                reached_at = steps
            if record:
                trajectory.append(obs["achieved_goal"].copy())
                subgoals.append(int(step.subgoal_index))
            if terminated or truncated:
                break
    success = adapter.success(info)
    if video is not None:
        video.capture(env, step, f"{mode} ep {index} step {steps} {'SUCCESS' if success else 'failure'}")
    return EpisodeResult(
        index=index,
        env_seed=seed,
        planner_seed=seed,
        success=success,
        final_distance=float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"])),
        steps=steps,
        replans=int(replans),
        latencies_s=latencies,
        resumes=ep.resumes,
        pair=None if isinstance(pair, int) else pair,
        task=pair if isinstance(pair, int) else None,
        can_fall=can_fall,
        fell_at=fell_at,
        reached_at=reached_at,
        trajectory=np.array(trajectory) if record else None,
        goal=np.array(obs["desired_goal"]) if record else None,
        subgoal_indices=subgoals if record else None,
    )


def run_episodes(
    client: PlannerClient,
    env: Any,
    env_id: str,
    *,
    episodes: int,
    seed: int = 0,
    mode: str = "l3p",
    stream: bool = False,
    video: VideoRecorder | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    pairs: str = "random",
    min_cells: int = mazes.MIN_FAR_CELLS,
    record: bool = False,
    task: int | None = None,
) -> RunResult:
    """Episodes ``seed + i`` for ``i < episodes`` under one planner variant (see `episode_plan`)."""
    result = RunResult(env_id=env_id, mode=mode, stream=stream, episodes=[])
    for i, (env_seed, pair) in enumerate(episode_plan(env, env_id, episodes, seed, pairs, min_cells, task)):
        ep = run_episode(client, env, index=i, seed=env_seed, mode=mode, stream=stream, video=video,
                         pair=pair, record=record)
        result.episodes.append(ep)
        if on_episode is not None:
            on_episode(ep)
    return result


def _warn(msg: str) -> None:
    print(f"WARNING: {msg}", file=sys.stderr)


def run(config: RunConfig) -> RunResult:
    """``l3p run`` as a function: the RunResult (raises on connection or env problems). With
    ``config.progress``, a line per episode on stdout."""
    client, info, env_id = connect(config)
    video = None
    try:
        protocol = episode_protocol(config, info.provenance, env_id)
        env = open_env(env_id, render=bool(config.video), size=config.video_size, max_steps=protocol.max_steps)
        try:
            for problem in check_env(info, env_id, env, force=config.force_env):
                _warn(problem + " -- running anyway (--force-env)")
            if config.video:
                video = VideoRecorder(config.video, landmarks=info.landmarks)
            print(f"{env_id}: {config.episodes} episodes, {seeds_text(config.seed, config.episodes)}", flush=True)

            def report(ep: EpisodeResult) -> None:
                pair = (f"  cells {ep.pair[0]} -> {ep.pair[1]}" if ep.pair else
                        f"  task {ep.task}" if ep.task is not None else "")
                print(f"episode {ep.index:3d}  seed {ep.env_seed}{pair}  "
                      f"{'success' if ep.success else 'failure'}  "
                      f"final distance {ep.final_distance:.3f}  steps {ep.steps}  "
                      f"re-plans {ep.replans}  p50 {percentile_ms(ep.latencies_s, 50):.2f} ms"
                      f"{f'  resumed {ep.resumes}x' if ep.resumes else ''}"
                      f"{'  ' + ep.fell_text if ep.fell_text else ''}", flush=True)

            return run_episodes(client, env, env_id, episodes=config.episodes, seed=config.seed,
                                mode=config.planner, stream=config.stream, video=video,
                                on_episode=report if config.progress else None, pairs=protocol.pairs,
                                min_cells=protocol.min_cells, task=protocol.task)
        finally:
            if video is not None:
                video.close()
            close_env(env)
    finally:
        client.close()


def run_run(config: RunConfig) -> int:
    """``l3p run``: a line per episode (unless --no-progress) and a summary; expected failures
    raise L3PError."""
    result = run(config)
    n, k = len(result.episodes), sum(result.successes)
    print(f"{result.env_id}  planner {result.mode}{' (stream)' if result.stream else ''}: "
          f"success {k}/{n}  mean final distance {result.mean_final_distance:.3f}  "
          f"re-plans/episode {result.replans_per_episode:.1f}  "
          f"step latency p50 {result.latency_p50_ms:.2f} ms  p99 {result.latency_p99_ms:.2f} ms  "
          f"resumes {result.resumes}")
    if config.video:
        # Offscreen rendering competes for the CPU, which shows in the latencies above.
        print(f"video: {config.video} (latencies measured while rendering)")
    return 0
