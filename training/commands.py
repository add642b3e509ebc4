"""The ``l3p train`` and ``l3p export`` commands: their arguments and entry points.

Expected failures raise `L3PError` subclasses (the `l3p` command prints one line and exits with
their ``exit_code``). The provenance records each command line as rebuilt from its parsed
arguments, so it is the same whether the command ran from a shell or from ``l3p.cli.main(argv)``.
"""
from __future__ import annotations

import argparse
import contextlib
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from l3p.core.bundle_format import MANIFEST, bundle_digest, planner_defaults, read_manifest, supported_edges
from l3p.core.commandline import ConfigError, read_config_file
from l3p.core.config import parse_options
from l3p.core.errors import INTERRUPTED, L3PError
from l3p.core.overrides import parse_overrides
from l3p.datasets.source import open_dataset
from l3p.sim.draw import plot_landmarks
from l3p.training.agent import L3PAgent
from l3p.training.arguments import add_export_arguments, add_train_arguments  # noqa: F401
from l3p.training.config import SAMPLED_LANDMARKS, TrainConfig, check as check_train_keys, describe
from l3p.training.presets import preset
from l3p.training.edges import data_graph
from l3p.training.export import (CENTRE_ITERATIONS, ExportError, agent_from_checkpoint, centred_landmarks,
                                 export_bundle, gls_landmarks, rebundle)
from l3p.training.offline import OfflineTrainer
from l3p.training.run_files import CHECKPOINT, REPLAY, SNAPSHOTS, load_checkpoint, run_provenance
from l3p.training.trainer import Trainer


class TrainArgumentError(L3PError):
    """The run cannot start as asked: no env, an unknown env, a bad ``--set``, a run in the way."""


# ----------------------------------------------------------------------------------------- train

def run_train(args: argparse.Namespace) -> int:
    if args.show_config:  # the run's config (a preset's for --env, the defaults without one), nothing run
        if args.resume:
            cfg = TrainConfig.from_dict(load_checkpoint(Path(args.resume))["config"])
        else:
            cfg = train_config(args) if args.env or args.dataset or args.config else TrainConfig()
        print(describe(cfg))
        return 0
    if args.resume:
        placement = parse_overrides(args.set, "--set")
        check_train_keys(placement, "--set")
        if args.ray_address:
            placement["ray_address"] = args.ray_address
        offline = load_checkpoint(Path(args.resume))["config"].get("dataset") is not None
        try:
            if offline:
                trainer = OfflineTrainer.resume(Path(args.resume), offline_updates=args.steps, placement=placement)
            else:
                trainer = Trainer.resume(Path(args.resume), total_env_steps=args.steps, placement=placement)
        except (TypeError, ValueError) as exc:
            raise TrainArgumentError(f"bad --set: {exc}") from None
        _check_placement(args, trainer.cfg)
        print(f"resuming {args.resume} at {trainer.progress_text()}", file=sys.stderr)
    else:
        cfg = train_config(args)
        _check_placement(args, cfg)
        run_dir = Path(args.out or f"runs/{cfg.env_id}")
        if (run_dir / CHECKPOINT).exists() and not args.force:
            raise TrainArgumentError(f"{run_dir} already holds a run; use --resume {run_dir} or --force to start over")
        command = _command_line("train", [], [("--config", args.config), ("--env", args.env),
                                              ("--preset-option", args.preset_option), ("--dataset", args.dataset),
                                              ("--out", args.out), ("--steps", args.steps),
                                              ("--seed", args.seed), ("--set", args.set),
                                              ("--ray-address", args.ray_address), ("--export", args.export),
                                              ("--force", args.force)])
        if cfg.dataset is not None:
            trainer = OfflineTrainer(cfg, run_dir, command)  # a bad dataset raises DatasetError here
        else:
            trainer = Trainer(cfg, run_dir, command)  # an unknown env id raises UnknownEnvError here
    with _stop_on_signals() as stop:
        trainer.train(show_progress=not args.no_progress, stop=stop)
    if stop.is_set():
        run = trainer.run_dir
        print(f"stopped at {trainer.progress_text()}; checkpoint saved in {run}\n"
              f"  continue: l3p train --resume {run}\n  export:   l3p export {run} BUNDLE_DIR", file=sys.stderr)
        return INTERRUPTED
    bundle_dir = Path(args.export) if args.export else trainer.run_dir / "bundle"
    provenance = trainer.provenance()
    if not trainer.agent.clusters_ready:
        # A run shorter than the planning warm-up still ends with a servable bundle: its landmarks
        # are GLS-spread replay goals (the clusters' initialization), and it says so.
        trainer.agent.init_clusters(trainer.replay.sample_goals(trainer.cfg.gls_sample, trainer.rng), trainer.rng)
        provenance["landmarks"] = "GLS initialization at export: the run ended before planning started"
    cfg = trainer.cfg
    write_bundle(trainer.agent, trainer.run_dir, bundle_dir, provenance, landmarks=cfg.export_landmarks,
                 n_landmarks=cfg.export_n_landmarks, graph=cfg.export_graph, force=True)
    print(f"bundle written to {bundle_dir} (sha256 {_digest(bundle_dir)})")
    return 0


