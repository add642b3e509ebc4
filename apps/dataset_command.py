"""``l3p dataset``: regenerate a maze dataset (``l3p dataset NAME ...``, the simulator's generator,
`l3p.sim.datasets`) or import a recording (``l3p dataset import FORMAT PATH ... --out FILE.npz``, the
dataset sources, `l3p.datasets`). Both forms' options are declared here, light (the standard library,
numpy), so ``--help`` lists them all in every install; each form names its extra when that is missing."""
from __future__ import annotations

import argparse
from pathlib import Path

from l3p.core.errors import USAGE, L3PError
from l3p.core.names import install_hint
from l3p.datasets.mapping import FORMATS

IMPORT = "import"

FORMS = """forms:
  l3p dataset NAME [--out FILE.npz] [--seed S] [--episodes N] [--steps N] ...
      regenerate a maze dataset (pointmaze-{medium,large,giant}-{navigate,stitch}-v0, ...); needs [sim]
  l3p dataset import FORMAT PATH [PATH ...] --out FILE.npz [--mapping YAML] [--env-id ENV] [--report JSON]
      convert recordings (npz, rosbag2, lerobot, minari) to one dataset file; needs [datasets].
      The mapping (YAML) says which topic/column is the observation, action and goals
      (docs/guides/recordings.md); npz and minari read without one.
"""


class MissingExtra(L3PError):
    exit_code = USAGE


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    # Each form's own --help, in full: the top-level parser only splits NAME from the rest.
    parser.epilog = "\n".join([FORMS, generator_parser().format_help(), import_parser().format_help()])
    parser.add_argument("name", help="a dataset name to regenerate, or 'import'")
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="...", help="the form's arguments (below)")


def generator_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l3p dataset", description="regenerate a maze dataset (needs [sim])")
    parser.add_argument("name", help="e.g. pointmaze-large-stitch-v0 (an unknown name is answered with the list)")
    parser.add_argument("--expert", type=Path, default=None, metavar="POLICY",
                        help="antmaze: the direction-following expert (policy.npz of an l3p expert run)")
    parser.add_argument("--out", type=Path, default=None, help="the .npz to write (default data/NAME.npz)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    parser.add_argument("--episodes", type=int, default=None, help="fewer episodes than OGBench's (tests, trials)")
    parser.add_argument("--steps", type=int, default=None, help="steps per episode (default OGBench's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")
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
            from l3p.datasets.commands import run_import

            return run_import(options)
        from l3p.sim.datasets import run_dataset as generate
    except ImportError as exc:
        if (exc.name or "").startswith("l3p"):
            raise
        raise _missing("datasets" if args.name == IMPORT else "sim", exc) from None
    return generate(generator_parser().parse_args([args.name, *args.rest]))
