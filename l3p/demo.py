"""One-command demo: serve each shipped model locally, run episodes against it, print its table.

``l3p demo [--bundle DIR ...] [--episodes 10] [--seed 2000000000] [--modes l3p,naive,policy]``

By default every bundle under ``models/`` is served in turn (FetchPush-v4, PointMaze_Large-v3):
Fetch episodes use the env's own start/goal draw, maze episodes the fixed far start/goal pairs
(>= 10 cells apart) of the held-out protocol. Each bundle is served with its own planner
defaults (the manifest's planner block; variants override them per episode). Each server runs
as a child process (`l3p.serving.local_server.LocalServer`) and is stopped on every exit path:
normal end, errors, Ctrl-C and SIGTERM (terminate, wait, kill).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from l3p.clients.client import PlannerClient, PlannerError
from l3p.clients.evaluate import evaluate, format_table, parse_modes, write_report
from l3p.clients.runner import served_env_id
from l3p.core.errors import L3PError
from l3p.core.seeds import HELD_OUT
from l3p.serving.local_server import LocalServer
from l3p.sim import mazes

MODELS = Path("models")
DEFAULT_BUNDLE = MODELS / "FetchPush-v4"


def models_dir() -> Path:
    """The shipped models: next to the package in a checkout, else under the current directory.

    A non-editable install does not carry ``models/``; ``scripts/demo`` runs from the
    repository root, where the second candidate finds it.
    """
    candidates = [Path(__file__).resolve().parents[1] / MODELS, Path.cwd() / MODELS]
    for path in candidates:
        if any(path.glob("*/manifest.json")):
            return path
    return candidates[0]


def shipped_bundles() -> list[Path]:
    """Every shipped bundle, the default (FetchPush-v4) first."""
    found = sorted(p.parent for p in models_dir().glob("*/manifest.json"))
    return sorted(found, key=lambda p: p.name != DEFAULT_BUNDLE.name)


def add_demo_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--bundle", type=Path, action="append", default=None,
                        help="model bundle directory; repeat for several (default: every shipped "
                             "bundle under models/)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=HELD_OUT,
                        help=f"episode i uses env and planner seed SEED + i (default {HELD_OUT}: the "
                             "held-out range, disjoint from the seeds training and validation draw)")
    parser.add_argument("--modes", type=parse_modes, default=["l3p", "naive", "policy"],
                        help="comma-separated planner variants to compare (default l3p,naive,policy)")
    parser.add_argument("--env", default=None, help="env id (default: each bundle's own)")
    parser.add_argument("--stream", action="store_true", help="use the Control stream per episode")
    parser.add_argument("--out", default=None, metavar="results.json",
                        help="write the JSON report (one file per bundle: NAME.json beside it if several)")
    parser.add_argument("--ready-timeout", type=float, default=120.0,
                        help="seconds to wait for the server to start")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit so ``finally`` blocks (stopping the server) run."""
    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: signals can't be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_demo(args: argparse.Namespace) -> int:
    """``l3p demo``: a table per bundle; expected failures (a missing bundle, a server that does not
    start or fails) raise L3PError, after the server is stopped."""
    bundles = args.bundle or shipped_bundles()
    for bundle in bundles:
        if not (bundle / "manifest.json").is_file():
            raise L3PError(f"no model bundle at {bundle} (missing manifest.json); pass --bundle DIR")
    with _sigterm_as_exit():
        for bundle in bundles:
            out = args.out
            if out and len(bundles) > 1:
                out = str(Path(out).with_name(f"{Path(out).stem}-{bundle.name}{Path(out).suffix}"))
            _demo_one(bundle, args, out)
    return 0


def _demo_one(bundle: Path, args: argparse.Namespace, out: str | None) -> None:
    server = LocalServer(bundle)
    try:
        print(f"starting the planner server for {bundle} ...", file=sys.stderr, flush=True)
        server.start()
        server.wait_ready(args.ready_timeout)
        print(f"server ready on {server.target}", file=sys.stderr, flush=True)
        with PlannerClient(server.target) as client:
            info = client.model_info()
            env_id = args.env or served_env_id(info)
            report = evaluate(client, info, env_id, modes=args.modes, episodes=args.episodes, seed=args.seed,
                              stream=args.stream, progress=not args.no_progress,
                              pairs="far" if mazes.is_maze(env_id) else "random")
        print(format_table(report), flush=True)
        if out:
            write_report(report, out)
            print(f"wrote {out}")
    except PlannerError as err:
        # The server's own last words usually say why it failed the call.
        tail = server.stderr_tail()
        if not tail:
            raise
        raise type(err)(err.code, f"{err.message}\nserver stderr tail:\n{tail}", err.method) from err
    finally:
        server.stop()
