"""``l3p run``, ``l3p eval`` and ``l3p models``' configs: every option, its type, default and help, written once.

The command line and a config file (``l3p eval --config eval.toml``; keys are the option names
with ``_`` for ``-``) are both read into a `RunConfig` / `EvalConfig` (core/commandline.py), which
the runner and the evaluator take. Standard library and ``l3p.core`` only (and the maze constants,
numpy only), so ``--help`` lists the options in every install profile.

Episodes use the held-out seeds by default (``l3p.core.seeds.HELD_OUT``): results are measured on
episodes that neither training, its evaluations nor validation sweeps drew.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from l3p.core.commandline import add_config_arguments, option
from l3p.core.config import VARIANT_HELP, parse_variant, variant_arg
from l3p.core.seeds import HELD_OUT, seed_range
from l3p.sim.mazes import MIN_FAR_CELLS

DEFAULT_SERVER = "127.0.0.1:50051"
TLS = "TLS and authentication (l3p serve --tls-cert/--auth-token-file)"
PROTOCOL = "episodes (each option left unset follows how the model was evaluated in training)"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"must be > 0, got {text}")
    return value


def parse_modes(text: str) -> tuple[str, ...]:
    """Comma-separated variants, ``MODE[@key=value...]`` each, without repeats."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes:
        raise ValueError(f"give at least one planner mode; got {text!r}")
    for mode in modes:
        parse_variant(mode)  # ValueError names the mode, option or value
    return tuple(dict.fromkeys(modes))


@dataclass(frozen=True)
class ProtocolOptions:
    """Which episodes to run; each unset option follows the model's own evaluation protocol."""

    pairs: str | None = option(None, "start/goal draw: the env's own (random); for mazes a fixed list of "
                                     "pairs >= --min-cells apart by BFS, seeded by --seed (far); for an env with "
                                     "fixed evaluation tasks (OGBench's five) episode i on task i mod 5 + 1 "
                                     "(tasks); default: how the model was evaluated in training",
                               choices=("random", "far", "tasks"), group=PROTOCOL)
    task: int | None = option(None, "every episode on this one evaluation task of the env (OGBench's 1..5)",
                              parse=_positive_int, metavar="K", group=PROTOCOL)
    min_cells: int | None = option(None, "--pairs far: start and goal cells at least K cells apart by BFS "
                                         f"(default: the model's evaluation protocol, else {MIN_FAR_CELLS})",
                                   parse=_positive_int, metavar="K", group=PROTOCOL)
    max_steps: int | None = option(None, "episode length (default: the model's evaluation protocol, else the "
                                         "env's own time limit)", parse=_positive_int, metavar="N",
                                   group=PROTOCOL)


@dataclass(frozen=True)
class ServerOptions:
    """Which planner server and how to reach it: what every client command shares."""

    server: str = option(DEFAULT_SERVER, "planner server address", metavar="HOST:PORT")
    timeout: float = option(5.0, "per-call deadline, seconds", parse=_positive_float, metavar="SECONDS")
    verbose: bool = option(False, "print each retry while the server is unreachable or restarting (without "
                                  "it, only the error after the last)", short="-v")
    tls_ca: str | None = option(None, "connect with TLS, trusting this CA (or the server's self-signed "
                                      "certificate)", metavar="PEM", group=TLS)
    tls_cert: str | None = option(None, "client certificate, for mutual TLS", metavar="PEM", group=TLS)
    tls_key: str | None = option(None, "the client certificate's private key", metavar="PEM", group=TLS)
    tls_server_name: str | None = option(None, "name to check the server's certificate against (default: the "
                                               "host in --server)", metavar="NAME", group=TLS)
    token_file: str | None = option(None, "send the bearer token in FILE (first line, 'token' or 'name:token')",
                                    metavar="FILE", group=TLS)


@dataclass(frozen=True)
class ModelsConfig(ServerOptions):
    """``l3p models``: what a server serves, a row per model."""

    json: bool = option(False, "print the server's answer as JSON (one object per model) instead of a table")


@dataclass(frozen=True)
class ConnectionConfig(ProtocolOptions, ServerOptions):
    """The server to drive, the env and the episodes: what ``l3p run`` and ``l3p eval`` share."""

    model: str | None = option(None, "the served model to drive (l3p serve --models; default: the server's "
                                     "default model)", metavar="NAME")
    env: str | None = option(None, "goal env: a gymnasium id or package.module:EnvClass (default: the served "
                                   "model's env)", metavar="ENV")
    force_env: bool = option(False, "run even if --env differs from the env the model was trained on")
    episodes: int = option(10, "episodes to run, per planner variant", parse=_positive_int, metavar="N")
    seed: int = option(HELD_OUT, "episode i uses env and planner seed SEED + i (default: the held-out range, "
                                 "disjoint from the seeds training and validation draw)", show_default=False)
    stream: bool = option(False, "one Control stream per episode instead of unary Act calls")
    progress: bool = option(True, "report progress while episodes run (a bar only on a terminal)")


@dataclass(frozen=True)
class RunConfig(ConnectionConfig):
    """``l3p run``: episodes under one planner variant, a line each, optionally a video."""

    planner: str = option("l3p", VARIANT_HELP, parse=variant_arg, metavar="MODE[@KEY=VALUE...]")
    video: str | None = option(None, "record all episodes (offscreen rendering) with the landmarks and the "
                                     "subgoal marked", metavar="OUT.mp4")
    video_size: int = option(480, "frame width = height, pixels", parse=_positive_int, metavar="PIXELS")


@dataclass(frozen=True)
class EvalConfig(ConnectionConfig):
    """``l3p eval``: every planner variant over the same episodes; a table and a JSON report."""

    modes: tuple[str, ...] = option(("l3p", "naive", "policy"),
                                    "comma-separated planner variants MODE[@KEY=VALUE...], e.g. "
                                    "l3p,l3p@search=hard,naive,policy", parse=parse_modes,
                                    metavar="MODE,...", comma_separated=True)
    out: str | None = option(None, "write the JSON report", metavar="results.json")


def add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """--pairs / --min-cells / --max-steps for a command not built from a config (plot, demo)."""
    add_config_arguments(parser, ProtocolOptions, config_file=False)


def seeds_text(seed: int, episodes: int) -> str:
    """How a run announces its seeds: the first and last, and the range they are drawn from."""
    return f"seeds {seed}..{seed + episodes - 1} ({seed_range(seed)} range)"


def modes_arg(text: str) -> Any:
    """parse_modes as an argparse type (for commands not built from a config)."""
    try:
        return list(parse_modes(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