def _check_placement(args: argparse.Namespace, cfg: TrainConfig) -> None:
    """Refuse a run that cannot run where it is asked to, before it builds anything."""
    if args.ray_address and cfg.collector != "ray":
        raise TrainArgumentError(f"--ray-address needs --set collector=ray (this run's collector is {cfg.collector!r})")
    if cfg.collector == "ray":
        from l3p.training.ray_collector import require_ray

        require_ray()


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The env's preset with ``--config``, ``--set``, ``--steps`` and ``--seed`` applied; with
    ``--dataset``, the dataset's env (``--env`` may name it too) and the offline budget. A bad key or
    value is a ConfigError naming where it came from, the key, the value and the expected type."""
    where = f"config file {args.config}"
    from_file = read_config_file(Path(args.config)) if args.config else {}
    if from_file:
        check_train_keys(from_file, where)
    env = args.env or from_file.get("env_id")
    if args.dataset:
        recorded = open_dataset(args.dataset).env_id
        if env and env != recorded:
            raise TrainArgumentError(f"--env {env} but the dataset was recorded on {recorded}")
        env = recorded
    if not env:
        raise TrainArgumentError("give --env ENV_ID or --dataset FILE (or --resume RUN_DIR)")
    start = preset(env, args.preset_option, offline=bool(args.dataset)).to_dict()
    base = {**start, **from_file, "env_id": env}
    if isinstance(from_file.get("planner"), dict):  # a [planner] table changes the preset's planner
        base["planner"] = {**start["planner"], **from_file["planner"]}
    _build(base, where if args.config else "preset")
    overrides = parse_overrides(args.set, "--set")
    check_train_keys(overrides, "--set")
    if args.dataset:
        overrides["dataset"] = str(args.dataset)
    if args.steps is not None:
        overrides["offline_updates" if args.dataset or base.get("dataset") else "total_env_steps"] = args.steps
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.ray_address:
        overrides["ray_address"] = args.ray_address
    return _build({**base, **overrides}, "--set")


def _build(values: dict, where: str) -> TrainConfig:
    """The config; its own checks (a collector count past n_envs, ...) name ``where`` they failed."""
    try:
        return TrainConfig.from_dict(values, where)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise TrainArgumentError(f"{where}: {exc}") from None


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
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


# ---------------------------------------------------------------------------------------- export

def run_export(args: argparse.Namespace) -> int:
    source = Path(args.checkpoint)
    run_dir = source if source.is_dir() else source.parent
    if run_dir.name == SNAPSHOTS:
        run_dir = run_dir.parent
    planner_overrides = parse_options(args.planner)
    command = _command_line("export", [args.checkpoint, args.out_dir],
                            [("--planner", args.planner), ("--landmarks", args.landmarks),
                             ("--n-landmarks", args.n_landmarks), ("--graph", args.graph), ("--force", args.force)])
    if source.is_dir() and (source / MANIFEST).is_file():  # a bundle: only its served defaults change
        data_options = [flag for flag, value in (("--landmarks", args.landmarks), ("--n-landmarks", args.n_landmarks),
                                                 ("--graph", args.graph)) if value is not None]
        if data_options:
            raise ExportError(f"{source} is a bundle: its landmarks and edges are copied as they are (--planner "
                              f"changes what it serves); {', '.join(data_options)} goes with a training run")
        bundle_dir = rebundle(source, Path(args.out_dir), planner_overrides, command, force=args.force,
                              sign_key=args.sign_key, sign_model=args.model)
        print(f"bundle written to {bundle_dir} (sha256 {_digest(bundle_dir)}), the graphs of {source} "
              f"with the planner defaults {planner_overrides}")
        return 0
    state = load_checkpoint(source)
    agent = agent_from_checkpoint(state)
    provenance = {**run_provenance(state["command"], state["config"], state["progress"], agent.optimizer_steps),
                  "export_command": command, "source_checkpoint": str(source),
                  **({"dataset": state["dataset"]} if "dataset" in state else {})}
    cfg = agent.cfg
    landmarks = cfg.export_landmarks if args.landmarks is None else args.landmarks
    if args.n_landmarks is not None:
        n_landmarks = args.n_landmarks
    else:
        n_landmarks = cfg.export_n_landmarks if landmarks in SAMPLED_LANDMARKS else None  # set only for those
    bundle_dir = write_bundle(agent, run_dir, Path(args.out_dir), provenance, landmarks=landmarks,
                              n_landmarks=n_landmarks, graph=cfg.export_graph if args.graph is None else args.graph,
                              planner_overrides=planner_overrides, force=args.force, sign_key=args.sign_key,
                              sign_model=args.model, announce=str(source))
    signed = f", signed with {args.sign_key} for model {args.model}" if args.sign_key else ""
    print(f"bundle written to {bundle_dir} (sha256 {_digest(bundle_dir)}{signed})")
    return 0


# ---------------------------------------------------------------------------------------- shared

def write_bundle(agent: L3PAgent, run_dir: Path, out_dir: Path, provenance: dict, *, landmarks: str,
                 n_landmarks: int | None, graph: str, planner_overrides: dict | None = None, force: bool = False,
                 sign_key: Path | None = None, sign_model: str | None = None, announce: str | None = None) -> Path:
    """The bundle of ``agent`` (a run's end, or one of its snapshots) with the graph nodes
    (``landmarks``: centroids or gls, ``n_landmarks`` of them) and edges (``graph``: all or data) asked
    for, and its plots beside it; what was chosen goes into ``provenance["export"]``."""
    planner_overrides = dict(planner_overrides or {})
    if landmarks == "centroids" and not agent.clusters_ready:
        # A run stopped before its clusters started has no centroids; its replay's (or dataset's)
        # goals still make a servable graph, as at the end of a short `l3p train`.
        print(f"{announce or run_dir}: the run has no landmark centroids yet ({clusters_start(agent.cfg)}): "
              f"exporting GLS-spread {'dataset' if agent.cfg.dataset else 'replay'} goals instead "
              f"(as --landmarks gls)", file=sys.stderr)
        landmarks = "gls"
    if n_landmarks is not None and (landmarks not in SAMPLED_LANDMARKS or n_landmarks < 2):
        raise ExportError("--n-landmarks N (N >= 2) goes with --landmarks gls or centred: the centroids are the "
                          f"run's {agent.cfg.n_landmarks} clusters")
    nodes = None
    if landmarks in SAMPLED_LANDMARKS:
        goals = run_goals(run_dir, agent.cfg)
        if goals is None:
            raise ExportError(f"--landmarks {landmarks} needs the run's replay ({run_dir / REPLAY}) or its dataset")
        sample = goals[np.random.default_rng(0).integers(0, len(goals), 10 * agent.cfg.gls_sample)]
        nodes = gls_landmarks(agent, sample, n=n_landmarks)
        provenance["landmarks"] = (f"GLS: {len(nodes)} achieved goals of the run's replay or dataset, spread "
                                   f"in the learned latent space (from {len(sample)} sampled), not decoded centroids")
        if landmarks == "centred":
            nodes = centred_landmarks(nodes, sample)
            provenance["landmarks"] += (f"; then centred: {CENTRE_ITERATIONS} Lloyd iterations over the same "
                                        f"sampled goals, each landmark the goal of its share nearest the share's mean")
    served = agent.landmarks() if nodes is None else nodes
    edges = None
    if graph == "data":
        episodes = run_episodes(run_dir, agent.cfg)
        if episodes is None:
            raise ExportError(f"--graph data needs the run's replay ({run_dir / REPLAY}) or its dataset")
        try:
            reach_steps = agent.cfg.actor_goal_steps if agent.cfg.dataset is not None else None
            supported = data_graph(served, *episodes, agent.value_fn, reach_steps=reach_steps)
        except ValueError as exc:  # e.g. no two landmarks the data passes between
            raise ExportError(f"--graph data: {exc}") from None
        planner_overrides = {**supported.planner(), **planner_overrides}  # --planner values win
        provenance["graph"] = supported.provenance()
        edges = supported.manifest_edges()
    provenance["export"] = {"landmarks": landmarks, "n_landmarks": len(served), "graph": graph}
    bundle_dir = export_bundle(agent, out_dir, provenance, force=force, planner_overrides=planner_overrides,
                               landmarks=nodes, sign_key=sign_key, sign_model=sign_model, edges=edges)
    _add_plots(run_dir, bundle_dir, agent, nodes)
    return bundle_dir


def _add_plots(run_dir: Path, bundle_dir: Path, agent: L3PAgent, landmarks: np.ndarray | None = None) -> None:
    """Next to the bundle (not part of it): the run's learning curve and log, and the landmarks
    drawn over achieved goals from the run's replay, with the graph the bundle serves (its d_max)."""
    landmarks = agent.landmarks() if landmarks is None else landmarks
    for name in ("learning_curve.png", "progress.csv"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, bundle_dir / name)
    goals = run_goals(run_dir, agent.cfg)
    if goals is None:
        return
    sample = goals[np.random.default_rng(0).integers(0, len(goals), 2000)]
    manifest = read_manifest(bundle_dir)
    served, supported = planner_defaults(manifest), supported_edges(manifest)
    env_id = agent.cfg.env_id
    graph = " over the edges the data supports" if supported is not None else ""
    drawn = "" if agent.cfg.offline_eval == "held_out" else env_id  # no env: no walls to draw
    plot_landmarks(landmarks, sample, bundle_dir / "landmarks.png",
                   f"{env_id}: {len(landmarks)} landmarks (served d_max {served.d_max:g}{graph})",
                   drawn, agent.value_fn, served.d_max, served.adaptive_cut, supported)


def run_goals(run_dir: Path, cfg: TrainConfig) -> np.ndarray | None:
    """Achieved goals the run learned from: its replay (online), or its dataset (offline); None if
    neither is there any more."""
    episodes = run_episodes(run_dir, cfg)
    return None if episodes is None else episodes[0]


def run_episodes(run_dir: Path, cfg: TrainConfig) -> tuple[np.ndarray, list[tuple[int, int]]] | None:
    """(achieved goals [T, goal_dim], each episode's (first, last) step) of the run's dataset
    (offline) or replay (online); None if neither is there any more."""
    try:
        if cfg.dataset is not None:
            dataset = open_dataset(cfg.dataset, check_digest=False)
            return dataset.achieved_goals, dataset.episode_bounds()
        with np.load(run_dir / REPLAY) as replay:
            ag = replay["ag"]  # [episodes, steps, goal_dim]
        episodes, length, dim = ag.shape
        return ag.reshape(-1, dim), [(k * length, (k + 1) * length - 1) for k in range(episodes)]
    except (OSError, ValueError, KeyError, L3PError):
        return None


def clusters_start(cfg: TrainConfig) -> str:
    """When a run's landmark clusters start: after episodes online, after updates offline."""
    if cfg.dataset is not None:
        return f"clusters start after {cfg.landmarks_after_updates} optimizer steps"
    return f"planning starts after {cfg.planning_start_episodes} episodes"


def _digest(bundle_dir: Path) -> str:
    """The digest the server reports and ``l3p serve --bundle-sha256`` pins."""
    return bundle_digest(read_manifest(bundle_dir))


def _command_line(command: str, positional: list[str], options: list[tuple[str, object]]) -> str:
    """``l3p COMMAND ...`` from parsed arguments: flags set to True, lists repeated, None left out."""
    words = ["l3p", command, *positional]
    for flag, value in options:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is True:
                words.append(flag)
            elif v is not None and v is not False:
                words += [flag, str(v)]
    return shlex.join(words)
