"""The ``l3p`` command: one table of commands, each imported only when chosen.

``l3p --help`` lists the commands from the table without importing any of them, so it works in
every install profile. A command whose extra is not installed answers with one line naming the
extra, whatever options it was given. Expected failures (``L3PError``) print one line,
``l3p COMMAND: error: MESSAGE``, and exit with the error's ``exit_code``; never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple

from l3p.core.errors import INTERRUPTED, USAGE, L3PError
from l3p.core.names import DISTRIBUTION


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
    add_arguments: str  # add_arguments(parser) declares the command's options
    run: str  # run(args) -> int | None; expected failures raise L3PError
    extra: str  # the pip extra(s) that bring the module's dependencies, e.g. "serve,sim"


COMMANDS: tuple[Command, ...] = (
    Command("train", "train L3P on a goal env and export a bundle",
            "l3p.training.commands", "add_train_arguments", "run_train", "train"),
    Command("export", "export a training checkpoint as an ONNX bundle",
            "l3p.training.commands", "add_export_arguments", "run_export", "train"),
    Command("serve", "serve model bundles over gRPC (stateful L3P planner; --models DIR or --bundle DIR)",
            "l3p.serving.args", "add_serve_arguments", "run_serve", "serve"),
    Command("run", "drive goal-env episodes (Fetch, mazes, your own module:EnvClass) through a planner server",
            "l3p.clients.runner", "add_run_arguments", "run_run", "sim"),
    Command("eval", "compare planner modes on the same episodes (table + JSON)",
            "l3p.clients.evaluate", "add_eval_arguments", "run_eval", "sim"),
    Command("plot", "draw a maze episode, or with --landmarks-only a bundle's landmark graph (PNG)",
            "l3p.plot", "add_plot_arguments", "run_plot", "serve,sim"),
    Command("demo", "serve the shipped models and drive Fetch and maze episodes through them",
            "l3p.demo", "add_demo_arguments", "run_demo", "serve,sim"),
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
    return MissingExtra(f"needs {what} (missing module {missing or str(exc)!r}): "
                        f"pip install '{DISTRIBUTION}[{command.extra}]'")


def command_parser(command: Command, module: ModuleType) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"l3p {command.name}", description=command.help)
    getattr(module, command.add_arguments)(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in BY_NAME:
        build_parser().parse_args(argv)  # prints help or the usage error, and exits
    command = BY_NAME[argv[0]]
    try:
        try:
            module = load(command)
            args = command_parser(command, module).parse_args(argv[1:])
            return int(getattr(module, command.run)(args) or 0)
        except ImportError as exc:
            if (exc.name or "").split(".")[0] == "l3p":
                raise  # our own module is missing: a broken install, not a missing extra
            raise missing_extra(command, exc) from None
    except L3PError as exc:
        print(f"l3p {command.name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"l3p {command.name}: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
