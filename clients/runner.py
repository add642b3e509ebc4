"""Drive goal envs (Fetch, mazes, your own ``module:EnvClass``) through the planner server.

``l3p run --server HOST:PORT --env FetchPush-v4 --episodes 5 --seed 0 --video push.mp4``
``l3p run --server HOST:PORT --episodes 5 --pairs far --seed 2000000000``   (a served maze model)

The env is built by ``l3p.sim.envs.make_env``, the one the model was trained with (default: the
served model's env id). Episode ``i`` resets the env with seed ``seed + i`` and starts the planner
session with the same seed, so a run is reproducible and ``l3p eval`` can replay the same
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

import argparse
import dataclasses
import importlib.util
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from l3p.clients.client import (
    ModelInfo,
    NotFound,
    PlannerClient,
    PlannerError,
    channel_credentials,
    read_token,
)
from l3p.core.errors import UNAVAILABLE, USAGE, L3PError
from l3p.core.names import DISTRIBUTION, VARIANT_HELP, parse_variant, variant_arg

# A missing simulator fails at import like any dependency, so `l3p` can say which extra to install.
for _dep in ("gymnasium", "gymnasium_robotics", "mujoco"):
    if importlib.util.find_spec(_dep) is None:
        raise ImportError(f"l3p.clients.runner needs {_dep}: pip install '{DISTRIBUTION}[sim]'", name=_dep)

from l3p.sim import mazes  # noqa: E402
from l3p.sim.envs import UnknownEnvError, evaluation_env_id, goal_adapter, make_env  # noqa: E402
from l3p.sim.render import VideoRecorder, close_env  # noqa: E402

DEFAULT_SERVER = "127.0.0.1:50051"


# --------------------------------------------------------------------------- results


def percentile_ms(latencies_s: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(latencies_s) * 1e3, q)) if len(latencies_s) else float("nan")


@dataclasses.dataclass
class EpisodeResult:
    index: int
    env_seed: int
    planner_seed: int
    success: bool
    final_distance: float  # |achieved_goal - desired_goal| after the last step
    steps: int
    replans: int
    latencies_s: list[float]  # per step, client-side round trip
    resumes: int = 0  # sessions replaced after their server was lost
    pair: tuple[tuple[int, int], tuple[int, int]] | None = None  # maze start / goal cells, if pinned
    # A robot that can fall (its env declares a torso, e.g. the ant): the step after which it first
    # lay fallen, None if it stayed up. can_fall False: the question does not apply.
    can_fall: bool = False
    fell_at: int | None = None
    # With record=True: achieved goal before each step (and after the last), the goal, and the
    # subgoal index pursued at each step (-1 = final goal).
    trajectory: np.ndarray | None = None
    goal: np.ndarray | None = None
    subgoal_indices: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "index": self.index,
            "env_seed": self.env_seed,
            "planner_seed": self.planner_seed,
            "success": self.success,
            "final_distance": self.final_distance,
            "steps": self.steps,
            "replans": self.replans,
            "resumes": self.resumes,
            "latency_ms": {"p50": percentile_ms(self.latencies_s, 50),
                           "p99": percentile_ms(self.latencies_s, 99)},
        }
        if self.pair is not None:
            out["pair"] = {"start_cell": list(self.pair[0]), "goal_cell": list(self.pair[1])}
        if self.can_fall:
            out["fell_at"] = self.fell_at
        return out

    @property
    def fell_text(self) -> str:
        """"fell at step N" for an episode in which the robot fell, else ""."""
        return f"fell at step {self.fell_at}" if self.fell_at is not None else ""


@dataclasses.dataclass
class RunResult:
    env_id: str
    mode: str
    stream: bool
    episodes: list[EpisodeResult]

    @property
    def successes(self) -> list[bool]:
        return [e.success for e in self.episodes]

    @property
    def latencies_s(self) -> list[float]:
        return [t for e in self.episodes for t in e.latencies_s]

    @property
    def latency_p50_ms(self) -> float:
        return percentile_ms(self.latencies_s, 50)

    @property
    def latency_p99_ms(self) -> float:
        return percentile_ms(self.latencies_s, 99)

    @property
    def mean_final_distance(self) -> float:
        return float(np.mean([e.final_distance for e in self.episodes])) if self.episodes else float("nan")

    @property
    def resumes(self) -> int:
        return sum(e.resumes for e in self.episodes)

    @property
    def falls(self) -> int | None:
        """Episodes in which the robot fell; None for a robot that cannot."""
        if not any(e.can_fall for e in self.episodes):
            return None
        return sum(e.fell_at is not None for e in self.episodes)

    @property
    def replans_per_episode(self) -> float:
        return float(np.mean([e.replans for e in self.episodes])) if self.episodes else float("nan")


# --------------------------------------------------------------------------- episodes


def episode_plan(env: Any, env_id: str, episodes: int, seed: int, pairs: str = "random",
                 min_cells: int = mazes.MIN_FAR_CELLS) -> list[tuple[int, Any]]:
    """(env seed, maze pair or None) per episode: seeds ``seed + i``; with ``pairs="far"`` also
    the i-th far start/goal pair of the list drawn from ``seed`` (mazes only)."""
    seeds = [seed + i for i in range(episodes)]
    if pairs == "random":
        return [(s, None) for s in seeds]
    if not mazes.is_maze(env_id):
        raise EnvMismatchError(f"--pairs {pairs} needs a maze env, not {env_id}")
    try:
        return list(zip(seeds, mazes.far_pairs(mazes.maze_map(env), episodes, seed, min_cells)))
    except ValueError as err:  # a --min-cells longer than the maze allows
        raise EnvMismatchError(f"{env_id}: {err} (lower --min-cells)") from None


class EnvMismatchError(L3PError):
    """The env cannot be run against the served model (another env, other dims, no maze)."""

    exit_code = USAGE


class ConnectionConfigError(L3PError):
    """A TLS or token file cannot be used."""

    exit_code = USAGE


class ServerUnreachable(L3PError):
    """The planner server did not answer the first call: down, a wrong address, TLS or token refused."""

    exit_code = UNAVAILABLE


def check_env(info: ModelInfo, env_id: str, env: Any, force: bool = False) -> list[str]:
    """Refuse (or with ``force``, warn about) an env the served model was not trained on."""
    problems = []
    if env_id != info.env_id and env_id != _evaluation_env_id_or_none(info.env_id):
        problems.append(f"the server's model was trained on {info.env_id!r}, not {env_id!r}")
    space = env.observation_space
    obs_dim, goal_dim = space["observation"].shape[0], space["desired_goal"].shape[0]
    if (obs_dim, goal_dim) != (info.obs_dim, info.goal_dim):
        # Dims can't be forced: the server would reject every observation.
        problems.append(f"{env_id} has obs/goal dims {obs_dim}/{goal_dim}, the model "
                        f"{info.obs_dim}/{info.goal_dim}")
        raise EnvMismatchError("; ".join(problems))
    if problems and not force:
        raise EnvMismatchError("; ".join(problems) + " (pass --force-env to run anyway)")
    return problems


def _evaluation_env_id_or_none(env_id: str) -> str | None:
    try:
        return evaluation_env_id(env_id)
    except UnknownEnvError:  # the model's env is not installed here: only an exact match runs
        return None


def served_env_id(info: ModelInfo) -> str:
    """The env a served model runs and is evaluated on: its training env's declared evaluation env
    (Place-Inside-Box: the in-box goal alone), else the training env."""
    return evaluation_env_id(info.env_id)


def run_episode(
    client: PlannerClient,
    env: Any,
    *,
    index: int,
    seed: int,
    mode: str,
    stream: bool = False,
    video: VideoRecorder | None = None,
    pair: tuple[tuple[int, int], tuple[int, int]] | None = None,
    record: bool = False,
) -> EpisodeResult:
    """One episode: reset with ``seed`` (pinned to a maze ``pair`` if given), act until the env's
    time limit. ``mode`` is a variant, ``MODE[@key=value...]``."""
    planner_mode, overrides = parse_variant(mode)
    adapter = goal_adapter(env)
    obs, info = env.reset(seed=seed, options=mazes.reset_options(pair) if pair else None)
    open_episode = client.stream_episode if stream else client.episode
    latencies, replans, steps, fell_at = [], 0, 0, None
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
        pair=pair,
        can_fall=can_fall,
        fell_at=fell_at,
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
) -> RunResult:
    """Episodes ``seed + i`` for ``i < episodes`` under one planner variant (see `episode_plan`)."""
    result = RunResult(env_id=env_id, mode=mode, stream=stream, episodes=[])
    for i, (env_seed, pair) in enumerate(episode_plan(env, env_id, episodes, seed, pairs, min_cells)):
        ep = run_episode(client, env, index=i, seed=env_seed, mode=mode, stream=stream, video=video,
                         pair=pair, record=record)
        result.episodes.append(ep)
        if on_episode is not None:
            on_episode(ep)
    return result


# --------------------------------------------------------------------------- CLI


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=DEFAULT_SERVER, metavar="HOST:PORT",
                        help=f"planner server address (default {DEFAULT_SERVER})")
    parser.add_argument("--model", default=None, metavar="NAME",
                        help="the served model to drive (l3p serve --models; default: the "
                             "server's default model)")
    parser.add_argument("--env", default=None, metavar="ENV",
                        help="goal env: a gymnasium id or package.module:EnvClass (default: the served model's env)")
    parser.add_argument("--force-env", action="store_true",
                        help="run even if --env differs from the env the model was trained on")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0,
                        help="episode i uses env and planner seed SEED + i")
    parser.add_argument("--stream", action="store_true",
                        help="one Control stream per episode instead of unary Act calls")
    add_protocol_arguments(parser, positive=True)
    parser.add_argument("--timeout", type=float, default=5.0, help="per-call deadline, seconds")
    tls = parser.add_argument_group("TLS and authentication (l3p serve --tls-cert/--auth-token-file)")
    tls.add_argument("--tls-ca", metavar="PEM",
                     help="connect with TLS, trusting this CA (or the server's self-signed certificate)")
    tls.add_argument("--tls-cert", metavar="PEM", help="client certificate, for mutual TLS")
    tls.add_argument("--tls-key", metavar="PEM", help="the client certificate's private key")
    tls.add_argument("--tls-server-name", metavar="NAME",
                     help="name to check the server's certificate against (default: the host in --server)")
    tls.add_argument("--token-file", metavar="FILE",
                     help="send the bearer token in FILE (first line, 'token' or 'name:token')")


def add_run_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_connection_arguments(parser)
    parser.add_argument("--planner", type=variant_arg, default="l3p", metavar="MODE[@KEY=VALUE...]",
                        help=VARIANT_HELP)
    parser.add_argument("--video", default=None, metavar="OUT.mp4",
                        help="record all episodes (offscreen rendering) with the landmarks and the subgoal marked")
    parser.add_argument("--video-size", type=int, default=480, help="frame width = height, pixels")
    return parser


def connect(args: argparse.Namespace) -> tuple[PlannerClient, ModelInfo, str]:
    """Client, the server's model info, and the env id to run (--env or ``served_env_id``)."""
    tls = args.tls_ca or args.tls_cert or args.tls_key
    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key) if tls else None
        token = read_token(args.token_file) if args.token_file else None
    except (OSError, ValueError) as err:
        raise ConnectionConfigError(str(err)) from None
    client = PlannerClient(args.server, timeout_s=args.timeout, credentials=credentials, token=token,
                           tls_server_name=args.tls_server_name, model=args.model)
    try:
        info = client.model_info()
        env_id = args.env or served_env_id(info)
    except NotFound as err:  # the server answered: it does not serve that model
        client.close()
        raise EnvMismatchError(f"{args.server}: {err.message}") from None
    except PlannerError as err:
        client.close()
        raise ServerUnreachable(f"cannot reach the planner server at {args.server}: {err}") from err
    except BaseException:
        client.close()
        raise
    return client, info, env_id


