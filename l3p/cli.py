"""The ``l3p`` command: train, export, serve, run, eval, demo, bench.

Subcommands import their package lazily, so the server and the robot client never import torch.
Expected failures (unknown env id, missing checkpoint, existing bundle, unreachable server) print
one line on stderr and exit with status 2; they are never tracebacks.
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path

EPILOG = """examples:
  l3p train --env FetchReach-v4                     # preset config, runs/FetchReach-v4, exports a bundle
  l3p train --env FetchPush-v4 --steps 20000 --set batch_size=512
  l3p train --resume runs/FetchPush-v4              # continue an interrupted run exactly
  l3p export runs/FetchPush-v4 bundles/push         # checkpoint -> ONNX bundle
  l3p serve --bundle models/FetchPush-v4 --port 50051
  l3p run --server 127.0.0.1:50051 --env FetchPush-v4 --episodes 10 --video ep.mp4
  l3p eval --server 127.0.0.1:50051 --env FetchPush-v4 --episodes 100 --out eval.json
  l3p eval --server 127.0.0.1:50052 --pairs far --modes l3p,l3p@search=hard,naive,policy
  l3p plot --bundle models/PointMaze_Large-v3 --out maze.png   # walls, landmarks, graph, one episode
  l3p demo                                          # serve the shipped model and drive Fetch episodes
  l3p bench serve | l3p bench train | l3p bench success --env FetchPush-v4 --minutes 45
"""


class CliError(Exception):
    """An expected failure: reported as one line, exit status 2."""


def _parse_overrides(pairs: list[str]) -> dict:
    import json

    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise CliError(f"--set expects key=value, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw  # bare strings such as search=hard
    return out


def cmd_train(args: argparse.Namespace) -> int:
    from l3p.training.config import TrainConfig, preset
    from l3p.sim.envs import UnknownEnvError
    from l3p.training.export import BundleExistsError, ExportError, export_bundle
    from l3p.training.trainer import CheckpointError, Trainer

    try:
        if args.resume:
            trainer = Trainer.resume(Path(args.resume), total_env_steps=args.steps)
            print(f"resuming {args.resume} at {trainer.progress.env_steps} env steps", file=sys.stderr)
        else:
            if not args.env:
                raise CliError("give --env ENV_ID (or --resume RUN_DIR)")
            try:
                cfg = preset(args.env)
            except KeyError as exc:
                raise CliError(exc.args[0]) from None
            overrides = _parse_overrides(args.set)
            if args.steps is not None:
                overrides["total_env_steps"] = args.steps
            if args.seed is not None:
                overrides["seed"] = args.seed
            try:
                cfg = TrainConfig.from_dict({**cfg.to_dict(), **overrides})
            except (TypeError, ValueError) as exc:
                raise CliError(f"bad --set: {exc}") from None
            run_dir = Path(args.out or f"runs/{cfg.env_id}")
            if (run_dir / "checkpoint.pt").exists() and not args.force:
                raise CliError(f"{run_dir} already holds a run; use --resume {run_dir} or --force to start over")
            trainer = Trainer(cfg, run_dir)
        with _stop_on_signals() as stop:
            progress = trainer.train(show_progress=not args.no_progress, stop=stop)
        if stop.is_set():
            run = trainer.run_dir
            print(f"stopped at {progress.env_steps} env steps; checkpoint saved in {run}\n"
                  f"  continue: l3p train --resume {run}\n  export:   l3p export {run} BUNDLE_DIR", file=sys.stderr)
            return 130
        bundle_dir = Path(args.export) if args.export else trainer.run_dir / "bundle"
        provenance = trainer.provenance()
        if not trainer.agent.clusters_ready:
            # A run shorter than the planning warm-up still ends with a servable bundle: its
            # landmarks are GLS-spread replay goals (the clusters' initialization), and it says so.
            trainer.agent.init_clusters(trainer.replay.sample_goals(trainer.cfg.gls_sample, trainer.rng), trainer.rng)
            provenance["landmarks"] = "GLS initialization at export: the run ended before planning started"
        export_bundle(trainer.agent, bundle_dir, provenance, force=True)
        _add_plots(trainer.run_dir, bundle_dir, trainer.agent)
        print(f"bundle written to {bundle_dir} (sha256 {_digest(bundle_dir)})")
        return 0
    except (UnknownEnvError, CheckpointError, BundleExistsError, ExportError) as exc:
        raise CliError(str(exc)) from None


def _add_plots(run_dir: Path, bundle_dir: Path, agent, landmarks=None) -> None:
    """Next to the bundle (not part of it): the run's learning curve and log, and the landmarks
    drawn over achieved goals from the run's replay."""
    import shutil

    import numpy as np

    from l3p.sim.draw import plot_landmarks
    from l3p.training.trainer import REPLAY

    landmarks = agent.landmarks() if landmarks is None else landmarks
    for name in ("learning_curve.png", "progress.csv"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, bundle_dir / name)
    if (run_dir / REPLAY).is_file():
        with np.load(run_dir / REPLAY) as replay:
            goals = replay["ag"].reshape(-1, landmarks.shape[1])
        sample = goals[np.random.default_rng(0).integers(0, len(goals), 2000)]
        env_id = agent.cfg.env_id
        plot_landmarks(landmarks, sample, bundle_dir / "landmarks.png", f"{env_id}: {len(landmarks)} landmarks",
                       env_id, agent.value_fn, agent.cfg.d_max)


