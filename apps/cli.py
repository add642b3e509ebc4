"""The ``l3p`` command: one table of commands, each imported only when chosen.

``l3p --help`` lists the commands from the table without importing any of them, and ``l3p COMMAND
--help`` lists the command's options from a light module (its typed config, or an argument
function): both work in every install profile. A command whose extra is not installed answers
with one line naming the extra, whatever options it was given (its --help says so too).
Expected failures (``L3PError``) print one line, ``l3p COMMAND: error: MESSAGE``, and exit with the
error's ``exit_code``; never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import dataclasses
import sys
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType
from typing import Any, NamedTuple

from l3p.core.errors import INTERRUPTED, USAGE, L3PError
from l3p.core.names import DISTRIBUTION, install_hint


EPILOG = """examples:
  l3p train --env FetchReach-v4                     # preset config, runs/FetchReach-v4, exports a bundle
  l3p train --env FetchPush-v4 --steps 20000 --set batch_size=512
  l3p train --resume runs/FetchPush-v4              # continue an interrupted run exactly
  l3p export runs/FetchPush-v4 bundles/push         # checkpoint -> ONNX bundle
  l3p serve --bundle models/FetchPush-v4 --port 50051
  l3p serve --models models --port 50052           # every bundle under models/, by name
  l3p run --server 127.0.0.1:50051 --env FetchPush-v4 --episodes 10 --video ep.mp4
  l3p eval --server 127.0.0.1:50051 --env FetchPush-v4 --episodes 100 --out eval.json
  l3p eval --server 127.0.0.1:50052 --model PointMaze_Large-v3 --pairs far --modes l3p,naive,policy
  l3p models --server 127.0.0.1:50052              # what the server serves: name, version, env, dims, state
  l3p plot --bundle models/PointMaze_Large-v3 --out maze.png   # walls, landmarks, graph, one episode
  l3p demo                                          # one server for the shipped models, episodes on each

benchmarks (from a checkout): python benchmarks/serve_latency.py, start_bursts.py, swap.py,
  train_throughput.py, time_to_success.py (each with --help)
"""


class Command(NamedTuple):
    """One ``l3p`` command: where its arguments and its entry point live, and the extra it needs."""

    name: str
    help: str
    module: str
    # Where the options are declared: NAME in ``module``, or ``package.module:NAME`` in a light
    # module (standard library and l3p.core), so --help lists them without the extra. NAME is a
    # config dataclass (core/commandline.py: run gets the config, --config FILE is read) or a
    # function add_arguments(parser) (run gets the argparse namespace).
    add_arguments: str
    run: str  # run(config or args) -> int | None; expected failures raise L3PError
    extra: str  # the pip extra(s) that bring the module's dependencies, e.g. "serve,sim"


COMMANDS: tuple[Command, ...] = (
    Command("train", "train L3P on a goal env and export a bundle",
            "l3p.training.commands", "l3p.training.arguments:add_train_arguments", "run_train", "train"),
    Command("export", "export a training checkpoint as an ONNX bundle",
            "l3p.training.commands", "l3p.training.arguments:add_export_arguments", "run_export", "train"),
    # Ed25519 from cryptography, which the train (and serve) extra brings; the training side signs.
    Command("keygen", "make an Ed25519 key pair for signing bundles (PREFIX.key, PREFIX.pub)",
            "l3p.signing", "add_keygen_arguments", "run_keygen", "train"),
    Command("sign", "sign a bundle (signature.json) for servers started with --trusted-keys",
            "l3p.signing", "add_sign_arguments", "run_sign", "train"),
    Command("rollback", "on a server host: serve a model's older signed version on purpose (lowers its highest "
                        "served sequence)", "l3p.signing", "add_rollback_arguments", "run_rollback", "serve"),
    Command("dataset", "regenerate an OGBench dataset (pointmaze-*; antmaze-* with --expert; the arm's *-play-v0), "
                       "or import a recording (l3p dataset import rosbag2|lerobot|minari|npz PATH ... --out FILE.npz)",
            "l3p.dataset_command", "add_dataset_arguments", "run_dataset", "sim"),
    Command("expert", "train (or --evaluate) OGBench's direction-following ant expert (SAC, resumable) for the "
                      "antmaze datasets",
            "l3p.training.expert", "l3p.training.expert:ExpertConfig", "run_expert", "train"),
    Command("serve", "serve model bundles over gRPC (stateful L3P planner; --models DIR or --bundle DIR)",
            "l3p.serving.args", "l3p.serving.config:ServeConfig", "run_serve", "serve"),
    Command("run", "drive goal-env episodes (Fetch, mazes, your own module:EnvClass) through a planner server",
            "l3p.clients.runner", "l3p.clients.run_config:RunConfig", "run_run", "sim"),
    Command("eval", "compare planner modes on the same episodes (table + JSON)",
            "l3p.clients.evaluate", "l3p.clients.run_config:EvalConfig", "run_eval", "sim"),
    # "": the robot library alone (grpcio, protobuf, numpy), on the robot's computer too.
    Command("models", "list what a planner server serves: name, version, env, dims, signer, state",
            "l3p.clients.models", "l3p.clients.run_config:ModelsConfig", "run_models", ""),
    Command("plot", "draw a maze episode, with --landmarks-only a bundle's landmark graph, with --learning-curve "
                    "its run's in-training evaluations (PNG)",
            "l3p.plot", "l3p.app_options:add_plot_arguments", "run_plot", "serve,sim"),
    Command("demo", "serve the shipped models and drive Fetch and maze episodes through them",
            "l3p.demo", "l3p.app_options:add_demo_arguments", "run_demo", "serve,sim"),
    # "": the base install is enough (it reads JSON with the standard library and l3p.core).
    Command("card", "write (or --check) a model's card, models/NAME/README.md, from its manifest and evaluations",
            "l3p.cards", "add_card_arguments", "run_card", ""),
    Command("ros2", "ROS 2: the bridge between robots and a planner server (bridge), a simulated robot (sim), "
            "a recorder (record), a bridge's status and end of episode (status, end)",
            "l3p.clients.ros2.commands", "l3p.clients.ros2.arguments:add_ros2_arguments", "run_ros2", "ros2"),
)
BY_NAME = {command.name: command for command in COMMANDS}


class MissingExtra(L3PError):
    """The chosen command's module needs a package its extra installs."""

    exit_code = USAGE


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: every command with its help, none of their modules imported."""
    parser = argparse.ArgumentParser(
        prog="l3p", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="L3P planning service: learn latent landmarks offline, export an ONNX bundle, "
                    "serve a stateful graph planner over gRPC, and drive MuJoCo Fetch and maze robots through it.")
    # Listed here, answered by main() before any parser is built (reading the version costs ~20 ms).
    parser.add_argument("--version", action="store_true", help="print the installed version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.help, add_help=False)
    return parser


def load(command: Command) -> ModuleType:
    """The command's module (imported here, only when the command is chosen)."""
    return importlib.import_module(command.module)