def _warn(msg: str) -> None:
    print(f"WARNING: {msg}", file=sys.stderr)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


@dataclasses.dataclass(frozen=True)
class EpisodeProtocol:
    """Which episodes to run: the start/goal draw, far pairs' BFS distance, the episode length."""

    pairs: str = "random"
    min_cells: int = mazes.MIN_FAR_CELLS
    max_steps: int | None = None  # None: the env's own time limit


def add_protocol_arguments(parser: argparse.ArgumentParser, positive: bool = False) -> None:
    """--pairs / --min-cells / --max-steps, each defaulting to the model's own evaluation protocol."""
    number = _positive_int if positive else int
    parser.add_argument("--pairs", choices=("random", "far"), default=None,
                        help="start/goal draw: the env's own (random), or for mazes a fixed list of "
                             "pairs >= --min-cells apart by BFS, seeded by --seed (far); default: "
                             "how the model was evaluated in training")
    parser.add_argument("--min-cells", type=number, default=None, metavar="K",
                        help="--pairs far: start and goal cells at least K cells apart by BFS "
                             f"(default: the model's evaluation protocol, else {mazes.MIN_FAR_CELLS})")
    parser.add_argument("--max-steps", type=number, default=None, metavar="N",
                        help="episode length (default: the model's evaluation protocol, else the "
                             "env's own time limit)")


