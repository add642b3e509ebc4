"""The options of ``l3p train`` and ``l3p export``, in a module light enough (standard library,
``l3p.core`` and the training config, no torch) for ``--help`` to list them in every install
profile; the commands themselves are in training/commands.py."""
from __future__ import annotations

import argparse
from pathlib import Path

from l3p.core.config import OPTIONS
from l3p.training.config import GRAPHS, LANDMARK_KINDS, PLACEMENT_KEYS, PLANNER_KEYS
from l3p.training.presets import PRESET_OPTIONS


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Train actor, distance critic, value, autoencoder and latent landmarks. Writes "
                          "config.json, progress.csv, learning_curve.png, checkpoints and, at the end, an ONNX "
                          "bundle (RUN_DIR/bundle unless --export).")
    parser.add_argument("--env", help="goal env: a registered id (FetchReach-v4, FetchPush-v4, PointMaze_UMaze-v3, "
                                      "...) or package.module:EnvClass")
    parser.add_argument("--out", help="run directory (default runs/ENV_ID)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    parser.add_argument("--config", metavar="FILE",
                        help="a training config, TOML or JSON (e.g. the config.json a run wrote): its keys replace "
                             "the env's preset; --env, --steps, --seed and --set override it")
    parser.add_argument("--preset-option", action="append", default=[], choices=list(PRESET_OPTIONS),
                        metavar="NAME", help="change the env's preset before --config and --set (repeatable): "
                                             + "; ".join(f"{name}: {o.help}" for name, o in PRESET_OPTIONS.items()))
    parser.add_argument("--dataset", help="train offline from this recorded dataset (.npz, docs/dataset.md; e.g. "
                                          "made by `l3p dataset`), or the recordings a mapping file (.yaml) names, "
                                          "read in place (docs/guides/recordings.md): no env steps, the env is the "
                                          "dataset's")
    parser.add_argument("--steps", type=int,
                        help="total env steps, or optimizer steps when training offline (overrides the preset; "
                             "with --resume, extends the run)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a training config field (value as JSON; repeatable). The planner options "
                             f"({', '.join(PLANNER_KEYS)}) set the training-time planner, e.g. --set d_max=30. "
                             "device=cpu|cuda|auto, collectors=N, collector=process|ray set where it runs; "
                             f"with --resume only those ({', '.join(PLACEMENT_KEYS)}) may change")
    parser.add_argument("--ray-address", help="with --set collector=ray: the Ray cluster to join (e.g. auto, "
                                              "ray://head:10001); default: start a local one")
    parser.add_argument("--export", metavar="BUNDLE_DIR", help="where to write the final bundle")
    parser.add_argument("--force", action="store_true", help="start over even if the run directory holds a run")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    parser.add_argument("--show-config", action="store_true",
                        help="print every config key with its value for this run (the --env preset, --config, "
                             "--set; the defaults without --env), its type and what it does, and exit")


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="run directory (its last checkpoint), or a file: its checkpoint.pt or "
                                           "one of its snapshots/ (the weights of one evaluation, named by env steps); "
                                           "or a bundle: its graphs and edges copied, --planner changing what it serves")
    parser.add_argument("out_dir", help="bundle directory to create")
    parser.add_argument("--force", action="store_true", help="overwrite an existing bundle directory")
    options = "; ".join(f"{name}: {option.doc}" for name, option in OPTIONS.items())
    parser.add_argument("--planner", action="append", default=[], metavar="KEY=VALUE",
                        help=f"a served planner default (repeatable), e.g. local_horizon=30; what one turned on "
                             f"makes do nothing is left off (docs/planner_api.md#options). {options}")
    parser.add_argument("--landmarks", choices=LANDMARK_KINDS,
                        help="graph nodes: the decoded cluster centroids (L3P), GLS-spread achieved goals from "
                             "the run's replay or dataset (gls: states the robot has visited), or those goals "
                             "centred in the ground the data covers (centred: off the walls); default: the run's "
                             "export_landmarks (centroids unless its config says otherwise)")
    parser.add_argument("--n-landmarks", type=int, metavar="N",
                        help="with --landmarks gls or centred: how many (default: the run's export_n_landmarks, "
                             "else its n_landmarks, its cluster count)")
    parser.add_argument("--graph", choices=GRAPHS,
                        help="the landmark graph served: every pair V connects (all, Algorithm 1), or data: only "
                             "edges the run's dataset or replay passes along, d_max from the graph, local_cut, "
                             "follow_edges and prune_loops on (training/edges.py); --planner values override it; "
                             "default: the run's export_graph (all unless its config says otherwise)")
    parser.add_argument("--sign-key", type=Path, metavar="KEY",
                        help="sign the bundle with this Ed25519 private key (from l3p keygen) for --model: "
                             "writes signature.json, which l3p serve --trusted-keys checks")
    parser.add_argument("--model", metavar="NAME",
                        help="with --sign-key: the model the servers serve the bundle as (its directory in the "
                             "repository, DIR/NAME/VERSION); the signature is valid for that model only")
