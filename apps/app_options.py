"""The options of the apps (``l3p plot``, ``l3p demo``), in a module light enough (standard library
and ``l3p.core``) for ``--help`` to list them in every install profile."""
from __future__ import annotations

import argparse
from pathlib import Path

from l3p.clients.run_config import add_protocol_arguments, modes_arg
from l3p.core.config import VARIANT_HELP, variant_arg
from l3p.core.seeds import HELD_OUT

DEFAULT_MODEL = "FetchPush-v4"  # the demo runs it first


def add_plot_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--bundle", type=Path, required=True,
                        help="the model bundle (its graph is drawn); with --learning-curve also a run directory")
    parser.add_argument("--server", default=None, metavar="HOST:PORT",
                        help="planner server serving that bundle (default: start one on --bundle)")
    parser.add_argument("--model", default=None, metavar="NAME",
                        help="with --server: the served model that is that bundle (default: the "
                             "server's default model)")
    parser.add_argument("--seed", type=int, default=HELD_OUT,
                        help=f"episode seed (and far-pair list seed; default {HELD_OUT}: the held-out list)")
    add_protocol_arguments(parser)
    parser.add_argument("--planner", type=variant_arg, default="l3p", metavar="MODE[@KEY=VALUE...]",
                        help=VARIANT_HELP + " (default: the bundle's served defaults)")
    picture = parser.add_mutually_exclusive_group()
    picture.add_argument("--landmarks-only", action="store_true",
                         help="draw the walls, the landmarks and their graph from the bundle alone "
                              "(no episode, no server); any env: other envs in goal-space views, over "
                              "the obstacles the env declares")
    picture.add_argument("--learning-curve", action="store_true",
                         help="draw the in-training evaluations of the run the bundle came from (its "
                              "progress.csv, which export copies beside it, and the training config in its "
                              "manifest), or of a run directory (progress.csv, config.json)")
    parser.add_argument("--out", type=Path, default=None,
                        help="PNG to write (default maze_episode.png, landmarks.png with --landmarks-only, "
                             "learning_curve.png with --learning-curve)")
    return parser


def add_demo_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    served = parser.add_mutually_exclusive_group()
    served.add_argument("--models", type=Path, default=None, metavar="DIR",
                        help="model repository to serve (default: the shipped models/)")
    served.add_argument("--bundle", type=Path, default=None,
                        help="serve this one model bundle directory instead")
    parser.add_argument("--model", action="append", default=None, metavar="NAME",
                        help="a served model to run; repeat for several (default: every model the "
                             f"server lists, {DEFAULT_MODEL} first)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=HELD_OUT,
                        help=f"episode i uses env and planner seed SEED + i (default {HELD_OUT}: the "
                             "held-out range, disjoint from the seeds training and validation draw)")
    parser.add_argument("--modes", type=modes_arg, default=["l3p", "naive", "policy"],
                        help="comma-separated planner variants to compare (default l3p,naive,policy)")
    parser.add_argument("--env", default=None, help="env id (default: each model's own)")
    add_protocol_arguments(parser)
    parser.add_argument("--stream", action="store_true", help="use the Control stream per episode")
    parser.add_argument("--out", default=None, metavar="results.json",
                        help="write the JSON report (one file per model: NAME.json beside it if several)")
    parser.add_argument("--ready-timeout", type=float, default=120.0,
                        help="seconds to wait for the server to start")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser
