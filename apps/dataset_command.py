"""``l3p dataset``: regenerate an OGBench dataset (``l3p dataset NAME ...``, the simulator's generators,
`l3p.sim.datasets`) or import a recording (``l3p dataset import FORMAT PATH ... --out FILE.npz``, the
dataset sources, `l3p.datasets`). Both forms' options are declared here, light (the standard library,
numpy), so ``--help`` lists them all in every install; each form names its extra when that is missing."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path

from l3p.core.commandline import add_config_arguments, option
from l3p.core.errors import USAGE, L3PError
from l3p.core.names import install_hint
from l3p.datasets.mapping import FORMATS

IMPORT = "import"
CHECK = "check"

FORMS = """forms:
  l3p dataset NAME [--out FILE.npz] [--seed S] [--episodes N] [--steps N] ...
      regenerate an OGBench dataset (pointmaze-{medium,large,giant}-{navigate,stitch}-v0, ...,
      {cube-double,scene,puzzle-3x3,puzzle-4x4}-play-v0 with NAME-val.npz beside it); needs [sim].
      A play dataset is made in chunks in NAME.work/ beside it: the same command run again continues
  l3p dataset import FORMAT PATH [PATH ...] --out FILE.npz [--mapping YAML] [--env-id ENV] [--report JSON]
      convert recordings (npz, rosbag2, lerobot, minari) to one dataset file; needs [datasets].
      The mapping (YAML) says which topic/column is the observation, action and goals
      (docs/guides/recordings.md); npz and minari read without one. Sizes are checked against the env.
  l3p dataset check MAPPING [--env-id ENV | --bundle DIR]
      the mapping's sizes against the env or a model bundle, before recording; needs [datasets].
"""


class MissingExtra(L3PError):
    exit_code = USAGE


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    # Each form's own --help, in full: the top-level parser only splits NAME from the rest.
    parser.epilog = "\n".join([FORMS, generator_parser().format_help(), import_parser().format_help()])
    parser.add_argument("name", help="a dataset name to regenerate, 'import' or 'check'")
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="...", help="the form's arguments (below)")


@dataclass(frozen=True)
class GeneratorOptions:
    """``l3p dataset NAME``: what to regenerate, how big, where to."""

    name: str  # the positional NAME
    expert: Path | None = option(None, "antmaze: the direction-following expert (policy.npz of an l3p expert run)",
                                 metavar="POLICY")
    out: Path | None = option(None, "the .npz to write (default data/NAME.npz)", metavar="FILE")
    seed: int = option(0, "the generator's seed")
    episodes: int | None = option(None, "fewer episodes than OGBench's (tests, trials)", metavar="N")
    steps: int | None = option(None, "steps per episode (default OGBench's)", metavar="N")
    val_episodes: int | None = option(None, "play datasets: validation episodes (default OGBench's: a tenth of "
                                            "the episodes, at least 1)", metavar="N")
    workers: int | None = option(None, "play datasets: processes (default one per core); any number makes the "
                                       "same data", metavar="N")
    progress: bool = option(True, "progress lines (a play dataset's with env steps/s and ETA)")


def generator_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l3p dataset", description="regenerate an OGBench dataset (needs [sim])")
    parser.add_argument("name", help="e.g. pointmaze-large-stitch-v0, cube-double-play-v0 (an unknown name is "
                                     "answered with the list)")
    add_config_arguments(parser, GeneratorOptions, config_file=False)
    return parser


def import_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l3p dataset import",
                                     description="convert recordings to one dataset file (needs [datasets])")
    parser.add_argument("format", choices=FORMATS)
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="bags, LeRobot or Minari folders, .npz files")
    parser.add_argument("--out", type=Path, required=True,
                        help="the .npz to write (written only if every check passes)")
    parser.add_argument("--mapping", metavar="YAML", type=Path,
                        help="which topic/column is the observation, action, goals (docs/guides/recordings.md)")
    parser.add_argument("--env-id", default=None, help="the goal env the recording is of (overrides the mapping's)")
    parser.add_argument("--report", metavar="JSON", type=Path, help="also write the report (steps, dropped) here")
    return parser


def _missing(extra: str, exc: ImportError) -> MissingExtra:
    name = (exc.name or str(exc)).split(".")[0]
    return MissingExtra(f"needs the {extra!r} extra (missing module {name!r}): {install_hint(extra)}")


def run_dataset(args: argparse.Namespace) -> int:
    try:
        if args.name == IMPORT:
            options = import_parser().parse_args(args.rest)
            from l3p.dataset_check import import_dims
            from l3p.datasets.commands import run_import

            return run_import(options, import_dims)
        if args.name == CHECK:
            from l3p.dataset_check import run_check

            return run_check(args.rest)
        from l3p.sim.datasets import run_dataset as generate
    except ImportError as exc:
        if (exc.name or "").startswith("l3p"):
            raise
        raise _missing("datasets" if args.name in (IMPORT, CHECK) else "sim", exc) from None
    parsed = generator_parser().parse_args([args.name, *args.rest])
    return generate(GeneratorOptions(**{f.name: getattr(parsed, f.name) for f in fields(GeneratorOptions)}))