@contextlib.contextmanager
def _stop_on_signals():
    """SIGINT / SIGTERM ask training to stop after the current cycle (with a checkpoint); a second
    signal interrupts at once."""
    stop = threading.Event()

    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping after this cycle (checkpointing); signal again to abort", file=sys.stderr)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _digest(bundle_dir: Path) -> str:
    """The digest GetModelInfo reports and `l3p serve --bundle-sha256` pins."""
    import json

    from l3p.serving.bundle import bundle_digest

    return bundle_digest(json.loads((bundle_dir / "manifest.json").read_text()))


def cmd_export(args: argparse.Namespace) -> int:
    import numpy as np

    from l3p.training.export import BundleExistsError, ExportError, agent_from_checkpoint, export_bundle, gls_landmarks
    from l3p.training.trainer import REPLAY, CheckpointError, load_checkpoint, run_provenance

    run_dir = Path(args.checkpoint)
    if run_dir.is_file():
        run_dir = run_dir.parent
    try:
        state = load_checkpoint(run_dir)
        agent = agent_from_checkpoint(state)
        provenance = {**run_provenance(state["command"], state["config"], state["progress"], agent.optimizer_steps),
                      "export_command": " ".join(["l3p", *sys.argv[1:]]), "source_checkpoint": str(run_dir)}
        landmarks = None
        if args.landmarks == "gls":
            try:
                with np.load(run_dir / REPLAY) as replay:
                    goals = replay["ag"].reshape(-1, agent.spec.goal_dim)
            except (OSError, ValueError, KeyError) as exc:
                raise CliError(f"--landmarks gls needs the run's replay ({run_dir / REPLAY}): {exc}") from None
            sample = goals[np.random.default_rng(0).integers(0, len(goals), 10 * agent.cfg.gls_sample)]
            landmarks = gls_landmarks(agent, sample)
            provenance["landmarks"] = (f"GLS: {len(landmarks)} replay achieved goals spread in the learned latent "
                                       f"space (from {len(sample)} sampled), not decoded centroids")
        try:
            export_bundle(agent, Path(args.out_dir), provenance, force=args.force,
                          planner_overrides=_parse_overrides(args.planner), landmarks=landmarks)
        except (TypeError, ValueError) as exc:
            raise CliError(f"bad --planner: {exc}") from None
        _add_plots(run_dir, Path(args.out_dir), agent, landmarks)
    except (CheckpointError, BundleExistsError, ExportError) as exc:
        raise CliError(str(exc)) from None
    print(f"bundle written to {args.out_dir} (sha256 {_digest(Path(args.out_dir))})")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import runpy

    name = {"serve": "serve_latency.py", "starts": "start_bursts.py", "train": "train_throughput.py",
            "success": "time_to_success.py"}[args.what]
    script = Path(__file__).resolve().parents[1] / "benchmarks" / name
    sys.argv = [str(script), *args.rest]
    runpy.run_path(str(script), run_name="__main__")
    return 0


