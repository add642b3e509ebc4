"""One-command demo: serve every shipped model from one server, run episodes against each, print
its table.

``l3p demo [--models DIR | --bundle DIR] [--model NAME ...] [--episodes 10] [--seed 2000000000]
[--modes l3p,naive,policy]``

One server process (`l3p serve --models models/`, started as a child process by
`l3p.serving.local_server.LocalServer`) hosts every bundle directory under ``models/`` (the
shipped models, and any other found there); the demo drives each model in turn through it, naming
the model on every call. Each model's episodes follow the protocol its training evaluated (its
provenance; ``--pairs`` / ``--min-cells`` / ``--max-steps`` override): Fetch the env's own
start/goal draw (Place-Inside-Box: its in-box goal), mazes fixed far start/goal pairs
(PointMaze_Large >= 10 cells apart over 800 steps, the ant's U end to end over 500). Each model is
served with its own planner defaults (the manifest's planner block; variants override them per
episode). The server is stopped on every exit path: normal end,
errors, Ctrl-C and SIGTERM (terminate, wait, kill).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from l3p.clients.client import NotFound, PlannerClient, PlannerError
from l3p.app_options import DEFAULT_MODEL
from l3p.clients.evaluate import evaluate, format_table, write_report
from l3p.clients.runner import episode_protocol, served_env_id
from l3p.core.errors import L3PError
# The child server's modules: without the serve extra the command names it here, at import, rather
# than the child server printing its traceback.
import l3p.serving.server  # noqa: F401
from l3p.serving.local_server import LocalServer

MODELS = Path("models")


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
    """``l3p demo``: a table per model, all served by one server; expected failures (no bundle, a
    server that does not start or fails, an unknown model) raise L3PError, after the server is
    stopped."""
    if args.bundle is not None:
        if not (args.bundle / "manifest.json").is_file():
            raise L3PError(f"no model bundle at {args.bundle} (missing manifest.json); pass --bundle DIR")
        server = LocalServer(args.bundle)
    else:
        root = args.models or models_dir()
        if not any(root.glob("*/manifest.json")) and not any(root.glob("*/*/manifest.json")):
            raise L3PError(f"no model bundle under {root} (DIR/NAME/manifest.json); pass --models DIR")
        server = LocalServer(models=root)
    with _sigterm_as_exit():
        try:
            print(f"starting one planner server for {server.bundle} ...", file=sys.stderr, flush=True)
            server.start()
            server.wait_ready(args.ready_timeout)
            with PlannerClient(server.target) as client:
                served = [m.info.model for m in client.list_models().models if m.loaded]
            print(f"server ready on {server.target}, serving {', '.join(served)}", file=sys.stderr,
                  flush=True)
            names = args.model or sorted(served, key=lambda name: name != DEFAULT_MODEL)
            for name in names:
                out = args.out
                if out and len(names) > 1:
                    out = str(Path(out).with_name(f"{Path(out).stem}-{name}{Path(out).suffix}"))
                _demo_one(server, name, args, out)
        except PlannerError as err:
            # The server's own last words usually say why it failed the call.
            tail = server.stderr_tail()
            if not tail:
                raise
            raise type(err)(err.code, f"{err.message}\nserver stderr tail:\n{tail}", err.method) from err
        finally:
            server.stop()
    return 0


def _demo_one(server: LocalServer, model: str, args: argparse.Namespace, out: str | None) -> None:
    with PlannerClient(server.target, model=model) as client:
        try:
            info = client.model_info()
        except NotFound as err:
            raise L3PError(f"--model {model}: {err.message}") from None
        env_id = args.env or served_env_id(info)
        print(f"model {model} ({env_id})", file=sys.stderr, flush=True)
        protocol = episode_protocol(args, info.provenance, env_id)
        report = evaluate(client, info, env_id, modes=args.modes, episodes=args.episodes, seed=args.seed,
                          stream=args.stream, progress=not args.no_progress, pairs=protocol.pairs,
                          min_cells=protocol.min_cells, max_steps=protocol.max_steps, task=protocol.task)
    print(format_table(report), flush=True)
    if out:
        write_report(report, out)
        print(f"wrote {out}")
    if report.get("interrupted"):  # Ctrl-C: this model's finished episodes are shown; stop here
        raise KeyboardInterrupt
