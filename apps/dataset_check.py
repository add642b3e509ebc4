"""``l3p dataset check MAPPING [--env-id ENV | --bundle DIR]``: the mapping's sizes against the env
(made by the simulator) or a model bundle (its manifest), before anything is recorded; exit 2 with
one line per problem, each naming the fix. ``l3p ros2 record`` runs the part that needs neither."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from l3p.core.commandline import did_you_mean
from l3p.core.dataset import DatasetError
from l3p.datasets.mapping import load_mapping
from l3p.datasets.sizes import describe, size_problems


def check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l3p dataset check", description="a mapping's sizes against the env or "
                                     "a model bundle, before recording (needs [datasets]; --env-id needs [sim])")
    parser.add_argument("mapping", type=Path, metavar="MAPPING", help="the mapping (YAML)")
    against = parser.add_mutually_exclusive_group()
    against.add_argument("--env-id", default=None, help="the env to compare with (default the mapping's env_id)")
    against.add_argument("--bundle", type=Path, metavar="DIR", help="a model bundle to compare with")
    return parser


def env_dims(env_id: str) -> dict[str, int]:
    """The env's obs, goal and action sizes; an unknown id is a DatasetError naming near ones."""
    try:
        import gymnasium as gym

        from l3p.sim.envs import UnknownEnvError, env_spec, make_env
        from l3p.sim.render import close_env
    except ImportError:
        raise DatasetError(f"checking against env {env_id!r} needs the simulator: pip install 'l3p-service[sim]' "
                           "(or check against the model: --bundle DIR)") from None
    try:
        env = make_env(env_id)
    except UnknownEnvError as err:
        near = did_you_mean(env_id, list(gym.registry))
        raise DatasetError(f"env_id {env_id!r} is not an env this install can make{near}: {err}") from None
    try:
        spec = env_spec(env)
    finally:
        close_env(env)
    return {"obs": spec.obs_dim, "goal": spec.goal_dim, "action": spec.action_dim}


def bundle_dims(bundle: Path) -> dict[str, int]:
    try:
        return dict(json.loads((bundle / "manifest.json").read_text())["dims"])
    except (OSError, ValueError, KeyError) as err:
        raise DatasetError(f"--bundle {bundle}: no readable manifest.json with dims ({err})") from None


def import_dims(env_id: str) -> tuple[dict[str, int], str] | None:
    """What ``l3p dataset import`` checks a recording against: the env's sizes; None (and one line
    saying so) where this install cannot make it and its id is not a misspelling of one it can."""
    if not env_id:
        return None
    try:
        return env_dims(env_id), f"env {env_id}"
    except DatasetError as err:
        if "did you mean" in str(err):
            raise
        print(f"l3p dataset import: sizes not checked against an env ({err})", file=sys.stderr, flush=True)
        return None


def run_check(argv: list[str]) -> int:
    args = check_parser().parse_args(argv)
    mapping = load_mapping(args.mapping, env_id=args.env_id)
    if args.bundle is not None:
        against, dims = f"bundle {args.bundle}", bundle_dims(args.bundle)
    else:
        against, dims = f"env {mapping.env_id}", env_dims(mapping.env_id)
    problems = size_problems(mapping, dims, against)
    if problems:
        raise DatasetError(f"{mapping.where()} does not fit {against}: " + "; ".join(problems))
    print(f"{mapping.where()} fits {against} (obs {dims['obs']}, goal {dims['goal']}, action {dims['action']}): "
          f"{describe(mapping)}")
    return 0
