"""``l3p dataset import FORMAT PATH ... --out FILE.npz``: a recording converted to the project's
dataset, with a report of what was read and what was dropped."""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from l3p.datasets.mapping import load_mapping
from l3p.datasets.source import import_to


def run_import(args: argparse.Namespace, dims_of: Callable[[str], tuple[dict[str, int], str] | None] = lambda _: None
               ) -> int:
    """``args``: format, paths, out, mapping, env_id, report (apps/dataset_command.py parses them);
    ``dims_of(env_id)``: the env's sizes to check against and what they are of (None: not checked)."""
    fmt, paths = args.format, [Path(p) for p in args.paths]
    env_id = args.env_id
    if fmt == "minari" and not env_id:
        from l3p.datasets.tables import minari_env_id

        env_id = minari_env_id(paths[0])
    mapping = load_mapping(args.mapping, fmt, env_id=env_id)
    t0 = time.perf_counter()
    dims, against = dims_of(mapping.env_id) or (None, "")
    digest, report = import_to(args.out, mapping, paths, dims, against)
    seconds = time.perf_counter() - t0
    dropped = ", ".join(f"{n} {why}" for why, n in report["dropped"].items() if n) or "none"
    print(f"wrote {args.out}: {report['steps']} steps in {report['episodes']} episodes of {report['env_id']} from "
          f"{len(paths)} {fmt} file(s); dropped: {dropped}; sha256 {digest} ({seconds:.1f} s)")
    if args.report:
        args.report.write_text(json.dumps({**report, "sha256": digest, "seconds": seconds}, indent=2) + "\n")
    return 0
