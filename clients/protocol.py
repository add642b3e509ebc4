"""Which env and which episodes a run drives: the env the served model runs on (checked against
the model), the episode protocol (the command line's, else the model's own evaluation's), and the
env seed and maze pair of each episode."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

from l3p.clients.client import ModelInfo
from l3p.core.errors import USAGE, L3PError
from l3p.core.names import install_hint

# A missing simulator fails at import like any dependency, so `l3p` can say which extra to install.
for _dep in ("gymnasium", "gymnasium_robotics", "mujoco"):
    if importlib.util.find_spec(_dep) is None:
        raise ImportError(f"l3p.clients.protocol needs {_dep}: {install_hint('sim')}", name=_dep)

from l3p.sim import mazes  # noqa: E402
from l3p.sim.envs import UnknownEnvError, evaluation_env_id, evaluation_tasks, make_env, task_options  # noqa: E402


def reset_options(start: Any) -> dict[str, Any] | None:
    """The env's reset options for an `episode_plan` start: a task number, a maze cell pair, or None."""
    if start is None:
        return None
    if isinstance(start, int):
        return {"task_id": start}
    return mazes.reset_options(start)


class EnvMismatchError(L3PError):
    """The env cannot be run against the served model (another env, other dims, no maze)."""

    exit_code = USAGE


@dataclasses.dataclass(frozen=True)
class EpisodeProtocol:
    """Which episodes to run: the start/goal draw, far pairs' BFS distance, the episode length."""

    pairs: str = "random"
    min_cells: int = mazes.MIN_FAR_CELLS
    max_steps: int | None = None  # None: the env's own time limit
    task: int | None = None  # every episode on this evaluation task (an env with fixed tasks)


def episode_protocol(args: Any, provenance: dict[str, Any], env_id: str) -> EpisodeProtocol:
    """The episodes to run: what ``args`` (a config's `ProtocolOptions`) says, else what the model's training evaluated
    (its provenance's ``success`` block: the ant maze's end-to-end pairs over 500 steps, say), for
    a maze only far pairs; else the defaults."""
    trained = provenance.get("success", {}) if isinstance(provenance, dict) else {}
    trained = trained if isinstance(trained, dict) else {}
    far = trained.get("eval_pairs") == "far" and mazes.is_maze(env_id)
    pairs = args.pairs or ("far" if far else trained.get("eval_pairs") if trained.get("eval_pairs") == "tasks"
                           else "random")
    task = getattr(args, "task", None)
    if task is not None:
        pairs = "tasks"
    own = pairs == "far" and far  # the model's own far pairs: its distance and length apply
    min_cells = args.min_cells or (own and trained.get("eval_min_cells")) or mazes.MIN_FAR_CELLS
    max_steps = args.max_steps or (own and trained.get("eval_max_steps")) or None
    return EpisodeProtocol(pairs, int(min_cells), None if max_steps is None else int(max_steps), task)


def open_env(env_id: str, *, render: bool = False, size: int = 480, max_steps: int | None = None) -> Any:
    """``make_env`` for a client process that shares the machine with the server: one BLAS thread
    whatever the caller's environment says (the envs' numpy work is tiny; a pool oversubscribes).
    ``max_steps``: the episode length, default the env's own time limit."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    return make_env(env_id, render=render, size=size, max_episode_steps=max_steps)


def episode_plan(env: Any, env_id: str, episodes: int, seed: int, pairs: str = "random",
                 min_cells: int = mazes.MIN_FAR_CELLS, task: int | None = None) -> list[tuple[int, Any]]:
    """(env seed, start) per episode: seeds ``seed + i``; the start is None (the env's own draw), with
    ``pairs="far"`` the i-th far start/goal cell pair of the list drawn from ``seed`` (mazes only),
    with ``pairs="tasks"`` an evaluation task number: ``task``, or i mod the env's tasks + 1."""
    seeds = [seed + i for i in range(episodes)]
    if pairs == "random":
        return [(s, None) for s in seeds]
    if pairs == "tasks":
        try:
            n = evaluation_tasks(env)
        except UnknownEnvError as err:
            raise EnvMismatchError(f"--pairs tasks: {err}") from None
        if task is not None and not 1 <= task <= n:
            raise EnvMismatchError(f"--task {task}: {env_id} has tasks 1..{n}")
        return [(s, task if task is not None else task_options(env, i)["task_id"]) for i, s in enumerate(seeds)]
    if not mazes.is_maze(env_id):
        raise EnvMismatchError(f"--pairs {pairs} needs a maze env, not {env_id}")
    try:
        return list(zip(seeds, mazes.far_pairs(mazes.maze_map(env), episodes, seed, min_cells)))
    except ValueError as err:  # a --min-cells longer than the maze allows
        raise EnvMismatchError(f"{env_id}: {err} (lower --min-cells)") from None


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
