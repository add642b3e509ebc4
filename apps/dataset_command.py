"""``l3p dataset``: regenerate a maze dataset (``l3p dataset NAME ...``, the simulator's generator,
`l3p.sim.datasets`) or import a recording (``l3p dataset import FORMAT PATH ... --out FILE.npz``, the
dataset sources, `l3p.datasets`). Light here (the standard library, numpy), so ``--help`` works in every
install; each form parses its own options and names its extra when that is missing."""
from __future__ import annotations

import argparse
from pathlib import Path

from l3p.core.errors import USAGE, L3PError
from l3p.core.names import install_hint
from l3p.datasets.mapping import FORMATS

IMPORT = "import"

EPILOG = """forms:
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
    parser.epilog = EPILOG
    parser.add_argument("name", help="a dataset name to regenerate, or 'import'")
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="...", help="the form's arguments (below)")


def import_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l3p dataset import", description="convert recordings to one dataset file")
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
        from l3p.sim.datasets import add_dataset_arguments as generator_arguments
        from l3p.sim.datasets import run_dataset as generate
    except ImportError as exc:
        if (exc.name or "").startswith("l3p"):
            raise
        raise _missing("datasets" if args.name == IMPORT else "sim", exc) from None
    parser = argparse.ArgumentParser(prog="l3p dataset")
    generator_arguments(parser)
    return generate(parser.parse_args([args.name, *args.rest]))