def _add_optional(sub, name: str, help: str, module: str, add_fn: str, run_fn: str, extra: str) -> None:
    """A subcommand whose module needs an optional extra; without it, the command says what to install."""
    import importlib

    p = sub.add_parser(name, help=help)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or str(exc)

        def unavailable(_args: argparse.Namespace) -> int:
            raise CliError(f"needs {missing!r}: pip install 'l3p-service[{extra}]'")

        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=unavailable)
        return
    getattr(mod, add_fn)(p)
    p.set_defaults(func=getattr(mod, run_fn))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="l3p", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="L3P planning service: learn latent landmarks offline, export an ONNX bundle, "
                    "serve a stateful graph planner over gRPC, and drive MuJoCo Fetch and maze robots through it.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train L3P on a goal env and export a bundle",
                       description="Train actor, distance critic, value, autoencoder and latent landmarks. "
                                   "Writes config.json, progress.csv, learning_curve.png, checkpoints and, at the "
                                   "end, an ONNX bundle (RUN_DIR/bundle unless --export).")
    p.add_argument("--env", help="goal env id, e.g. FetchReach-v4, FetchPush-v4, PointMaze_UMaze-v3")
    p.add_argument("--out", help="run directory (default runs/ENV_ID)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    p.add_argument("--steps", type=int, help="total env steps (overrides the preset; with --resume, extends the run)")
    p.add_argument("--seed", type=int)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override any TrainConfig field")
    p.add_argument("--export", metavar="BUNDLE_DIR", help="where to write the final bundle")
    p.add_argument("--force", action="store_true", help="start over even if the run directory holds a run")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("export", help="export a training checkpoint as an ONNX bundle")
    p.add_argument("checkpoint", help="run directory (or its checkpoint.pt)")
    p.add_argument("out_dir", help="bundle directory to create")
    p.add_argument("--force", action="store_true", help="overwrite an existing bundle directory")
    p.add_argument("--planner", action="append", default=[], metavar="KEY=VALUE",
                   help="served planner default, e.g. local_horizon=30 (mode, d_max, temperature, search, "
                        "search_iterations, local_horizon, counter_extra, sample_subgoal, adaptive_cut, prune_failed)")
    p.add_argument("--landmarks", choices=("centroids", "gls"), default="centroids",
                   help="graph nodes: the decoded cluster centroids (L3P, default) or GLS-spread achieved goals "
                        "from the run's replay (states the robot has visited)")
    p.set_defaults(func=cmd_export)

    _add_optional(sub, "serve", "serve a bundle over gRPC (stateful L3P planner)",
                  "serving.server", "add_serve_arguments", "run_serve", "serve")
    _add_optional(sub, "run", "drive MuJoCo episodes (Fetch, mazes) through a planner server",
                  "clients.runner", "add_run_arguments", "run_run", "sim")
    _add_optional(sub, "eval", "compare planner modes on the same episodes (table + JSON)",
                  "clients.evaluate", "add_eval_arguments", "run_eval", "sim")
    _add_optional(sub, "plot", "draw a maze episode: walls, landmarks, solved graph, trajectory by subgoal (PNG)",
                  "clients.plots", "add_plot_arguments", "run_plot", "serve,sim")
    _add_optional(sub, "demo", "serve the shipped models and drive Fetch and maze episodes through them",
                  "clients.demo", "add_demo_arguments", "run_demo", "serve,sim")

    p = sub.add_parser("bench", help="run a benchmark (serve latency, start bursts side by side, "
                                     "training throughput, time to success)")
    p.add_argument("what", choices=["serve", "starts", "train", "success"])
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark script")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"l3p {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"l3p {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