def episode_protocol(args: argparse.Namespace, provenance: dict[str, Any], env_id: str) -> EpisodeProtocol:
    """The episodes to run: what the command line says, else what the model's training evaluated
    (its provenance's ``success`` block: the ant maze's end-to-end pairs over 500 steps, say), for
    a maze only far pairs; else the defaults."""
    trained = provenance.get("success", {}) if isinstance(provenance, dict) else {}
    trained = trained if isinstance(trained, dict) else {}
    far = trained.get("eval_pairs") == "far" and mazes.is_maze(env_id)
    pairs = args.pairs or ("far" if far else "random")
    own = pairs == "far" and far  # the model's own far pairs: its distance and length apply
    min_cells = args.min_cells or (own and trained.get("eval_min_cells")) or mazes.MIN_FAR_CELLS
    max_steps = args.max_steps or (own and trained.get("eval_max_steps")) or None
    return EpisodeProtocol(pairs, int(min_cells), None if max_steps is None else int(max_steps))


def open_env(env_id: str, *, render: bool = False, size: int = 480, max_steps: int | None = None) -> Any:
    """``make_env`` for a client process that shares the machine with the server: one BLAS thread
    whatever the caller's environment says (the envs' numpy work is tiny; a pool oversubscribes).
    ``max_steps``: the episode length, default the env's own time limit."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    return make_env(env_id, render=render, size=size, max_episode_steps=max_steps)


def run(args: argparse.Namespace) -> RunResult:
    """``l3p run`` as a function: the RunResult (raises on connection or env problems)."""
    client, info, env_id = connect(args)
    video = None
    try:
        protocol = episode_protocol(args, info.provenance, env_id)
        env = open_env(env_id, render=bool(args.video), size=args.video_size, max_steps=protocol.max_steps)
        try:
            for problem in check_env(info, env_id, env, force=args.force_env):
                _warn(problem + " -- running anyway (--force-env)")
            if args.video:
                video = VideoRecorder(args.video, landmarks=info.landmarks)

            def report(ep: EpisodeResult) -> None:
                pair = f"  cells {ep.pair[0]} -> {ep.pair[1]}" if ep.pair else ""
                print(f"episode {ep.index:3d}  seed {ep.env_seed}{pair}  "
                      f"{'success' if ep.success else 'failure'}  "
                      f"final distance {ep.final_distance:.3f}  steps {ep.steps}  "
                      f"re-plans {ep.replans}  p50 {percentile_ms(ep.latencies_s, 50):.2f} ms"
                      f"{f'  resumed {ep.resumes}x' if ep.resumes else ''}"
                      f"{'  ' + ep.fell_text if ep.fell_text else ''}", flush=True)

            return run_episodes(client, env, env_id, episodes=args.episodes, seed=args.seed,
                                mode=args.planner, stream=args.stream, video=video,
                                on_episode=report, pairs=protocol.pairs, min_cells=protocol.min_cells)
        finally:
            if video is not None:
                video.close()
            close_env(env)
    finally:
        client.close()


def run_run(args: argparse.Namespace) -> int:
    """``l3p run``: a line per episode and a summary; expected failures raise L3PError."""
    result = run(args)
    n, k = len(result.episodes), sum(result.successes)
    print(f"{result.env_id}  planner {result.mode}{' (stream)' if result.stream else ''}: "
          f"success {k}/{n}  mean final distance {result.mean_final_distance:.3f}  "
          f"re-plans/episode {result.replans_per_episode:.1f}  "
          f"step latency p50 {result.latency_p50_ms:.2f} ms  p99 {result.latency_p99_ms:.2f} ms  "
          f"resumes {result.resumes}")
    if args.video:
        # Offscreen rendering competes for the CPU, which shows in the latencies above.
        print(f"video: {args.video} (latencies measured while rendering)")
    return 0