def missing_extra(command: Command, exc: ImportError) -> MissingExtra:
    """A package the command needs is not installed: name the extra that brings it."""
    missing = (exc.name or "").split(".")[0]
    what = f"the {command.extra!r} extra" + ("s" if "," in command.extra else "")
    return MissingExtra(f"needs {what} (missing module {missing or str(exc)!r}): {install_hint(command.extra)}")


def declared_options(command: Command) -> Any:
    """The command's config class or argument function (importing only its declaring module)."""
    where, sep, name = command.add_arguments.rpartition(":")
    return getattr(importlib.import_module(where) if sep else load(command), name)


def command_parser(command: Command, options: Any, note: str = "") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"l3p {command.name}", description=command.help, epilog=note or None)
    if dataclasses.is_dataclass(options):
        from l3p.core.commandline import add_config_arguments

        add_config_arguments(parser, options)
    else:
        options(parser)
    return parser


def _wants_help(argv: list[str]) -> bool:
    words = argv[:argv.index("--")] if "--" in argv else argv
    return "-h" in words or "--help" in words


def _load_or_missing(command: Command) -> ModuleType:
    try:
        return load(command)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "l3p":
            raise  # our own module is missing: a broken install, not a missing extra
        raise missing_extra(command, exc) from None


def _help(command: Command, argv: list[str]) -> None:
    """Prints the command's options, and whether this install lacks its extra; exits."""
    note = ""
    try:
        _load_or_missing(command)
    except MissingExtra as exc:
        note = f"this install cannot run it: it {exc}"
        if ":" not in command.add_arguments:  # the options live in the missing module: say so
            argparse.ArgumentParser(prog=f"l3p {command.name}", description=command.help,
                                    epilog=f"{note}; its options are listed once it is installed").parse_args(["-h"])
    command_parser(command, declared_options(command), note).parse_args(argv)


def version() -> str:
    try:
        return f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return f"{DISTRIBUTION} (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--version":
        print(version())
        return 0
    if not argv or argv[0] not in BY_NAME:
        build_parser().parse_args(argv)  # prints help or the usage error, and exits
    command = BY_NAME[argv[0]]
    try:
        if _wants_help(argv[1:]):
            _help(command, argv[1:])
        module = _load_or_missing(command)  # a missing extra is named whatever the options
        options = declared_options(command)
        args = command_parser(command, options).parse_args(argv[1:])
        if dataclasses.is_dataclass(options):
            from l3p.core.commandline import config_from_args

            args = config_from_args(options, args)
        try:
            return int(getattr(module, command.run)(args) or 0)
        except ImportError as exc:  # a module the command imports only when it needs it
            if (exc.name or "").split(".")[0] == "l3p":
                raise
            raise missing_extra(command, exc) from None
    except L3PError as exc:
        print(f"l3p {command.name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"l3p {command.name}: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
